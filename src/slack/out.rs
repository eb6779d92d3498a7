//! Replies out: the router's `Surface`, implemented with Slack's Web API. An address is a
//! small JSON object (channel, the message's ts, the thread to answer in) that only this
//! module writes and reads; an assistant thread's note makes the working sign a status.
//!
//! Replies are Markdown (`markdown_text`). A reply in a thread may stream into one message
//! (`[slack] stream_replies` with `[llm] stream`): begun only within the workspace's stream
//! budget and where Slack has not refused streams lately (otherwise the reply goes whole),
//! ended with the rest of the text, or rewritten in place with chat.update when what
//! streamed is not how the reply ends. A streamed reply's last message carries the feedback
//! buttons, and so does an answer's last message in an assistant thread (posted or rewritten
//! as a `markdown` block beside them: `markdown_text` takes no blocks).

use std::sync::Arc;

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde::{Deserialize, Serialize};
use tracing::{debug, info, warn};

use super::api::{BotIdentity, Outgoing, PostMark, SlackApi, SlackError};
use super::budget::{Kind, Limits};
use super::markdown;
use super::stream::StreamAt;
use crate::router::{Address, Appended, Begun, Part, PartMark, Surface, Undeliverable};

/// The note on an assistant thread.
pub const ASSISTANT: &str = "assistant";

/// Where a Slack message is and its reply goes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlackAddress {
    pub channel: String,
    /// The message's own ts.
    pub ts: String,
    /// The thread the reply goes in; `None`: the channel's top level (a DM).
    pub thread_ts: Option<String>,
    /// The files shared with the message, kept with its row so that a retried turn still
    /// reads them (none: not written, so a message without files is stored as before).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<crate::files::Attachment>,
}

impl SlackAddress {
    pub fn encode(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    fn decode(a: &Address) -> Option<SlackAddress> {
        serde_json::from_str(&a.text).ok()
    }
}

pub struct SlackSurface {
    api: Arc<SlackApi>,
    bot: BotIdentity,
    allow_broadcast: bool,
    /// Replies may stream (`[slack] stream_replies` with `[llm] stream`).
    stream: bool,
    /// The workspace's stream budget and refusals, shared through the store.
    limits: Limits,
}

impl SlackSurface {
    pub fn new(
        api: Arc<SlackApi>,
        bot: BotIdentity,
        (allow_broadcast, stream): (bool, bool),
        limits: Limits,
    ) -> Self {
        SlackSurface {
            api,
            bot,
            allow_broadcast,
            stream,
            limits,
        }
    }

    /// Slack said no to a stream call: a 429 spends the method's budget; a refusal of a start
    /// is remembered for that kind of conversation.
    async fn refused(&self, e: &SlackError, channel: &str, starting: bool) {
        match e {
            SlackError::RateLimited { method, .. } => self.limits.rate_limited(method).await,
            SlackError::Api { method, code } if code == "ratelimited" || code == "rate_limited" => {
                self.limits.rate_limited(method).await
            }
            SlackError::Api { code, .. } if starting && !super::api::transient(code) => {
                self.limits.note_refusal(channel, code).await
            }
            _ => {}
        }
        self.api.warn_once(e, "a streamed reply fell back");
    }

    /// Rewrites a streamed message to read `text`: chat.update, after stopping the stream if
    /// Slack says it still runs.
    async fn rewrite(
        &self,
        channel: &str,
        ts: &str,
        text: &str,
        mark: Option<PostMark>,
        feedback: bool,
    ) -> Result<(), SlackError> {
        match self.api.update(channel, ts, text, mark, feedback).await {
            Err(SlackError::Api { code, .. }) if code == "streaming_state_conflict" => {
                // Still streaming: stop it first, within the budget (else later).
                if !self.limits.stop().await {
                    return Err(SlackError::RateLimited {
                        method: "chat.stopStream",
                        retry_after: None,
                    });
                }
                match self.api.stop_stream(channel, ts, "", None, None).await {
                    Err(e) if e.is_temporary() => {
                        self.refused(&e, channel, false).await;
                        return Err(e);
                    }
                    // Stopped, or no longer streaming by now: the update can go.
                    _ => {}
                }
                self.api.update(channel, ts, text, mark, feedback).await
            }
            other => other,
        }
    }
}

/// A slice of `text` the stream can take now: its released prefix, unless that is blank.
fn releasable(text: &str) -> Option<usize> {
    let n = markdown::ready(text);
    (!text[..n].trim().is_empty()).then_some(n)
}

impl Surface for SlackSurface {
    fn attachments(&self, at: &Address) -> Vec<crate::files::Attachment> {
        SlackAddress::decode(at)
            .map(|a| a.files)
            .unwrap_or_default()
    }

    fn working<'a>(&'a self, at: &'a Address, on: bool) -> BoxFuture<'a, ()> {
        async move {
            let Some(a) = SlackAddress::decode(at) else {
                return;
            };
            let assistant = a
                .thread_ts
                .as_deref()
                .filter(|_| at.note.as_deref() == Some(ASSISTANT));
            self.api.working(&a.channel, &a.ts, assistant, on).await
        }
        .boxed()
    }

    fn speaker_name<'a>(&'a self, user_id: &'a str) -> BoxFuture<'a, String> {
        self.api.display_name(user_id).boxed()
    }

    fn parts(&self, reply: &str) -> Vec<String> {
        markdown::render(reply, self.allow_broadcast, markdown::MESSAGE_LIMIT)
    }

    fn deliver<'a>(
        &'a self,
        to: &'a Address,
        part: Part<'a>,
    ) -> BoxFuture<'a, Result<String, Undeliverable>> {
        async move {
            let Some(a) = SlackAddress::decode(to) else {
                warn!(address = %to.text, "an address this surface did not write");
                return Err(Undeliverable::Refused(format!(
                    "not a Slack address: {}",
                    to.text
                )));
            };
            let out = Outgoing {
                channel: &a.channel,
                thread_ts: a.thread_ts.as_deref(),
                after_ts: &a.ts,
                text: part.text,
                mark: part.mark.map(|m| PostMark {
                    inbox: m.row,
                    part: m.part,
                }),
                // An answer's last message in an assistant thread takes feedback.
                feedback: part.last && part.mark.is_some() && to.note.as_deref() == Some(ASSISTANT),
                held: part.held,
            };
            self.api
                .post(&self.bot, &out, part.maybe_delivered)
                .await
                .map_err(|e| {
                    if e.is_temporary() {
                        Undeliverable::Unavailable(e.to_string())
                    } else {
                        Undeliverable::Refused(e.to_string())
                    }
                })
        }
        .boxed()
    }

    fn streams(&self, to: &Address) -> bool {
        let Some(a) = SlackAddress::decode(to) else {
            return false;
        };
        // A stream is always a reply in a thread: a top-level DM is answered whole. Where Slack
        // refused streams lately is asked when one would begin.
        self.stream && a.thread_ts.is_some()
    }

    fn begin_stream<'a>(
        &'a self,
        to: &'a Address,
        recipient: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Begun> {
        async move {
            let Some(a) = SlackAddress::decode(to) else {
                return Begun::Whole;
            };
            let Some(thread_ts) = a.thread_ts.as_deref() else {
                return Begun::Whole;
            };
            let Some(n) = releasable(text) else {
                return Begun::Wait;
            };
            if let Some(code) = self.limits.refused(&a.channel).await {
                debug!(code, "Slack refused streams here lately; this reply goes whole");
                return Begun::Whole;
            }
            if !self.limits.begin().await {
                info!("the workspace's stream budget is spent; this reply goes whole");
                return Begun::Whole;
            }
            let at = StreamAt {
                channel: &a.channel,
                thread_ts,
                recipient: (Kind::of(&a.channel) != Kind::Dm)
                    .then_some((recipient, self.bot.team_id.as_str())),
            };
            let first = markdown::neutralise(&text[..n], self.allow_broadcast);
            match self.api.start_stream(at, &first).await {
                Ok(ts) => Begun::Started {
                    reference: ts,
                    took: n,
                },
                Err(e) => {
                    self.refused(&e, &a.channel, true).await;
                    // Not known whether it began: if it did, the reply goes into it (the
                    // router looks for it, knowing which messages are other rows').
                    let unknown = matches!(&e, SlackError::Transport { .. })
                        || matches!(&e, SlackError::Api { code, .. } if super::api::transient(code));
                    if unknown {
                        Begun::Unknown { took: n }
                    } else {
                        Begun::Whole
                    }
                }
            }
        }
        .boxed()
    }

    fn append_stream<'a>(
        &'a self,
        to: &'a Address,
        reference: &'a str,
        text: &'a str,
    ) -> BoxFuture<'a, Appended> {
        async move {
            let Some(a) = SlackAddress::decode(to) else {
                return Appended::Broken;
            };
            let n = markdown::ready(text);
            if n == 0 {
                return Appended::Later;
            }
            if !self.limits.append().await {
                return Appended::Later;
            }
            let more = markdown::neutralise(&text[..n], self.allow_broadcast);
            match self.api.append_stream(&a.channel, reference, &more).await {
                Ok(()) => Appended::Took(n),
                // A 429 was not taken: the text is offered again later.
                Err(e @ SlackError::RateLimited { .. }) => {
                    self.refused(&e, &a.channel, false).await;
                    Appended::Later
                }
                Err(e) => {
                    // Expired, stopped, refused, or unknown: never sent again.
                    self.refused(&e, &a.channel, false).await;
                    Appended::Broken
                }
            }
        }
        .boxed()
    }

    fn finish_stream<'a>(
        &'a self,
        to: &'a Address,
        reference: &'a str,
        shown: Option<&'a str>,
        part: Part<'a>,
    ) -> BoxFuture<'a, Result<String, Undeliverable>> {
        async move {
            let Some(a) = SlackAddress::decode(to) else {
                return Err(Undeliverable::Refused(format!(
                    "not a Slack address: {}",
                    to.text
                )));
            };
            let mark = part.mark.map(|m| PostMark {
                inbox: m.row,
                part: m.part,
            });
            // What streamed is how the reply begins: the stop adds the rest.
            let rest = shown
                .map(|s| markdown::neutralise(s, self.allow_broadcast))
                .and_then(|s| part.text.strip_prefix(s.as_str()).map(str::to_string));
            if let Some(rest) = rest {
                match self
                    .api
                    .stop_stream(
                        &a.channel,
                        reference,
                        &rest,
                        mark,
                        part.last.then(|| vec![super::feedback::feedback_block()]),
                    )
                    .await
                {
                    Ok(()) => return Ok(reference.to_string()),
                    // Not taken: later (as one that may have arrived, so rewritten whole).
                    Err(e @ SlackError::RateLimited { .. }) => {
                        self.refused(&e, &a.channel, false).await;
                        return Err(Undeliverable::Unavailable(e.to_string()));
                    }
                    // Its outcome is unknown or it failed (an expired stream): the message is
                    // rewritten whole, which is right whatever the stop did.
                    Err(e) => debug!(error = %e, "the stream did not stop; rewriting the message"),
                }
            }
            match self
                .rewrite(&a.channel, reference, part.text, mark, part.last)
                .await
            {
                Ok(()) => Ok(reference.to_string()),
                Err(e) => {
                    if let SlackError::RateLimited { method, .. } = &e {
                        self.limits.rate_limited(method).await;
                    }
                    warn!(error = %e, "the streamed message was not rewritten yet");
                    let conflict =
                        matches!(&e, SlackError::Api { code, .. } if code == "streaming_state_conflict");
                    if e.is_temporary() || conflict {
                        Err(Undeliverable::Unavailable(e.to_string()))
                    } else {
                        Err(Undeliverable::Refused(e.to_string()))
                    }
                }
            }
        }
        .boxed()
    }

    fn halt_stream<'a>(
        &'a self,
        to: &'a Address,
        reference: &'a str,
        rest: &'a str,
        mark: Option<PartMark>,
    ) -> BoxFuture<'a, ()> {
        async move {
            let Some(a) = SlackAddress::decode(to) else {
                return;
            };
            let rest = markdown::neutralise(rest, self.allow_broadcast);
            let mark = mark.map(|m| PostMark {
                inbox: m.row,
                part: m.part,
            });
            if let Err(e) = self
                .api
                .stop_stream(&a.channel, reference, &rest, mark, None)
                .await
            {
                debug!(error = %e, "the stopped turn's stream did not stop (it may have already)");
            }
        }
        .boxed()
    }

    fn find_unrecorded_stream<'a>(
        &'a self,
        to: &'a Address,
        held: &'a [String],
    ) -> BoxFuture<'a, Option<String>> {
        async move {
            // Only a surface that streams can have begun a stream.
            if !self.stream {
                return None;
            }
            let a = SlackAddress::decode(to)?;
            let thread_ts = a.thread_ts.as_deref()?;
            match self
                .api
                .find_unmarked(&self.bot, &a.channel, thread_ts, &a.ts, held)
                .await
            {
                Ok(found) => found,
                Err(e) => {
                    warn!(error = %e, "could not look for a stream begun before the restart");
                    None
                }
            }
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_reads_back_and_matches_what_migration_5_wrote() {
        let a = SlackAddress {
            channel: "C1".into(),
            ts: "1.000200".into(),
            thread_ts: Some("1.000100".into()),
            files: Vec::new(),
        };
        let text = a.encode();
        let back = SlackAddress::decode(&Address {
            text: text.clone(),
            note: None,
        });
        assert_eq!(back, Some(a));
        // The migration's json_object() with a NULL thread.
        let migrated = r#"{"channel":"D1","ts":"5.0","thread_ts":null}"#;
        let dm = SlackAddress::decode(&Address {
            text: migrated.into(),
            note: None,
        })
        .unwrap();
        assert_eq!(dm.thread_ts, None);
    }
}
