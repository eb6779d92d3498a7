//! How soon a streamed reply shows in Slack: `cargo bench --bench stream`.
//!
//! The real (release) binary against the fake Slack (Socket Mode) and a fake model that sends
//! its first dialogue token 300 ms after the request and then 50 tokens a second. For each
//! message: the time from that first token leaving the model to the request carrying it
//! (chat.startStream) reaching the fake Slack. Messages are paced within the workspace's
//! stream budget (5 starts at once, then one every 4 s), and the stream calls per minute are
//! counted against Slack's tiers.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use serde_json::json;
use support::daemon::Daemon;
use support::slack::{self, FakeSlack};
use support::{FakeModel, Home, Script};

const MESSAGES: usize = 30;
const TOKENS: usize = 40;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

fn main() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let home = Home::new(
        "anthropic",
        &model.url(),
        &format!(
            "stream = true\n\n[slack]\nmode = \"socket\"\napi_base_url = \"{}\"\n\n[http]\nlisten = \"127.0.0.1:0\"\n",
            slack.api_url()
        ),
    );
    let _d = Daemon::start_env(&home, &[("ANIMA_LOG", "anima=warn,anima::daemon=info")]);
    slack.wait(20, "a Socket Mode connection", |s| s.sockets() > 0);

    let run = Instant::now();
    for i in 0..MESSAGES {
        let mut pieces = vec![format!("<external_dialogue verb=\"said\">Token{i}")];
        pieces.extend((1..TOKENS).map(|t| format!(" word{t}")));
        pieces.push("</external_dialogue>".to_string());
        model.push(Script::Paced {
            pieces,
            first_ms: 300,
            every_ms: 20,
        });
        let ts = format!("1700000{i:03}.000100");
        let ev = json!({"type":"app_mention","user":"U061F7AUR","text":format!("<@{}> question {i}", slack::BOT_USER),
                        "ts":ts,"channel":format!("C{i:03}"),"event_ts":ts});
        slack.send_event(ev, &format!("E{i}"), 0);
        slack.wait(30, "the reply", |s| {
            s.posts().iter().filter(|p| !p.streaming).count() > i
        });
        // Within the budget: the first few a second apart, then one every 4 s.
        std::thread::sleep(Duration::from_millis(if i < 4 { 1000 } else { 4100 }));
    }
    let span = run.elapsed();

    let firsts = model.first_pieces();
    let starts = slack.timed_calls("chat.startStream");
    let mut shown: Vec<Duration> = firsts
        .iter()
        .zip(&starts)
        .map(|(token, (at, _))| at.saturating_duration_since(*token))
        .collect();
    shown.sort();
    let whole = slack.calls("chat.postMessage").len();
    let per_minute = |method: &str| slack.calls(method).len() as f64 / span.as_secs_f64() * 60.0;

    println!(
        "anima run, {MESSAGES} streamed replies, first dialogue token at 300 ms, then 50 tokens/s"
    );
    println!(
        "replies streamed          {:>8}   ({whole} went whole)",
        starts.len()
    );
    println!(
        "first token → Slack p50   {:>8.1} ms",
        percentile(&shown, 0.50).as_secs_f64() * 1e3
    );
    println!(
        "first token → Slack p99   {:>8.1} ms",
        percentile(&shown, 0.99).as_secs_f64() * 1e3
    );
    println!(
        "first token → Slack max   {:>8.1} ms",
        shown.last().unwrap().as_secs_f64() * 1e3
    );
    println!(
        "stream calls per minute   start {:.1} (budget 20), append {:.1} (budget 100), stop {:.1} (budget 20)",
        per_minute("chat.startStream"),
        per_minute("chat.appendStream"),
        per_minute("chat.stopStream")
    );
}
