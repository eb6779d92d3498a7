//! Slack's AI-app surfaces, the calls: the assistant status with the soul's loading
//! messages, suggested prompts (in an assistant thread, or without a thread in the Messages
//! tab of agent_view), a thread's title, and the greeting that opens a conversation.
//!
//! slack-morphism's setStatus has no `loading_messages` and its setSuggestedPrompts requires
//! `thread_ts` (which agent_view refuses silently): those two go out as this module's own
//! request types through the session's `http_post`, with the session's token. Every call
//! here is a courtesy: a refusal (a missing scope, a token type, an unknown error) degrades
//! to today's behaviour, logged once per method and code. Knows nothing of souls or turns.

use serde::Serialize;
use slack_morphism::prelude::*;

use super::api::{BotIdentity, Outgoing, SlackApi, SlackError};
use super::markdown;
use crate::assistant::{AssistantWords, Prompt, MAX_LOADING_MESSAGES, MAX_PROMPTS};

/// The longest thread title set, in characters.
pub const MAX_TITLE_CHARS: usize = 80;

/// `assistant.threads.setStatus`, with the field slack-morphism lacks.
#[derive(Debug, Serialize)]
struct SetStatus<'a> {
    channel_id: &'a str,
    thread_ts: &'a str,
    status: &'a str,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    loading_messages: &'a [String],
}

#[derive(Debug, Serialize)]
struct PromptOut<'a> {
    title: &'a str,
    message: &'a str,
}

/// `assistant.threads.setSuggestedPrompts`, with `thread_ts` optional (agent_view wants
/// none).
#[derive(Debug, Serialize)]
struct SetSuggestedPrompts<'a> {
    channel_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    thread_ts: Option<&'a str>,
    prompts: Vec<PromptOut<'a>>,
}

/// A thread's title from its first message: whitespace runs folded to one space, cut to
/// `MAX_TITLE_CHARS` characters on a character boundary (marked with `…`); `None` when
/// nothing is left.
pub fn title_from(text: &str) -> Option<String> {
    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if folded.is_empty() {
        return None;
    }
    match folded.char_indices().nth(MAX_TITLE_CHARS) {
        None => Some(folded),
        Some(_) => {
            // Room for the ellipsis; cut at a word boundary when one is near.
            let (at, _) = folded
                .char_indices()
                .nth(MAX_TITLE_CHARS - 1)
                .expect("longer than the limit");
            let head = &folded[..at];
            let head = match head.rfind(' ') {
                Some(space) if head[..space].chars().count() >= MAX_TITLE_CHARS / 2 => {
                    &head[..space]
                }
                _ => head,
            };
            Some(format!("{}…", head.trim_end()))
        }
    }
}

impl SlackApi {
    /// Shows (`on`) or clears the assistant status of a thread. Shown with the soul's status
    /// and loading messages (as many as Slack takes); cleared with an empty status.
    pub async fn set_status(
        &self,
        channel: &str,
        thread_ts: &str,
        on: bool,
    ) -> Result<(), SlackError> {
        let words = self.words.as_ref().map(|w| w.current());
        let (status, loading): (&str, &[String]) = match (&words, on) {
            (_, false) => ("", &[]),
            (Some(w), true) => (
                w.status.as_str(),
                &w.loading_messages[..w.loading_messages.len().min(MAX_LOADING_MESSAGES)],
            ),
            (None, true) => ("is thinking…", &[]),
        };
        let req = SetStatus {
            channel_id: channel,
            thread_ts,
            status,
            loading_messages: loading,
        };
        let session = self.client.open_session(&self.bot_token);
        self.timed(
            "assistant.threads.setStatus",
            session
                .http_session_api
                .http_post::<_, SlackApiAssistantThreadsSetStatusResponse>(
                    "assistant.threads.setStatus",
                    &req,
                    None,
                ),
        )
        .await
        .map(|_| ())
    }

    /// Offers the soul's prompts in a conversation: in an assistant thread with its
    /// `thread_ts`, in agent_view's Messages tab without one.
    pub async fn set_suggested_prompts(
        &self,
        channel: &str,
        thread_ts: Option<&str>,
        prompts: &[Prompt],
    ) -> Result<(), SlackError> {
        let req = SetSuggestedPrompts {
            channel_id: channel,
            thread_ts,
            prompts: prompts
                .iter()
                .take(MAX_PROMPTS)
                .map(|p| PromptOut {
                    title: &p.title,
                    message: &p.message,
                })
                .collect(),
        };
        let session = self.client.open_session(&self.bot_token);
        self.timed(
            "assistant.threads.setSuggestedPrompts",
            session
                .http_session_api
                .http_post::<_, SlackApiAssistantThreadsSetSuggestedPromptsResponse>(
                    "assistant.threads.setSuggestedPrompts",
                    &req,
                    None,
                ),
        )
        .await
        .map(|_| ())
    }

    /// Names an assistant thread.
    pub async fn set_title(
        &self,
        channel: &str,
        thread_ts: &str,
        title: &str,
    ) -> Result<(), SlackError> {
        let req = SlackApiAssistantThreadSetTitleRequest::new(
            SlackChannelId::new(channel.to_string()),
            SlackTs::new(thread_ts.to_string()),
            title.to_string(),
        );
        let session = self.client.open_session(&self.bot_token);
        self.timed(
            "assistant.threads.setTitle",
            session.assistant_threads_set_title(&req),
        )
        .await
        .map(|_| ())
    }

    /// Opens a conversation the person just opened: the soul's greeting (in the thread, or
    /// at the DM's top level) and its suggested prompts. Each part is a courtesy: one that
    /// fails leaves the other, and the conversation, as they are.
    pub async fn open_conversation(
        &self,
        bot: &BotIdentity,
        words: &AssistantWords,
        channel: &str,
        thread_ts: Option<&str>,
        after_ts: &str,
    ) {
        if let Some(greeting) = markdown::render(&words.greeting, false, markdown::MESSAGE_LIMIT)
            .into_iter()
            .next()
        {
            let out = Outgoing {
                channel,
                thread_ts,
                after_ts,
                text: &greeting,
                mark: None,
                feedback: false,
                held: &[],
            };
            self.courtesy(self.post(bot, &out, false).await, "greeting not posted");
        }
        if !words.prompts.is_empty() {
            let result = self
                .set_suggested_prompts(channel, thread_ts, &words.prompts)
                .await;
            self.courtesy(result, "suggested prompts not set");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_short_title_is_the_message_with_its_whitespace_folded() {
        assert_eq!(
            title_from("  how do I\n\n rebase?  ").as_deref(),
            Some("how do I rebase?")
        );
        assert_eq!(title_from(" \n\t "), None);
    }

    #[test]
    fn a_long_title_is_cut_at_a_word_near_the_limit() {
        let long = "word ".repeat(40);
        let t = title_from(&long).unwrap();
        assert!(t.chars().count() <= MAX_TITLE_CHARS, "{t}");
        assert!(t.ends_with("word…"), "{t}");
        let one = "x".repeat(200);
        let t = title_from(&one).unwrap();
        assert_eq!(t.chars().count(), MAX_TITLE_CHARS);
    }

    #[test]
    fn the_requests_have_slacks_field_names() {
        let loading = vec!["a".to_string()];
        let v = serde_json::to_value(SetStatus {
            channel_id: "D1",
            thread_ts: "1.0",
            status: "is thinking…",
            loading_messages: &loading,
        })
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"channel_id":"D1","thread_ts":"1.0","status":"is thinking…","loading_messages":["a"]})
        );
        let cleared = serde_json::to_value(SetStatus {
            channel_id: "D1",
            thread_ts: "1.0",
            status: "",
            loading_messages: &[],
        })
        .unwrap();
        assert_eq!(
            cleared,
            serde_json::json!({"channel_id":"D1","thread_ts":"1.0","status":""})
        );
        let v = serde_json::to_value(SetSuggestedPrompts {
            channel_id: "D1",
            thread_ts: None,
            prompts: vec![PromptOut {
                title: "t",
                message: "m",
            }],
        })
        .unwrap();
        assert_eq!(
            v,
            serde_json::json!({"channel_id":"D1","prompts":[{"title":"t","message":"m"}]}),
            "no thread_ts under agent_view"
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        #[test]
        fn a_title_is_whole_characters_of_the_message_within_the_limit(
            text in prop::collection::vec(
                prop_oneof![
                    Just("é".to_string()), Just("日本".to_string()), Just("🦀".to_string()),
                    Just("👩‍👩‍👧".to_string()), Just(" ".to_string()), Just("\n".to_string()),
                    "[a-z]{1,12}",
                ],
                0..120,
            ).prop_map(|parts| parts.concat()),
        ) {
            match title_from(&text) {
                None => prop_assert!(text.trim().is_empty()),
                Some(t) => {
                    prop_assert!(t.chars().count() <= MAX_TITLE_CHARS, "{} chars", t.chars().count());
                    prop_assert!(!t.is_empty());
                    let folded = text.split_whitespace().collect::<Vec<_>>().join(" ");
                    let head = t.strip_suffix('…').unwrap_or(&t);
                    prop_assert!(folded.starts_with(head), "{:?} is not a start of {:?}", head, folded);
                    if folded.chars().count() <= MAX_TITLE_CHARS {
                        prop_assert_eq!(t, folded);
                    }
                }
            }
        }
    }
}
