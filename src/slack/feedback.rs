//! Feedback on the soul's replies: the buttons (a `context_actions` block holding a
//! `feedback_buttons` element, for the final message of a reply) and what a click on them
//! means. `read_click` is pure: an interaction in, a `Click` out; the `Gate` stores it.
//!
//! A click counts only if it is on anima's buttons (`ACTION_ID`, a value it set) in a message
//! of anima's own; which reply that message holds is the store's to say. Knows nothing of
//! turns or models.

use serde_json::Value;
use slack_morphism::prelude::*;

use super::api::BotIdentity;
use crate::memory::Verdict;

/// The `action_id` of anima's feedback buttons.
pub const ACTION_ID: &str = "anima_feedback";
/// The `block_id` of the block holding them.
pub const BLOCK_ID: &str = "anima_feedback";

/// The block that carries the feedback buttons, as slack-morphism's type (for
/// `SlackMessageContent::with_blocks` on `chat.stopStream`, `chat.postMessage` or
/// `chat.update`): a `context_actions` block holding one `feedback_buttons` element, positive
/// `good`, negative `bad`.
pub fn feedback_block() -> SlackBlock {
    let buttons = SlackBlockFeedbackButtonsElement::new(
        SlackFeedbackButtonItem::new("👍".into(), Verdict::Good.as_str().to_string())
            .with_accessibility_label(SlackAccessibilityLabel("Good reply".into())),
        SlackFeedbackButtonItem::new("👎".into(), Verdict::Bad.as_str().to_string())
            .with_accessibility_label(SlackAccessibilityLabel("Not helpful".into())),
    )
    .with_action_id(SlackActionId(ACTION_ID.into()));
    SlackContextActionsBlock::new(vec![buttons.into()])
        .with_block_id(SlackBlockId(BLOCK_ID.into()))
        .into()
}

/// The same block as Slack's JSON `blocks` array (one block), for a request built by hand.
pub fn feedback_blocks() -> Value {
    serde_json::to_value(vec![feedback_block()]).unwrap_or(Value::Null)
}

/// What a click means.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Click {
    /// A person judged the reply in the message `message_ts` of `channel`.
    Feedback {
        channel: String,
        message_ts: String,
        person: String,
        verdict: Verdict,
    },
    Ignore(&'static str),
}

/// Reads an interaction: a click on anima's feedback buttons, or something to ignore (and
/// why).
pub fn read_click(ev: &SlackInteractionEvent, bot: &BotIdentity) -> Click {
    let SlackInteractionEvent::BlockActions(b) = ev else {
        return Click::Ignore("an interaction that is not a button click");
    };
    let Some(action) = b
        .actions
        .iter()
        .flatten()
        .find(|a| a.action_id.0 == ACTION_ID)
    else {
        return Click::Ignore("a click on a button anima did not make");
    };
    let Some(verdict) = action.value.as_deref().and_then(Verdict::parse) else {
        return Click::Ignore("a feedback value anima did not set");
    };
    let SlackInteractionActionContainer::Message(container) = &b.container else {
        return Click::Ignore("a click outside a message");
    };
    let channel = container
        .channel_id
        .as_ref()
        .or(b.channel.as_ref().map(|c| &c.id))
        .map(|c| c.0.clone())
        .filter(|c| !c.is_empty());
    let Some(channel) = channel else {
        return Click::Ignore("a click without a channel");
    };
    if let Some(m) = &b.message {
        let by_us = m.sender.user.as_ref().is_some_and(|u| u.0 == bot.user_id)
            || m.sender
                .bot_id
                .as_ref()
                .is_some_and(|id| Some(&id.0) == bot.bot_id.as_ref());
        let by_anyone = m.sender.user.is_some() || m.sender.bot_id.is_some();
        if by_anyone && !by_us {
            return Click::Ignore("a click on another app's message");
        }
    }
    let Some(person) = b.user.as_ref().map(|u| u.id.0.clone()) else {
        return Click::Ignore("a click without a person");
    };
    Click::Feedback {
        channel,
        message_ts: container.message_ts.0.clone(),
        person,
        verdict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn bot() -> BotIdentity {
        BotIdentity::for_tests()
    }

    /// A block_actions payload as Slack sends it for a feedback button.
    pub(crate) fn click_payload(
        message_ts: &str,
        action_id: &str,
        value: &str,
        bot_id: &str,
    ) -> Value {
        json!({
            "type": "block_actions",
            "user": {"id": "U1", "username": "ann", "name": "ann", "team_id": "T111"},
            "api_app_id": "A111",
            "token": "x",
            "container": {"type": "message", "message_ts": message_ts, "channel_id": "D1", "is_ephemeral": false},
            "trigger_id": "1.2.abc",
            "team": {"id": "T111", "domain": "fake"},
            "channel": {"id": "D1", "name": "directmessage"},
            "message": {"type": "message", "user": "UBOT", "bot_id": bot_id, "text": "An answer.", "ts": message_ts,
                        "blocks": feedback_blocks()},
            "state": {"values": {}},
            "response_url": "https://hooks.slack.com/actions/T111/1/x",
            "actions": [{"type": "feedback_buttons", "action_id": action_id, "block_id": BLOCK_ID,
                         "value": value, "action_ts": "1700000001.000100"}]
        })
    }

    fn read(v: Value) -> Click {
        let ev: SlackInteractionEvent = serde_json::from_value(v).expect("a real payload reads");
        read_click(&ev, &bot())
    }

    #[test]
    fn the_buttons_are_a_context_actions_block_with_feedback_buttons() {
        let blocks = feedback_blocks();
        assert_eq!(blocks[0]["type"], "context_actions");
        assert_eq!(blocks[0]["block_id"], BLOCK_ID);
        let e = &blocks[0]["elements"][0];
        assert_eq!(e["type"], "feedback_buttons");
        assert_eq!(e["action_id"], ACTION_ID);
        assert_eq!(e["positive_button"]["value"], "good");
        assert_eq!(e["negative_button"]["value"], "bad");
        assert_eq!(e["positive_button"]["text"]["type"], "plain_text");
        let back: Vec<SlackBlock> = serde_json::from_value(blocks).unwrap();
        assert_eq!(
            back,
            vec![feedback_block()],
            "round-trips through slack-morphism"
        );
    }

    #[test]
    fn a_click_on_anima_s_buttons_is_feedback() {
        assert_eq!(
            read(click_payload("5.000100", ACTION_ID, "bad", "BBOT")),
            Click::Feedback {
                channel: "D1".into(),
                message_ts: "5.000100".into(),
                person: "U1".into(),
                verdict: Verdict::Bad,
            }
        );
    }

    #[test]
    fn other_buttons_values_apps_and_interactions_are_ignored() {
        assert_eq!(
            read(click_payload("5.0", "someone_elses", "good", "BBOT")),
            Click::Ignore("a click on a button anima did not make")
        );
        assert_eq!(
            read(click_payload("5.0", ACTION_ID, "meh", "BBOT")),
            Click::Ignore("a feedback value anima did not set")
        );
        let mut other = click_payload("5.0", ACTION_ID, "good", "BOTHER");
        other["message"]["user"] = json!("UOTHER");
        assert_eq!(
            read(other),
            Click::Ignore("a click on another app's message")
        );
        let mut no_actions = click_payload("5.0", ACTION_ID, "good", "BBOT");
        no_actions.as_object_mut().unwrap().remove("actions");
        assert_eq!(
            read(no_actions),
            Click::Ignore("a click on a button anima did not make")
        );
    }
}
