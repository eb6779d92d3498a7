//! The files shared with a message, read in its turn (so a failed download is tried again
//! with the turn, and a turn cut short by a crash reads them again): each planned (named
//! without a fetch when too big, of a kind anima does not read, or an image the model cannot
//! see), fetched through the surface's `files::Fetch` within `[files] max_bytes`, read
//! (`files::read`: text inlined, a PDF's text extracted, off the runtime), an image fitted
//! for the provider (`llm::image::prepare`). Whatever fails is a line for the soul and the
//! log, never an error for the person. A message without files costs nothing here.
//!
//! After the turn, what the soul noted each file showed (`<attachment_note>`) is kept in the
//! message's working-memory line (`keep_notes`); should the model refuse the images after all,
//! each is named to the soul as unseen (`sections(false)`, see `chain`).

use std::sync::Arc;

use tracing::{info, warn};

use super::begin::Begun;
use super::perception::Message;
use super::Engine;
use crate::files::{self, Attachment, Fetch, Limits, Read, Seen};
use crate::llm::image::{self, Image, ImageLimits};
use crate::parse::attachment::{parse_notes, AttachmentNote};
use crate::prompt;

/// One shared file: what became of it, and its line for the soul.
#[derive(Debug)]
pub(super) struct SharedFile {
    pub seen: Seen,
    pub about: String,
    /// An image shown with the message: its line should the model refuse images after all.
    pub unseen: Option<String>,
}

/// What the soul is told of an image the model refused.
pub(super) const UNSEEN: &str =
    "an image was shared; you cannot see it (the model does not read images)";

/// What a message's files gave its turn.
#[derive(Debug, Default)]
pub(super) struct Shared {
    pub files: Vec<SharedFile>,
    /// The images the model sees with the message, fitted to its provider.
    pub images: Vec<Image>,
}

impl Shared {
    /// The message as working memory keeps it: its text, then a line per file (name, kind,
    /// size; never the bytes), so a later turn can speak of what was shared.
    pub fn remembered(&self, text: &str) -> String {
        if self.files.is_empty() {
            return text.to_string();
        }
        let lines: Vec<String> = self.files.iter().map(|f| f.seen.remembered()).collect();
        if text.trim().is_empty() {
            lines.join("\n")
        } else {
            format!("{text}\n{}", lines.join("\n"))
        }
    }

    /// The message as working memory keeps it once the soul said what its files showed
    /// (`notes`, from its answer): each file's line with its note. A note names its file as
    /// the prompt did (a lone note on a lone file needs no name). `None` when no note names
    /// any of them: the line recorded when the message came stands.
    pub fn remembered_with(&self, text: &str, notes: &[AttachmentNote]) -> Option<String> {
        let mut left: Vec<&AttachmentNote> = notes.iter().collect();
        let lone = self.files.len() == 1 && notes.len() == 1;
        let mut any = false;
        let lines: Vec<String> = self
            .files
            .iter()
            .map(|f| {
                let name = f.seen.name.split_whitespace().collect::<Vec<_>>().join(" ");
                let at = left
                    .iter()
                    .position(|n| n.name == name)
                    .or_else(|| left.iter().position(|n| n.name.eq_ignore_ascii_case(&name)))
                    .or_else(|| lone.then_some(0));
                let note = at.map(|i| left.remove(i).note.as_str());
                any |= note.is_some();
                f.seen.remembered_with(note)
            })
            .collect();
        if !any {
            return None;
        }
        Some(if text.trim().is_empty() {
            lines.join("\n")
        } else {
            format!("{text}\n{}", lines.join("\n"))
        })
    }

    /// The files as the prompt shows them; `seeing`: the images shown go with the message
    /// (else each is a line saying it cannot be seen: the model refused them).
    pub fn sections(&self, seeing: bool) -> Vec<prompt::Attachment<'_>> {
        self.files
            .iter()
            .map(|f| prompt::Attachment {
                name: &f.seen.name,
                about: match (&f.unseen, seeing) {
                    (Some(unseen), false) => unseen,
                    _ => &f.about,
                },
                text: match &f.seen.read {
                    Read::Text { text, .. } => Some(text.as_str()),
                    _ => None,
                },
            })
            .collect()
    }
}

impl Engine {
    /// Fetches shared files through `fetch` (the surface's: only it knows where files are
    /// and with which credentials). Set once, by the daemon; without it a file is named as
    /// not fetched.
    pub fn fetch_files_with(&self, fetch: Arc<dyn Fetch>) {
        let _ = self.fetcher.set(fetch);
    }

    /// Keeps what the soul said the message's files showed (the `<attachment_note>`s of
    /// `raw`, the answer that stands for the turn) in the message's working-memory line, so a
    /// later turn can speak of them. Nothing without files or notes; a write that fails is
    /// logged, and the line recorded when the message came stands.
    pub(super) async fn keep_notes(&self, begun: &Begun, text: &str, raw: &str) {
        let Some(id) = begun.message.filter(|_| !begun.shared.files.is_empty()) else {
            return;
        };
        let Some(line) = begun.shared.remembered_with(text, &parse_notes(raw)) else {
            return;
        };
        match self.store.rewrite_message(id, &line).await {
            Ok(()) => info!(message = id, "what the shared files showed, kept"),
            Err(e) => warn!(message = id, error = %e, "the files' notes were not kept"),
        }
    }

    /// Reads the files shared with `m` (none: nothing is done).
    pub(super) async fn read_shared(&self, m: &Message) -> Shared {
        let mut shared = Shared::default();
        if m.attachments.is_empty() {
            return shared;
        }
        let cfg = &self.config.files;
        let seeing = self.provider.image_limits().filter(|_| cfg.images);
        let limits = Limits {
            max_bytes: cfg.max_bytes,
            max_files: cfg.max_files as usize,
            text_chars: usize::try_from(cfg.text_chars).unwrap_or(usize::MAX),
            images: seeing.is_some(),
        };
        for (i, file) in m.attachments.iter().enumerate() {
            let seen = if i < limits.max_files {
                self.read_one(file, &limits).await
            } else {
                files::read::beyond_the_count(file, limits.max_files)
            };
            let seen = fitted(seen, seeing, &mut shared.images).await;
            let about = seen.about();
            let unseen = matches!(seen.read, Read::Shown).then(|| {
                Seen {
                    read: Read::Named(UNSEEN.into()),
                    ..seen.clone()
                }
                .about()
            });
            info!(file = %seen.name, about = %about, "a shared file");
            shared.files.push(SharedFile {
                seen,
                about,
                unseen,
            });
        }
        shared
    }

    /// One file within the count: planned, fetched, read.
    async fn read_one(&self, file: &Attachment, limits: &Limits) -> Seen {
        if let Some(seen) = files::read::plan(file, limits) {
            return seen;
        }
        let fetched = match self.fetcher.get() {
            Some(fetch) => fetch.fetch(file, limits.max_bytes).await,
            None => files::Fetched::Failed("files cannot be fetched here".into()),
        };
        if let files::Fetched::Failed(why) = &fetched {
            warn!(file = %files::display_name(&file.name), why = %why, "a shared file was not fetched");
        }
        let (owned, copied) = (file.clone(), *limits);
        // A PDF's text is work for a blocking thread, not the runtime.
        let read = tokio::task::spawn_blocking(move || files::read(&owned, fetched, &copied));
        read.await.unwrap_or_else(|_| {
            let failed = files::Fetched::Failed("anima could not read it".into());
            files::read(file, failed, limits)
        })
    }
}

/// An image's bytes fitted for the provider (off the runtime): the image goes with the
/// message, and its bytes are dropped from what is kept; a failure is the image's line.
async fn fitted(seen: Seen, fit: Option<ImageLimits>, images: &mut Vec<Image>) -> Seen {
    let Seen {
        name,
        kind,
        size,
        read,
    } = seen;
    let read = match (read, fit) {
        (Read::Image(bytes), Some(fit)) => {
            let prepared = tokio::task::spawn_blocking(move || image::prepare(&bytes, &fit));
            match prepared.await {
                Ok(Ok(img)) => {
                    images.push(img);
                    Read::Shown
                }
                Ok(Err(e)) => Read::Named(format!("an image was shared; you cannot see it ({e})")),
                Err(_) => Read::Named("an image was shared; you cannot see it".into()),
            }
        }
        (read, _) => read,
    };
    Seen {
        name,
        kind,
        size,
        read,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::read::Kind;

    fn shared(names: &[&str]) -> Shared {
        let files = names
            .iter()
            .map(|name| SharedFile {
                seen: Seen {
                    name: name.to_string(),
                    kind: Kind::Image,
                    size: Some(2048),
                    read: Read::Shown,
                },
                about: String::new(),
                unseen: None,
            })
            .collect();
        Shared {
            files,
            images: Vec::new(),
        }
    }

    fn note(name: &str, note: &str) -> AttachmentNote {
        AttachmentNote {
            name: name.into(),
            note: note.into(),
        }
    }

    #[test]
    fn each_files_line_keeps_the_note_that_names_it() {
        let s = shared(&["trace.png", "Plan B.png"]);
        let notes = [
            note("plan b.png", "a whiteboard of three boxes"),
            note("other.png", "nothing shared by that name"),
            note("trace.png", "a stack trace ending in a panic"),
        ];
        assert_eq!(
            s.remembered_with("look", &notes).unwrap(),
            "look\n\
             [shared a file: trace.png (an image, 2.0 KB); you noted: a stack trace ending in a panic]\n\
             [shared a file: Plan B.png (an image, 2.0 KB); you noted: a whiteboard of three boxes]"
        );
    }

    #[test]
    fn a_lone_note_on_a_lone_file_needs_no_name_and_no_note_keeps_the_line() {
        let one = shared(&["shot.png"]);
        assert_eq!(
            one.remembered_with("", &[note("", "a login form")])
                .unwrap(),
            "[shared a file: shot.png (an image, 2.0 KB); you noted: a login form]"
        );
        assert_eq!(one.remembered_with("hi", &[]), None);
        let two = shared(&["a.png", "b.png"]);
        assert_eq!(two.remembered_with("hi", &[note("c.png", "x")]), None);
        assert_eq!(
            two.remembered("hi"),
            "hi\n[shared a file: a.png (an image, 2.0 KB)]\n[shared a file: b.png (an image, 2.0 KB)]"
        );
    }

    #[test]
    fn an_image_the_model_refused_is_named_as_unseen() {
        let mut s = shared(&["shot.png"]);
        s.files[0].about = "an image, 2.0 KB, shown to you with the message".into();
        s.files[0].unseen = Some(
            Seen {
                read: Read::Named(UNSEEN.into()),
                ..s.files[0].seen.clone()
            }
            .about(),
        );
        assert_eq!(s.sections(true)[0].about, s.files[0].about);
        assert_eq!(
            s.sections(false)[0].about,
            "a 2.0 KB image, not read: an image was shared; you cannot see it (the model does not read images)"
        );
    }
}
