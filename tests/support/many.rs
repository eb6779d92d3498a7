//! The harness of the "many daemons, one soul" tests (`many_daemons`, `many_daemons_faults`;
//! `many_daemons_shared` takes its lock):
//! a load of top-level DMs, and the checks that each message is answered exactly once and, in
//! each conversation, in order.
//!
//! The fake Slack gives each envelope to one of the open Socket Mode connections (each daemon
//! holds two), drawn at random from a fixed seed, and sends an unacknowledged one again after
//! `REDELIVER`, to another connection, as Slack does. The fake model echoes each message, so a
//! reply names the message it answers: `echo: t<thread> m<message>`. Conversations are
//! top-level DMs (one DM channel, one conversation), sent in ts order within a conversation and
//! interleaved across them.
#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::daemon::Daemons;
use super::slack::{FakeSlack, Spread};
use super::FakeModel;

/// `[store] claim_lease_secs` in these tests: the smallest the config accepts (5 to 86400).
pub const LEASE: u64 = 5;
/// Slack sends an unacknowledged envelope again after about 3 s.
pub const REDELIVER: Duration = Duration::from_secs(3);
/// How long after a message is recorded its acknowledgement may reach the fake Slack (see
/// `problems`): the daemon's callback returns after the store's commit, under load later.
pub const ACK_SLACK: Duration = Duration::from_secs(1);
/// Envelopes go to any open connection, at random but the same each run: with a round robin,
/// 100 conversations over 4 connections would each go to one daemon only.
pub const SPREAD: Spread = Spread::Random(0x5eed_a11a);
/// One test at a time: each runs two to four daemons, and on a small machine two such tests
/// at once slow the daemons' acknowledgements past Slack's patience for no reason of theirs.
/// The three many-daemon suites share it: they run in one test process, next to each other.
pub static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Less logging than the harness's default (debug): a thousand turns are logged.
pub const ENV: &[(&str, &str)] = &[("ANIMA_LOG", "anima=info")];

pub fn channel(t: usize) -> String {
    format!("D{t:04}")
}

/// The `i`th message of a load over `threads` conversations: (thread, message).
pub fn nth(i: usize, threads: usize) -> (usize, usize) {
    (i % threads, i / threads)
}

/// Message `m` of conversation `t`: a top-level DM, its ts increasing with `m`.
pub fn dm(t: usize, m: usize) -> Value {
    let ts = format!("1700000000.{:06}", m + 1);
    json!({"type":"message","channel":channel(t),"user":format!("U{t:04}"),"text":format!("t{t} m{m}"),
           "ts":ts,"event_ts":ts,"channel_type":"im","client_msg_id":uuid::Uuid::new_v4().to_string()})
}

/// Sends the `i`th message of the load.
pub fn send(slack: &FakeSlack, i: usize, threads: usize) {
    let (t, m) = nth(i, threads);
    slack.send_event(dm(t, m), &format!("Ev{t}-{m}"), 0);
}

/// (thread, message) a reply answers, from `echo: t<thread> m<message>` in `D<thread>`.
pub fn answered(post: &super::slack::Post) -> Option<(usize, usize)> {
    let rest = post.text.strip_prefix("echo: t")?;
    let (t, m) = rest.split_once(" m")?;
    let (t, m) = (t.parse().ok()?, m.parse().ok()?);
    (post.channel == channel(t) && post.thread_ts.is_none()).then_some((t, m))
}

/// Everything wrong with the replies to the first `sent` messages of a load over `threads`
/// conversations: a message answered twice or more, one not answered, a conversation
/// answered out of order, a post that answers none of them. `marks` name moments (a kill, a
/// resume) that a doubled reply's times are shown against.
///
/// Out of order means a message answered after a later one of its conversation that was
/// recorded well after it: the daemon holding the conversation had both and took the later
/// one first. A message that reached the store only after the later one (its envelope waited
/// in a dead, paused or busy daemon's socket until Slack sent it again) may have come after
/// that one's turn had begun: no daemon can answer it first, so it is a late arrival, counted
/// and shown, not a fault. When each was recorded is known only from above (its first
/// acknowledgement, which a daemon sends once its callback returns): two recorded within
/// `ACK_SLACK` of each other may have been recorded in either order.
pub fn problems(
    slack: &FakeSlack,
    model: &FakeModel,
    threads: usize,
    sent: usize,
    marks: &[(&str, Instant)],
) -> Vec<String> {
    let mut out = Vec::new();
    let mut by_thread: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut times: HashMap<(usize, usize), Vec<Instant>> = HashMap::new();
    for p in slack.posts() {
        match answered(&p) {
            Some((t, m)) if t < threads && t + m * threads < sent => {
                by_thread.entry(t).or_default().push(m);
                times.entry((t, m)).or_default().push(p.at);
            }
            _ => out.push(format!(
                "a post that answers no message sent: {:?} in {} (thread_ts {:?})",
                p.text, p.channel, p.thread_ts
            )),
        }
    }
    let when = |at: &Instant| {
        marks
            .iter()
            .map(|(name, mark)| {
                if at >= mark {
                    format!("{name}+{:.1}s", at.duration_since(*mark).as_secs_f64())
                } else {
                    format!("{name}-{:.1}s", mark.duration_since(*at).as_secs_f64())
                }
            })
            .collect::<Vec<_>>()
            .join("/")
    };
    let mut doubled = Vec::new();
    let mut missing = Vec::new();
    for i in 0..sent {
        let (t, m) = nth(i, threads);
        match times.get(&(t, m)).map_or(0, Vec::len) {
            0 => missing.push(format!("t{t} m{m}")),
            1 => {}
            n => doubled.push(format!(
                "t{t} m{m} ×{n} (at {})",
                times[&(t, m)]
                    .iter()
                    .map(when)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }
    if !doubled.is_empty() {
        out.push(format!(
            "DUPLICATE: {} messages answered more than once: {}",
            doubled.len(),
            first(&doubled)
        ));
    }
    if !missing.is_empty() {
        out.push(format!(
            "LOST: {} of {sent} messages never answered: {}",
            missing.len(),
            first(&missing)
        ));
    }
    // When each message was first recorded, and when the model was first asked about each.
    let recorded = first_recorded(slack);
    let mut asked: HashMap<String, Instant> = HashMap::new();
    for (message, at) in model.asked() {
        asked.entry(message).or_insert(at);
    }
    let mut disordered = Vec::new();
    let mut late = Vec::new();
    for (t, ms) in &by_thread {
        // The order of first replies: a doubled one is counted above, not here.
        let mut seen = Vec::new();
        for m in ms {
            if !seen.contains(m) {
                seen.push(*m);
            }
        }
        for (p, j) in seen.iter().enumerate() {
            for k in seen[p + 1..].iter().filter(|k| *k < j) {
                let later = recorded.get(&format!("Ev{t}-{j}"));
                let known = recorded.get(&format!("Ev{t}-{k}"));
                let began = asked.get(&format!("t{t} m{j}"));
                match (later, known, began) {
                    (Some(later), Some(known), Some(began)) if *known + ACK_SLACK > *later => late
                        .push(format!(
                        "t{t} m{k} after m{j} (recorded {:+.2} s from it, {:+.2} s from its turn)",
                        if known > later {
                            known.duration_since(*later).as_secs_f64()
                        } else {
                            -later.duration_since(*known).as_secs_f64()
                        },
                        if known > began {
                            known.duration_since(*began).as_secs_f64()
                        } else {
                            -began.duration_since(*known).as_secs_f64()
                        }
                    )),
                    (Some(later), Some(known), _) => disordered.push(format!(
                        "t{t}: {seen:?} (m{k} after m{j}, recorded {:.2} s before it)",
                        later.duration_since(*known).as_secs_f64()
                    )),
                    _ => disordered.push(format!("t{t}: {seen:?} (m{k} after m{j})")),
                }
            }
        }
    }
    if !late.is_empty() {
        eprintln!(
            "{} late arrivals answered after a later message: {}",
            late.len(),
            first(&late)
        );
    }
    if !disordered.is_empty() {
        out.push(format!(
            "OUT OF ORDER: {} conversations answered out of order (message numbers in reply order): {}",
            disordered.len(),
            first(&disordered)
        ));
    }
    out
}

/// When each event was first recorded: the first acknowledgement of any envelope that carried
/// it, by event id.
pub fn first_recorded(slack: &FakeSlack) -> HashMap<String, Instant> {
    let event_of: HashMap<String, String> = slack
        .deliveries()
        .into_iter()
        .map(|d| (d.envelope_id, d.event_id))
        .collect();
    let mut recorded: HashMap<String, Instant> = HashMap::new();
    for (_, envelope, at) in slack.acks_with_times() {
        if let Some(event) = event_of.get(&envelope) {
            let first = recorded.entry(event.clone()).or_insert(at);
            *first = (*first).min(at);
        }
    }
    recorded
}

/// The first few of a list, and how many more.
pub fn first(items: &[String]) -> String {
    let shown = items
        .iter()
        .take(12)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    match items.len() {
        n if n > 12 => format!("{shown}; … {} more", n - 12),
        _ => shown,
    }
}

/// How many of the first `sent` messages have a reply.
pub fn answered_count(slack: &FakeSlack, threads: usize, sent: usize) -> usize {
    let mut seen = std::collections::HashSet::new();
    for p in slack.posts() {
        if let Some((t, m)) = answered(&p) {
            if t < threads && t + m * threads < sent {
                seen.insert((t, m));
            }
        }
    }
    seen.len()
}

/// Waits until each of the first `sent` messages has a reply or `secs` pass; true if they all
/// have one.
pub fn wait_answered(slack: &FakeSlack, threads: usize, sent: usize, secs: u64) -> bool {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        if answered_count(slack, threads, sent) >= sent {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// Waits until `cond` holds, or fails after `secs` naming `what` (without the thousand posts
/// `FakeSlack::wait` would show).
pub fn until(slack: &FakeSlack, secs: u64, what: &str, mut cond: impl FnMut(&FakeSlack) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !cond(slack) {
        assert!(
            Instant::now() < deadline,
            "timed out after {secs} s waiting for {what}; {} posts so far",
            slack.posts().len()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits until no post has come for `quiet` (at most 20 s): a reply doubled late has had its
/// chance to come.
pub fn settle(slack: &FakeSlack, quiet: Duration) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut last = (slack.posts().len(), Instant::now());
    while Instant::now() < deadline {
        let n = slack.posts().len();
        if n != last.0 {
            last = (n, Instant::now());
        } else if last.1.elapsed() >= quiet {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The warnings and errors in the daemons' logs, the last few of each.
pub fn troubles(daemons: &Daemons) -> String {
    daemons
        .list
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let log = d.log();
            let lines: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("WARN") || l.contains("ERROR"))
                .collect();
            let from = lines.len().saturating_sub(15);
            format!(
                "--- daemon {i} (pid {}): {} warnings/errors, the last:\n{}",
                d.pid(),
                lines.len(),
                lines[from..].join("\n")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Fails with every problem found, the acknowledgements per daemon and the logs' troubles.
pub fn verdict(
    slack: &FakeSlack,
    daemons: &Daemons,
    mut found: Vec<String>,
    what: &str,
    conns: &[Vec<usize>],
) {
    if found.is_empty() {
        return;
    }
    let acks: Vec<String> = conns
        .iter()
        .enumerate()
        .map(|(i, c)| format!("daemon {i}: {}", slack.acks_on(c).len()))
        .collect();
    let mut delays = slack.ack_delays();
    delays.sort();
    let at = |q: f64| {
        delays
            .get(((delays.len() as f64 * q) as usize).min(delays.len().saturating_sub(1)))
            .map_or(0.0, Duration::as_secs_f64)
    };
    found.push(format!(
        "acknowledged envelopes by daemon: {}; deliveries {} (retries {}), given up by Slack {}, ack delay p50 {:.2} s p99 {:.2} s max {:.2} s; posts {}",
        acks.join(", "),
        slack.deliveries().len(),
        slack.deliveries().iter().filter(|d| d.attempt > 0).count(),
        slack.given_up().len(),
        at(0.5),
        at(0.99),
        at(1.0),
        slack.posts().len()
    ));
    panic!("{what}:\n  {}\n{}", found.join("\n  "), troubles(daemons));
}

/// Each daemon's Socket Mode connections now, added to what was known of them.
pub fn note_connections(slack: &FakeSlack, daemons: &Daemons, conns: &mut Vec<Vec<usize>>) {
    conns.resize(daemons.list.len(), Vec::new());
    for (d, known) in daemons.list.iter().zip(conns.iter_mut()) {
        for c in d.slack_connections(slack) {
            if !known.contains(&c) {
                known.push(c);
            }
        }
    }
}

/// Every daemon acknowledged some envelopes: otherwise one did all the work and the test
/// proves nothing about several.
pub fn each_acked(slack: &FakeSlack, conns: &[Vec<usize>]) -> Vec<String> {
    conns
        .iter()
        .enumerate()
        .filter(|(_, c)| slack.acks_on(c).is_empty())
        .map(|(i, c)| {
            format!("HARNESS: daemon {i} acknowledged no envelope (its connections {c:?}): the test proves nothing")
        })
        .collect()
}

/// The end of every load: waits up to `secs` for the `total` messages of `threads`
/// conversations (`load`) to be answered, lets the
/// daemons settle, and returns what the checks find (each daemon acknowledged some envelopes;
/// every message answered once and in order, `marks` naming moments for the report), or, when
/// they find nothing, that not every message was answered within `secs` s `after` (" of the
/// kill", say).
#[allow(clippy::too_many_arguments)]
pub fn checked_answers(
    slack: &FakeSlack,
    model: &FakeModel,
    daemons: &Daemons,
    conns: &mut Vec<Vec<usize>>,
    (threads, total): (usize, usize),
    secs: u64,
    after: &str,
    marks: &[(&str, Instant)],
) -> Vec<String> {
    let all = wait_answered(slack, threads, total, secs);
    settle(slack, Duration::from_secs(1));
    note_connections(slack, daemons, conns);
    let mut found = each_acked(slack, conns);
    found.extend(problems(slack, model, threads, total, marks));
    if !all && found.is_empty() {
        found.push(format!("not every message answered within {secs} s{after}"));
    }
    found
}
