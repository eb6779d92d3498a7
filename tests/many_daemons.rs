//! Many daemons, one soul: several `anima run` on one PostgreSQL database answer every Slack
//! message exactly once and, in each conversation, in order; a peer's SIGKILL, a SIGSTOP
//! longer than the claim lease, and a rolling restart change nothing of that, and a rolling
//! restart never shuts the soul down.
//!
//! The fake Slack gives each envelope to one of the open Socket Mode connections (each daemon
//! holds two), drawn at random from a fixed seed, and sends an unacknowledged one again after `REDELIVER`, to another
//! connection, as Slack does. The fake model echoes each message, so a reply names the
//! message it answers: `echo: t<thread> m<message>`. Conversations are top-level DMs (one DM
//! channel, one conversation), `THREADS` of them with `MESSAGES` each, sent in ts order within
//! a conversation and interleaved across them.
//!
//! PostgreSQL only: each test says it is skipped and passes when `ANIMA_TEST_POSTGRES_URL` is
//! not set.

mod support;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::daemon::{shared_home, try_http, Daemons};
use support::slack::{FakeSlack, Spread};
use support::*;

/// `[store] claim_lease_secs` in these tests: the smallest the config accepts (5 to 86400).
const LEASE: u64 = 5;
/// Slack sends an unacknowledged envelope again after about 3 s.
const REDELIVER: Duration = Duration::from_secs(3);
/// How long after a message is recorded its acknowledgement may reach the fake Slack (see
/// `problems`): the daemon's callback returns after the store's commit, under load later.
const ACK_SLACK: Duration = Duration::from_secs(1);
/// Envelopes go to any open connection, at random but the same each run: with a round robin,
/// 100 conversations over 4 connections would each go to one daemon only.
const SPREAD: Spread = Spread::Random(0x5eed_a11a);
/// One test at a time: each runs two to four daemons, and on a small machine two such tests
/// at once slow the daemons' acknowledgements past Slack's patience for no reason of theirs.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Less logging than the harness's default (debug): a thousand turns are logged.
const ENV: &[(&str, &str)] = &[("ANIMA_LOG", "anima=info")];

fn channel(t: usize) -> String {
    format!("D{t:04}")
}

/// The `i`th message of a load over `threads` conversations: (thread, message).
fn nth(i: usize, threads: usize) -> (usize, usize) {
    (i % threads, i / threads)
}

/// Message `m` of conversation `t`: a top-level DM, its ts increasing with `m`.
fn dm(t: usize, m: usize) -> Value {
    let ts = format!("1700000000.{:06}", m + 1);
    json!({"type":"message","channel":channel(t),"user":format!("U{t:04}"),"text":format!("t{t} m{m}"),
           "ts":ts,"event_ts":ts,"channel_type":"im","client_msg_id":uuid::Uuid::new_v4().to_string()})
}

/// Sends the `i`th message of the load.
fn send(slack: &FakeSlack, i: usize, threads: usize) {
    let (t, m) = nth(i, threads);
    slack.send_event(dm(t, m), &format!("Ev{t}-{m}"), 0);
}

/// (thread, message) a reply answers, from `echo: t<thread> m<message>` in `D<thread>`.
fn answered(post: &support::slack::Post) -> Option<(usize, usize)> {
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
fn problems(
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
    // When each message was first recorded (its first acknowledged envelope), and when the
    // model was first asked about each.
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

/// The first few of a list, and how many more.
fn first(items: &[String]) -> String {
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
fn answered_count(slack: &FakeSlack, threads: usize, sent: usize) -> usize {
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
fn wait_answered(slack: &FakeSlack, threads: usize, sent: usize, secs: u64) -> bool {
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
fn until(slack: &FakeSlack, secs: u64, what: &str, mut cond: impl FnMut(&FakeSlack) -> bool) {
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
fn settle(slack: &FakeSlack, quiet: Duration) {
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
fn troubles(daemons: &Daemons) -> String {
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
fn verdict(
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
fn note_connections(slack: &FakeSlack, daemons: &Daemons, conns: &mut Vec<Vec<usize>>) {
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
fn each_acked(slack: &FakeSlack, conns: &[Vec<usize>]) -> Vec<String> {
    conns
        .iter()
        .enumerate()
        .filter(|(_, c)| slack.acks_on(c).is_empty())
        .map(|(i, c)| {
            format!("HARNESS: daemon {i} acknowledged no envelope (its connections {c:?}): the test proves nothing")
        })
        .collect()
}

const THREADS: usize = 100;
const MESSAGES: usize = 10;

/// `n` daemons, `THREADS` × `MESSAGES` messages at once: each answered once, in order.
fn daemons_answer_a_burst_once_each_in_order(n: usize) {
    let _one = one_at_a_time();
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    slack.redeliver_unacked_after(REDELIVER);
    slack.spread(SPREAD);
    let Some(home) = shared_home(&model, &slack, LEASE, "") else {
        return;
    };
    let daemons = Daemons::start(&home, &slack, n, ENV);
    let mut conns = Vec::new();
    note_connections(&slack, &daemons, &mut conns);
    let total = THREADS * MESSAGES;
    let sent = Instant::now();
    for i in 0..total {
        send(&slack, i, THREADS);
    }
    let all = wait_answered(&slack, THREADS, total, 120);
    settle(&slack, Duration::from_secs(1));
    note_connections(&slack, &daemons, &mut conns);
    let mut found = each_acked(&slack, &conns);
    found.extend(problems(&slack, &model, THREADS, total, &[("sent", sent)]));
    if !all && found.is_empty() {
        found.push("not every message answered within 120 s".into());
    }
    verdict(
        &slack,
        &daemons,
        found,
        &format!("{n} daemons, {THREADS} conversations × {MESSAGES} messages"),
        &conns,
    );
    home.assert_backend_kept();
}

/// The control: one daemon (today's design) passes the same checks under the same load,
/// Slack's redelivery included, so a failure with several is theirs, not the harness's.
#[test]
fn one_daemon_answers_every_message_once_and_in_order() {
    daemons_answer_a_burst_once_each_in_order(1);
}

#[test]
fn two_daemons_answer_every_message_once_and_in_order() {
    daemons_answer_a_burst_once_each_in_order(2);
}

#[test]
fn three_daemons_answer_every_message_once_and_in_order() {
    daemons_answer_a_burst_once_each_in_order(3);
}

#[test]
fn a_daemon_killed_mid_load_leaves_every_message_answered_once_in_order_by_the_survivor() {
    let _one = one_at_a_time();
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    slack.redeliver_unacked_after(REDELIVER);
    slack.spread(SPREAD);
    let Some(home) = shared_home(&model, &slack, LEASE, "") else {
        return;
    };
    let mut daemons = Daemons::start(&home, &slack, 2, ENV);
    let mut conns = Vec::new();
    note_connections(&slack, &daemons, &mut conns);
    let total = THREADS * MESSAGES;
    for i in 0..total {
        send(&slack, i, THREADS);
    }
    until(&slack, 60, "the first hundred replies", |s| {
        answered_count(s, THREADS, total) >= 100
    });
    note_connections(&slack, &daemons, &mut conns);
    daemons[1].kill9();
    let killed = Instant::now();
    let left = total - answered_count(&slack, THREADS, total);
    assert!(
        left >= total / 4,
        "HARNESS: only {left} messages were left when daemon 1 was killed: the kill proves little; slow the model or send more"
    );
    // The survivor needs the dead one's leases to pass, and then the time to answer the rest.
    let all = wait_answered(&slack, THREADS, total, LEASE + 90);
    settle(&slack, Duration::from_secs(1));
    let mut found = each_acked(&slack, &conns);
    found.extend(problems(
        &slack,
        &model,
        THREADS,
        total,
        &[("kill", killed)],
    ));
    if !all && found.is_empty() {
        found.push(format!(
            "not every message answered within {} s of the kill",
            LEASE + 90
        ));
    }
    verdict(
        &slack,
        &daemons,
        found,
        &format!("daemon 1 SIGKILLed with {left} of {total} messages unanswered"),
        &conns,
    );
}

#[test]
fn a_daemon_paused_past_its_lease_posts_nothing_for_the_conversations_taken_from_it() {
    let _one = one_at_a_time();
    const THREADS: usize = 20;
    const MESSAGES: usize = 5;
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    // Slow answers: when daemon 1 is paused, it is in the middle of turns (their answers reach
    // its sockets while it sleeps) and holds conversations with messages still to answer.
    model.slow_echo(500);
    slack.redeliver_unacked_after(REDELIVER);
    slack.spread(SPREAD);
    let Some(home) = shared_home(&model, &slack, LEASE, "") else {
        return;
    };
    let daemons = Daemons::start(&home, &slack, 2, ENV);
    let mut conns = Vec::new();
    note_connections(&slack, &daemons, &mut conns);
    let total = THREADS * MESSAGES;
    for i in 0..total {
        send(&slack, i, THREADS);
    }
    let paused_ones = conns[1].clone();
    until(
        &slack,
        30,
        "daemon 1 to acknowledge a tenth of the messages",
        |s| s.acks_on(&paused_ones).len() >= total / 10,
    );
    daemons[1].pause();
    let paused = Instant::now();
    // The messages daemon 1 took in and had not answered when it paused: what it holds.
    let taken: std::collections::HashSet<String> =
        slack.acks_on(&paused_ones).into_iter().collect();
    let held: Vec<String> = slack
        .deliveries()
        .into_iter()
        .filter(|d| taken.contains(&d.envelope_id))
        .map(|d| d.event_id)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|e| {
            let (t, m) = e.trim_start_matches("Ev").split_once('-').unwrap();
            !slack.posts().iter().any(|p| {
                p.channel == channel(t.parse().unwrap()) && p.text == format!("echo: t{t} m{m}")
            })
        })
        .collect();
    assert!(
        !held.is_empty(),
        "HARNESS: daemon 1 held nothing unanswered when it paused: the pause proves nothing"
    );
    // While daemon 1 sleeps, the other answers everything the store has, its conversations
    // too, once their leases have passed. A message whose every delivery went to daemon 1's
    // connections (Slack retries where it can; once the fake gives up on an event it is
    // daemon 1's alone) is in no store until daemon 1 wakes: it is answered after, as the
    // check after the wake requires.
    let within = LEASE + 25;
    // Settled: every message is answered but those only daemon 1 ever received, on which the
    // fake has given up (no retry of theirs can reach the other daemon any more).
    let settled = |slack: &FakeSlack| -> (bool, usize) {
        let answered: std::collections::HashSet<(usize, usize)> =
            slack.posts().iter().filter_map(answered).collect();
        let given_up: std::collections::HashSet<String> = slack.given_up().into_iter().collect();
        let mut only_paused: HashMap<String, bool> = HashMap::new();
        for d in slack.deliveries() {
            let alone = only_paused.entry(d.event_id).or_insert(true);
            *alone &= paused_ones.contains(&d.connection);
        }
        let mut unreachable = 0;
        for i in 0..total {
            let (t, m) = nth(i, THREADS);
            if answered.contains(&(t, m)) {
                continue;
            }
            let event = format!("Ev{t}-{m}");
            if given_up.contains(&event) && only_paused.get(&event) == Some(&true) {
                unreachable += 1;
            } else {
                return (false, 0);
            }
        }
        (true, unreachable)
    };
    let deadline = Instant::now() + Duration::from_secs(within);
    let (mut all, mut unreachable) = settled(&slack);
    while !all && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        (all, unreachable) = settled(&slack);
    }
    if unreachable > 0 {
        eprintln!(
            "{unreachable} messages reached only daemon 1's connections before Slack gave up: answered after it wakes"
        );
    }
    let mut found = Vec::new();
    if !all {
        // What the database's sessions were doing meanwhile: a paused daemon's open
        // transaction holds its row locks, and whoever needs those rows waits.
        let sessions = support::postgres::query(
            home.database().unwrap(),
            "SELECT state || ' / ' || coalesce(wait_event_type || ':' || wait_event, 'not waiting') || ' × ' || count(*)
             FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()
             GROUP BY state, wait_event_type, wait_event ORDER BY 1",
        );
        let idle_in_transaction = support::postgres::query(
            home.database().unwrap(),
            "SELECT left(regexp_replace(query, '\\s+', ' ', 'g'), 160) FROM pg_stat_activity
             WHERE datname = current_database() AND state = 'idle in transaction'",
        );
        found.push(format!(
            "TAKEOVER: while daemon 1 was paused ({} s), {} of {total} messages were not answered (daemon 1 held {} unanswered: {}); the database's sessions then: {sessions:?}",
            paused.elapsed().as_secs(),
            total - answered_count(&slack, THREADS, total),
            held.len(),
            first(&held)
        ));
        found.push(format!(
            "the last statement of each session idle in a transaction: {idle_in_transaction:?}"
        ));
    }
    // Paused for longer than the lease, whatever the other did meanwhile.
    let longer = Duration::from_secs(LEASE + 1);
    if paused.elapsed() < longer {
        std::thread::sleep(longer - paused.elapsed());
    }
    let before_wake = slack.posts().len();
    daemons[1].resume();
    let resumed = Instant::now();
    // Daemon 1 is running again: it answers HTTP.
    let alive = Instant::now() + Duration::from_secs(10);
    while try_http("GET", &daemons[1].url("/healthz"), &[], "").is_err() {
        assert!(
            Instant::now() < alive,
            "daemon 1 does not answer HTTP after SIGCONT:\n{}",
            daemons[1].log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // What it had in flight when it paused would be posted now, or once it learns its leases
    // are gone: give it a lease and more.
    settle(&slack, Duration::from_secs(LEASE + 2));
    let after_wake = slack.posts().len() - before_wake;
    found.extend(problems(
        &slack,
        &model,
        THREADS,
        total,
        &[("pause", paused), ("resume", resumed)],
    ));
    note_connections(&slack, &daemons, &mut conns);
    verdict(
        &slack,
        &daemons,
        found,
        &format!(
            "daemon 1 paused {:.1} s (lease {LEASE} s) holding {} unanswered messages; {after_wake} posts after it woke",
            resumed.duration_since(paused).as_secs_f64(),
            held.len()
        ),
        &conns,
    );
}

#[test]
fn a_rolling_restart_loses_nothing_doubles_nothing_and_never_shuts_the_soul_down() {
    let _one = one_at_a_time();
    const THREADS: usize = 20;
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    slack.redeliver_unacked_after(REDELIVER);
    slack.spread(SPREAD);
    let Some(home) = shared_home(&model, &slack, LEASE, "") else {
        return;
    };
    let mut daemons = Daemons::start(&home, &slack, 2, ENV);
    let mut conns = Vec::new();
    note_connections(&slack, &daemons, &mut conns);
    let began = Instant::now();
    // A steady trickle: a message every 25 ms, round the conversations.
    let (stop, sent) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicUsize::new(0)),
    );
    /// Ends the trickle however the test ends.
    struct Stop(Arc<AtomicBool>);
    impl Drop for Stop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }
    let _stop = Stop(stop.clone());
    let trickle = {
        let (slack, stop, sent) = (slack.clone(), stop.clone(), sent.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::SeqCst) {
                let i = sent.load(Ordering::SeqCst);
                send(&slack, i, THREADS);
                sent.store(i + 1, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(25));
            }
        })
    };
    let more_replies = |n: usize| {
        let from = slack.posts().len();
        until(&slack, 30, "more replies", |s| s.posts().len() >= from + n);
    };
    more_replies(20);
    // A: stopped, then started again as A'.
    let a_stopped = Instant::now();
    let code = daemons[0].terminate();
    assert_eq!(code, 0, "daemon A's exit:\n{}", daemons[0].log());
    let a2 = daemons.add(&home, &slack, ENV);
    note_connections(&slack, &daemons, &mut conns);
    more_replies(20);
    // B: stopped, then started again as B'.
    let b_stopped = Instant::now();
    let code = daemons[1].terminate();
    assert_eq!(code, 0, "daemon B's exit:\n{}", daemons[1].log());
    let b2 = daemons.add(&home, &slack, ENV);
    note_connections(&slack, &daemons, &mut conns);
    let b2_conns = conns[b2].clone();
    until(&slack, 30, "B' to acknowledge some messages", |s| {
        s.acks_on(&b2_conns).len() >= 5
    });
    more_replies(20);
    stop.store(true, Ordering::SeqCst);
    trickle.join().unwrap();
    let total = sent.load(Ordering::SeqCst);
    let all = wait_answered(&slack, THREADS, total, LEASE + 30);
    settle(&slack, Duration::from_secs(1));
    note_connections(&slack, &daemons, &mut conns);
    let mut found = each_acked(&slack, &conns);
    found.extend(problems(
        &slack,
        &model,
        THREADS,
        total,
        &[
            ("start", began),
            ("A stop", a_stopped),
            ("B stop", b_stopped),
        ],
    ));
    if !all && found.is_empty() {
        found.push(format!(
            "not every message answered within {} s",
            LEASE + 30
        ));
    }
    // One soul, never shut down: one wakeup, at the first start; no shutdown protocol.
    let calls: Vec<String> = model.state_requests().into_iter().map(|(k, _)| k).collect();
    let wakeups = calls.iter().filter(|k| *k == "wakeup").count();
    if wakeups != 1 {
        found.push(format!(
            "WAKEUP: the soul was woken {wakeups} times (state calls: {calls:?}), not once"
        ));
    }
    if calls.iter().any(|k| k == "shutdown") {
        found.push(format!(
            "SHUTDOWN: the soul was asked to consent to a shutdown (state calls: {calls:?})"
        ));
    }
    let moves = wait(home.store().state_moves(100)).unwrap();
    let path: Vec<String> = moves
        .iter()
        .rev()
        .map(|m| format!("{} ({})", m.to, m.cause))
        .collect();
    let into = |s: &str| moves.iter().filter(|m| m.to == s).count();
    if into("SHUTDOWN") > 0 || into("WAKEUP") != 1 {
        found.push(format!(
            "STATES: {} moves to SHUTDOWN, {} to WAKEUP; the moves, oldest first: {path:?}",
            into("SHUTDOWN"),
            into("WAKEUP")
        ));
    }
    let now = wait(home.store().cognitive_state()).unwrap().state;
    if now != "WORK" {
        found.push(format!("STATES: the soul is in {now}, not WORK"));
    }
    verdict(
        &slack,
        &daemons,
        found,
        &format!(
            "a rolling restart (A → A' = daemon {a2}, B → B' = daemon {b2}) under {total} messages"
        ),
        &conns,
    );
    // The restarted ones are the ones still running.
    for d in [a2, b2] {
        assert!(daemons[d].child_alive(), "{}", daemons[d].log());
    }
}

/// The scheduled work is the soul's, not each daemon's: two daemons scanning for quiet threads
/// make one follow-up, by the one that leads.
#[test]
fn two_daemons_follow_a_quiet_thread_up_once() {
    let _one = one_at_a_time();
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("I'll look into the loader."));
    let extra = "\n[processes]\nproactive_idle_minutes = 60\nproactive_scan_secs = 1\n";
    let Some(home) = shared_home(&model, &slack, LEASE, extra) else {
        return;
    };
    // The shipped processes, `proactive` among them.
    let processes = home.dir.path().join("processes");
    std::fs::create_dir_all(&processes).unwrap();
    for f in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/processes")).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), processes.join(f.file_name())).unwrap();
    }
    let mut first = Daemons::start(&home, &slack, 1, ENV);
    slack.send_event(
        json!({"type":"app_mention","user":"U061F7AUR",
               "text":format!("<@{}> can you check the loader?", support::slack::BOT_USER),
               "ts":"8.000001","channel":"C1","event_ts":"8.000001"}),
        "E1",
        0,
    );
    slack.wait(10, "the reply", |s| s.posts().len() == 1);
    assert_eq!(first.list[0].terminate(), 0);

    // Two hours pass; two daemons scan every second.
    home.backdate(7_200_000);
    model.reply(&format!(
        "<internal_monologue>hm</internal_monologue><mental_query question=\"{}\">true</mental_query><mental_query question=\"{}\">false</mental_query><external_dialogue>Did the loader port work out?</external_dialogue>",
        anima::engine::FOLLOW_UP_QUESTION,
        anima::engine::CLOSED_QUESTION
    ));
    let daemons = Daemons::start(&home, &slack, 2, ENV);
    slack.wait(15, "the follow-up", |s| s.posts().len() == 2);
    // Both have scanned several times since: one follow-up, one model call for it.
    std::thread::sleep(Duration::from_millis(3_000));
    let posts = slack.posts();
    assert_eq!(posts.len(), 2, "{:#?}\n{}", posts, daemons.logs());
    assert_eq!(posts[1].text, "Did the loader port work out?");
    assert_eq!(model.requests().len(), 2, "{}", daemons.logs());
    let leads = daemons
        .logs()
        .matches("leading the soul's scheduled work")
        .count();
    assert_eq!(leads, 1, "one daemon leads: {}", daemons.logs());
}
