//! A reply's mark: the metadata every message anima posts carries (its inbox row and part), so
//! a message whose post outcome was lost is found again in the conversation instead of being
//! posted twice; and the content a reply goes out as. Makes no call (`api` does).

use slack_morphism::prelude::*;

use super::api::{ts_order, BotIdentity};

/// The `metadata` event type on every reply anima posts.
pub const REPLY_EVENT_TYPE: &str = "anima_reply";

/// Which reply a message is: its inbox row and part. Slack keeps it as message metadata, so
/// a message whose post outcome was lost (a timeout, or a crash while the post was in flight)
/// is found again in the conversation instead of being posted twice.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostMark {
    pub inbox: i64,
    pub part: usize,
}

impl PostMark {
    /// A mark for a message that answers no inbox row (a follow-up, a closing note, an admin
    /// answer): row 0, which no row has, and a part number drawn at random.
    pub(super) fn one_off() -> PostMark {
        use std::hash::BuildHasher;
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let part = std::collections::hash_map::RandomState::new().hash_one(seed) as usize;
        PostMark {
            inbox: 0,
            part: part.max(1),
        }
    }

    pub(super) fn metadata(self) -> SlackMessageMetadata {
        SlackMessageMetadata {
            event_type: REPLY_EVENT_TYPE.to_string(),
            event_payload: Some(
                [
                    ("inbox".to_string(), self.inbox.to_string()),
                    ("part".to_string(), self.part.to_string()),
                ]
                .into(),
            ),
        }
    }

    pub(super) fn is_on(self, m: &SlackHistoryMessage) -> bool {
        m.content.metadata.as_ref().is_some_and(|meta| {
            let payload = meta.event_payload.as_ref();
            let field = |k: &str| payload.and_then(|p| p.get(k)).map(String::as_str);
            meta.event_type == REPLY_EVENT_TYPE
                && field("inbox") == Some(self.inbox.to_string().as_str())
                && field("part") == Some(self.part.to_string().as_str())
        })
    }
}

/// A reply's content: Markdown with the reply's mark; with the feedback buttons, the text goes
/// as a `markdown` block beside them (`markdown_text` cannot go with blocks), and `text` is
/// the notification's fallback.
pub(super) fn reply_content(
    text: &str,
    mark: Option<PostMark>,
    feedback: bool,
) -> SlackMessageContent {
    let content = SlackMessageContent::new().opt_metadata(mark.map(PostMark::metadata));
    if feedback {
        content.with_text(text.to_string()).with_blocks(vec![
            SlackMarkdownBlock::new(text.to_string()).into(),
            super::feedback::feedback_block(),
        ])
    } else {
        content.with_markdown_text(text.to_string())
    }
}

/// The first of `messages` that is ours, after `after_ts`, carries no reply mark and is not
/// `held` (given to a reply by the inbox).
pub(super) fn unmarked(
    bot: &BotIdentity,
    messages: &[SlackHistoryMessage],
    after_ts: &str,
    held: &[String],
) -> Option<String> {
    messages
        .iter()
        .filter(|m| ts_order(m.origin.ts.as_ref()) > ts_order(after_ts))
        .filter(|m| !held.iter().any(|h| h.as_str() == m.origin.ts.as_ref()))
        .find(|m| {
            is_mine(bot, m)
                && m.content
                    .metadata
                    .as_ref()
                    .is_none_or(|meta| meta.event_type != REPLY_EVENT_TYPE)
        })
        .map(|m| m.origin.ts.to_string())
}

/// Whether the bot wrote `m`.
pub(super) fn is_mine(bot: &BotIdentity, m: &SlackHistoryMessage) -> bool {
    m.sender.user.as_ref().map(|u| u.to_string()) == Some(bot.user_id.clone())
        || (bot.bot_id.is_some() && m.sender.bot_id.as_ref().map(|b| b.to_string()) == bot.bot_id)
}
