//! The hand-written dossiers on disk: `soul/dossiers/*.md` read (each file bounded, its
//! frontmatter checked), and the folder's stamps that say when to read it again. Only ever
//! read: the soul writes its own dossiers to the store.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use crate::dossier::{self, Dossier, Origin};

/// Reads every `*.md` in `dir` as a hand-written dossier, by file name: those that load, and
/// a problem (file, line) for each that does not (too big, unreadable, bad frontmatter, a
/// name that makes no slug, a slug another file has). A missing folder is no dossier.
pub fn load_hand_written(dir: &Path) -> (Vec<Dossier>, Vec<String>) {
    let (mut out, mut problems) = (Vec::new(), Vec::new());
    let Ok(entries) = std::fs::read_dir(dir) else {
        return (out, problems);
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    for path in files {
        let shown = path.display();
        let len = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0);
        if len > dossier::MAX_BYTES as u64 {
            problems.push(format!(
                "{shown}: {len} bytes; a dossier holds at most {} (split it, or keep the essentials)",
                dossier::MAX_BYTES
            ));
            continue;
        }
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                problems.push(format!("{shown}: cannot read it: {e}"));
                continue;
            }
        };
        let (head, body) = match dossier::parse(&text) {
            Ok(parsed) => parsed,
            Err(e) => {
                problems.push(format!("{shown}:{}: {}", e.line, e.message));
                continue;
            }
        };
        let Some(slug) = dossier::slug(&head.name) else {
            problems.push(format!(
                "{shown}:2: the name {:?} has no letter or digit to keep it under",
                head.name
            ));
            continue;
        };
        if out.iter().any(|d: &Dossier| d.slug == slug) {
            problems.push(format!(
                "{shown}:2: another dossier is already named {slug:?}"
            ));
            continue;
        }
        out.push(Dossier {
            slug,
            name: head.name,
            aliases: head.aliases,
            kind: head.kind,
            body: body.to_string(),
            origin: Origin::Hand,
        });
    }
    (out, problems)
}

pub(super) type Stamps = Vec<(PathBuf, Option<(SystemTime, u64)>)>;

pub(super) fn stamps(dir: &Path) -> Stamps {
    let mut out: Stamps = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .map(|p| {
            let m = std::fs::metadata(&p).ok();
            let s = m.and_then(|m| Some((m.modified().ok()?, m.len())));
            (p, s)
        })
        .collect();
    out.sort();
    out
}
