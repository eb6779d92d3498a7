//! The files shared with a message, read in its turn (so a failed download is tried again
//! with the turn, and a turn cut short by a crash reads them again): each planned (named
//! without a fetch when too big, of a kind anima does not read, or an image the model cannot
//! see), fetched through the surface's `files::Fetch` within `[files] max_bytes`, read
//! (`files::read`: text inlined, a PDF's text extracted, off the runtime), an image fitted
//! for the provider (`llm::image::prepare`). Whatever fails is a line for the soul and the
//! log, never an error for the person. A message without files costs nothing here.

use std::sync::Arc;

use tracing::{info, warn};

use super::perception::Message;
use super::Engine;
use crate::files::{self, Attachment, Fetch, Limits, Read, Seen};
use crate::llm::image::{self, Image, ImageLimits};
use crate::prompt;

/// One shared file: what became of it, and its line for the soul.
#[derive(Debug)]
pub(super) struct SharedFile {
    pub seen: Seen,
    pub about: String,
}

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

    /// The files as the prompt shows them.
    pub fn sections(&self) -> Vec<prompt::Attachment<'_>> {
        self.files
            .iter()
            .map(|f| prompt::Attachment {
                name: &f.seen.name,
                about: &f.about,
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
            info!(file = %seen.name, about = %about, "a shared file");
            shared.files.push(SharedFile { seen, about });
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
