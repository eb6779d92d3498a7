//! "Why did you say that?": the `anima_why` message shortcut. A person uses it on one of the
//! soul's replies and gets, in an ephemeral message only they see, that turn's monologue, its
//! process path and decisions, its checks and what it wrote to memory, from the turn's trace.
//!
//! `read_ask` is pure (an interaction in, an `Ask` out); `answer` finds the trace and words
//! the answer; `post` sends it with `chat.postEphemeral`. Everything in a trace came from the
//! model or from people: it goes to Slack as escaped text (`&`, `<`, `>`), so a monologue can
//! neither ping anyone nor make a link, and long texts are cut, saying so. Who may ask is the
//! config's to say (`InspectConfig::may_ask_why`); which reply a message holds is the store's.
//! `permalink` words (and links) a reply's message for the inspector's turn page.
//! Knows nothing of turns or models beyond the trace's words.

use slack_morphism::prelude::*;
use tracing::{debug, info, warn};

use super::api::{BotIdentity, SlackApi, SlackError};
use super::out::SlackAddress;
use crate::memory::{Store, TraceRow};
use crate::window::TraceBody;

/// The shortcut's callback id (the manifest's `features.shortcuts`).
pub const CALLBACK_ID: &str = "anima_why";
/// The shortcut's name, as people see it in a message's menu.
pub const NAME: &str = "Why did you say that?";

/// The answer on a message that is not one of the soul's replies.
pub const NOT_MINE: &str = "That is not one of my replies.";
/// The answer to someone who may not ask.
pub const REFUSAL: &str =
    "Sorry: only the people this soul's operator named may ask why it said something.";
/// The answer when the reply's turn left no trace (pruned, or `[inspect] keep_turns = 0`).
pub const NO_TRACE: &str = "No trace kept of that reply: its turn's trace was pruned, or traces are off (`[inspect] keep_turns = 0`).";

/// The monologue's characters shown; beyond them it is cut, and the cut named.
const MONOLOGUE_CHARS: usize = 2_500;
/// The characters of any other item (a check, a decision, a memory write).
const ITEM_CHARS: usize = 300;
/// The items of a list shown.
const ITEMS: usize = 12;
/// The most characters of the whole message: Slack shows up to 40,000; this stays readable.
const MESSAGE_CHARS: usize = 12_000;
/// The cognitive step whose text is the reply itself (shown in Slack already).
const DIALOGUE: &str = "external_dialogue";

/// A use of the shortcut, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ask {
    pub channel: String,
    /// The message's ts: the reference its reply is found by.
    pub message_ts: String,
    /// The thread the message sits in, when it is a reply in one (the answer goes there).
    pub thread_ts: Option<String>,
    pub person: String,
    /// The message was posted by the soul's bot.
    pub by_us: bool,
}

/// What an interaction is, for this module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// Not this shortcut: another part takes it.
    NotOurs,
    /// This shortcut, but the payload lacks what an answer needs (logged, acknowledged).
    Unusable(&'static str),
    Ask(Ask),
}

/// Reads an interaction: a use of the `anima_why` shortcut, or not.
pub fn read_ask(ev: &SlackInteractionEvent, bot: &BotIdentity) -> Read {
    let SlackInteractionEvent::MessageAction(a) = ev else {
        return Read::NotOurs;
    };
    if a.callback_id.0 != CALLBACK_ID {
        return Read::NotOurs;
    }
    let Some(message) = &a.message else {
        return Read::Unusable("a shortcut without its message");
    };
    let channel = a
        .channel
        .as_ref()
        .map(|c| c.id.0.clone())
        .or_else(|| message.origin.channel.as_ref().map(|c| c.0.clone()))
        .filter(|c| !c.is_empty());
    let Some(channel) = channel else {
        return Read::Unusable("a shortcut without a channel");
    };
    let message_ts = message.origin.ts.0.clone();
    if message_ts.is_empty() || a.user.id.0.is_empty() {
        return Read::Unusable("a shortcut without the message's ts or the person");
    }
    let by_us = message
        .sender
        .user
        .as_ref()
        .is_some_and(|u| u.0 == bot.user_id)
        || message
            .sender
            .bot_id
            .as_ref()
            .is_some_and(|id| Some(&id.0) == bot.bot_id.as_ref());
    let thread_ts = message
        .origin
        .thread_ts
        .as_ref()
        .map(|t| t.0.clone())
        .filter(|t| *t != message_ts && !t.is_empty());
    Read::Ask(Ask {
        channel,
        message_ts,
        thread_ts,
        person: a.user.id.0.clone(),
        by_us,
    })
}

/// The answer to `ask`: "not mine", a refusal, "no trace", or the trace in words.
pub async fn answer(store: &dyn Store, ask: &Ask, allowed: bool) -> String {
    if !ask.by_us {
        debug!(channel = %ask.channel, ts = %ask.message_ts, "why: not the soul's message");
        return NOT_MINE.to_string();
    }
    if !allowed {
        warn!(user = %ask.person, "why: asked by someone not in [inspect] why_users; refused");
        return REFUSAL.to_string();
    }
    let channel = ask.channel.clone();
    let here = Box::new(move |address: &str| {
        serde_json::from_str::<SlackAddress>(address).is_ok_and(|a| a.channel == channel)
    });
    match store.trace_of_reply(&ask.message_ts, here).await {
        Ok(Some(row)) => {
            info!(user = %ask.person, trace = %row.trace, "why: a reply's trace shown");
            explain(&row)
        }
        Ok(None) => {
            info!(user = %ask.person, ts = %ask.message_ts, "why: no trace kept of that reply");
            NO_TRACE.to_string()
        }
        Err(e) => {
            warn!(error = %e, "why: the trace could not be read");
            "The trace of that reply could not be read now; try again in a moment.".to_string()
        }
    }
}

/// Sends `text` to the person only, where they asked (in the thread, when it was in one).
pub async fn post(api: &SlackApi, ask: &Ask, text: &str) -> Result<(), SlackError> {
    let session = api.client.open_session(&api.bot_token);
    let req = SlackApiChatPostEphemeralRequest::new(
        SlackChannelId::new(ask.channel.clone()),
        SlackUserId::new(ask.person.clone()),
        SlackMessageContent::new().with_text(text.to_string()),
    )
    .with_link_names(false)
    .opt_thread_ts(ask.thread_ts.clone().map(SlackTs::new));
    api.timed("chat.postEphemeral", session.chat_post_ephemeral(&req))
        .await
        .map(|_| ())
}

/// A trace in words, for Slack: the monologue, the process path and decisions, the checks,
/// what memory was written, errors. Every text escaped and cut.
pub fn explain(row: &TraceRow) -> String {
    let body = match TraceBody::from_row(&row.body, &row.pieces) {
        Ok(body) => body,
        Err(e) => {
            warn!(trace = %row.trace, error = %e, "why: a trace that cannot be read");
            return format!(
                "The trace of that reply (`{}`) cannot be read.",
                escape(&row.trace)
            );
        }
    };
    let mut out = format!(
        "*Why I said that* (trace `{}`)\n",
        escape(short(&row.trace))
    );
    let monologue = body.monologue().join("\n\n");
    out.push_str("\n*Monologue*\n");
    if monologue.trim().is_empty() {
        out.push_str("_none: the turn thought nothing aloud_\n");
    } else {
        out.push_str(&cut_named(&monologue, MONOLOGUE_CHARS));
        out.push('\n');
    }
    let path = if body.processes.is_empty() {
        row.process.clone()
    } else {
        body.processes.join(" → ")
    };
    out.push_str(&format!("\n*Process*: {}\n", cut_named(&path, ITEM_CHARS)));
    let decisions = body
        .decisions
        .iter()
        .map(|d| format!("{}: {}", d.kind, d.text));
    list(&mut out, "Decisions", decisions);
    let checks = body
        .cognition
        .iter()
        .filter(|s| s.step != crate::window::trace::MONOLOGUE && s.step != DIALOGUE)
        .map(|s| format!("{}: {}", s.step, s.text));
    list(&mut out, "Checks", checks);
    let memory = body
        .memory
        .iter()
        .map(|w| format!("{}: {}", w.what, w.detail));
    list(&mut out, "Memory written", memory);
    list(&mut out, "Errors", body.errors.iter().cloned());
    bounded(out, MESSAGE_CHARS)
}

/// A titled list, at most `ITEMS` lines, each escaped and cut; nothing when empty.
fn list(out: &mut String, title: &str, items: impl Iterator<Item = String>) {
    let items: Vec<String> = items.collect();
    if items.is_empty() {
        return;
    }
    out.push_str(&format!("\n*{title}*\n"));
    for item in items.iter().take(ITEMS) {
        out.push_str("• ");
        out.push_str(&cut_named(&one_line(item), ITEM_CHARS));
        out.push('\n');
    }
    if items.len() > ITEMS {
        out.push_str(&format!("… and {} more\n", items.len() - ITEMS));
    }
}

/// The first 12 characters of a trace id: how the logs name the turn.
fn short(trace: &str) -> &str {
    trace
        .char_indices()
        .nth(12)
        .map_or(trace, |(at, _)| &trace[..at])
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` escaped for Slack, cut to `max` characters first; a cut says how long it was.
fn cut_named(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!(
            "{}… _(cut: {} characters in all)_",
            escape(&text[..at]),
            text.chars().count()
        ),
        None => escape(text),
    }
}

/// Text as Slack shows it literally: `&`, `<` and `>` as entities (no mention, broadcast or
/// link can form), and the broadcast words (`@channel`, `@here`, `@everyone`) made to notify
/// nobody.
pub fn escape(text: &str) -> String {
    let escaped = text
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;");
    super::markdown::neutralise(&escaped, false)
}

/// Where a reply of the soul's went in Slack, for the inspector: its channel and ts in words,
/// and its permalink when the workspace's URL is known (`workspace`, from auth.test):
/// `WORKSPACE/archives/CHANNEL/pTS` (the ts without its dot), with `?thread_ts=T&cid=CHANNEL`
/// for a reply in a thread. `address` is the inbox row's (`SlackAddress`), `reference` the
/// ts of the reply's message. `None` for an address that is not Slack's. A link is made only
/// from an http(s) workspace URL and a channel and ts of letters, digits and dots: anything
/// else gives the words alone.
pub fn permalink(
    workspace: Option<&str>,
    address: &str,
    reference: &str,
) -> Option<(String, Option<String>)> {
    let a: SlackAddress = serde_json::from_str(address).ok()?;
    let thread = a.thread_ts.filter(|t| t != reference);
    let text = match &thread {
        Some(t) => format!("{} {reference} (in the thread {t})", a.channel),
        None => format!("{} {reference}", a.channel),
    };
    let plain =
        |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.');
    let base = workspace
        .map(|w| w.trim_end_matches('/'))
        .filter(|w| w.starts_with("https://") || w.starts_with("http://"))
        .filter(|w| !w.contains(['"', '\'', '<', '>', ' ', '?', '#']));
    let ok = plain(&a.channel) && plain(reference) && thread.as_deref().is_none_or(plain);
    let link = base.filter(|_| ok).map(|base| {
        let mut link = format!(
            "{base}/archives/{}/p{}",
            a.channel,
            reference.replace('.', "")
        );
        if let Some(t) = &thread {
            link.push_str(&format!("?thread_ts={t}&cid={}", a.channel));
        }
        link
    });
    Some((text, link))
}

/// The whole message within `max` characters, never cutting an entity in two.
fn bounded(text: String, max: usize) -> String {
    let Some((at, _)) = text.char_indices().nth(max) else {
        return text;
    };
    let mut head = &text[..at];
    if let Some(amp) = head.rfind('&') {
        if !head[amp..].contains(';') {
            head = &head[..amp];
        }
    }
    format!("{head}…\n_(cut to Slack's length)_")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    fn bot() -> BotIdentity {
        BotIdentity::for_tests()
    }

    #[test]
    fn a_reply_s_permalink_names_its_thread_and_needs_a_known_http_workspace() {
        let threaded = r#"{"channel":"C1","ts":"4.000100","thread_ts":"4.000100"}"#;
        let (text, link) =
            permalink(Some("https://acme.slack.com/"), threaded, "5.000200").unwrap();
        assert_eq!(text, "C1 5.000200 (in the thread 4.000100)");
        assert_eq!(
            link.as_deref(),
            Some("https://acme.slack.com/archives/C1/p5000200?thread_ts=4.000100&cid=C1")
        );
        let dm = r#"{"channel":"D1","ts":"4.0","thread_ts":null}"#;
        let (text, link) = permalink(Some("https://acme.slack.com"), dm, "5.000200").unwrap();
        assert_eq!(text, "D1 5.000200");
        assert_eq!(
            link.as_deref(),
            Some("https://acme.slack.com/archives/D1/p5000200")
        );
        // No workspace, or one that is not http(s), or odd parts: the words alone.
        assert_eq!(permalink(None, dm, "5.1").unwrap().1, None);
        assert_eq!(
            permalink(Some("javascript:alert(1)"), dm, "5.1").unwrap().1,
            None
        );
        assert_eq!(permalink(Some("https://a\"b/"), dm, "5.1").unwrap().1, None);
        let odd = r#"{"channel":"C1/../x","ts":"4.0","thread_ts":null}"#;
        assert_eq!(
            permalink(Some("https://a.slack.com"), odd, "5.1")
                .unwrap()
                .1,
            None
        );
        assert_eq!(
            permalink(Some("https://a.slack.com"), dm, "5.1\"><b>")
                .unwrap()
                .1,
            None
        );
        assert_eq!(
            permalink(Some("https://a.slack.com"), "not slack", "5.1"),
            None
        );
    }

    /// A message_action payload as Slack sends it for a message shortcut.
    fn shortcut(callback_id: &str, user: &str, bot_id: Option<&str>) -> Value {
        let mut message = json!({"type": "message", "user": user, "text": "An answer.",
                                 "ts": "5.000100", "thread_ts": "4.000100"});
        if let Some(b) = bot_id {
            message["bot_id"] = json!(b);
        }
        json!({
            "type": "message_action",
            "token": "x",
            "action_ts": "1700000001.000100",
            "team": {"id": "T111", "domain": "fake"},
            "user": {"id": "U1", "username": "ann", "name": "ann", "team_id": "T111"},
            "channel": {"id": "C1", "name": "general"},
            "callback_id": callback_id,
            "trigger_id": "1.2.abc",
            "message_ts": "5.000100",
            "message": message,
            "response_url": "https://hooks.slack.com/app/T111/1/x"
        })
    }

    fn read(v: Value) -> Read {
        let ev: SlackInteractionEvent = serde_json::from_value(v).expect("a real payload reads");
        read_ask(&ev, &bot())
    }

    #[test]
    fn the_shortcut_on_a_reply_of_the_bot_is_an_ask_in_its_thread() {
        assert_eq!(
            read(shortcut(CALLBACK_ID, "UBOT", Some("BBOT"))),
            Read::Ask(Ask {
                channel: "C1".into(),
                message_ts: "5.000100".into(),
                thread_ts: Some("4.000100".into()),
                person: "U1".into(),
                by_us: true,
            })
        );
        let Read::Ask(ask) = read(shortcut(CALLBACK_ID, "U2", None)) else {
            panic!("an ask");
        };
        assert!(!ask.by_us, "a person's message is not the soul's");
        let Read::Ask(ask) = read(shortcut(CALLBACK_ID, "U2", Some("BOTHER"))) else {
            panic!("an ask");
        };
        assert!(!ask.by_us, "another app's message is not the soul's");
    }

    #[test]
    fn other_shortcuts_and_interactions_are_not_ours_and_a_bare_one_is_unusable() {
        assert_eq!(
            read(shortcut("someone_elses", "UBOT", Some("BBOT"))),
            Read::NotOurs
        );
        let mut bare = shortcut(CALLBACK_ID, "UBOT", Some("BBOT"));
        bare.as_object_mut().unwrap().remove("message");
        assert_eq!(read(bare), Read::Unusable("a shortcut without its message"));
        let mut nowhere = shortcut(CALLBACK_ID, "UBOT", Some("BBOT"));
        nowhere.as_object_mut().unwrap().remove("channel");
        assert_eq!(
            read(nowhere),
            Read::Unusable("a shortcut without a channel")
        );
    }

    fn row(body: &TraceBody) -> TraceRow {
        TraceRow {
            trace: "0123456789abcdef0123456789abcdef".into(),
            kind: "message".into(),
            thread: "C1:4.000100".into(),
            person: Some("U1".into()),
            inbox: Some(1),
            process: "main".into(),
            at: 1,
            reply: Some("An answer.".into()),
            body: body.to_json(),
            pieces: Vec::new(),
        }
    }

    fn step(step: &str, text: &str) -> crate::window::CognitionStep {
        crate::window::CognitionStep {
            step: step.into(),
            verb: String::new(),
            text: text.into(),
        }
    }

    #[test]
    fn a_trace_is_told_with_its_monologue_path_checks_and_memory_all_escaped() {
        let body = TraceBody {
            processes: vec!["main".into(), "deep_talk".into()],
            cognition: vec![
                step(
                    "internal_monologue",
                    "Ping <!channel> & see <https://x|y> @here",
                ),
                step(DIALOGUE, "An answer."),
                step("user_model_check", "true"),
            ],
            decisions: vec![crate::window::Decision {
                kind: "process".into(),
                text: "main → deep_talk".into(),
            }],
            memory: vec![crate::window::Written {
                what: "user_model".into(),
                detail: "version 3".into(),
            }],
            ..TraceBody::default()
        };
        let text = explain(&row(&body));
        assert!(text.contains("trace `0123456789ab`"), "{text}");
        assert!(
            text.contains("Ping &lt;!channel&gt; &amp; see &lt;https://x|y&gt; @\u{2060}here"),
            "{text}"
        );
        assert!(!text.contains('<') && !text.contains("<!"), "{text}");
        assert!(text.contains("*Process*: main → deep_talk"), "{text}");
        assert!(text.contains("• process: main → deep_talk"), "{text}");
        assert!(text.contains("• user_model_check: true"), "{text}");
        assert!(text.contains("• user_model: version 3"), "{text}");
        assert!(
            !text.contains("An answer."),
            "the reply is not repeated: {text}"
        );
    }

    #[test]
    fn a_long_monologue_is_cut_and_the_cut_named() {
        let body = TraceBody {
            cognition: vec![step("internal_monologue", &"é<".repeat(60_000))],
            ..TraceBody::default()
        };
        let text = explain(&row(&body));
        assert!(
            text.contains("(cut: 120000 characters in all)"),
            "{}",
            &text[..200]
        );
        assert!(text.chars().count() <= MESSAGE_CHARS + 40);
        let many = TraceBody {
            cognition: (0..40).map(|i| step("check", &format!("<{i}>"))).collect(),
            ..TraceBody::default()
        };
        let text = explain(&row(&many));
        assert!(text.contains("… and 28 more"), "{text}");
    }

    #[test]
    fn the_whole_message_is_bounded_without_cutting_an_entity() {
        let text = bounded(format!("{}&amp;tail", "a".repeat(9)), 12);
        assert_eq!(text, "aaaaaaaaa…\n_(cut to Slack's length)_");
        assert_eq!(bounded("short".into(), 12), "short");
    }

    #[test]
    fn an_unreadable_trace_is_said_not_a_panic() {
        let mut r = row(&TraceBody::default());
        r.body = "{not json".into();
        assert!(explain(&r).contains("cannot be read"));
    }
}
