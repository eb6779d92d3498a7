//! `anima dossiers list | show NAME | log NAME`: the hand-written dossiers (`soul/dossiers/`)
//! and those the soul learned (the store; their files in the git repository beside the user
//! models); and, for `anima users forget --dossiers`, the learned dossiers about a person
//! removed from the store and the repository.

use std::path::Path;
use std::sync::Arc;

use clap::Subcommand;

use super::{load_config, open_existing_store, plural, CliResult, Failure};
use crate::dossier::{self, Dossier};
use crate::memory::faces::DossierRecord;
use crate::memory::model_repo::{hold_exports, ModelRepo};
use crate::memory::{Store, UserRecord};

#[derive(Debug, Subcommand)]
pub enum DossiersCommand {
    /// Every dossier: hand-written (soul/dossiers/) and learned.
    List,
    /// A dossier's text (by name, alias or slug): the hand-written one and the learned one.
    Show { name: String },
    /// The history of a learned dossier, with its change notes.
    Log { name: String },
}

pub async fn run(config_path: Option<&Path>, command: DossiersCommand) -> CliResult {
    let config = load_config(config_path)?;
    let store = open_existing_store(&config).await?;
    let learned = match &store {
        Some(store) => store.dossiers().await.map_err(Failure::runtime)?,
        None => Vec::new(),
    };
    let (hand, problems) = crate::engine::load_hand_written(&config.soul_dir.join("dossiers"));
    for p in &problems {
        eprintln!("left out: {p}");
    }
    match command {
        DossiersCommand::List => {
            if hand.is_empty() && learned.is_empty() {
                println!("no dossiers yet");
                return Ok(());
            }
            println!(
                "{:<32} {:<8} {:<8} {:>4}  NAME",
                "SLUG", "KIND", "ORIGIN", "V"
            );
            for d in &hand {
                println!(
                    "{:<32} {:<8} {:<8} {:>4}  {}",
                    d.slug,
                    d.kind.name(),
                    "hand",
                    "-",
                    d.name
                );
            }
            for d in &learned {
                println!(
                    "{:<32} {:<8} {:<8} {:>4}  {}",
                    d.slug, d.kind, "learned", d.version, d.name
                );
            }
            Ok(())
        }
        DossiersCommand::Show { name } => {
            let (h, l) = find(&hand, &learned, &name)?;
            if let Some(d) = h {
                println!("# {} (written by hand: {}.md)\n", d.name, d.slug);
                println!("{}", d.body.trim_end());
            }
            if let Some(d) = l {
                if h.is_some() {
                    println!();
                }
                println!("# {} (learned, v{})\n", d.name, d.version);
                let body = dossier::parse(&d.text).map_or(d.text.as_str(), |(_, b)| b);
                println!("{}", body.trim_end());
            }
            Ok(())
        }
        DossiersCommand::Log { name } => {
            let (h, l) = find(&hand, &learned, &name)?;
            let Some(d) = l else {
                let d = h.expect("found one");
                println!(
                    "{} is written by hand: its history is the soul folder's",
                    d.name
                );
                return Ok(());
            };
            let Some(store) = &store else { return Ok(()) };
            let mut history = store
                .dossier_history(&d.slug)
                .await
                .map_err(Failure::runtime)?;
            history.reverse();
            for (version, note, at_ms) in history {
                println!(
                    "{:<5} {}  {}",
                    format!("v{version}"),
                    super::users::format_time(at_ms.div_euclid(1000)),
                    note.trim_end().replace('\n', &format!("\n{:28}", ""))
                );
            }
            Ok(())
        }
    }
}

/// The hand-written and the learned dossier `name` names (by slug, name or alias); an error
/// when neither does.
fn find<'a>(
    hand: &'a [Dossier],
    learned: &'a [DossierRecord],
    name: &str,
) -> Result<(Option<&'a Dossier>, Option<&'a DossierRecord>), Failure> {
    let wanted = name.trim();
    let slug = dossier::slug(wanted);
    let is = |s: &str, n: &str, aliases: &[String]| {
        Some(s) == slug.as_deref()
            || n.eq_ignore_ascii_case(wanted)
            || aliases.iter().any(|a| a.eq_ignore_ascii_case(wanted))
    };
    let h = hand.iter().find(|d| is(&d.slug, &d.name, &d.aliases));
    let l = learned.iter().find(|d| is(&d.slug, &d.name, &d.aliases));
    if h.is_none() && l.is_none() {
        return Err(Failure::Runtime(format!(
            "no dossier named `{wanted}`; `anima dossiers list` shows which there are"
        )));
    }
    Ok((h, l))
}

/// The learned dossiers about `u` (named as them, by their slug, id or display name, or kept
/// with their id), removed from the repository at `root` (and, with `purge_history`, from its
/// history) and from the store, under the repository's export lock. Prints what went.
pub(super) async fn forget_about(
    store: &Arc<dyn Store>,
    root: &Path,
    u: &UserRecord,
    purge_history: bool,
) -> Result<(), Failure> {
    let about = |d: &DossierRecord| {
        d.about.as_deref() == Some(u.user_id.as_str())
            || d.slug == u.slug
            || [&u.display_name, &u.user_id].iter().any(|n| {
                d.name.eq_ignore_ascii_case(n)
                    || d.aliases.iter().any(|a| a.eq_ignore_ascii_case(n))
            })
    };
    let slugs: Vec<String> = store
        .dossiers()
        .await
        .map_err(Failure::runtime)?
        .into_iter()
        .filter(about)
        .map(|d| d.slug)
        .collect();
    if slugs.is_empty() {
        println!("  dossiers: none about them");
        return Ok(());
    }
    let _lock = match ModelRepo::open_existing(root) {
        Some(_) => Some(hold_exports(root).map_err(Failure::runtime)?),
        None => None,
    };
    for slug in &slugs {
        if let Some(repo) = ModelRepo::open_existing(root) {
            repo.remove_dossier(slug, &u.user_id)
                .map_err(Failure::runtime)?;
            if purge_history {
                repo.purge_dossier_history(slug).map_err(Failure::runtime)?;
            }
        }
    }
    let versions = store
        .forget_dossiers(&slugs)
        .await
        .map_err(Failure::runtime)?;
    println!(
        "  dossiers: {} about them ({}) removed, {}{}",
        plural(slugs.len() as u64, "dossier"),
        slugs.join(", "),
        plural(versions, "version"),
        if purge_history {
            "; git history rewritten: no commit holds them"
        } else {
            ""
        }
    );
    Ok(())
}
