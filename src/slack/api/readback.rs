//! Reading a conversation back before posting: whether a reply is already there (its mark,
//! or a message of ours without one that the inbox holds for no reply), so a reply is never
//! posted twice. Part of `SlackApi`; decides nothing about what to post.

use slack_morphism::prelude::*;
use tracing::{debug, info, warn};

use super::{BotIdentity, Outgoing, SlackApi, SlackError};
use crate::slack::mark::{is_mine, unmarked};

impl SlackApi {
    /// Our own copy of `out` in the conversation, after `after_ts`: our message carrying its
    /// mark. When none does and `out` is part of an inbox row's reply, a message of ours
    /// after `after_ts` without a reply mark that the inbox holds for no reply is taken for
    /// it (Slack's answer came without metadata, or it is a stream begun for this reply whose
    /// start was lost), and rewritten to read `out`: whatever it said, it says this now.
    pub(super) async fn find_posted(
        &self,
        bot: &BotIdentity,
        out: &Outgoing<'_>,
    ) -> Result<Option<String>, SlackError> {
        let messages = self.messages_after(out).await?;
        if let Some(m) = messages
            .iter()
            .find(|m| is_mine(bot, m) && out.mark.is_some_and(|mark| mark.is_on(m)))
        {
            return Ok(Some(m.origin.ts.to_string()));
        }
        if out.mark.is_none_or(|m| m.inbox == 0) {
            return Ok(None);
        }
        let Some(ts) = unmarked(bot, &messages, out.after_ts, out.held) else {
            return Ok(None);
        };
        match self
            .update(out.channel, &ts, out.text, out.mark, out.feedback)
            .await
        {
            Ok(()) => {
                info!(ts = %ts, "a message of ours without a mark, held for no reply, is this one");
                Ok(Some(ts))
            }
            Err(e) if e.is_temporary() => Err(e),
            Err(e) => {
                warn!(error = %e, ts = %ts, "an unmarked message could not be rewritten; posting anew");
                Ok(None)
            }
        }
    }

    /// A message of ours in the thread after `after_ts` that carries no reply mark: a stream
    /// begun for a reply whose start was not recorded (its outcome was unknown, or anima
    /// stopped before the store took it). Every other message anima leaves carries a mark,
    /// but Slack's answer may come without the marks (without any message's metadata): a
    /// message in `held` (the store gave it to another reply) is never the one.
    pub async fn find_unmarked(
        &self,
        bot: &BotIdentity,
        channel: &str,
        thread_ts: &str,
        after_ts: &str,
        held: &[String],
    ) -> Result<Option<String>, SlackError> {
        let out = Outgoing {
            channel,
            thread_ts: Some(thread_ts),
            after_ts,
            text: "",
            mark: None,
            feedback: false,
            held,
        };
        let messages = self.messages_after(&out).await?;
        Ok(unmarked(bot, &messages, after_ts, held))
    }

    /// The messages of `out`'s conversation (its thread, or the channel's top level) after
    /// `out.after_ts`, with their metadata.
    async fn messages_after(
        &self,
        out: &Outgoing<'_>,
    ) -> Result<Vec<SlackHistoryMessage>, SlackError> {
        let session = self.client.open_session(&self.bot_token);
        let channel_id = SlackChannelId::new(out.channel.to_string());
        let oldest = SlackTs::new(out.after_ts.to_string());
        let messages = match out.thread_ts {
            Some(t) => {
                // slack-morphism's request type has no include_all_metadata: the same call,
                // with it.
                let params = [
                    ("channel", Some(out.channel.to_string())),
                    ("ts", Some(t.to_string())),
                    ("oldest", Some(out.after_ts.to_string())),
                    ("include_all_metadata", Some("true".to_string())),
                    ("limit", Some("200".to_string())),
                ];
                self.timed(
                    "conversations.replies",
                    session
                        .http_session_api
                        .http_get::<SlackApiConversationsRepliesResponse, _, _>(
                            "conversations.replies",
                            &params,
                            None,
                        ),
                )
                .await
                .map(|r| r.messages)
            }
            None => {
                let req = SlackApiConversationsHistoryRequest::new()
                    .with_channel(channel_id)
                    .with_oldest(oldest)
                    .with_include_all_metadata(true);
                self.timed("conversations.history", session.conversations_history(&req))
                    .await
                    .map(|r| r.messages)
            }
        };
        let messages = match messages {
            Ok(m) => m,
            Err(e) => {
                warn!(error = %e, "cannot check whether the reply arrived; not posting it until one can");
                return Err(SlackError::Transport {
                    method: "conversations.replies",
                    message: format!("cannot check whether the reply arrived: {e}"),
                });
            }
        };
        debug!(
            found = messages.len(),
            "looked for the reply in the conversation"
        );
        Ok(messages)
    }
}
