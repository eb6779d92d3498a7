//! Cognitive states in the daemon: the wakeup (bounded, degraded after three failures,
//! messages waiting meanwhile), the shutdown protocol in each mode with a model that hangs
//! (always within the grace period, exit 0), an objection, and PLAY on request — the real
//! binary against the fake Slack and the fake model.

use crate::support;

use std::time::{Duration, Instant};

use anima::memory::{move_state, Quiet};
use serde_json::json;
use support::daemon::{home, http, Daemon};
use support::slack::FakeSlack;
use support::*;

fn dm(ts: &str, text: &str) -> serde_json::Value {
    json!({"type":"message","channel":"D1","user":"U1","text":text,"ts":ts,"event_ts":ts,"channel_type":"im"})
}

/// A home whose soul has `template` as its template.toml, with a 2 s grace period, one
/// crisis keyword, a 1 s model timeout and an ops channel.
fn home_with(model: &FakeModel, slack: &FakeSlack, template: &str) -> Home {
    let h = home(model, slack, "socket", "");
    let soul = h.dir.path().join("soul");
    std::fs::create_dir_all(&soul).unwrap();
    let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/soul");
    std::fs::copy(format!("{shipped}/soul.md"), soul.join("soul.md")).unwrap();
    std::fs::write(soul.join("template.toml"), template).unwrap();
    let cfg = std::fs::read_to_string(h.config()).unwrap();
    let cfg = cfg
        .replace(&format!("soul_dir = \"{shipped}\""), "soul_dir = \"soul\"")
        .replace("timeout_secs = 5", "timeout_secs = 1")
        .replace(
            "shutdown_grace_secs = 10",
            "shutdown_grace_secs = 2\nops_channel = \"COPS\"\n\n[guardrails]\ncrisis_keywords = [\"Suicidal\"]",
        );
    std::fs::write(h.config(), cfg).unwrap();
    h
}

const ALWAYS: &str = "[cognitive_state_behaviors.shutdown]\nmode = \"always_consent\"\n";
const ALLY: &str = include_str!("../../soul/templates/ally.toml");
const SCOUT: &str = include_str!("../../soul/templates/scout.toml");

/// The last recorded move.
fn last_move(h: &Home) -> anima::memory::StateMove {
    wait(h.store().state_moves(1)).unwrap().remove(0)
}

/// Starts, has one conversation (a crisis), then stops with a model that hangs on the
/// consent call: the daemon exits 0 within the grace period, and the decision is recorded.
fn stop_with_a_hanging_model(template: &str) -> (FakeModel, Home, Daemon, Duration) {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("I'm here with you."));
    let h = home_with(&model, &slack, template);
    let mut d = Daemon::start(&h);
    slack.wait_connected_or(|| d.log());
    slack.send_event(dm("5.0", "I feel suicidal tonight"), "E1", 0);
    slack.wait(15, "the reply", |s| {
        s.posts().iter().any(|p| p.channel == "D1")
    });
    model.state(Script::Hang);
    let started = Instant::now();
    let code = d.terminate();
    let took = started.elapsed();
    assert_eq!(code, 0, "{}", d.log());
    let m = last_move(&h);
    assert_eq!(m.to, "SHUTDOWN", "{m:?}");
    (model, h, d, took)
}

/// The grace period (2 s) and a margin for a loaded machine: a bound, not a speed.
const WITHIN: Duration = Duration::from_secs(2 + 8);

#[test]
fn always_consent_asks_and_a_hanging_model_still_ends_within_grace() {
    let (model, h, d, took) = stop_with_a_hanging_model(ALWAYS);
    assert!(took < WITHIN, "{took:?}\n{}", d.log());
    let asked: Vec<_> = model
        .state_requests()
        .into_iter()
        .filter(|(k, _)| k == "shutdown")
        .collect();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].1.prompt_text().contains("I feel suicidal tonight"),
        "the active threads"
    );
    let m = last_move(&h);
    assert_eq!(m.detail["decision"]["ask_consent"], true);
    assert_eq!(m.detail["decision"]["mode"], "always_consent");
    assert!(m.detail["answer"]["no_answer"].is_string(), "{m:?}");
}

#[test]
fn ally_asks_consent_during_a_crisis_and_says_which_condition_fired() {
    let (model, h, d, took) = stop_with_a_hanging_model(ALLY);
    assert!(took < WITHIN, "{took:?}\n{}", d.log());
    assert!(
        model.state_requests().iter().all(|(k, _)| k != "wakeup"),
        "ally skips wakeup"
    );
    assert!(model.state_requests().iter().any(|(k, _)| k == "shutdown"));
    let m = last_move(&h);
    assert_eq!(
        m.detail["decision"]["fired"],
        json!(["active_crisis_response"])
    );
    assert!(m.cause.contains("suicidal"), "{}", m.cause);
}

#[test]
fn instant_shutdown_skips_consent_even_in_a_crisis() {
    let (model, h, d, took) = stop_with_a_hanging_model(SCOUT);
    assert!(took < WITHIN, "{took:?}\n{}", d.log());
    assert!(model.state_requests().is_empty(), "no wakeup, no consent");
    let m = last_move(&h);
    assert_eq!(m.detail["decision"]["ask_consent"], false);
    assert_eq!(m.detail["decision"]["mode"], "instant");
}

#[test]
fn a_dream_leaves_the_last_hour_whole_so_the_shutdown_still_sees_a_crisis() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let h = home_with(&model, &slack, ALLY);
    with_config(&h, "\n[dream]\nkeep_recent = 2\n");
    let s = h.store();
    let thread = "D1:5.0";
    wait(s.record_user_message(thread, "U1", "Tom", "I feel suicidal tonight", None)).unwrap();
    for i in 0..6 {
        wait(s.record_user_message(thread, "U1", "Tom", &format!("and then {i} 🦀"), None))
            .unwrap();
    }
    let before = wait(s.thread_entries(thread)).unwrap();
    // Far more than the two it keeps, but all of the last hour: the dream leaves them.
    let r = h.run(&["dream", "--json"], "");
    assert_eq!(r.status, 0, "{}{}", r.stdout, r.stderr);
    let report: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(report["entries_pruned"], 0, "{report}");
    assert_eq!(wait(s.thread_entries(thread)).unwrap(), before);
    assert!(model.state_requests().is_empty(), "nothing to dream of yet");

    let mut d = Daemon::start(&h);
    slack.wait_connected_or(|| d.log());
    // Slack answers while the soul may still be waking: stopped before it is awake, there is
    // no shutdown to decide (it never left SHUTDOWN).
    wait_state(&h, "WORK", 20, || d.log());
    model.state(Script::Hang);
    assert_eq!(d.terminate(), 0, "{}", d.log());
    let m = last_move(&h);
    assert_eq!(
        m.detail["decision"]["fired"],
        json!(["active_crisis_response"]),
        "{m:?}"
    );

    // Two hours later the same conversation is consolidated down to the two newest.
    h.backdate(2 * 3_600_000);
    let r = h.run(&["dream", "--json"], "");
    assert_eq!(r.status, 0, "{}{}", r.stdout, r.stderr);
    let report: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(report["entries_pruned"], 5, "{report}");
}

/// Issue 23: 312 conversations of the last hour, each last message 32,000 characters, made a
/// consent request a real model refuses. The request the model receives stays bounded.
#[test]
fn the_consent_request_with_many_long_conversations_stays_bounded() {
    use anima::states::quote::{MAX_QUOTED_CHARS, MAX_QUOTED_CONVERSATIONS};
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let h = home_with(&model, &slack, ALWAYS);
    let s = h.store();
    let long: String = "Привет 日本語 👍🏽 é. "
        .chars()
        .cycle()
        .take(32_000)
        .collect();
    for n in 0..312 {
        wait(s.record_user_message(&format!("D1:{n}.0"), "U1", "Tom", &long, None)).unwrap();
    }
    let mut d = Daemon::start(&h);
    slack.wait_connected_or(|| d.log());
    model.state(Script::Hang);
    assert_eq!(d.terminate(), 0, "{}", d.log());
    let asked: Vec<_> = model
        .state_requests()
        .into_iter()
        .filter(|(k, _)| k == "shutdown")
        .collect();
    assert_eq!(asked.len(), 1, "{}", d.log());
    let prompt = asked[0].1.prompt_text();
    let soul = std::fs::read_to_string(h.dir.path().join("soul/soul.md")).unwrap();
    let size = prompt.chars().count();
    assert!(
        size <= soul.chars().count() + MAX_QUOTED_CHARS + 1_000,
        "{size} characters"
    );
    let shown = prompt.matches("- D1:").count();
    assert_eq!(shown, MAX_QUOTED_CONVERSATIONS);
    assert!(prompt.contains("- D1:311.0:"), "the most recent is shown");
    assert!(!prompt.contains("- D1:0.0:"), "the oldest is left out");
    assert!(
        prompt.contains("… and 292 more conversations not shown."),
        "{:?}",
        prompt.lines().rev().take(8).collect::<Vec<_>>()
    );
}

#[test]
fn an_objection_is_logged_sent_to_the_ops_channel_and_the_daemon_still_exits_0() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Let's keep going."));
    let h = home_with(&model, &slack, ALWAYS);
    let mut d = Daemon::start(&h);
    slack.wait_connected_or(|| d.log());
    slack.send_event(dm("5.0", "can you help me plan?"), "E1", 0);
    slack.wait(15, "the reply", |s| {
        s.posts().iter().any(|p| p.channel == "D1")
    });
    model.state(Script::Reply(
        "<consent>no</consent><reason>Tom is mid-plan 🦀</reason><closing_note>I have to pause; back soon.</closing_note>".into(),
    ));
    assert_eq!(d.terminate(), 0, "{}", d.log());
    assert!(
        d.log().contains("the soul objects to being shut down"),
        "{}",
        d.log()
    );
    let posts = slack.posts();
    assert!(
        posts
            .iter()
            .any(|p| p.channel == "COPS" && p.text.contains("Tom is mid-plan 🦀")),
        "{posts:?}"
    );
    assert!(
        posts
            .iter()
            .any(|p| p.channel == "D1" && p.text.contains("back soon")),
        "the closing note: {posts:?}"
    );
    let m = last_move(&h);
    assert_eq!(m.detail["answer"]["consent"], false);
}

#[test]
fn a_wakeup_that_hangs_three_times_enters_work_degraded_and_the_waiting_message_is_answered() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Answered after waking."));
    for _ in 0..3 {
        model.state(Script::Hang);
    }
    let h = home_with(&model, &slack, ALWAYS);
    let d = Daemon::start(&h);
    slack.wait_connected_or(|| d.log());
    slack.send_event(dm("5.0", "are you up?"), "E1", 0);
    slack.wait(20, "the reply", |s| {
        s.posts().iter().any(|p| p.channel == "D1")
    });
    let wakeups = model
        .state_requests()
        .iter()
        .filter(|(k, _)| k == "wakeup")
        .count();
    assert_eq!(wakeups, 3, "three bounded attempts, never a spin");
    let now = wait(h.store().cognitive_state()).unwrap();
    assert_eq!(now.state, "WORK");
    assert!(now.degraded, "{now:?}");
    assert!(d.log().contains("degraded=true"), "logged");
    // The message waited for the wakeup: its turn came after the last attempt.
    assert_eq!(model.requests().len(), 1);
    let moves = wait(h.store().state_moves(10)).unwrap();
    let order: Vec<&str> = moves.iter().rev().map(|m| m.to.as_str()).collect();
    assert_eq!(order, ["WAKEUP", "WORK"]);
}

#[test]
fn play_is_requested_by_the_operator_and_shapes_the_prompt() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    let h = home_with(&model, &slack, ALWAYS);
    let d = Daemon::start_env(&h, &[("ANIMA_ADMIN_TOKEN", "tok")]);
    slack.wait_connected_or(|| d.log());
    let auth = [("authorization", "Bearer tok")];
    let url = d.url("/api/admin/state");
    let deadline = Instant::now() + Duration::from_secs(10);
    while wait(h.store().cognitive_state()).unwrap().state != "WORK" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let (status, body) = http("POST", &url, &auth, r#"{"state":"dream"}"#);
    assert_eq!(status, 409, "{body}");
    let (status, body) = http("POST", &url, &auth, r#"{"state":"play"}"#);
    assert_eq!(status, 200, "{body}");
    let (status, body) = http("POST", &url, &auth, r#"{"state":"play"}"#);
    assert_eq!(status, 409, "already in PLAY: {body}");
    let (_, body) = http("GET", &url, &auth, "");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["cognitive_state"]["state"], "PLAY");
    assert_eq!(
        v["cognitive_state"]["allowed_moves"],
        json!(["WORK", "SHUTDOWN"])
    );
    slack.send_event(dm("5.0", "hi"), "E1", 0);
    slack.wait(10, "the reply", |s| {
        s.posts().iter().any(|p| p.channel == "D1")
    });
    assert!(
        model.requests()[0]
            .turn_text()
            .contains("Your cognitive state is PLAY"),
        "PLAY's words in the instructions"
    );
}

#[test]
fn a_bad_template_fails_check_and_the_first_start_with_its_file_and_line() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let h = home_with(
        &model,
        &slack,
        "[cognitive_state_behaviors.shutdown]\nmode = \"conditional\"\nrequire_consent_when = [\"full_moon\"]\n",
    );
    let r = h.run(&["check"], "");
    assert_eq!(r.status, 2, "{}", r.stdout);
    assert!(
        r.stdout.contains("soul/template.toml:3") && r.stdout.contains("full_moon"),
        "{}",
        r.stdout
    );
    let mut d = Daemon::spawn(&h, &[]);
    assert_eq!(d.wait_exit(20), 2, "{}", d.log());
    assert!(d.log().contains("template.toml:3"), "{}", d.log());
}

#[test]
fn anima_state_shows_the_cognitive_state_its_template_and_the_journal() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let h = home_with(&model, &slack, ALLY);
    let mut d = Daemon::start(&h);
    slack.wait_connected_or(|| d.log());
    assert_eq!(d.terminate(), 0);
    let r = h.run(&["state"], "");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stdout.starts_with("cognitive state: SHUTDOWN"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("allowed moves: WORK"), "{}", r.stdout);
    assert!(
        r.stdout.contains("wakeup: Partnership model"),
        "the rationales: {}",
        r.stdout
    );
    let r = h.run(&["state", "--json"], "");
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(v["cognitive_state"]["template"]["name"], "ally");
    let moves = v["cognitive_state"]["recent_moves"].as_array().unwrap();
    assert_eq!(moves[0]["to"], "SHUTDOWN");
    assert_eq!(moves[1]["to"], "WORK", "no wakeup: {moves:?}");
    wait(h.store().add_journal("Alone, I thought of Tom. 🦀")).unwrap();
    let r = h.run(&["state", "--journal"], "");
    assert!(
        r.stdout.contains("Alone, I thought of Tom. 🦀"),
        "{}",
        r.stdout
    );
}

/// Adds TOML sections to a home's config.
fn with_config(h: &Home, extra: &str) {
    let cfg = std::fs::read_to_string(h.config()).unwrap() + extra;
    std::fs::write(h.config(), cfg).unwrap();
}

/// Waits until the store's cognitive state is `state`.
fn wait_state(h: &Home, state: &str, secs: u64, log: impl Fn() -> String) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while wait(h.store().cognitive_state()).unwrap().state != state {
        assert!(Instant::now() < deadline, "never {state}: {}", log());
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_quiet_daemon_enters_solitude_writes_one_journal_entry_and_a_message_brings_it_back() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Back from my solitude."));
    // No scheduled dream: it would take the quiet spell first (tested on its own).
    let template = format!("{ALWAYS}\n[cognitive_state_behaviors.dream]\nauto_schedule = false\n");
    let h = home_with(&model, &slack, &template);
    // The shortest idle spell there is: a minute (the test waits for it).
    with_config(
        &h,
        "\n[states]\nsolitude_after_idle_minutes = 1\n\n[processes]\nproactive_scan_secs = 1\n",
    );
    let d = Daemon::start(&h);
    slack.wait_connected_or(|| d.log());
    wait_state(&h, "WORK", 10, || d.log());
    // This template does not resume silently: a note to the ops channel after waking.
    slack.wait(10, "the wakeup note", |s| {
        s.posts().iter().any(|p| p.channel == "COPS")
    });
    wait_state(&h, "SOLITUDE", 90, || d.log());
    let m = last_move(&h);
    assert!(m.cause.contains("no message for"), "{m:?}");
    d.wait_log("solitude: a journal entry written", 10);
    let journals = model
        .state_requests()
        .iter()
        .filter(|(k, _)| k == "solitude")
        .count();
    assert_eq!(journals, 1, "one journal entry per solitude");
    let shown = h.run(&["state", "--journal"], "");
    assert!(!shown.stdout.trim().is_empty(), "{}", shown.stdout);

    // A message: answered as usual, and the soul is back at work.
    slack.send_event(dm("9.0", "are you there?"), "E9", 0);
    slack.wait(15, "the reply", |s| {
        s.posts().iter().any(|p| p.text == "Back from my solitude.")
    });
    assert_eq!(wait(h.store().cognitive_state()).unwrap().state, "WORK");
    assert!(
        last_move(&h).cause.contains("message"),
        "{:?}",
        last_move(&h)
    );
}

#[test]
fn a_process_rule_requests_play_and_the_soul_moves_there() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Let's play."));
    // ally: no wakeup, resumes silently, PLAY enabled.
    let h = home_with(&model, &slack, ALLY);
    let dir = h.dir.path().join("processes");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("main.toml"),
        "name = \"main\"\nsteps = [\"external_dialogue\"]\n\n[[transitions]]\nto = \"main\"\nparams = { request_state = \"PLAY\" }\n",
    )
    .unwrap();
    let cfg = std::fs::read_to_string(h.config()).unwrap().replacen(
        "[paths]\n",
        &format!("[paths]\nprocesses_dir = \"{}\"\n", dir.display()),
        1,
    );
    std::fs::write(h.config(), cfg).unwrap();
    with_config(&h, "\n[processes]\ninitial = \"main\"\n");
    let d = Daemon::start(&h);
    slack.wait_connected_or(|| d.log());
    wait_state(&h, "WORK", 10, || d.log());
    slack.send_event(dm("5.0", "shall we improvise?"), "E1", 0);
    slack.wait(15, "the reply", |s| {
        s.posts().iter().any(|p| p.channel == "D1")
    });
    wait_state(&h, "PLAY", 10, || d.log());
    let m = last_move(&h);
    assert!(m.cause.contains("process rule"), "{m:?}");
    assert!(
        !slack.posts().iter().any(|p| p.channel == "COPS"),
        "resume_silently: no note to the ops channel"
    );
}

/// `home_with`, keeping the 4 newest entries of a conversation and waiting up to `timeout`
/// seconds for the model; two conversations seeded with 10 messages each from Tom, two hours
/// ago (a dream keeps the last hour whole).
fn dreaming_home(model: &FakeModel, slack: &FakeSlack, timeout: u32) -> Home {
    let h = home_with(model, slack, ALWAYS);
    let cfg = std::fs::read_to_string(h.config()).unwrap();
    let cfg = cfg.replace("timeout_secs = 1", &format!("timeout_secs = {timeout}"))
        + "\n[dream]\nkeep_recent = 4\n";
    std::fs::write(h.config(), cfg).unwrap();
    let s = h.store();
    for thread in ["C1:1.0", "C2:1.0"] {
        for i in 0..10 {
            wait(s.record_user_message(
                thread,
                "U1",
                "Tom",
                &format!("crab fact {i}: ça 🦀"),
                None,
            ))
            .unwrap();
        }
    }
    h.backdate(2 * 3_600_000);
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheduled_dream_does_not_start_when_someone_wrote_after_its_scan() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let h = dreaming_home(&model, &slack, 5);
    let engine = engine(&model, &h);
    let store = engine.store().clone();
    // A running daemon's soul works.
    anima::memory::move_state(store.as_ref(), None, |_| {
        Ok::<_, String>(anima::memory::NewMove {
            to: "WORK".into(),
            cause: "started".into(),
            detail: json!({}),
            degraded: false,
        })
    })
    .await
    .unwrap()
    .unwrap();
    // The schedule reads the newest message; then someone writes, before the dream moves.
    let seen = Quiet(store.newest_message_id().await.unwrap());
    store
        .record_user_message("C3:1.0", "U2", "Ann", "are you there? 👋", None)
        .await
        .unwrap();
    let refused = engine.dream("scheduled: test", Some(seen)).await;
    assert!(
        matches!(&refused, Err(anima::engine::DreamError::Refused(why)) if why.contains("wrote")),
        "{refused:?}"
    );
    assert_eq!(store.cognitive_state().await.unwrap().state, "WORK");
    assert!(
        store.last_dream().await.unwrap().is_none(),
        "no dream begun"
    );
    assert!(model.state_requests().is_empty());
    // Read again with nobody writing since: it dreams, and the soul is back at work.
    let seen = Quiet(store.newest_message_id().await.unwrap());
    let r = engine.dream("scheduled: test", Some(seen)).await.unwrap();
    assert_eq!(r.threads_consolidated, 2, "{r:?}");
    assert_eq!(store.cognitive_state().await.unwrap().state, "WORK");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_after_the_last_batch_is_no_yield_when_what_is_left_is_the_last_hour() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let h = dreaming_home(&model, &slack, 5);
    // A busy conversation of the last hour: more entries than the four kept, no backlog.
    let s = h.store();
    for i in 0..6 {
        wait(s.record_user_message("C3:1.0", "U2", "Ann", &format!("just now {i} 👋"), None))
            .unwrap();
    }
    let engine = std::sync::Arc::new(engine(&model, &h));
    let store = engine.store().clone();
    let to_work = |cause: &'static str| {
        move |_: &anima::memory::CognitiveRow| {
            Ok::<_, String>(anima::memory::NewMove {
                to: "WORK".into(),
                cause: cause.into(),
                detail: json!({}),
                degraded: false,
            })
        }
    };
    move_state(store.as_ref(), None, to_work("started"))
        .await
        .unwrap()
        .unwrap();
    // C1's call, then C2's, the last backlog there is: slow, and a message comes meanwhile.
    model.state(Script::Reply("<summary>C1 crabs.</summary>".into()));
    model.state(Script::Delay(1_500, "<summary>C2 crabs.</summary>".into()));
    let e = engine.clone();
    let dreaming = tokio::spawn(async move { e.dream("test", None).await });
    let deadline = Instant::now() + Duration::from_secs(20);
    while model.state_requests().len() < 2 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(model.state_requests().len(), 2);
    // The message's turn moves the soul back to WORK.
    move_state(store.as_ref(), None, to_work("a message arrived"))
        .await
        .unwrap()
        .unwrap();
    let r = dreaming.await.unwrap().unwrap();
    assert_eq!(r.threads_consolidated, 2, "{r:?}");
    assert_eq!(r.backlog_left, 0, "{r:?}");
    assert_eq!(r.threads, 2, "C3 has no backlog: {r:?}");
    // Nothing was left to yield: the report must not say the next dream resumes (the
    // schedule would dream again at the next quiet scan), and the upkeep runs.
    assert!(!r.yielded, "{r:?}");
    assert!(r.complete, "{r:?}");
    assert!(r.upkeep.is_some(), "{r:?}");
    assert_eq!(wait(s.thread_entries("C3:1.0")).unwrap().len(), 6);
}

#[test]
fn anima_dream_consolidates_each_thread_keeps_the_newest_and_shows_in_anima_state() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let h = dreaming_home(&model, &slack, 5);
    let before: Vec<_> = ["C1:1.0", "C2:1.0"]
        .iter()
        .map(|t| wait(h.store().thread_entries(t)).unwrap())
        .collect();
    let r = h.run(&["dream", "--json"], "");
    assert_eq!(r.status, 0, "{}{}", r.stdout, r.stderr);
    let report: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(report["threads_consolidated"], 2, "{report}");
    assert_eq!(report["entries_summarised"], 12);
    assert_eq!(report["entries_pruned"], 12);
    assert_eq!(report["model_calls"], 2);
    assert_eq!(report["complete"], true);
    assert_eq!(report["upkeep"]["analyzed"], true);
    let s = h.store();
    for (i, t) in ["C1:1.0", "C2:1.0"].iter().enumerate() {
        assert_eq!(
            wait(s.thread_entries(t)).unwrap(),
            before[i][6..],
            "only the covered entries went; the newest four stay"
        );
        assert_eq!(
            wait(s.thread_summary(t)).unwrap().as_deref(),
            Some("Tom and I talked about crabs. 🦀")
        );
        assert_eq!(wait(s.episodes(t)).unwrap()[0].importance, 7);
    }
    let calls = model.state_requests();
    assert!(calls.iter().all(|(k, _)| k == "dream"));
    assert!(calls[0].1.prompt_text().contains("crab fact 0"));
    assert_eq!(
        wait(s.cognitive_state()).unwrap().state,
        "SHUTDOWN",
        "no daemon: no move"
    );
    let r = h.run(&["state"], "");
    assert!(
        r.stdout.contains("last dream:")
            && r.stdout
                .contains("(complete): 2 thread(s), 12 entries summarised, 12 pruned"),
        "{}",
        r.stdout
    );
    // Nothing left: a second dream consolidates nothing and calls no model.
    let r = h.run(&["dream"], "");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(r.stdout.contains("0 with a backlog"), "{}", r.stdout);
    assert_eq!(model.state_requests().len(), 2);
}

#[test]
fn a_dream_with_no_summary_or_a_failed_call_deletes_nothing_and_a_disabled_one_is_refused() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let h = dreaming_home(&model, &slack, 1);
    model.state(Script::Reply("I dreamt of nothing.".into()));
    model.state(Script::Hang);
    let before = wait(h.store().thread_entries("C1:1.0")).unwrap().len()
        + wait(h.store().thread_entries("C2:1.0")).unwrap().len();
    let r = h.run(&["dream", "--json"], "");
    assert_eq!(r.status, 0, "{}", r.stderr);
    let report: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(report["entries_pruned"], 0, "{report}");
    assert_eq!(report["failed_calls"], 1);
    assert_eq!(report["complete"], false);
    let after = wait(h.store().thread_entries("C1:1.0")).unwrap().len()
        + wait(h.store().thread_entries("C2:1.0")).unwrap().len();
    assert_eq!(before, after);
    std::fs::write(
        h.dir.path().join("soul/template.toml"),
        "[cognitive_state_behaviors.dream]\nenabled = false\n",
    )
    .unwrap();
    let r = h.run(&["dream"], "");
    assert_eq!(r.status, 2, "{}", r.stdout);
    assert!(r.stderr.contains("disables DREAM"), "{}", r.stderr);
}

#[test]
fn a_message_during_anima_dream_beside_the_daemon_is_answered_and_the_dream_yields() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Here, awake."));
    let h = dreaming_home(&model, &slack, 30);
    let d = Daemon::start(&h);
    slack.wait_connected_or(|| d.log());
    let deadline = Instant::now() + Duration::from_secs(20);
    while wait(h.store().cognitive_state()).unwrap().state != "WORK" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    // The first thread's consolidation takes a while: the message comes meanwhile.
    model.state(Script::Delay(
        6_000,
        "<summary>Slow dream about crabs.</summary>".into(),
    ));
    let dreaming = {
        let config = h.config();
        let dir = h.dir.path().to_path_buf();
        std::thread::spawn(move || run(anima_command(&config, &dir, &["dream", "--json"]), ""))
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while wait(h.store().cognitive_state()).unwrap().state != "DREAM" && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(wait(h.store().cognitive_state()).unwrap().state, "DREAM");
    slack.send_event(dm("5.0", "are you dreaming?"), "E1", 0);
    slack.wait(20, "the reply", |s| {
        s.posts().iter().any(|p| p.channel == "D1")
    });
    assert!(
        !dreaming.is_finished(),
        "the reply came while the dream's current step was still running"
    );
    let r = dreaming.join().unwrap();
    assert_eq!(r.status, 0, "{}", r.stderr);
    let report: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(report["yielded"], true, "{report}");
    assert_eq!(
        report["threads_consolidated"], 1,
        "its current thread, then it yielded"
    );
    assert_eq!(report["model_calls"], 1);
    assert!(report["backlog_left"].as_u64().unwrap() > 0);
    let s = h.store();
    let (first, second) = (
        wait(s.thread_entries("C1:1.0")).unwrap().len(),
        wait(s.thread_entries("C2:1.0")).unwrap().len(),
    );
    assert_eq!(first.min(second), 4, "one thread consolidated");
    assert_eq!(first.max(second), 10, "the other waits for the next dream");
    let moves = wait(s.state_moves(10)).unwrap();
    let woke = moves
        .iter()
        .find(|m| m.from == "DREAM")
        .expect("moved out of DREAM");
    assert_eq!(
        (woke.to.as_str(), woke.cause.as_str()),
        ("WORK", "a message arrived")
    );
    assert!(moves
        .iter()
        .any(|m| m.from == "WORK" && m.to == "DREAM" && m.cause.contains("anima dream")));
    assert_eq!(wait(s.cognitive_state()).unwrap().state, "WORK");
}

#[test]
fn an_anima_dream_killed_beside_the_daemon_leaves_no_stuck_dream_and_the_next_one_resumes() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Here, awake."));
    let h = dreaming_home(&model, &slack, 30);
    let d = Daemon::start(&h);
    slack.wait_connected_or(|| d.log());
    wait_state(&h, "WORK", 20, || d.log());
    model.state(Script::Hang);
    let mut dreamer = anima_command(&h.config(), h.dir.path(), &["dream", "--json"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_state(&h, "DREAM", 20, || d.log());
    // The dreamer hangs on its first call (the move to DREAM comes a few store round trips
    // before it, more on PostgreSQL): killed before that call, it would leave the hang to the
    // next dream.
    let deadline = Instant::now() + Duration::from_secs(20);
    while !model.state_requests().iter().any(|(k, _)| k == "dream") {
        assert!(
            Instant::now() < deadline,
            "the dreamer never called: {}",
            d.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Ctrl-C, the OOM killer, SIGKILL: the dreamer is gone without moving back to WORK.
    dreamer.kill().unwrap();
    dreamer.wait().unwrap();
    let r = h.run(&["dream", "--json"], "");
    assert_eq!(r.status, 0, "the next dream is not refused: {}", r.stderr);
    let report: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(report["threads_consolidated"], 2, "{report}");
    assert_eq!(report["complete"], true, "{report}");
    assert_eq!(wait(h.store().cognitive_state()).unwrap().state, "WORK");
    let moves = wait(h.store().state_moves(10)).unwrap();
    assert!(
        moves
            .iter()
            .any(|m| m.from == "DREAM" && m.to == "WORK" && m.cause.contains("ended without")),
        "{moves:?}"
    );
}

#[test]
fn a_quiet_daemon_dreams_on_schedule_and_consolidates() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let h = dreaming_home(&model, &slack, 5);
    // The default dream schedule; no solitude, so the quiet spell goes to the dream.
    std::fs::write(
        h.dir.path().join("soul/template.toml"),
        format!("{ALWAYS}\n[cognitive_state_behaviors.solitude]\nenabled = false\nrationale = \"Dreams only\"\n"),
    )
    .unwrap();
    with_config(
        &h,
        "\n[states]\nsolitude_after_idle_minutes = 1\n\n[processes]\nproactive_scan_secs = 1\n",
    );
    // Someone wrote just now (in a conversation too short to consolidate): the quiet spell
    // begins now, and the dream waits it out.
    wait(
        h.store()
            .record_user_message("C3:1.0", "U2", "Ann", "see you later 👋", None),
    )
    .unwrap();
    let started = Instant::now();
    let d = Daemon::start(&h);
    slack.wait_connected_or(|| d.log());
    d.wait_log("scheduled dream ended", 100);
    assert!(
        started.elapsed() >= Duration::from_secs(55),
        "the dream waited for the quiet spell: {:?}",
        started.elapsed()
    );
    let s = h.store();
    let dream = wait(s.last_dream()).unwrap().expect("a dream is recorded");
    assert!(dream.complete, "{dream:?}");
    assert!(dream.cause.contains("scheduled"), "{dream:?}");
    assert_eq!(dream.report["threads_consolidated"], 2, "{dream:?}");
    assert_eq!(dream.report["entries_pruned"], 12, "{dream:?}");
    let moves = wait(s.state_moves(10)).unwrap();
    assert!(
        moves.iter().any(|m| m.from == "WORK" && m.to == "DREAM"),
        "{moves:?}"
    );
    assert_eq!(wait(s.cognitive_state()).unwrap().state, "WORK");
}

#[test]
fn a_stop_during_the_wakeup_leaves_the_waiting_message_for_the_next_start_without_waiting_out_the_grace(
) {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.state(Script::Hang);
    model.reply(&answer("Answered at the next start."));
    let h = home_with(&model, &slack, ALWAYS);
    let cfg = std::fs::read_to_string(h.config())
        .unwrap()
        .replace("shutdown_grace_secs = 2", "shutdown_grace_secs = 30")
        .replace("timeout_secs = 1", "timeout_secs = 60");
    std::fs::write(h.config(), cfg).unwrap();
    let mut d = Daemon::start(&h);
    slack.wait_connected_or(|| d.log());
    slack.send_event(dm("5.0", "are you awake?"), "E1", 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while wait(h.store().inbox_depth()).unwrap_or(0) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let started = Instant::now();
    assert_eq!(d.terminate(), 0, "{}", d.log());
    // Far under the 30 s grace: nothing waits for a wakeup that will not come.
    assert!(started.elapsed() < Duration::from_secs(15), "{}", d.log());
    assert!(slack.posts().iter().all(|p| p.channel != "D1"));
    let item = wait(h.store().inbox_item(1)).unwrap().unwrap();
    assert_eq!(item.status, anima::memory::InboxStatus::Pending);
    assert_eq!(item.attempts, 0, "no turn was begun");
}
