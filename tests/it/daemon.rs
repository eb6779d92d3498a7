//! `anima run` end to end: the real binary against the fake Slack (Socket Mode and Events
//! API) and the fake model.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::daemon::{home, http, Daemon};
use support::slack::{self, FakeSlack, PostFailure};
use support::*;

fn mention(channel: &str, ts: &str, text: &str) -> serde_json::Value {
    json!({"type":"app_mention","user":"U061F7AUR","text":format!("<@{}> {text}", slack::BOT_USER),"ts":ts,"channel":channel,"event_ts":ts})
}

fn channel_message(
    channel: &str,
    ts: &str,
    thread_ts: Option<&str>,
    text: &str,
) -> serde_json::Value {
    let mut m = json!({"type":"message","channel":channel,"channel_type":"channel","user":"U061F7AUR","text":text,"ts":ts,"client_msg_id":uuid::Uuid::new_v4().to_string(),"team":"T111","blocks":[]});
    if let Some(t) = thread_ts {
        m["thread_ts"] = json!(t);
    }
    m
}

fn dm(channel: &str, user: &str, ts: &str, text: &str) -> serde_json::Value {
    json!({"type":"message","channel":channel,"user":user,"text":text,"ts":ts,"event_ts":ts,"channel_type":"im"})
}

fn socket_daemon(model: &FakeModel, slack: &FakeSlack, extra: &str) -> (Home, Daemon) {
    let home = home(model, slack, "socket", extra);
    let d = Daemon::start(&home);
    slack.wait_connected_or(|| d.log());
    (home, d)
}

#[test]
fn a_mention_gets_one_reply_in_its_thread_with_the_dialogue_only() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("The river is **fine**, thanks."));
    let (home, d) = socket_daemon(&model, &slack, "");
    let env = slack.send_event(
        mention(
            "C0LAN2Q65",
            "1515449522.000016",
            "is it everything a river should be?",
        ),
        "Ev01",
        0,
    );
    slack.wait(10, "the reply", |s| !s.posts().is_empty());
    let posts = slack.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].channel, "C0LAN2Q65");
    assert_eq!(posts[0].thread_ts.as_deref(), Some("1515449522.000016"));
    assert_eq!(
        posts[0].text, "The river is **fine**, thanks.",
        "Markdown for Slack to render, external dialogue only"
    );
    assert!(posts[0].markdown, "sent as markdown_text");
    assert!(!posts[0].text.contains("Thinking about"));
    assert!(slack.acks().contains(&env), "the envelope was acknowledged");
    slack.wait(5, "the working sign to go", |s| {
        !s.calls("reactions.remove").is_empty()
    });
    let added = slack.calls("reactions.add");
    assert_eq!(added[0]["name"], "thinking_face");
    assert_eq!(added[0]["timestamp"], "1515449522.000016");
    // The prompt named the person by their display name from users.info.
    assert!(
        model.requests()[0]
            .turn_text()
            .contains("Person U061F7AUR: is it everything a river should be?"),
        "{}",
        model.requests()[0].turn_text()
    );
    assert!(
        !d.log().contains(slack::BOT_TOKEN),
        "tokens are never logged"
    );
    assert!(!d.log().contains("sk-ant-test-secret-key"));
    drop(home);
}

#[test]
fn a_dm_gets_one_reply_at_top_level() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Loud and clear."));
    let (_home, _d) = socket_daemon(&model, &slack, "");
    slack.send_event(
        dm(
            "D024BE91L",
            "U2147483697",
            "1355517523.000005",
            "Hello hello can you hear me?",
        ),
        "Ev02",
        0,
    );
    slack.wait(10, "the reply", |s| !s.posts().is_empty());
    let posts = slack.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].channel, "D024BE91L");
    assert_eq!(
        posts[0].thread_ts, None,
        "a top-level DM is answered at top level"
    );
}

#[test]
fn twins_and_retries_of_one_message_make_one_model_call_and_one_reply() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.push(Script::Delay(300, answer("Once.")));
    let (_home, _d) = socket_daemon(&model, &slack, "");
    let ts = "1700000000.000100";
    slack.send_event(
        channel_message("C1", ts, None, &format!("<@{}> hi", slack::BOT_USER)),
        "EvMsg",
        0,
    );
    slack.send_event(mention("C1", ts, "hi"), "EvMention", 0);
    for attempt in 1..=3 {
        slack.send_event(mention("C1", ts, "hi"), "EvMention", attempt);
    }
    slack.wait(10, "the reply", |s| !s.posts().is_empty());
    std::thread::sleep(Duration::from_millis(700));
    assert_eq!(slack.posts().len(), 1);
    assert_eq!(model.requests().len(), 1);
    assert_eq!(slack.acks().len(), 5, "every delivery is acknowledged");
}

#[test]
fn own_other_bot_edited_and_unmentioned_messages_are_ignored() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let (_home, d) = socket_daemon(&model, &slack, "");
    slack.send_event(json!({"type":"message","channel":"D1","channel_type":"im","user":slack::BOT_USER,"bot_id":slack::BOT_ID,"text":"my own reply","ts":"1.1"}), "E1", 0);
    slack.send_event(json!({"type":"message","subtype":"bot_message","channel":"D1","channel_type":"im","bot_id":"BOTHER","username":"other","text":"beep","ts":"1.2"}), "E2", 0);
    slack.send_event(json!({"type":"message","subtype":"message_changed","hidden":true,"channel":"D1","channel_type":"im","ts":"1.3","message":{"type":"message","user":"U1","text":"edited","ts":"1.0"},"previous_message":{"type":"message","user":"U1","text":"orig","ts":"1.0"}}), "E3", 0);
    slack.send_event(json!({"type":"message","subtype":"message_deleted","hidden":true,"channel":"D1","channel_type":"im","ts":"1.4","deleted_ts":"1.0"}), "E4", 0);
    slack.send_event(
        channel_message("C1", "1.5", None, "talking among ourselves"),
        "E5",
        0,
    );
    slack.send_event(
        channel_message("C1", "1.6", Some("1.0"), "a thread the soul is not in"),
        "E6",
        0,
    );
    slack.send_event(json!({"type":"message","channel":"X1","channel_type":"huddle","user":"U1","text":"?","ts":"1.7"}), "E7", 0);
    slack.send_event(json!({"type":"reaction_added","user":"U1","reaction":"thumbsup","item":{"type":"message","channel":"C1","ts":"1.0"},"event_ts":"1.8"}), "E8", 0);
    slack.wait(10, "all acks", |s| s.acks().len() == 8);
    std::thread::sleep(Duration::from_millis(300));
    assert!(model.requests().is_empty());
    assert!(slack.posts().is_empty());
    assert!(d.log().contains("unknown channel type"), "logged at debug");
}

#[test]
fn later_thread_messages_need_no_mention_once_the_soul_has_spoken() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    let (home, _d) = socket_daemon(&model, &slack, "");
    slack.send_event(mention("C1", "100.000001", "start"), "E1", 0);
    slack.wait(10, "first reply", |s| s.posts().len() == 1);
    // The soul has spoken once its post is recorded, a moment after Slack shows it (longer
    // on PostgreSQL): a person answers later than that.
    slack.wait(10, "the first reply recorded", |_| {
        wait(home.store().inbox_item(1))
            .unwrap()
            .is_some_and(|i| i.status == anima::memory::InboxStatus::Done)
    });
    slack.send_event(
        channel_message(
            "C1",
            "100.000009",
            Some("100.000001"),
            "follow-up without a mention",
        ),
        "E2",
        0,
    );
    slack.wait(10, "second reply", |s| s.posts().len() == 2);
    let posts = slack.posts();
    assert_eq!(posts[1].text, "echo: follow-up without a mention");
    assert_eq!(posts[1].thread_ts.as_deref(), Some("100.000001"));
}

#[test]
fn a_rate_limited_post_is_delivered_once_after_retry_after() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Patience."));
    slack.fail_next_post(PostFailure::RateLimited(1));
    let (_home, _d) = socket_daemon(&model, &slack, "");
    let sent = std::time::Instant::now();
    slack.send_event(dm("D1", "U1", "5.0", "hi"), "E1", 0);
    slack.wait(10, "the reply", |s| !s.posts().is_empty());
    assert!(
        sent.elapsed() >= Duration::from_secs(1),
        "waited as Slack asked"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(slack.posts().len(), 1);
    assert_eq!(slack.calls("chat.postMessage").len(), 2);
}

#[test]
fn a_post_whose_outcome_is_unknown_is_not_posted_twice() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Exactly once."));
    slack.fail_next_post(PostFailure::StoredThenError);
    let (_home, d) = socket_daemon(&model, &slack, "");
    slack.send_event(mention("C1", "7.0", "hi"), "E1", 0);
    d.wait_log("not posting it again", 10);
    d.wait_log("replied", 10);
    assert_eq!(slack.posts().len(), 1);
    assert_eq!(slack.calls("conversations.replies").len(), 1);
}

#[test]
fn a_refused_post_is_logged_with_method_and_code_and_not_retried_forever() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    slack.fail_next_post(PostFailure::Api("not_in_channel"));
    let (_home, d) = socket_daemon(&model, &slack, "");
    slack.send_event(mention("C1", "7.0", "hi"), "E1", 0);
    let line = d.wait_log("Slack refused the reply", 10);
    assert!(
        line.contains("chat.postMessage") && line.contains("not_in_channel"),
        "{line}"
    );
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(slack.calls("chat.postMessage").len(), 1);
}

#[test]
fn the_model_down_gives_one_short_apology_and_keeps_the_message() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    for _ in 0..3 {
        model.push(Script::Status(
            529,
            vec![("retry-after-ms", "10".into())],
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#.into(),
        ));
    }
    let (home, _d) = socket_daemon(&model, &slack, "");
    slack.send_event(dm("D1", "U1", "5.0", "are you there?"), "E1", 0);
    slack.wait(10, "the apology", |s| !s.posts().is_empty());
    std::thread::sleep(Duration::from_millis(300));
    let posts = slack.posts();
    assert_eq!(posts.len(), 1);
    assert_eq!(posts[0].text, anima::engine::PROVIDER_DOWN_REPLY);
    let entries = wait(home.store().thread_entries("D1")).unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].content, "are you there?");
}

#[test]
fn killed_mid_turn_the_daemon_replies_exactly_once_after_restart() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.push(Script::Hang);
    let home = home(&model, &slack, "socket", "");
    let mut d = Daemon::start(&home);
    slack.wait_connected();
    slack.send_event(mention("C1", "9.000001", "a question"), "E1", 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while model.requests().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(model.requests().len(), 1, "the turn is in flight");
    d.kill9();
    assert!(slack.posts().is_empty());

    model.reply(&answer("Answered after the restart."));
    let _d = Daemon::start(&home);
    slack.wait(15, "the reply", |s| !s.posts().is_empty());
    std::thread::sleep(Duration::from_millis(500));
    let posts = slack.posts();
    assert_eq!(posts.len(), 1, "{posts:#?}");
    assert_eq!(posts[0].text, "Answered after the restart.");
    let users = wait(home.store().thread_entries("C1:9.000001")).unwrap();
    let user_messages = users
        .iter()
        .filter(|e| e.entry_type == anima::memory::EntryType::UserMessage)
        .count();
    assert_eq!(user_messages, 1, "the message is in working memory once");
}

#[test]
fn fifty_threads_of_five_messages_are_all_answered_each_in_order() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    let (_home, _d) = socket_daemon(&model, &slack, "");
    for m in 0..5 {
        for t in 0..50 {
            let channel = format!("D{t:03}");
            slack.send_event(
                dm(
                    &channel,
                    &format!("U{t}"),
                    &format!("1700000000.{:06}", m + 1),
                    &format!("t{t} m{m}"),
                ),
                &format!("E{t}-{m}"),
                0,
            );
        }
    }
    slack.wait(60, "250 replies", |s| s.posts().len() >= 250);
    std::thread::sleep(Duration::from_millis(300));
    let posts = slack.posts();
    assert_eq!(posts.len(), 250);
    for t in 0..50 {
        let channel = format!("D{t:03}");
        let texts: Vec<String> = posts
            .iter()
            .filter(|p| p.channel == channel)
            .map(|p| p.text.clone())
            .collect();
        let want: Vec<String> = (0..5).map(|m| format!("echo: t{t} m{m}")).collect();
        assert_eq!(texts, want, "thread {t} in order");
    }
}

#[test]
fn sigterm_lets_the_turn_in_flight_finish_then_exits_0() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.push(Script::Delay(1500, answer("Finished before stopping.")));
    let home = home(&model, &slack, "socket", "");
    let mut d = Daemon::start(&home);
    slack.wait_connected();
    slack.send_event(dm("D1", "U1", "5.0", "slow one"), "E1", 0);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while model.requests().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(10));
    }
    let code = d.terminate();
    assert_eq!(code, 0, "{}", d.log());
    assert_eq!(slack.posts().len(), 1);
    assert_eq!(slack.posts()[0].text, "Finished before stopping.");
}

#[test]
fn missing_tokens_exit_2_naming_the_variable() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    for (mode, var) in [
        ("socket", "SLACK_APP_TOKEN"),
        ("socket", "SLACK_BOT_TOKEN"),
        ("events", "SLACK_SIGNING_SECRET"),
    ] {
        let home = home(&model, &slack, mode, "");
        let mut d = Daemon::spawn(&home, &[(var, "")]);
        assert_eq!(d.wait_exit(20), 2, "{mode} without {var}");
        assert!(d.log().contains(var), "{}", d.log());
    }
}

#[test]
fn a_second_daemon_on_one_sqlite_home_exits_2_naming_the_first_which_answers_on() {
    if skipped_on_postgres("several daemons share one soul on PostgreSQL") {
        return;
    }
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Still the only one."));
    let (home, mut first) = socket_daemon(&model, &slack, "");
    let mut second = Daemon::spawn(&home, &[]);
    assert_eq!(second.wait_exit(20), 2, "{}", second.log());
    let said = second.log();
    assert!(said.contains(&format!("pid {}", first.pid())), "{said}");
    assert!(said.contains("PostgreSQL"), "{said}");
    // The commands an operator runs beside the daemon still work, and the second daemon put
    // nothing to sleep.
    let state = home.run(&["state"], "");
    assert_eq!(state.status, 0, "{}", state.stderr);
    assert!(
        state.stdout.starts_with("cognitive state: WORK"),
        "{}",
        state.stdout
    );
    let chat = home.run(&["chat"], "hello\n");
    assert_eq!(chat.status, 0, "{}", chat.stderr);
    assert!(
        chat.stdout.contains("Still the only one."),
        "{}",
        chat.stdout
    );
    slack.send_event(dm("D1", "U1", "5.0", "are you there?"), "E1", 0);
    slack.wait(10, "the first daemon's reply", |s| s.posts().len() == 1);
    assert!(first.child_alive());
    // Once the first stops, the home is free for the next.
    assert_eq!(first.terminate(), 0, "{}", first.log());
    let mut next = Daemon::start(&home);
    slack.wait_connected_or(|| next.log());
    assert!(next.child_alive(), "{}", next.log());
}

#[test]
fn malformed_socket_payloads_are_acknowledged_and_the_daemon_carries_on() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Still here."));
    let (_home, mut d) = socket_daemon(&model, &slack, "");
    slack.send_frame(json!({"envelope_id":"bad-1","type":"events_api","payload":{"type":"event_callback","event":"not an object"},"accepts_response_payload":false}).to_string());
    slack.send_frame("{not json at all".to_string());
    slack.send_frame(
        json!({"envelope_id":"odd-1","type":"something_new","payload":{"x":1}}).to_string(),
    );
    slack.wait(10, "the acks", |s| {
        s.acks().contains(&"bad-1".to_string()) && s.acks().contains(&"odd-1".to_string())
    });
    slack.send_event(dm("D1", "U1", "5.0", "hello?"), "E1", 0);
    slack.wait(10, "the reply", |s| s.posts().len() == 1);
    assert!(d.child_alive());
}

#[test]
fn a_disconnect_frame_reconnects_and_events_keep_flowing() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    let (_home, _d) = socket_daemon(&model, &slack, "");
    let opens = slack.calls("apps.connections.open").len();
    slack.disconnect_all("refresh_requested");
    slack.wait(20, "a new connection", |s| {
        s.calls("apps.connections.open").len() > opens && s.sockets() > 0
    });
    slack.send_event(dm("D1", "U1", "5.0", "after the refresh"), "E1", 0);
    slack.wait(10, "the reply", |s| s.posts().len() == 1);
    assert_eq!(slack.posts()[0].text, "echo: after the refresh");
    assert!(slack
        .auth_headers("apps.connections.open")
        .iter()
        .all(|a| a.as_deref() == Some(&*format!("Bearer {}", slack::APP_TOKEN))));
}

#[test]
fn slack_unreachable_at_start_is_retried_until_it_answers() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    slack.up.store(false, std::sync::atomic::Ordering::SeqCst);
    let home = home(&model, &slack, "socket", "");
    let d = Daemon::start(&home);
    d.wait_log("Slack is unreachable; retrying", 10);
    let (status, body) = http("GET", &d.url("/healthz"), &[], "");
    assert_eq!((status, body.as_str()), (503, "slack not connected"));
    slack.up.store(true, std::sync::atomic::Ordering::SeqCst);
    slack.wait_connected();
    d.wait_log("connected to Slack", 10);
    let (status, body) = http("GET", &d.url("/healthz"), &[], "");
    assert_eq!((status, body.as_str()), (200, "ok"));
}

#[test]
fn events_api_verifies_signatures_and_answers_signed_events() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Over HTTP."));
    let home = home(&model, &slack, "events", "");
    let d = Daemon::start(&home);
    d.wait_log("ready for Events API", 10);
    let url = d.url("/slack/events");
    let post = |body: &str, ts: &str, sig: &str, extra: &[(&str, &str)]| {
        let mut headers = vec![
            ("content-type", "application/json"),
            ("x-slack-request-timestamp", ts),
            ("x-slack-signature", sig),
        ];
        headers.extend_from_slice(extra);
        http("POST", &url, &headers, body)
    };
    let now = slack::now_secs().to_string();

    let challenge = json!({"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}).to_string();
    let (status, body) = post(
        &challenge,
        &now,
        &slack::sign(slack::SIGNING_SECRET, &now, &challenge),
        &[],
    );
    assert_eq!(status, 200);
    assert!(body.contains("3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"));

    let event = slack::event_callback(dm("D1", "U1", "5.0", "over http"), "EvH1").to_string();
    let (status, _) = post(
        &event,
        &now,
        "v0=0000000000000000000000000000000000000000000000000000000000000000",
        &[],
    );
    assert_eq!(status, 401, "bad signature");
    let stale = (slack::now_secs() - 301).to_string();
    let (status, _) = post(
        &event,
        &stale,
        &slack::sign(slack::SIGNING_SECRET, &stale, &event),
        &[],
    );
    assert_eq!(status, 401, "stale timestamp");
    let (status, _) = post(&challenge, &now, "v0=bad", &[]);
    assert_eq!(status, 401, "url_verification is verified too");
    std::thread::sleep(Duration::from_millis(200));
    assert!(model.requests().is_empty(), "nothing answered");
    assert!(
        wait(home.store().open_conversations()).unwrap().is_empty(),
        "nothing stored"
    );

    let sig = slack::sign(slack::SIGNING_SECRET, &now, &event);
    let (status, _) = post(&event, &now, &sig, &[]);
    assert_eq!(status, 200);
    let (status, _) = post(
        &event,
        &now,
        &sig,
        &[
            ("x-slack-retry-num", "1"),
            ("x-slack-retry-reason", "http_timeout"),
        ],
    );
    assert_eq!(status, 200);
    slack.wait(10, "the reply", |s| !s.posts().is_empty());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(slack.posts().len(), 1);
    assert_eq!(slack.posts()[0].text, "Over HTTP.");

    let garbage = "{\"type\":\"event_callback\",\"event\":42}";
    let (status, _) = post(
        garbage,
        &now,
        &slack::sign(slack::SIGNING_SECRET, &now, garbage),
        &[],
    );
    assert_eq!(
        status, 200,
        "malformed but signed: acknowledged, not redelivered forever"
    );
}

#[test]
fn health_metrics_and_whisper_endpoints() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Noted."));
    let home = home(&model, &slack, "socket", "");
    let d = Daemon::start_env(&home, &[("ANIMA_WHISPER_TOKEN", "whisper-secret")]);
    slack.wait_connected();
    d.wait_log("connected to Slack", 10);
    assert_eq!(
        http("GET", &d.url("/healthz"), &[], ""),
        (200, "ok".to_string())
    );

    let w = json!({"whisper":"They need assurance, not answers.","source":"kothar"}).to_string();
    let (status, _) = http(
        "POST",
        &d.url("/api/whisper"),
        &[("authorization", "Bearer wrong")],
        &w,
    );
    assert_eq!(status, 401);
    let (status, _) = http(
        "POST",
        &d.url("/api/whisper"),
        &[("authorization", "Bearer whisper-secret")],
        &w,
    );
    assert_eq!(status, 202);
    slack.send_event(dm("D1", "U1", "5.0", "hi"), "E1", 0);
    slack.wait(10, "the reply", |s| s.posts().len() == 1);
    assert!(model.requests()[0]
        .turn_text()
        .contains("They need assurance, not answers."));

    let (status, metrics) = http("GET", &d.url("/metrics"), &[], "");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("anima_replies_posted_total 1"),
        "{metrics}"
    );
    assert!(metrics.contains("anima_slack_connected 1"), "{metrics}");
}

#[test]
fn assistant_threads_show_the_assistant_status_instead_of_a_reaction() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Happy to help."));
    let (_home, _d) = socket_daemon(&model, &slack, "");
    slack.send_event(
        json!({"type":"assistant_thread_started","assistant_thread":{"user_id":"U1","context":{"channel_id":"C123","team_id":"T111","enterprise_id":null},"channel_id":"D777","thread_ts":"1729999327.187299"},"event_ts":"1729999327.187299"}),
        "EvA1",
        0,
    );
    slack.wait(10, "the ack", |s| s.acks().len() == 1);
    let mut msg = dm("D777", "U1", "1729999330.000100", "what can you do?");
    msg["thread_ts"] = json!("1729999327.187299");
    slack.send_event(msg, "EvA2", 0);
    slack.wait(10, "the reply", |s| !s.posts().is_empty());
    assert_eq!(
        slack.posts()[0].thread_ts.as_deref(),
        Some("1729999327.187299")
    );
    slack.wait(5, "the status to clear", |s| {
        s.calls("assistant.threads.setStatus").len() == 2
    });
    let calls = slack.calls("assistant.threads.setStatus");
    assert_eq!(calls[0]["status"], "is thinking…");
    assert_eq!(calls[0]["thread_ts"], "1729999327.187299");
    assert_eq!(calls[1]["status"], "");
    assert!(slack.calls("reactions.add").is_empty());
}

#[test]
fn a_burst_in_one_thread_does_not_starve_another() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.slow_echo(150);
    let (_home, _d) = socket_daemon(&model, &slack, "[slack]\nmax_concurrent_turns = 1\n");
    for m in 0..8 {
        slack.send_event(
            dm(
                "DBUSY",
                "U1",
                &format!("1700000000.{:06}", m + 1),
                &format!("busy {m}"),
            ),
            &format!("EB{m}"),
            0,
        );
    }
    std::thread::sleep(Duration::from_millis(50));
    slack.send_event(dm("DQUIET", "U2", "1700000000.000001", "just one"), "EQ", 0);
    slack.wait(20, "the quiet thread's reply", |s| {
        s.posts().iter().any(|p| p.channel == "DQUIET")
    });
    let busy_before = slack
        .posts()
        .iter()
        .filter(|p| p.channel == "DBUSY")
        .count();
    assert!(
        busy_before <= 2,
        "the quiet thread waited for {busy_before} busy turns"
    );
    slack.wait(20, "the burst", |s| s.posts().len() == 9);
}

#[test]
fn a_dropped_socket_reconnects_and_names_are_cached() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    let (_home, _d) = socket_daemon(&model, &slack, "");
    slack.send_event(dm("D1", "U1", "5.0", "before"), "E1", 0);
    slack.wait(10, "the first reply", |s| s.posts().len() == 1);
    let opens = slack.calls("apps.connections.open").len();
    slack.drop_all();
    slack.wait(20, "a new connection", |s| {
        s.calls("apps.connections.open").len() > opens && s.sockets() > 0
    });
    slack.send_event(dm("D1", "U1", "6.0", "after the drop"), "E2", 0);
    slack.wait(10, "the reply", |s| s.posts().len() == 2);
    assert_eq!(slack.posts()[1].text, "echo: after the drop");
    assert_eq!(
        slack.calls("users.info").len(),
        1,
        "the display name is cached"
    );
}

#[test]
fn a_refused_working_sign_is_named_once_and_never_stops_the_reply() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    slack.refuse("reactions.add", "missing_scope");
    let (_home, d) = socket_daemon(&model, &slack, "");
    slack.send_event(dm("D1", "U1", "5.0", "one"), "E1", 0);
    slack.send_event(dm("D1", "U1", "6.0", "two"), "E2", 0);
    slack.wait(10, "both replies", |s| s.posts().len() == 2);
    let warnings = d
        .log()
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("reactions.add failed: missing_scope"))
        .count();
    assert_eq!(warnings, 1, "{}", d.log());
}
