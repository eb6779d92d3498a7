//! Delivery: a reply, part by part, through the surface. For an inbox row each part is
//! marked, the parts it already has are skipped, each delivery is recorded, and the row is
//! done at the end; a part that may have been in flight is looked for before it is sent
//! again. The working sign is cleared off the reply's path.

use std::sync::atomic::Ordering;
use std::time::Duration;

use tracing::warn;

use super::{Address, Part, PartMark, Router, Undeliverable};
use crate::memory::InboxItem;
use crate::metrics::Metrics;

/// Where a reply's delivery stands, part after part.
struct Delivery {
    /// The next part may have arrived already (it is looked for first).
    maybe_delivered: bool,
    /// What the inbox holds in the conversation (kept up to date with this reply's parts):
    /// none of it is taken for a part's copy. Read before a row's first part, not only after
    /// a crash: a post whose answer is lost is looked for at once, and without Slack's
    /// metadata only this list keeps another reply from being taken for it.
    held: Option<Vec<String>>,
    /// The first part went into the message the reply streamed into.
    streamed: bool,
    /// The row's last part is delivered and recorded.
    finished: bool,
}

impl Router {
    /// Delivers a reply part by part. For an inbox row, each part is marked, the parts it
    /// already has are skipped, each delivery is recorded, and the row is done at the end (or
    /// when the surface refuses the reply for good). Returns the number of parts.
    pub(super) async fn deliver(
        &self,
        to: &Address,
        reply: &str,
        row: Option<Row<'_>>,
    ) -> anyhow::Result<usize> {
        // An empty reply says nothing: a message that a newer one in its conversation
        // interrupted is answered by that one's reply.
        let parts = if reply.trim().is_empty() {
            Vec::new()
        } else {
            self.surface.parts(reply)
        };
        let (skip, maybe_delivered) = row.map_or((0, false), |r| {
            (r.item.parts_posted.max(0) as usize, r.maybe_delivered)
        });
        // The first part goes into the message the reply streamed into, if it began one.
        let stream_ref = row.and_then(|r| r.item.stream_ref.as_deref());
        // Only while this daemon holds the conversation, asked right before each post (a row's
        // reply; a reply without a row is fenced by its caller).
        if let (Some(reference), true) = (stream_ref, parts.is_empty()) {
            if let Some(r) = row {
                if !self.may_post(&r.item.conversation).await? {
                    return Err(Self::fenced(&r.item.conversation));
                }
            }
            // Nothing to say after all (a newer message took over): it ends as it stands.
            let mark = row.map(|r| PartMark {
                row: r.item.id,
                part: 1,
            });
            self.surface.halt_stream(to, reference, "", mark).await;
        }
        let mut d = Delivery {
            maybe_delivered,
            held: None,
            streamed: false,
            finished: false,
        };
        for (i, text) in parts.iter().enumerate().skip(skip) {
            let last = i + 1 == parts.len();
            if !self
                .deliver_part(to, row, stream_ref, (i, text, last), &mut d)
                .await?
            {
                break;
            }
        }
        let Delivery {
            finished, streamed, ..
        } = d;
        if finished || row.is_none() {
            let mode = if streamed { "streamed" } else { "whole" };
            Metrics::inc(
                &self
                    .metrics
                    .replies
                    .get_or_create(&crate::metrics::ReplyLabels { mode }),
            );
        }
        if let (Some(Row { item: r, .. }), false) = (row, finished) {
            // Refused, or nothing (more) to deliver: the row is done all the same.
            let id = r.id;
            self.store.mark_done(id).await?;
        }
        Ok(parts.len())
    }

    /// Delivers part `i` of a reply (`last`: the reply's last), trying again while the
    /// surface cannot take it now: false when the surface refused it for good (the reply is
    /// given up).
    async fn deliver_part(
        &self,
        to: &Address,
        row: Option<Row<'_>>,
        stream_ref: Option<&str>,
        (i, text, last): (usize, &str, bool),
        d: &mut Delivery,
    ) -> anyhow::Result<bool> {
        let mut wait = Duration::from_secs(1);
        loop {
            if let (Some(r), None) = (row, &d.held) {
                let id = r.item.id;
                d.held = Some(self.store.references_held(id).await?);
            }
            if let Some(r) = row {
                if !self.may_post(&r.item.conversation).await? {
                    return Err(Self::fenced(&r.item.conversation));
                }
            }
            let part = Part {
                text,
                mark: row.map(|r| PartMark {
                    row: r.item.id,
                    part: i + 1,
                }),
                maybe_delivered: d.maybe_delivered,
                last,
                held: d.held.as_deref().unwrap_or_default(),
            };
            let delivered = match stream_ref.filter(|_| i == 0) {
                Some(reference) => {
                    // All that streamed, if it is known to have arrived (never after a
                    // failed attempt to finish: that may have added to it).
                    let live = row.and_then(|r| r.live).filter(|_| !d.maybe_delivered);
                    d.streamed = true;
                    self.surface.finish_stream(to, reference, live, part).await
                }
                None => self.surface.deliver(to, part).await,
            };
            match delivered {
                Ok(reference) => {
                    d.maybe_delivered = false;
                    if let Some(h) = d.held.as_mut() {
                        h.push(reference.clone());
                    }
                    Metrics::inc(&self.metrics.replies_posted);
                    if let Some(Row { item: r, .. }) = row {
                        self.store
                            .mark_part_posted(r.id, i as i64 + 1, &reference, last)
                            .await?;
                        d.finished = last;
                    }
                    return Ok(true);
                }
                Err(Undeliverable::Unavailable(e)) => {
                    // Not now: the same part again later (it may have arrived, so it is
                    // looked for first). No attempt is spent; at shutdown the row waits for
                    // the next start.
                    d.maybe_delivered = true;
                    if self.stopping.load(Ordering::SeqCst) {
                        anyhow::bail!("stopping with a part undelivered: {e}");
                    }
                    warn!(error = %e, retry_in_ms = wait.as_millis() as u64, "reply not delivered yet; trying again");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(60));
                }
                Err(e @ Undeliverable::Refused(_)) => {
                    // Refused for good (e.g. not_in_channel): give up on this reply rather
                    // than retry forever; the message and reply stay in the store.
                    Metrics::inc(&self.metrics.replies_undeliverable);
                    warn!(error = %e, "reply not delivered");
                    return Ok(false);
                }
            }
        }
    }

    /// Says `text` in a conversation outside any turn (a closing note before a shutdown).
    /// False when the conversation has no address.
    pub async fn say(&self, conversation: &str, text: &str) -> anyhow::Result<bool> {
        let key = conversation.to_string();
        let Some((address, note)) = self.store.conversation_address(&key).await? else {
            return Ok(false);
        };
        let to = Address {
            text: address,
            note,
        };
        self.deliver(&to, text, None).await?;
        Ok(true)
    }

    /// Clears the working sign at `to` once the task that showed it (`sign`) is done: off the
    /// reply's path, never awaited.
    pub(super) fn clear_sign_after(&self, sign: Option<tokio::task::JoinHandle<()>>, to: Address) {
        if let Some(shown) = sign {
            let surface = self.surface.clone();
            tokio::spawn(async move {
                let _ = shown.await;
                surface.working(&to, false).await
            });
        }
    }
}

/// The inbox row a reply answers, as delivery sees it.
#[derive(Clone, Copy)]
pub(super) struct Row<'a> {
    pub(super) item: &'a InboxItem,
    /// A part may have been delivered before this pick-up: look for it first.
    pub(super) maybe_delivered: bool,
    /// All that streamed into the reply's message during this pick-up.
    pub(super) live: Option<&'a str>,
}
