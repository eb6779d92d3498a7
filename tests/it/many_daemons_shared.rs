//! Many daemons, one soul, one workspace: what the daemons of a soul share beyond its
//! conversations. The stream budget is the workspace's, so three daemons streaming at once
//! never make more stream calls than Slack's tier (the fake Slack enforces it and answers 429
//! past it); user models are exported to git by one daemon at a time (the leader), so one
//! repository receives every version, once and in order, whichever daemon's turn made it.
//!
//! PostgreSQL only: each test says it is skipped and passes when `ANIMA_TEST_POSTGRES_URL` is
//! not set.

use crate::support;

use std::time::Duration;

use serde_json::{json, Value};
use support::daemon::{shared_home, Daemon, Daemons};
use support::many::one_at_a_time;
use support::slack::{FakeSlack, Spread};
use support::*;

const LEASE: u64 = 5;
const SPREAD: Spread = Spread::Random(0x5eed_b0d9);
const ENV: &[(&str, &str)] = &[("ANIMA_LOG", "anima=info")];

fn mention(channel: &str, ts: &str, text: &str) -> Value {
    json!({"type":"app_mention","user":"U1","text":format!("<@{}> {text}", support::slack::BOT_USER),"ts":ts,"channel":channel,"event_ts":ts})
}

/// Turns `[llm] stream` on in a home made by `shared_home`.
fn streaming(home: &Home) {
    let cfg = std::fs::read_to_string(home.config()).unwrap();
    let on = cfg.replacen("max_retries = 2\n", "max_retries = 2\nstream = true\n", 1);
    assert_ne!(on, cfg, "the [llm] table: {cfg}");
    std::fs::write(home.config(), on).unwrap();
}

/// Three daemons streaming replies into many threads at once: together they stay within the
/// workspace's tier for each stream method (no 429 from the fake Slack, which counts any 60
/// seconds), and every message is answered once. With a budget per daemon, three would start
/// up to three bursts at once and go past the tier.
#[test]
fn three_daemons_stay_within_the_workspace_stream_budget_together() {
    let _one = one_at_a_time();
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.slow_echo(1500);
    slack.enforce_stream_tiers();
    slack.spread(SPREAD);
    let Some(home) = shared_home(&model, &slack, LEASE, "max_concurrent_turns = 2") else {
        return;
    };
    streaming(&home);
    let daemons = Daemons::start(&home, &slack, 3, ENV);
    let threads = 48;
    for i in 0..threads {
        slack.send_event(
            mention(
                &format!("C{i}"),
                &format!("{}.000001", 100 + i),
                &format!("message {i}"),
            ),
            &format!("E{i}"),
            0,
        );
    }
    let finished = |s: &FakeSlack| s.posts().into_iter().filter(|p| !p.streaming).count();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while finished(&slack) < threads {
        assert!(
            std::time::Instant::now() < deadline,
            "{} of {threads} answered\n{}",
            finished(&slack),
            daemons.logs()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    std::thread::sleep(Duration::from_millis(500));
    let posts = slack.posts();
    for i in 0..threads {
        let here: Vec<_> = posts
            .iter()
            .filter(|p| p.channel == format!("C{i}"))
            .collect();
        assert_eq!(here.len(), 1, "C{i}: {here:#?}");
        assert_eq!(here[0].text, format!("echo: message {i}"));
    }
    assert_eq!(
        slack.rate_limited(),
        0,
        "a stream call went past the workspace's tier\n{}",
        daemons.logs()
    );
    let starts = slack.calls("chat.startStream").len();
    assert!(
        (5..=20).contains(&starts),
        "one budget for the three: {starts} streams begun in well under a minute"
    );
    // Each daemon streamed some (the budget is shared, not one daemon's).
    assert_eq!(slack.calls("chat.postMessage").len() + starts, threads);
}

/// Each message of one person changes their model (the fake model says so with a note naming
/// the message). Two daemons on two homes (two machines' repositories) and one database: the
/// leader's repository holds every version, once and in the store's order, whichever daemon
/// made it; the other's holds none.
#[test]
fn user_models_reach_the_leaders_repository_once_each_and_in_order() {
    let _one = one_at_a_time();
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.respond_with(|turn| {
        let m = current_message(turn);
        format!(
            "<external_dialogue>noted {m}</external_dialogue><user_model_check>true</user_model_check><user_model_update># Ada\n\nLast said: {m}</user_model_update><model_change_note>after {m}</model_change_note>"
        )
    });
    slack.spread(SPREAD);
    let more = "\n[processes]\nproactive_scan_secs = 1\n";
    let Some(leader_home) = shared_home(&model, &slack, LEASE, "") else {
        return;
    };
    let other_home = shared_home(&model, &slack, LEASE, "").unwrap();
    for h in [&leader_home, &other_home] {
        let cfg = std::fs::read_to_string(h.config()).unwrap();
        std::fs::write(h.config(), format!("{cfg}{more}")).unwrap();
    }
    let database = leader_home.database().unwrap().to_string();
    let mut env = ENV.to_vec();
    env.push(("ANIMA_DATABASE_URL", &database));
    let leader = Daemon::start_env(&leader_home, &env);
    leader.wait_slack_connections(&slack, 2, 20);
    let other = Daemon::start_env(&other_home, &env);
    other.wait_slack_connections(&slack, 2, 20);
    let logs = || {
        format!(
            "--- leader ---\n{}\n--- other ---\n{}",
            leader.log(),
            other.log()
        )
    };
    let total = 12;
    for i in 0..total {
        // One thread each, so the turns spread over both daemons.
        slack.send_event(
            json!({"type":"message","channel":format!("D{i}"),"user":"U1","text":format!("m{i:02}"),
                   "ts":format!("1700000000.{i:06}"),"event_ts":format!("1700000000.{i:06}"),"channel_type":"im"}),
            &format!("Ev{i}"),
            0,
        );
        std::thread::sleep(Duration::from_millis(150));
    }
    slack.wait(60, "every answer", |s| s.posts().len() >= total);
    let by_other = other.log().matches("turn done").count();
    assert!(by_other > 0, "the other daemon answered some: {}", logs());

    // The store's history, newest first: one line per version, ending with its note.
    let log = leader_home.run_env(
        &["users", "log", "U1"],
        "",
        &[("ANIMA_DATABASE_URL", &database)],
    );
    assert_eq!(log.status, 0, "{}", log.stderr);
    let mut notes: Vec<String> = log
        .stdout
        .lines()
        .filter_map(|l| l.rsplit_once("after ").map(|(_, n)| format!("after {n}")))
        .collect();
    notes.reverse();
    assert_eq!(notes.len(), total, "{}", log.stdout);

    // The leader's repository catches up with the other's turns at its next scan.
    let committed = |home: &Home| -> Vec<String> {
        let Ok(repo) = git2::Repository::open(home.data().join("memory")) else {
            return Vec::new();
        };
        let Ok(mut walk) = repo.revwalk() else {
            return Vec::new();
        };
        if walk.push_head().is_err() {
            return Vec::new();
        }
        let mut messages: Vec<String> = walk
            .filter_map(|id| repo.find_commit(id.ok()?).ok())
            .map(|c| c.message().unwrap_or("").trim().to_string())
            .collect();
        messages.reverse();
        messages
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while committed(&leader_home).len() < total && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        committed(&leader_home),
        notes,
        "every version once, in order\n{}",
        logs()
    );
    assert!(
        committed(&other_home).is_empty(),
        "the other daemon exported: {:?}",
        committed(&other_home)
    );
}
