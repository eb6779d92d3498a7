//! "Why did you say that?" end to end: the real `anima run` against the fake Slack and the
//! fake model. A reply goes out, its turn's trace is in the store (written here through the
//! `Traces` face, newer than any the engine keeps itself), and the `anima_why` message
//! shortcut comes through Socket Mode or as a signed Events API post: the monologue goes only
//! to an allowed person (chat.postEphemeral with their user id), escaped; anyone else gets a
//! refusal; a message that is not the soul's, "not one of my replies"; no trace, "no trace
//! kept".

use crate::support;

use serde_json::{json, Value};
use support::daemon::{home, http, Daemon};
use support::slack::{self, FakeSlack};
use support::*;

/// The monologue the trace holds: broadcasts, a link and an ampersand that must not work.
const MONOLOGUE: &str = "They ask about rivers. <!channel> should not hear this; nor should <https://x|y> link & @here ping.";

fn dm(channel: &str, ts: &str, text: &str) -> Value {
    json!({"type":"message","channel":channel,"user":"U1","text":text,"ts":ts,"event_ts":ts,"channel_type":"im"})
}

fn socket_daemon(model: &FakeModel, slack: &FakeSlack, extra: &str) -> (Home, Daemon) {
    let home = home(model, slack, "socket", extra);
    let d = Daemon::start(&home);
    slack.wait_connected_or(|| d.log());
    (home, d)
}

/// Waits until inbox row `id` is answered and recorded: its reply's message is known then.
fn reply_recorded(slack: &FakeSlack, home: &Home, id: i64) {
    slack.wait(15, "the reply recorded", |_| {
        wait(home.store().inbox_item(id))
            .unwrap()
            .is_some_and(|i| i.status == anima::memory::InboxStatus::Done)
    });
}

/// Keeps a trace for inbox row `inbox`'s turn, as the engine would: a monologue, a check,
/// a process move and a user-model write. Dated an hour ahead, so it is the row's newest
/// whatever the engine kept itself.
fn keep_trace(home: &Home, inbox: i64, thread: &str) {
    use anima::window::{CognitionStep, Decision, TraceBody, Written};
    let step = |step: &str, text: &str| CognitionStep {
        step: step.into(),
        verb: "thought".into(),
        text: text.into(),
    };
    let body = TraceBody {
        stimulus: "tell me about rivers".into(),
        processes: vec!["main".into(), "deep_talk".into()],
        cognition: vec![
            step("internal_monologue", MONOLOGUE),
            step("external_dialogue", "Rivers run."),
            step("user_model_check", "true"),
        ],
        decisions: vec![Decision {
            kind: "process".into(),
            text: "main → deep_talk".into(),
        }],
        memory: vec![Written {
            what: "user_model".into(),
            detail: "version 2".into(),
        }],
        ..TraceBody::default()
    };
    let row = anima::memory::TraceRow {
        trace: "feedc0ffee0123456789abcdef012345".into(),
        kind: "message".into(),
        thread: thread.into(),
        person: Some("U1".into()),
        inbox: Some(inbox),
        process: "deep_talk".into(),
        at: anima::memory::now_ms() + 3_600_000,
        reply: Some("Rivers run.".into()),
        body: body.to_json(),
        pieces: Vec::new(),
    };
    wait(home.store().record_trace(row)).unwrap();
}

/// The escaped monologue, as Slack must receive it.
fn escaped() -> &'static str {
    "They ask about rivers. &lt;!channel&gt; should not hear this; nor should &lt;https://x|y&gt; link &amp; @\u{2060}here ping."
}

#[test]
fn an_allowed_person_gets_the_monologue_only_they_see_anyone_else_a_refusal() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Rivers run."));
    let (home, d) = socket_daemon(&model, &slack, "[inspect]\nwhy_users = [\"U1\"]\n");
    slack.send_event(
        dm("D1", "1700000000.000100", "tell me about rivers"),
        "EvW1",
        0,
    );
    slack.wait(15, "the reply", |s| s.posts().len() == 1);
    reply_recorded(&slack, &home, 1);
    let reply = slack.posts()[0].ts.clone();
    keep_trace(&home, 1, "D1");

    let ask = |person: &str| {
        slack::message_action(
            "anima_why",
            person,
            "D1",
            &reply,
            slack::BOT_USER,
            Some(slack::BOT_ID),
        )
    };
    let asked = slack.send_interactive(ask("U1"));
    slack.wait(15, "the answer to U1", |s| {
        !s.ephemerals_to("U1").is_empty()
    });
    assert!(slack.acks().contains(&asked), "acknowledged");
    let calls = slack.calls("chat.postEphemeral");
    assert_eq!(calls.len(), 1, "{calls:#?}");
    assert_eq!(calls[0]["channel"], "D1");
    assert_eq!(calls[0]["user"], "U1");
    assert!(calls[0].get("thread_ts").is_none(), "a DM's top level");
    let text = &slack.ephemerals_to("U1")[0];
    assert!(text.contains(escaped()), "{text}");
    assert!(
        !text.contains("<!channel>") && !text.contains("<https://"),
        "{text}"
    );
    assert!(text.contains("main → deep_talk"), "{text}");
    assert!(text.contains("user_model_check: true"), "{text}");
    assert!(text.contains("user_model: version 2"), "{text}");
    assert_eq!(slack.posts().len(), 1, "nothing said in the conversation");

    // Someone not in why_users: a refusal, and nothing of the monologue.
    slack.send_interactive(ask("U2"));
    slack.wait(15, "the answer to U2", |s| {
        !s.ephemerals_to("U2").is_empty()
    });
    let refusal = &slack.ephemerals_to("U2")[0];
    assert_eq!(refusal, anima::slack::why::REFUSAL);
    assert!(!refusal.contains("rivers"), "{refusal}");

    // A message that is not the soul's (a person's, another app's).
    slack.send_interactive(slack::message_action(
        "anima_why",
        "U1",
        "D1",
        "1700000000.000100",
        "U1",
        None,
    ));
    slack.send_interactive(slack::message_action(
        "anima_why",
        "U1",
        "D1",
        &reply,
        "UOTHER",
        Some("BOTHER"),
    ));
    slack.wait(15, "two more answers to U1", |s| {
        s.ephemerals_to("U1").len() == 3
    });
    for text in &slack.ephemerals_to("U1")[1..] {
        assert_eq!(text, "That is not one of my replies.");
    }

    // A shortcut without its message or its message's ts, and another app's shortcut:
    // acknowledged, no answer.
    let mut bare = ask("U1");
    bare.as_object_mut().unwrap().remove("message");
    let bare = slack.send_interactive(bare);
    let foreign = slack.send_interactive(slack::message_action(
        "someone_elses",
        "U1",
        "D1",
        &reply,
        slack::BOT_USER,
        Some(slack::BOT_ID),
    ));
    let mut no_ts = ask("U1");
    no_ts["message"].as_object_mut().unwrap().remove("ts");
    let no_ts = slack.send_interactive(no_ts);
    slack.wait(15, "all three acknowledged", |s| {
        [&bare, &foreign, &no_ts]
            .iter()
            .all(|e| s.acks().contains(e))
    });
    d.wait_log("a shortcut without its message", 5);
    d.wait_log("a Slack payload could not be read", 5);
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(slack.calls("chat.postEphemeral").len(), 4);
    assert!(!d.log().contains("panicked"), "{}", d.log());
}

/// The shortcut used the moment a reply is posted finds that turn's own trace (the engine's,
/// which may still wait in the trace writer's queue then): never "no trace kept".
#[test]
fn asked_at_once_the_reply_is_explained_from_the_engines_own_trace() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Rivers run deep."));
    let (home, d) = socket_daemon(&model, &slack, "[inspect]\nwhy_users = [\"U1\"]\n");
    slack.send_event(dm("D1", "1700000000.000100", "rivers?"), "EvW9", 0);
    slack.wait(15, "the reply", |s| s.posts().len() == 1);
    // The reply's message is known once its delivery is recorded (a moment after the post).
    reply_recorded(&slack, &home, 1);
    let reply = slack.posts()[0].ts.clone();
    slack.send_interactive(slack::message_action(
        "anima_why",
        "U1",
        "D1",
        &reply,
        slack::BOT_USER,
        Some(slack::BOT_ID),
    ));
    slack.wait(15, "the answer to U1", |s| {
        !s.ephemerals_to("U1").is_empty()
    });
    let text = &slack.ephemerals_to("U1")[0];
    assert_ne!(text, anima::slack::why::NO_TRACE, "{}", d.log());
    assert!(text.contains("Thinking about: Rivers run deep."), "{text}");
}

/// With `keep_turns = 0` no trace is kept: an admin (why_users empty) hears so.
#[test]
fn no_trace_kept_is_said_and_the_admin_users_may_ask_when_none_are_named() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Rivers run."));
    let (home, _d) = socket_daemon(
        &model,
        &slack,
        "[admin]\nusers = [\"U7\"]\n\n[inspect]\nkeep_turns = 0\n",
    );
    slack.send_event(dm("D1", "1700000000.000100", "hello"), "EvW2", 0);
    slack.wait(15, "the reply", |s| s.posts().len() == 1);
    reply_recorded(&slack, &home, 1);
    let reply = slack.posts()[0].ts.clone();
    for person in ["U7", "U1"] {
        slack.send_interactive(slack::message_action(
            "anima_why",
            person,
            "D1",
            &reply,
            slack::BOT_USER,
            Some(slack::BOT_ID),
        ));
    }
    slack.wait(15, "both answers", |s| {
        !s.ephemerals_to("U7").is_empty() && !s.ephemerals_to("U1").is_empty()
    });
    assert_eq!(slack.ephemerals_to("U7"), [anima::slack::why::NO_TRACE]);
    assert!(slack.ephemerals_to("U7")[0].contains("No trace kept"));
    assert_eq!(slack.ephemerals_to("U1"), [anima::slack::why::REFUSAL]);
}

/// In events mode the shortcut is a signed form post; the answer goes into the reply's
/// thread.
#[test]
fn in_events_mode_the_shortcut_is_a_signed_post_answered_in_the_thread() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Rivers run."));
    let home = home(
        &model,
        &slack,
        "events",
        "[inspect]\nwhy_users = [\"U1\"]\n",
    );
    let d = Daemon::start(&home);
    d.wait_log("ready for Events API", 10);
    let url = d.url("/slack/events");
    let now = slack::now_secs().to_string();
    let post = |body: &str, content_type: &str| {
        let sig = slack::sign(slack::SIGNING_SECRET, &now, body);
        http(
            "POST",
            &url,
            &[
                ("content-type", content_type),
                ("x-slack-request-timestamp", &now),
                ("x-slack-signature", &sig),
            ],
            body,
        )
    };
    let mention = "1700000000.000100";
    let event = slack::event_callback(
        json!({"type":"app_mention","user":"U1","text":format!("<@{}> rivers?", slack::BOT_USER),"ts":mention,"channel":"C1","event_ts":mention}),
        "EvW3",
    );
    assert_eq!(post(&event.to_string(), "application/json").0, 200);
    slack.wait(15, "the reply", |s| s.posts().len() == 1);
    reply_recorded(&slack, &home, 1);
    let reply = slack.posts()[0].ts.clone();
    assert_eq!(slack.posts()[0].thread_ts.as_deref(), Some(mention));
    keep_trace(&home, 1, &format!("C1:{mention}"));

    let mut ask = slack::message_action(
        "anima_why",
        "U1",
        "C1",
        &reply,
        slack::BOT_USER,
        Some(slack::BOT_ID),
    );
    ask["message"]["thread_ts"] = json!(mention);
    // The same ts in another channel is not this reply.
    let mut elsewhere = ask.clone();
    elsewhere["channel"]["id"] = json!("C2");
    let (status, _) = post(
        &slack::interaction_form(&elsewhere),
        "application/x-www-form-urlencoded",
    );
    assert_eq!(status, 200);
    slack.wait(15, "the answer elsewhere", |s| {
        !s.ephemerals_to("U1").is_empty()
    });
    assert_eq!(slack.ephemerals_to("U1"), [anima::slack::why::NO_TRACE]);

    let (status, _) = post(
        &slack::interaction_form(&ask),
        "application/x-www-form-urlencoded",
    );
    assert_eq!(status, 200, "acknowledged at once");
    slack.wait(15, "the answer", |s| s.ephemerals_to("U1").len() == 2);
    let call = &slack.calls("chat.postEphemeral")[1];
    assert_eq!(call["channel"], "C1");
    assert_eq!(call["thread_ts"], mention, "in the reply's thread");
    assert!(call["text"].as_str().unwrap().contains(escaped()), "{call}");
}
