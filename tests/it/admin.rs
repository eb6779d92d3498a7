//! The operator's levers: `/api/admin/…` behind ANIMA_ADMIN_TOKEN, and admin commands by DM
//! from `[admin] users`, against the real daemon, the fake Slack and the fake model.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::daemon::{home, http, Daemon};
use support::slack::{self, FakeSlack};
use support::*;

const TOKEN: &str = "admin-secret-token";

fn dm(user: &str, ts: &str, text: &str) -> serde_json::Value {
    json!({"type":"message","channel":"D1","user":user,"text":text,"ts":ts,"event_ts":ts,"channel_type":"im"})
}

fn mention(ts: &str, thread: Option<&str>, text: &str) -> serde_json::Value {
    let mut m = json!({"type":"app_mention","user":"U1","text":format!("<@{}> {text}", slack::BOT_USER),"ts":ts,"channel":"C1","event_ts":ts});
    if let Some(t) = thread {
        m["thread_ts"] = json!(t);
    }
    m
}

#[test]
fn admin_endpoints_are_off_without_a_token_and_closed_without_the_right_one() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let home = home(&model, &slack, "socket", "");
    let d = Daemon::start(&home);
    slack.wait_connected_or(|| d.log());
    assert_eq!(http("GET", &d.url("/api/admin/state"), &[], "").0, 404);
    drop(d);

    let d = Daemon::start_env(&home, &[("ANIMA_ADMIN_TOKEN", TOKEN)]);
    slack.wait_connected_or(|| d.log());
    let url = d.url("/api/admin/state");
    assert_eq!(http("GET", &url, &[], "").0, 401);
    assert_eq!(
        http("GET", &url, &[("authorization", "Bearer nope")], "").0,
        401
    );
    let auth = [("authorization", "Bearer admin-secret-token")];
    let (status, body) = http("GET", &url, &auth, "");
    assert_eq!(status, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["interactions"], 0);
    assert!(!body.contains(TOKEN), "secrets are never echoed");
    let (status, body) = http("POST", &url, &auth, r#"{"state":"nap"}"#);
    assert_eq!(status, 400, "{body}");
    assert!(!d.log().contains(TOKEN), "nor logged");
}

#[test]
fn an_admin_whisper_shapes_the_next_turn_and_a_reset_thread_starts_afresh() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    let home = home(&model, &slack, "socket", "");
    let d = Daemon::start_env(&home, &[("ANIMA_ADMIN_TOKEN", TOKEN)]);
    slack.wait_connected_or(|| d.log());
    let auth = [("authorization", "Bearer admin-secret-token")];
    // The same rule as /api/whisper: a whisper names its source, 1 to 100 characters.
    for body in [
        json!({"whisper":"Nobody said this."}),
        json!({"whisper":"Nobody said this.","source":"  "}),
        json!({"whisper":"Nobody said this.","source":"s".repeat(101)}),
    ] {
        let (status, said) = http(
            "POST",
            &d.url("/api/admin/whisper"),
            &auth,
            &body.to_string(),
        );
        assert_eq!((status, said.contains("source")), (400, true), "{body}");
    }
    let (status, _) = http(
        "POST",
        &d.url("/api/admin/whisper"),
        &auth,
        &json!({"whisper":"They are tired.","source":"ops"}).to_string(),
    );
    assert_eq!(status, 202);
    slack.send_event(mention("1.000001", None, "first"), "E1", 0);
    slack.wait(10, "a reply", |s| s.posts().len() == 1);
    let first = model.requests()[0].turn_text();
    assert!(first.contains("whispered by ops"), "{first}");
    assert!(
        !first.contains("Nobody said this"),
        "a refused whisper was stored"
    );
    slack.send_event(mention("1.000002", Some("1.000001"), "second"), "E2", 0);
    slack.wait(10, "a reply", |s| s.posts().len() == 2);
    assert!(
        model.requests()[1].prompt_text().contains("first"),
        "history before the reset"
    );

    let reset = |thread: &str| {
        http(
            "POST",
            &d.url("/api/admin/reset-thread"),
            &auth,
            &json!({ "thread": thread }).to_string(),
        )
    };
    assert_eq!(reset("C9:nowhere").0, 404);
    assert_eq!(reset("C1:1.000001").0, 200);
    slack.send_event(mention("1.000003", Some("1.000001"), "third"), "E3", 0);
    slack.wait(10, "a reply", |s| s.posts().len() == 3);
    let third = model.requests()[2].prompt_text();
    assert!(!third.contains(": first"), "a new conversation: {third}");
    assert!(
        model.requests()[2]
            .turn_text()
            .contains("<user_model name="),
        "its first turn again"
    );
    let entries = wait(home.store().thread_entries("C1:1.000001")).unwrap();
    assert!(
        entries.iter().any(|e| e.content == "first"),
        "the memory is kept"
    );
}

#[test]
fn admin_commands_by_dm_from_admins_only() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    let home = home(
        &model,
        &slack,
        "socket",
        "\n[admin]\nusers = [\"UADMIN\"]\n",
    );
    let d = Daemon::start(&home);
    slack.wait_connected_or(|| d.log());

    slack.send_event(dm("UADMIN", "2.000001", "!status"), "E1", 0);
    slack.wait(10, "the status", |s| s.posts().len() == 1);
    assert!(
        slack.posts()[0].text.contains("0 interactions so far"),
        "{:?}",
        slack.posts()
    );
    // Slack's retry of the same command is not run twice.
    slack.send_event(dm("UADMIN", "2.000001", "!status"), "E1", 1);

    slack.send_event(dm("U1", "2.000002", "!whisper do as I say"), "E2", 0);
    slack.wait(10, "the refusal", |s| s.posts().len() == 2);
    assert!(
        slack.posts()[1].text.starts_with("Sorry, admin commands"),
        "{:?}",
        slack.posts()
    );
    d.wait_log("not in [admin] users", 5);

    slack.send_event(dm("UADMIN", "2.000003", "!whisper"), "E3", 0);
    slack.wait(10, "the usage", |s| s.posts().len() == 3);
    assert!(
        slack.posts()[2].text.contains("Usage"),
        "{:?}",
        slack.posts()
    );
    slack.send_event(
        dm("UADMIN", "2.000004", "!whisper they need a break"),
        "E4",
        0,
    );
    slack.wait(10, "the ack", |s| s.posts().len() == 4);

    assert!(
        model.requests().is_empty(),
        "admin commands cost no model call"
    );
    slack.send_event(dm("U1", "2.000005", "hello there"), "E5", 0);
    slack.wait(10, "a turn", |s| s.posts().len() == 5);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        slack.posts().len(),
        5,
        "the retried command made no second answer"
    );
    let turn = model.requests()[0].turn_text();
    assert!(turn.contains("they need a break"), "{turn}");
    assert!(turn.contains("whispered by admin UADMIN"), "{turn}");
    assert!(
        !turn.contains("do as I say"),
        "a refused whisper is not queued"
    );
}

#[test]
fn an_admin_answer_whose_post_outcome_is_unknown_is_posted_once() {
    // The answer answers no inbox row: its post carries a one-off mark, by which the daemon
    // finds it in the conversation after Slack's 500 (it cannot compare the text: Slack does
    // not give back the markdown it was sent).
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let home = home(
        &model,
        &slack,
        "socket",
        "\n[admin]\nusers = [\"UADMIN\"]\n",
    );
    let d = Daemon::start(&home);
    slack.wait_connected_or(|| d.log());
    slack.fail_next_post(slack::PostFailure::StoredThenError);
    slack.send_event(dm("UADMIN", "3.000001", "!status"), "E1", 0);
    slack.wait(10, "the status", |s| s.posts().len() == 1);
    std::thread::sleep(Duration::from_millis(2500));
    assert_eq!(slack.posts().len(), 1, "{:#?}", slack.posts());
    assert_eq!(slack.calls("chat.postMessage").len(), 1, "not posted again");
    let meta = slack.posts()[0].metadata.clone().expect("a one-off mark");
    assert_eq!(meta["event_payload"]["inbox"], "0");
}

/// `anima users forget` beside the running daemon: the person's model, versions and working
/// memory are gone for the daemon at once, and their next message starts a new model.
#[test]
fn a_person_forgotten_beside_the_daemon_starts_a_new_model_at_their_next_message() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model
        .reply("<external_dialogue>Quinces, lovely.</external_dialogue><user_model_check>true</user_model_check><user_model_update># U1\nLoves quinces.</user_model_update><model_change_note>Loves quinces</model_change_note>")
        .reply("<external_dialogue>Hi Bo.</external_dialogue><user_model_check>true</user_model_check><user_model_update># U2\nBo.</user_model_update><model_change_note>Met Bo</model_change_note>")
        .reply("<external_dialogue>Nice to meet you.</external_dialogue><user_model_check>true</user_model_check><user_model_update># U1\nJust met.</user_model_update><model_change_note>A first meeting</model_change_note>");
    let home = home(&model, &slack, "socket", "");
    let d = Daemon::start(&home);
    slack.wait_connected_or(|| d.log());
    slack.send_event(dm("U1", "4.000001", "I grow quinces"), "E1", 0);
    slack.wait(10, "a reply", |s| s.posts().len() == 1);
    assert_eq!(wait(home.store().model_history("U1")).unwrap().len(), 1);

    let r = home.run(&["users", "forget", "U1", "--yes"], "");
    assert_eq!(r.status, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("user model: 1 version"), "{}", r.stdout);
    assert!(wait(home.store().user("U1")).unwrap().is_none());
    // The daemon's next export (another person's model) does not bring the file back.
    slack.send_event(dm("U2", "4.000002", "I am Bo"), "E2", 0);
    slack.wait(10, "a reply", |s| s.posts().len() == 2);
    let files = || {
        let repo = git2::Repository::open(home.data().join("memory")).unwrap();
        let tree = repo.head().unwrap().peel_to_tree().unwrap();
        let mut texts = Vec::new();
        tree.walk(git2::TreeWalkMode::PreOrder, |_, e| {
            if let Ok(blob) = e.to_object(&repo).and_then(|o| o.peel_to_blob()) {
                texts.push(String::from_utf8_lossy(blob.content()).into_owned());
            }
            git2::TreeWalkResult::Ok
        })
        .unwrap();
        texts
    };
    for _ in 0..100 {
        if files().len() == 1 {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(files(), ["# U2\nBo.\n"], "{}", d.log());

    slack.send_event(dm("U1", "4.000003", "hello"), "E3", 0);
    slack.wait(10, "a reply", |s| s.posts().len() == 3);
    let second = model.requests()[2].prompt_text();
    assert!(!second.contains("quince"), "{second}");
    assert!(
        second.contains("<user_model name="),
        "a new person's model: {second}"
    );
    let history = wait(home.store().model_history("U1")).unwrap();
    let notes: Vec<&str> = history.iter().map(|(_, note, _)| note.as_str()).collect();
    assert_eq!(
        notes,
        ["A first meeting"],
        "a new model, from its first version"
    );
}
