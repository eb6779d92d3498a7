//! A reply streamed into one Slack message: chat.startStream on the first words,
//! chat.appendStream as more arrive, chat.stopStream with the rest, and chat.update when the
//! message must be rewritten (the final text differs from what streamed, the stream expired
//! or broke, or it began before a restart). Every call is one attempt: an append is never
//! re-sent (Slack would show its text twice).
//!
//! Only the calls; when to make them (budget, refusals, coalescing) is decided by `out` and
//! the router. Knows nothing about souls or turns.

use slack_morphism::prelude::*;

use super::api::{PostMark, SlackApi, SlackError};

/// Where a stream goes.
#[derive(Debug, Clone, Copy)]
pub struct StreamAt<'a> {
    pub channel: &'a str,
    pub thread_ts: &'a str,
    /// In a channel, the person it answers (and their team): only they see it live.
    pub recipient: Option<(&'a str, &'a str)>,
}

impl SlackApi {
    /// Begins a streamed message showing `text`; its ts.
    pub async fn start_stream(&self, at: StreamAt<'_>, text: &str) -> Result<String, SlackError> {
        let session = self.client.open_session(&self.bot_token);
        let mut req = SlackApiChatStartStreamRequest::new(SlackChannelId::new(at.channel.into()))
            .with_thread_ts(SlackTs::new(at.thread_ts.into()))
            .with_markdown_text(text.to_string());
        if let Some((user, team)) = at.recipient {
            req = req
                .with_recipient_user_id(SlackUserId::new(user.into()))
                .with_recipient_team_id(SlackTeamId::new(team.into()));
        }
        let r = self
            .timed("chat.startStream", session.chat_start_stream(&req))
            .await?;
        Ok(r.ts.to_string())
    }

    /// Adds `text` to a streamed message. One attempt: an append whose outcome is unknown is
    /// not sent again.
    pub async fn append_stream(
        &self,
        channel: &str,
        ts: &str,
        text: &str,
    ) -> Result<(), SlackError> {
        let session = self.client.open_session(&self.bot_token);
        let req = SlackApiChatAppendStreamRequest::new(
            SlackChannelId::new(channel.into()),
            SlackTs::new(ts.into()),
        )
        .with_markdown_text(text.to_string());
        self.timed("chat.appendStream", session.chat_append_stream(&req))
            .await
            .map(|_| ())
    }

    /// Ends a streamed message, adding `rest` (if any), the reply's mark and `blocks`.
    pub async fn stop_stream(
        &self,
        channel: &str,
        ts: &str,
        rest: &str,
        mark: Option<PostMark>,
        blocks: Option<Vec<SlackBlock>>,
    ) -> Result<(), SlackError> {
        let session = self.client.open_session(&self.bot_token);
        let content = SlackMessageContent::new()
            .opt_markdown_text((!rest.is_empty()).then(|| rest.to_string()))
            .opt_metadata(mark.map(PostMark::metadata))
            .opt_blocks(blocks);
        let req = SlackApiChatStopStreamRequest::new(
            SlackChannelId::new(channel.into()),
            SlackTs::new(ts.into()),
            content,
        );
        self.timed("chat.stopStream", session.chat_stop_stream(&req))
            .await
            .map(|_| ())
    }

    /// Rewrites a message (no longer streaming) to read `text`, with the reply's mark (and
    /// the feedback buttons, when it is the reply's last message in an AI-app conversation).
    pub async fn update(
        &self,
        channel: &str,
        ts: &str,
        text: &str,
        mark: Option<PostMark>,
        feedback: bool,
    ) -> Result<(), SlackError> {
        let session = self.client.open_session(&self.bot_token);
        let content = super::api::reply_content(text, mark, feedback);
        let req = SlackApiChatUpdateRequest::new(
            SlackChannelId::new(channel.into()),
            content,
            SlackTs::new(ts.into()),
        );
        self.timed("chat.update", session.chat_update(&req))
            .await
            .map(|_| ())
    }
}
