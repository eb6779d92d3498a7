//! The Slack app manifest, for "Create New App → From a manifest": exactly the features, bot
//! scopes, bot events and interactivity anima uses, in Socket Mode or at an Events API URL.
//!
//! Owns the two tables that tie the manifest to the code: the Web API methods anima calls
//! with the bot token and the scopes each needs (`METHODS`), and the event types the intake
//! handles with the bot events that deliver them (`EVENTS`), each marked when only the inner
//! life uses it (`Extent::Minimal` leaves those out); and the message shortcuts the code
//! answers (`SHORTCUTS`). A test reads `src/slack/` and fails naming any method or event the
//! tables lack, and any entry the code no longer uses.
//! Pure: data in, JSON or YAML out (`yaml` writes it). Knows nothing of souls or models: the
//! caller names the bot and gives its words.

use serde_json::{json, Map, Value};

use crate::assistant::{Prompt, MAX_PROMPTS};

pub mod yaml;

/// A Web API method anima calls with the bot token, and the bot scopes Slack requires for it.
#[derive(Debug, Clone, Copy)]
pub struct Method {
    pub name: &'static str,
    pub scopes: &'static [&'static str],
}

/// The four conversation kinds' history scopes: reading a thread or a channel's top level
/// needs the one of its kind, and anima answers in all four.
const HISTORY: &[&str] = &[
    "channels:history",
    "groups:history",
    "im:history",
    "mpim:history",
];

/// Every Web API method anima calls with the bot token (`apps.connections.open` takes the
/// app-level token, whose `connections:write` is not a bot scope: the manifest cannot give it).
pub const METHODS: &[Method] = &[
    Method {
        name: "auth.test",
        scopes: &[],
    },
    Method {
        name: "users.info",
        scopes: &["users:read"],
    },
    Method {
        name: "chat.postMessage",
        scopes: &["chat:write"],
    },
    Method {
        name: "chat.postEphemeral",
        scopes: &["chat:write"],
    },
    Method {
        name: "chat.update",
        scopes: &["chat:write"],
    },
    Method {
        name: "chat.startStream",
        scopes: &["chat:write"],
    },
    Method {
        name: "chat.appendStream",
        scopes: &["chat:write"],
    },
    Method {
        name: "chat.stopStream",
        scopes: &["chat:write"],
    },
    Method {
        name: "conversations.replies",
        scopes: HISTORY,
    },
    Method {
        name: "conversations.history",
        scopes: HISTORY,
    },
    Method {
        name: "reactions.add",
        scopes: &["reactions:write"],
    },
    Method {
        name: "reactions.remove",
        scopes: &["reactions:write"],
    },
    Method {
        name: "assistant.threads.setStatus",
        scopes: &["assistant:write"],
    },
    Method {
        name: "assistant.threads.setSuggestedPrompts",
        scopes: &["assistant:write"],
    },
    Method {
        name: "assistant.threads.setTitle",
        scopes: &["assistant:write"],
    },
    Method {
        name: "agents.sessions.setStatus",
        scopes: &["assistant:write"],
    },
];

/// An event type the intake handles (the `type` of Slack's event) and the bot events that
/// deliver it, each with the bot scopes Slack requires to subscribe to it.
#[derive(Debug, Clone, Copy)]
pub struct Event {
    pub handled: &'static str,
    pub subscriptions: &'static [(&'static str, &'static [&'static str])],
    /// Only the soul's inner life feels it (nothing is said): an app without it answers as
    /// well.
    pub inner_life_only: bool,
}

/// Every event type the intake handles.
pub const EVENTS: &[Event] = &[
    Event {
        // A message comes by one subscription per conversation kind.
        handled: "message",
        subscriptions: &[
            ("message.channels", &["channels:history"]),
            ("message.groups", &["groups:history"]),
            ("message.im", &["im:history"]),
            ("message.mpim", &["mpim:history"]),
        ],
        inner_life_only: false,
    },
    Event {
        handled: "app_mention",
        subscriptions: &[("app_mention", &["app_mentions:read"])],
        inner_life_only: false,
    },
    Event {
        handled: "reaction_added",
        subscriptions: &[("reaction_added", &["reactions:read"])],
        inner_life_only: true,
    },
    Event {
        // Public channels need the first, private ones the second.
        handled: "member_joined_channel",
        subscriptions: &[("member_joined_channel", &["channels:read", "groups:read"])],
        inner_life_only: true,
    },
    Event {
        handled: "assistant_thread_started",
        subscriptions: &[("assistant_thread_started", &["assistant:write"])],
        inner_life_only: false,
    },
    Event {
        // The Messages tab opened: needs no scope.
        handled: "app_home_opened",
        subscriptions: &[("app_home_opened", &[])],
        inner_life_only: false,
    },
    Event {
        // The stop button of the agent view.
        handled: "agent_session_stopped",
        subscriptions: &[("agent_session_stopped", &["assistant:write"])],
        inner_life_only: false,
    },
];

/// A message shortcut (in a message's "More actions" menu) the code answers.
#[derive(Debug, Clone, Copy)]
pub struct Shortcut {
    pub callback_id: &'static str,
    pub name: &'static str,
    pub description: &'static str,
}

/// Every message shortcut: "Why did you say that?" on one of the soul's replies.
pub const SHORTCUTS: &[Shortcut] = &[Shortcut {
    callback_id: super::why::CALLBACK_ID,
    name: super::why::NAME,
    description: "The soul's monologue, process and checks behind this reply (only you see it)",
}];

/// The bot scope Slack requires of an app with shortcuts.
const SHORTCUT_SCOPE: &str = "commands";

/// The bot scope reading the files people share with a message needs (`slack::files` fetches
/// them from Slack's file hosts, not through a Web API method). The soul answers with what it
/// read, so even `--minimal` asks for it.
pub const FILES_SCOPE: &str = "files:read";

/// The route of anima's Events API door (events and interactions alike).
pub const EVENTS_PATH: &str = "/slack/events";

/// Slack's limits on the manifest's words, in characters.
const MAX_APP_NAME: usize = 35;
const MAX_DISPLAY_NAME: usize = 80;
const MAX_DESCRIPTION: usize = 140;

/// How Slack reaches anima.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery<'a> {
    /// Socket Mode: anima dials out; no public URL.
    Socket,
    /// The Events API: Slack posts events and interactions to this URL.
    Events { url: &'a str },
}

/// What the app asks Slack for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extent {
    /// Every event the intake handles, with its scopes.
    Full,
    /// Without the events (and so the scopes) only the inner life uses: the soul answers as
    /// well, and is not moved by reactions or by people joining its channels.
    Minimal,
}

impl Extent {
    fn takes(self, e: &Event) -> bool {
        self == Extent::Full || !e.inner_life_only
    }
}

/// Who the app is: the bot's name and the words of its agent view.
#[derive(Debug, Clone, Copy)]
pub struct App<'a> {
    pub name: &'a str,
    pub prompts: &'a [Prompt],
}

/// Every bot scope the manifest asks for: those of the methods and of the events, sorted.
pub fn bot_scopes(extent: Extent) -> Vec<&'static str> {
    let methods = METHODS.iter().flat_map(|m| m.scopes.iter());
    let events = EVENTS
        .iter()
        .filter(|e| extent.takes(e))
        .flat_map(|e| e.subscriptions.iter().flat_map(|(_, s)| s.iter()));
    let shortcuts = (!SHORTCUTS.is_empty()).then_some(&SHORTCUT_SCOPE);
    let mut scopes: Vec<&'static str> = methods
        .chain(events)
        .chain(shortcuts)
        .chain([&FILES_SCOPE])
        .copied()
        .collect();
    scopes.sort_unstable();
    scopes.dedup();
    scopes
}

/// Every bot event the manifest subscribes to, in the table's order.
pub fn bot_events(extent: Extent) -> Vec<&'static str> {
    EVENTS
        .iter()
        .filter(|e| extent.takes(e))
        .flat_map(|e| e.subscriptions.iter().map(|(name, _)| *name))
        .collect()
}

/// The manifest, as Slack's JSON.
pub fn manifest(app: &App, delivery: Delivery, extent: Extent) -> Value {
    let name = app.name.trim();
    let description = cut(
        &format!("{name}, a soul with memory and moods, at home in Slack (run by anima)"),
        MAX_DESCRIPTION,
    );
    let mut agent_view = Map::new();
    agent_view.insert("agent_description".into(), json!(description));
    let prompts: Vec<Value> = app
        .prompts
        .iter()
        .take(MAX_PROMPTS)
        .map(|p| json!({ "title": p.title, "message": p.message }))
        .collect();
    if !prompts.is_empty() {
        agent_view.insert("suggested_prompts".into(), Value::Array(prompts));
    }
    let mut events = Map::new();
    let mut interactivity = Map::new();
    interactivity.insert("is_enabled".into(), json!(true));
    if let Delivery::Events { url } = delivery {
        events.insert("request_url".into(), json!(url));
        // Interactions come to the same door as events (a signed form post).
        interactivity.insert("request_url".into(), json!(url));
    }
    events.insert("bot_events".into(), json!(bot_events(extent)));
    // Interactions come by the same door as events (above): a shortcut needs nothing more.
    let shortcuts: Vec<Value> = SHORTCUTS
        .iter()
        .map(|s| {
            json!({
                "name": s.name,
                "type": "message",
                "callback_id": s.callback_id,
                "description": s.description,
            })
        })
        .collect();
    json!({
        "display_information": {
            "name": cut(name, MAX_APP_NAME),
            "description": description,
        },
        "features": {
            "agent_view": agent_view,
            "app_home": {
                "home_tab_enabled": false,
                "messages_tab_enabled": true,
                "messages_tab_read_only_enabled": false,
            },
            "bot_user": {
                "display_name": cut(name, MAX_DISPLAY_NAME),
                "always_online": true,
            },
            "shortcuts": shortcuts,
        },
        "oauth_config": {
            "scopes": { "bot": bot_scopes(extent) },
        },
        "settings": {
            "event_subscriptions": events,
            "interactivity": interactivity,
            "org_deploy_enabled": false,
            "socket_mode_enabled": delivery == Delivery::Socket,
            "token_rotation_enabled": false,
        },
    })
}

/// `text` cut to `max` characters on a character boundary.
fn cut(text: &str, max: usize) -> String {
    text.chars()
        .take(max)
        .collect::<String>()
        .trim_end()
        .to_string()
}

#[cfg(test)]
mod tests;
