//! Replies out: the router's `Surface`, implemented with Slack's Web API. An address is a
//! small JSON object (channel, the message's ts, the thread to answer in) that only this
//! module writes and reads; an assistant thread's note makes the working sign a status.

use std::sync::Arc;

use futures_util::future::BoxFuture;
use futures_util::FutureExt;
use serde::{Deserialize, Serialize};
use tracing::warn;

use super::api::{BotIdentity, Outgoing, PostMark, SlackApi};
use super::mrkdwn;
use crate::router::{Address, Part, Surface, Undeliverable};

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
}

impl SlackSurface {
    pub fn new(api: Arc<SlackApi>, bot: BotIdentity, allow_broadcast: bool) -> Self {
        SlackSurface {
            api,
            bot,
            allow_broadcast,
        }
    }
}

impl Surface for SlackSurface {
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
        mrkdwn::render(reply, self.allow_broadcast, mrkdwn::MESSAGE_LIMIT)
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
