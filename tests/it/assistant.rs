//! Slack's AI-app surfaces end to end: the real `anima run` against the fake Slack and the
//! fake model. Opening a conversation (greeting and suggested prompts), the thread title, the
//! status with the soul's loading messages, feedback clicks, the stop button, and missing
//! scopes degrading quietly.

use crate::support;

use serde_json::{json, Value};
use support::daemon::{home, http, Daemon};
use support::slack::{self, FakeSlack};
use support::*;

const THREAD: &str = "1729999327.187299";

fn thread_started(channel: &str, thread_ts: &str) -> Value {
    json!({"type":"assistant_thread_started","assistant_thread":{"user_id":"U1","context":{"channel_id":"C123","team_id":"T111","enterprise_id":null},"channel_id":channel,"thread_ts":thread_ts},"event_ts":thread_ts})
}

fn in_thread(channel: &str, thread_ts: &str, ts: &str, text: &str) -> Value {
    json!({"type":"message","channel":channel,"user":"U1","text":text,"ts":ts,"thread_ts":thread_ts,"event_ts":ts,"channel_type":"im","assistant_thread":{"action_token":"x"}})
}

fn dm(channel: &str, ts: &str, text: &str) -> Value {
    json!({"type":"message","channel":channel,"user":"U1","text":text,"ts":ts,"event_ts":ts,"channel_type":"im"})
}

fn messages_tab(channel: &str) -> Value {
    json!({"type":"app_home_opened","user":"U1","channel":channel,"tab":"messages","event_ts":"1700000000.000100"})
}

/// A block_actions click on a feedback button, as Slack sends it.
fn click(channel: &str, message_ts: &str, action_id: &str, value: &str) -> Value {
    json!({
        "type": "block_actions",
        "user": {"id": "U1", "username": "ann", "name": "ann", "team_id": "T111"},
        "api_app_id": "A111",
        "token": "x",
        "container": {"type": "message", "message_ts": message_ts, "channel_id": channel, "is_ephemeral": false},
        "trigger_id": "1.2.abc",
        "team": {"id": "T111", "domain": "fake"},
        "channel": {"id": channel, "name": "directmessage"},
        "message": {"type": "message", "user": slack::BOT_USER, "bot_id": slack::BOT_ID, "text": "An answer.", "ts": message_ts,
                    "blocks": anima::slack::feedback::feedback_blocks()},
        "state": {"values": {}},
        "response_url": "https://hooks.slack.com/actions/T111/1/x",
        "actions": [{"type": "feedback_buttons", "action_id": action_id, "block_id": "anima_feedback",
                     "value": value, "action_ts": "1700000001.000100"}]
    })
}

fn socket_daemon(model: &FakeModel, slack: &FakeSlack, extra: &str) -> (Home, Daemon) {
    let home = home(model, slack, "socket", extra);
    let d = Daemon::start(&home);
    slack.wait_connected_or(|| d.log());
    (home, d)
}

/// Points the home's soul at a folder of its own (a copy of the shipped soul.md), so a test
/// may write soul files without touching the repository's.
fn own_soul(home: &Home) -> std::path::PathBuf {
    let soul = home.dir.path().join("soul");
    std::fs::create_dir_all(&soul).unwrap();
    std::fs::write(soul.join("soul.md"), anima::soul::SHIPPED_SOUL_MD).unwrap();
    std::fs::write(soul.join("template.toml"), anima::states::SHIPPED_TEMPLATE).unwrap();
    let config = std::fs::read_to_string(home.config()).unwrap();
    let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/soul");
    let config = config.replace(shipped, &soul.display().to_string());
    std::fs::write(home.config(), config).unwrap();
    soul
}

/// Waits until inbox row `id`'s reply is recorded: a click on it counts from then (Slack shows
/// the post a moment before, longer on PostgreSQL; a person clicks later than that).
fn reply_recorded(slack: &FakeSlack, home: &Home, id: i64) {
    slack.wait(10, "the reply recorded", |_| {
        wait(home.store().inbox_item(id))
            .unwrap()
            .is_some_and(|i| i.status == anima::memory::InboxStatus::Done)
    });
}

fn metrics(d: &Daemon) -> String {
    http("GET", &d.url("/metrics"), &[], "").1
}

/// Waits until `n` log lines hold `needle`.
fn wait_lines(d: &Daemon, needle: &str, n: usize) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while d.log().lines().filter(|l| l.contains(needle)).count() < n {
        assert!(
            std::time::Instant::now() < deadline,
            "fewer than {n} lines with {needle:?}:\n{}",
            d.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn warnings(d: &Daemon, needle: &str) -> usize {
    d.log()
        .lines()
        .filter(|l| l.contains("WARN") && l.contains(needle))
        .count()
}

#[test]
fn an_assistant_thread_opens_with_the_greeting_and_the_prompts_once() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let (_home, _d) = socket_daemon(&model, &slack, "");
    slack.send_event(thread_started("D777", THREAD), "EvA1", 0);
    slack.wait(10, "the greeting and the prompts", |s| {
        !s.posts().is_empty() && !s.calls("assistant.threads.setSuggestedPrompts").is_empty()
    });
    let words = anima::assistant::built_in();
    let posts = slack.posts();
    assert_eq!(posts[0].channel, "D777");
    assert_eq!(posts[0].thread_ts.as_deref(), Some(THREAD));
    assert_eq!(posts[0].text, words.greeting);
    let prompts = &slack.calls("assistant.threads.setSuggestedPrompts")[0];
    assert_eq!(prompts["channel_id"], "D777");
    assert_eq!(prompts["thread_ts"], THREAD);
    let titles: Vec<&str> = prompts["prompts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["title"].as_str().unwrap())
        .collect();
    let expected: Vec<&str> = words.prompts.iter().map(|p| p.title.as_str()).collect();
    assert_eq!(titles, expected);
    assert_eq!(
        prompts["prompts"][0]["message"],
        words.prompts[0].message.as_str()
    );

    // Slack's retry of the same event greets no one twice; the thread still answers.
    slack.send_event(thread_started("D777", THREAD), "EvA1", 1);
    model.reply(&answer("Here I am."));
    slack.send_event(
        in_thread("D777", THREAD, "1729999330.000100", "hello?"),
        "EvA2",
        0,
    );
    slack.wait(10, "the reply", |s| s.posts().len() == 2);
    assert_eq!(slack.posts()[1].text, "Here I am.");
    assert_eq!(
        slack.calls("assistant.threads.setSuggestedPrompts").len(),
        1
    );
    assert_eq!(
        slack
            .posts()
            .iter()
            .filter(|p| p.text == words.greeting)
            .count(),
        1
    );
}

#[test]
fn the_messages_tab_gets_prompts_without_a_thread_once_per_channel_across_restarts() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    let (home, mut d) = socket_daemon(&model, &slack, "");
    slack.send_event(messages_tab("D900"), "EvH1", 0);
    slack.wait(10, "the prompts", |s| {
        !s.calls("assistant.threads.setSuggestedPrompts").is_empty() && !s.posts().is_empty()
    });
    let prompts = &slack.calls("assistant.threads.setSuggestedPrompts")[0];
    assert_eq!(prompts["channel_id"], "D900");
    assert!(
        prompts.get("thread_ts").is_none(),
        "agent_view: no thread_ts, or Slack silently fails: {prompts}"
    );
    let greeting = &slack.posts()[0];
    assert_eq!(
        (greeting.channel.as_str(), greeting.thread_ts.as_deref()),
        ("D900", None)
    );

    // Opened again, another tab, then after a restart: nothing more. A message sent after
    // each shows the events before it were handled.
    slack.send_event(messages_tab("D900"), "EvH2", 0);
    let mut home_tab = messages_tab("D900");
    home_tab["tab"] = json!("home");
    slack.send_event(home_tab, "EvH3", 0);
    slack.send_event(dm("D900", "1700000001.000100", "first"), "EvH4", 0);
    slack.wait(10, "the reply", |s| s.posts().len() == 2);
    assert_eq!(d.terminate(), 0);
    let d = Daemon::start(&home);
    slack.wait(20, "a new connection", |s| {
        s.calls("apps.connections.open").len() >= 2 && s.sockets() > 0
    });
    d.wait_log("connected to Slack", 10);
    slack.send_event(messages_tab("D900"), "EvH5", 0);
    slack.send_event(dm("D900", "1700000002.000100", "second"), "EvH6", 0);
    slack.wait(10, "the second reply", |s| s.posts().len() == 3);
    assert_eq!(
        slack.calls("assistant.threads.setSuggestedPrompts").len(),
        1
    );
    assert_eq!(slack.posts()[2].text, "echo: second");
    // Another person's DM is greeted on its own.
    slack.send_event(messages_tab("D901"), "EvH7", 0);
    slack.wait(10, "the other DM's prompts", |s| {
        s.calls("assistant.threads.setSuggestedPrompts").len() == 2
    });
}

#[test]
fn an_assistant_thread_is_titled_from_its_first_message_only() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    let (_home, _d) = socket_daemon(&model, &slack, "");
    slack.send_event(thread_started("D777", THREAD), "EvT1", 0);
    slack.wait(10, "the greeting", |s| s.posts().len() == 1);
    let first = format!("Pourquoi   l'été\n{} 🦀", "déjà-vu ".repeat(20));
    slack.send_event(
        in_thread("D777", THREAD, "1729999330.000100", &first),
        "EvT2",
        0,
    );
    slack.wait(10, "the first reply", |s| s.posts().len() == 2);
    slack.send_event(
        in_thread("D777", THREAD, "1729999331.000100", "and another thing"),
        "EvT3",
        0,
    );
    slack.wait(10, "the second reply", |s| s.posts().len() == 3);
    let titles = slack.calls("assistant.threads.setTitle");
    assert_eq!(titles.len(), 1, "{titles:?}");
    assert_eq!(titles[0]["channel_id"], "D777");
    assert_eq!(titles[0]["thread_ts"], THREAD);
    let title = titles[0]["title"].as_str().unwrap();
    assert!(title.starts_with("Pourquoi l'été déjà-vu"), "{title}");
    assert!(
        title.chars().count() <= 80 && title.ends_with('…'),
        "{title}"
    );
    // A DM outside an assistant thread is never titled.
    slack.send_event(dm("D777", "1729999340.000100", "top level"), "EvT4", 0);
    slack.wait(10, "the top-level reply", |s| s.posts().len() == 4);
    assert_eq!(slack.calls("assistant.threads.setTitle").len(), 1);
}

#[test]
fn the_status_shows_the_souls_loading_messages_and_clears_after_a_reply_and_a_model_error() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let home = home(&model, &slack, "socket", "");
    let soul = own_soul(&home);
    let d = Daemon::start(&home);
    slack.wait_connected_or(|| d.log());
    slack.send_event(thread_started("D777", THREAD), "EvS1", 0);
    slack.wait(10, "the greeting", |s| s.posts().len() == 1);

    // Edited while the daemon runs: in force for a turn that starts a second later.
    std::fs::write(
        soul.join("assistant.toml"),
        "status = \"is pondering…\"\nloading_messages = [\"Counting sheep…\", \"Asking the river…\"]\n",
    )
    .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1100));
    model.reply(&answer("Done pondering."));
    slack.send_event(
        in_thread("D777", THREAD, "1729999330.000100", "one"),
        "EvS2",
        0,
    );
    slack.wait(10, "the reply and the status cleared", |s| {
        s.posts().len() == 2 && s.calls("assistant.threads.setStatus").len() == 2
    });
    let calls = slack.calls("assistant.threads.setStatus");
    assert_eq!(calls[0]["status"], "is pondering…");
    assert_eq!(calls[0]["channel_id"], "D777");
    assert_eq!(calls[0]["thread_ts"], THREAD);
    assert_eq!(
        calls[0]["loading_messages"],
        json!(["Counting sheep…", "Asking the river…"])
    );
    assert_eq!(calls[1]["status"], "", "cleared after the reply");
    // An agent's session is processing (the stop button shows) while the soul works.
    let sessions: Vec<_> = slack
        .calls("agents.sessions.setStatus")
        .iter()
        .map(|c| c["status"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(sessions, ["processing", "active"]);
    assert_eq!(
        slack.calls("agents.sessions.setStatus")[0]["thread_ts"],
        THREAD
    );

    // The model fails: the apology is posted and the status cleared all the same.
    for _ in 0..3 {
        model.push(Script::Status(
            529,
            vec![("retry-after-ms", "10".into())],
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#.into(),
        ));
    }
    slack.send_event(
        in_thread("D777", THREAD, "1729999331.000100", "two"),
        "EvS3",
        0,
    );
    slack.wait(15, "the apology and the status cleared", |s| {
        s.posts().len() == 3 && s.calls("assistant.threads.setStatus").len() == 4
    });
    assert_eq!(slack.posts()[2].text, anima::engine::PROVIDER_DOWN_REPLY);
    let calls = slack.calls("assistant.threads.setStatus");
    assert_eq!(calls[2]["status"], "is pondering…");
    assert_eq!(calls[3]["status"], "", "cleared after the model error");
    assert!(slack.calls("reactions.add").is_empty());
}

#[test]
fn feedback_clicks_are_stored_per_reply_and_person_and_counted() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("An answer."));
    let (home, d) = socket_daemon(&model, &slack, "");
    slack.send_event(dm("D1", "1700000000.000100", "a question"), "EvF1", 0);
    slack.wait(10, "the reply", |s| s.posts().len() == 1);
    let reply = slack.posts()[0].ts.clone();
    reply_recorded(&slack, &home, 1);

    let good = slack.send_interactive(click("D1", &reply, "anima_feedback", "good"));
    slack.wait(10, "the click's ack", |s| s.acks().contains(&good));
    assert_eq!(
        wait(home.store().feedback_on(&reply)).unwrap(),
        vec![("U1".to_string(), anima::memory::Verdict::Good)]
    );
    let bad = slack.send_interactive(click("D1", &reply, "anima_feedback", "bad"));
    slack.wait(10, "the second click's ack", |s| s.acks().contains(&bad));
    assert_eq!(
        wait(home.store().feedback_on(&reply)).unwrap(),
        vec![("U1".to_string(), anima::memory::Verdict::Bad)],
        "one row per (reply, person): the latest value"
    );
    let m = metrics(&d);
    assert!(m.contains("anima_feedback_total{value=\"good\"} 1"), "{m}");
    assert!(m.contains("anima_feedback_total{value=\"bad\"} 1"), "{m}");

    // A message anima never sent, the same ts in another channel, another app's button:
    // acknowledged, ignored, logged at debug.
    let unknown =
        slack.send_interactive(click("D1", "1700000099.000100", "anima_feedback", "good"));
    let elsewhere = slack.send_interactive(click("D2", &reply, "anima_feedback", "good"));
    let foreign = slack.send_interactive(click("D1", &reply, "another_apps_button", "good"));
    slack.wait(10, "the acks", |s| {
        [&unknown, &elsewhere, &foreign]
            .iter()
            .all(|e| s.acks().contains(e))
    });
    d.wait_log("feedback on a message anima never sent", 5);
    d.wait_log("a click on a button anima did not make", 5);
    assert!(wait(home.store().feedback_on("1700000099.000100"))
        .unwrap()
        .is_empty());
    assert_eq!(wait(home.store().feedback_on(&reply)).unwrap().len(), 1);
    let m = metrics(&d);
    assert!(m.contains("anima_feedback_total{value=\"good\"} 1"), "{m}");
}

#[test]
fn a_feedback_click_in_events_mode_is_a_signed_form_post() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Over HTTP."));
    let home = home(&model, &slack, "events", "");
    let d = Daemon::start(&home);
    d.wait_log("ready for Events API", 10);
    let url = d.url("/slack/events");
    let now = slack::now_secs().to_string();
    let event = slack::event_callback(dm("D1", "1700000000.000100", "hi"), "EvE1").to_string();
    let sig = slack::sign(slack::SIGNING_SECRET, &now, &event);
    let (status, _) = http(
        "POST",
        &url,
        &[
            ("content-type", "application/json"),
            ("x-slack-request-timestamp", &now),
            ("x-slack-signature", &sig),
        ],
        &event,
    );
    assert_eq!(status, 200);
    slack.wait(10, "the reply", |s| s.posts().len() == 1);
    reply_recorded(&slack, &home, 1);
    let reply = slack.posts()[0].ts.clone();
    let form = serde_urlencoded::to_string([(
        "payload",
        click("D1", &reply, "anima_feedback", "good").to_string(),
    )])
    .unwrap();
    let post = |sig: &str| {
        http(
            "POST",
            &url,
            &[
                ("content-type", "application/x-www-form-urlencoded"),
                ("x-slack-request-timestamp", &now),
                ("x-slack-signature", sig),
            ],
            &form,
        )
    };
    let (status, _) = post("v0=0000000000000000000000000000000000000000000000000000000000000000");
    assert_eq!(status, 401, "a click is verified like an event");
    assert!(wait(home.store().feedback_on(&reply)).unwrap().is_empty());
    let (status, _) = post(&slack::sign(slack::SIGNING_SECRET, &now, &form));
    assert_eq!(status, 200);
    assert_eq!(
        wait(home.store().feedback_on(&reply)).unwrap(),
        vec![("U1".to_string(), anima::memory::Verdict::Good)]
    );
    let garbage = "payload=%7Bnot%20json";
    let (status, _) = http(
        "POST",
        &url,
        &[
            ("content-type", "application/x-www-form-urlencoded"),
            ("x-slack-request-timestamp", &now),
            (
                "x-slack-signature",
                &slack::sign(slack::SIGNING_SECRET, &now, garbage),
            ),
        ],
        garbage,
    );
    assert_eq!(
        status, 200,
        "unreadable but signed: acknowledged and dropped"
    );
    d.wait_log("an interaction payload could not be read", 5);
}

#[test]
fn the_stop_button_stops_the_running_turn_and_nothing_more_is_said() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.push(Script::Hang);
    model.reply(&answer("The other thread."));
    let (home, d) = socket_daemon(&model, &slack, "");
    let ts = "1700000000.000100";
    slack.send_event(
        json!({"type":"app_mention","user":"U1","text":format!("<@{}> think hard", slack::BOT_USER),"ts":ts,"channel":"C1","event_ts":ts}),
        "EvX1",
        0,
    );
    slack.wait(10, "the model call", |_| !model.requests().is_empty());

    // A stop for a thread with no running turn, then the real one.
    slack.send_event(
        json!({"type":"agent_session_stopped","channel":"C1","thread_ts":"1700000050.000100","streaming_message_ts":[],"user":"U1","event_ts":"1700000060.0"}),
        "EvX2",
        0,
    );
    d.wait_log("a stop for a conversation with no running turn", 5);
    slack.send_event(
        json!({"type":"agent_session_stopped","channel":"C1","thread_ts":ts,"streaming_message_ts":[],"user":"U1","event_ts":"1700000061.0"}),
        "EvX3",
        0,
    );
    d.wait_log("the person stopped the turn", 10);
    let item = wait(home.store().inbox_item(1)).unwrap().unwrap();
    assert_eq!(item.status, anima::memory::InboxStatus::Stopped);
    let m = metrics(&d);
    assert!(m.contains("anima_turns_stopped_total 1"), "{m}");

    // Another conversation is answered; the stopped one never is.
    slack.send_event(dm("D5", "1700000100.000100", "still there?"), "EvX4", 0);
    slack.wait(10, "the other reply", |s| !s.posts().is_empty());
    let posts = slack.posts();
    assert_eq!(posts.len(), 1, "{posts:#?}");
    assert_eq!(posts[0].channel, "D5");
    slack.wait(5, "the reaction cleared", |s| {
        s.calls("reactions.remove")
            .iter()
            .any(|c| c["timestamp"] == ts)
    });
}

#[test]
fn a_missing_scope_on_prompts_warns_once_and_the_conversation_goes_on() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    slack.refuse("assistant.threads.setSuggestedPrompts", "missing_scope");
    slack.refuse("assistant.threads.setTitle", "not_allowed_token_type");
    let (_home, d) = socket_daemon(&model, &slack, "");
    slack.send_event(thread_started("D777", THREAD), "EvM1", 0);
    slack.send_event(thread_started("D778", "1729999400.000100"), "EvM2", 0);
    slack.wait(10, "both greetings and both refusals", |s| {
        s.posts().len() == 2 && s.calls("assistant.threads.setSuggestedPrompts").len() == 2
    });
    slack.send_event(
        in_thread("D777", THREAD, "1729999330.000100", "hi"),
        "EvM3",
        0,
    );
    slack.send_event(
        in_thread("D778", "1729999400.000100", "1729999401.000100", "hi too"),
        "EvM4",
        0,
    );
    slack.wait(10, "both replies and titles tried", |s| {
        s.posts().len() == 4 && s.calls("assistant.threads.setTitle").len() == 2
    });
    wait_lines(
        &d,
        "assistant.threads.setSuggestedPrompts failed: missing_scope",
        2,
    );
    wait_lines(
        &d,
        "assistant.threads.setTitle failed: not_allowed_token_type",
        2,
    );
    assert_eq!(
        warnings(
            &d,
            "assistant.threads.setSuggestedPrompts failed: missing_scope"
        ),
        1,
        "{}",
        d.log()
    );
    assert_eq!(
        warnings(
            &d,
            "assistant.threads.setTitle failed: not_allowed_token_type"
        ),
        1,
        "{}",
        d.log()
    );
    let texts: Vec<String> = slack.posts().iter().map(|p| p.text.clone()).collect();
    assert!(texts.contains(&"echo: hi".to_string()), "{texts:?}");
    assert!(texts.contains(&"echo: hi too".to_string()), "{texts:?}");
}

#[test]
fn check_names_every_problem_in_the_assistant_words_with_its_line_and_exits_2() {
    let model = FakeModel::start();
    let home = Home::new("anthropic", &model.url(), "");
    let soul = own_soul(&home);
    let file = soul.join("assistant.toml");
    let many: Vec<String> = (0..11).map(|i| format!("\"m{i}\"")).collect();
    std::fs::write(
        &file,
        format!(
            "greeting = \"\"\nloading_messages = [{}]\n",
            many.join(", ")
        ),
    )
    .unwrap();
    let r = home.run(&["check"], "");
    assert_eq!(r.status, 2, "{}\n{}", r.stdout, r.stderr);
    let path = file.display().to_string();
    assert!(
        r.stdout
            .contains(&format!("problem: {path}:1: key `greeting`: is empty")),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(&format!(
            "problem: {path}:2: key `loading_messages`: has 11"
        )),
        "{}",
        r.stdout
    );
    std::fs::write(
        &file,
        "[[prompts]]\ntitle = \"Hi\"\nmessage = \"Hello\"\ncolour = \"red\"\n",
    )
    .unwrap();
    let r = home.run(&["check"], "");
    assert_eq!(r.status, 2);
    assert!(
        r.stdout.contains(&format!("problem: {path}:4:")),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("colour"), "{}", r.stdout);
    std::fs::write(&file, "[[prompts]]\ntitle = \"Hi\"\nmessage = \"Hello\"\n").unwrap();
    let r = home.run(&["check"], "");
    assert_eq!(r.status, 0, "{}", r.stdout);
    assert!(
        r.stdout.contains("assistant words:") && r.stdout.contains("1 suggested prompt,"),
        "{}",
        r.stdout
    );
}

#[test]
fn an_answer_in_an_assistant_thread_ends_with_the_feedback_buttons_and_a_plain_dm_does_not() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("In the **thread**."));
    model.reply(&answer("At the top."));
    let (_home, _d) = socket_daemon(&model, &slack, "");
    slack.send_event(thread_started("D777", THREAD), "EvB1", 0);
    slack.wait(10, "the greeting", |s| s.posts().len() == 1);
    slack.send_event(
        in_thread("D777", THREAD, "1729999340.000100", "a question"),
        "EvB2",
        0,
    );
    slack.wait(10, "the answer", |s| s.posts().len() == 2);
    let answer_post = &slack.posts()[1];
    assert_eq!(
        answer_post.text, "In the **thread**.",
        "the markdown block's text"
    );
    let blocks = answer_post.blocks.as_ref().expect("blocks");
    assert_eq!(blocks[0]["type"], "markdown");
    assert_eq!(blocks[1]["type"], "context_actions");
    assert_eq!(blocks[1]["elements"][0]["type"], "feedback_buttons");
    assert!(
        slack.posts()[0].blocks.is_none(),
        "the greeting takes no feedback"
    );

    slack.send_event(dm("D1", "1700000200.000100", "hello"), "EvB3", 0);
    slack.wait(10, "the DM reply", |s| s.posts().len() == 3);
    assert!(slack.posts()[2].blocks.is_none());
    assert_eq!(slack.posts()[2].text, "At the top.");
}
