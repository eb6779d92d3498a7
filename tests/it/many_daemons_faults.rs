//! Many daemons, one soul, under bad conditions: every daemon SIGKILLed at once and started
//! again, the database unreachable for 30 s under load, one daemon cut off from it for 20 s
//! (and one alone), a daemon whose clock is 10 minutes
//! off, the scheduled dream (and `anima dream`) with two daemons on two machines, and a daemon
//! older than the schema another daemon's anima left. Each message is still answered exactly
//! once and, in each conversation, in order; the soul wakes once per life; two dreams never
//! run at once; an older anima refuses to start and the running daemons go on.
//!
//! The load and its checks are `support::many`'s (see `many_daemons`). PostgreSQL only: each
//! test says it is skipped and passes when `ANIMA_TEST_POSTGRES_URL` is not set.

use crate::support;

use std::collections::HashSet;
use std::time::{Duration, Instant, SystemTime};

use support::daemon::{shared_home, try_http, Daemon, Daemons};
use support::many::*;
use support::slack::FakeSlack;
use support::*;

/// The event ids Slack has an acknowledgement for: the messages some daemon stored.
fn recorded_events(slack: &FakeSlack) -> HashSet<String> {
    let acked: HashSet<String> = slack.acks().into_iter().collect();
    slack
        .deliveries()
        .into_iter()
        .filter(|d| acked.contains(&d.envelope_id))
        .map(|d| d.event_id)
        .collect()
}

/// The soul's state moves, oldest first, as `TO (cause)`; and how many went into `to`.
fn moves(home: &Home) -> Vec<anima::memory::StateMove> {
    let mut m = wait(home.store().state_moves(200)).unwrap();
    m.reverse();
    m
}

fn path(moves: &[anima::memory::StateMove]) -> Vec<String> {
    moves
        .iter()
        .map(|m| format!("{} ({})", m.to, m.cause))
        .collect()
}

/// The config's model timeout raised to `secs`: a test that holds a state call behind a gate
/// must not see it time out meanwhile.
fn model_timeout(home: &Home, secs: u32) {
    let cfg = std::fs::read_to_string(home.config()).unwrap();
    assert!(cfg.contains("timeout_secs = 5\n"), "{cfg}");
    std::fs::write(
        home.config(),
        cfg.replace("timeout_secs = 5\n", &format!("timeout_secs = {secs}\n")),
    )
    .unwrap();
}

#[test]
fn every_daemon_sigkilled_at_once_and_restarted_loses_nothing_doubles_nothing_and_wakes_the_soul_once_more(
) {
    let _one = one_at_a_time();
    const THREADS: usize = 110;
    const MESSAGES: usize = 6;
    /// Conversations begun before the kill; the others begin after the restart.
    const OLD: usize = 100;
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
    // Half of each old conversation now; the rest, and the new conversations, once the new
    // daemons run (so that they take messages in too, and find conversations that no daemon
    // resumed at its start).
    let before = |i: usize| {
        let (t, m) = nth(i, THREADS);
        t < OLD && m < MESSAGES / 2
    };
    let half = (0..total).filter(|&i| before(i)).count();
    for i in (0..total).filter(|&i| before(i)) {
        send(&slack, i, THREADS);
    }
    let answered_before = |s: &FakeSlack| {
        let posts: HashSet<(usize, usize)> = s.posts().iter().filter_map(answered).collect();
        (0..total)
            .filter(|&i| before(i) && posts.contains(&nth(i, THREADS)))
            .count()
    };
    until(&slack, 60, "the first hundred replies", |s| {
        answered_before(s) >= 100
    });
    note_connections(&slack, &daemons, &mut conns);
    // Both at the same moment: the signals go out before either is waited for.
    daemons[0].signal("KILL");
    daemons[1].signal("KILL");
    let killed = Instant::now();
    daemons[0].kill9();
    daemons[1].kill9();
    let left = half - answered_before(&slack);
    assert!(
        left >= half / 4,
        "HARNESS: only {left} of {half} messages were left when the daemons were killed: the kill proves little"
    );
    let wakeups_before = model
        .state_requests()
        .iter()
        .filter(|(k, _)| k == "wakeup")
        .count();
    assert_eq!(wakeups_before, 1, "the first start woke the soul once");

    // The new daemons: the first finds no daemon alive (the dead ones are of this machine,
    // their processes gone), so it wakes the soul; the second joins it.
    let restarted = Instant::now();
    let a = daemons.add(&home, &slack, ENV);
    let b = daemons.add(&home, &slack, ENV);
    note_connections(&slack, &daemons, &mut conns);
    for i in (0..total).filter(|&i| !before(i)) {
        send(&slack, i, THREADS);
    }
    let mut found = checked_answers(
        &slack,
        &model,
        &daemons,
        &mut conns,
        (THREADS, total),
        LEASE + 90,
        " of the restart",
        &[("kill", killed), ("restart", restarted)],
    );
    // One soul, two lives: it was woken at the first start and again at the restart (the first
    // new daemon found no daemon alive), not a third time by the second new daemon; the crash
    // is on record once.
    let wakeups = model
        .state_requests()
        .iter()
        .filter(|(k, _)| k == "wakeup")
        .count();
    if wakeups != 2 {
        found.push(format!(
            "WAKEUP: {wakeups} wakeup calls in all, not 2 (the first start, the restart)"
        ));
    }
    let moves = moves(&home);
    let into = |s: &str| moves.iter().filter(|m| m.to == s).count();
    let crashes = moves
        .iter()
        .filter(|m| m.to == "SHUTDOWN" && m.cause.contains("crash"))
        .count();
    if into("WAKEUP") != 2 || into("SHUTDOWN") != 1 || crashes != 1 {
        found.push(format!(
            "STATES: {} moves to WAKEUP (not 2), {} to SHUTDOWN (not 1, the crash recorded at the restart); the moves: {:?}",
            into("WAKEUP"),
            into("SHUTDOWN"),
            path(&moves)
        ));
    }
    let now = wait(home.store().cognitive_state()).unwrap().state;
    if now != "WORK" {
        found.push(format!("STATES: the soul is in {now}, not WORK"));
    }
    // The first new daemon took the dead ones' places (same machine, processes gone); the
    // second joined it.
    let buried = daemons[a]
        .log()
        .matches("a daemon of this machine died")
        .count();
    if buried != 2 {
        found.push(format!(
            "BURIAL: the first new daemon buried {buried} dead daemons, not 2"
        ));
    }
    if !daemons[b]
        .log()
        .contains("joining the daemons already running")
    {
        found.push(
            "the second new daemon did not join the first as a daemon already running".into(),
        );
    }
    verdict(
        &slack,
        &daemons,
        found,
        &format!("both daemons SIGKILLed with {left} of {half} messages unanswered, two new ones started, {} more sent", total - half),
        &conns,
    );
    home.assert_backend_kept();
}

/// The soul wakes before it answers, whichever daemon a message reaches: of two daemons started
/// together on a sleeping soul, the first wakes it (its wakeup call held here), and neither
/// answers a message until the wakeup is over, as one daemon alone does.
#[test]
fn a_daemon_that_joins_while_the_soul_wakes_answers_nothing_before_it_is_awake() {
    let _one = one_at_a_time();
    const THREADS: usize = 20;
    const MESSAGES: usize = 3;
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    slack.redeliver_unacked_after(REDELIVER);
    slack.spread(SPREAD);
    let Some(home) = shared_home(&model, &slack, LEASE, "") else {
        return;
    };
    // The wakeup is held behind a gate, longer than the default timeout.
    model_timeout(&home, 30);
    let waking = Gate::default();
    model.gate_state("wakeup", &waking);
    let started = Instant::now();
    let daemons = Daemons::start(&home, &slack, 2, ENV);
    let mut conns = Vec::new();
    note_connections(&slack, &daemons, &mut conns);
    let total = THREADS * MESSAGES;
    for i in 0..total {
        send(&slack, i, THREADS);
    }
    let mut found = Vec::new();
    // Both daemons have taken messages in while the soul wakes.
    let (a, b) = (conns[0].clone(), conns[1].clone());
    until(&slack, 20, "both daemons to take messages in", |s| {
        s.acks_on(&a).len() >= 5 && s.acks_on(&b).len() >= 5
    });
    let asked = model
        .state_requests()
        .iter()
        .filter(|(k, _)| k == "wakeup")
        .count();
    assert_eq!(asked, 1, "HARNESS: the soul's wakeup is under way, once");
    // A window for a turn begun meanwhile to post (an echo takes milliseconds).
    std::thread::sleep(Duration::from_secs(2));
    let early = slack.posts().len();
    let opened = Instant::now();
    waking.open();
    if early > 0 {
        let turns = model.asked().len();
        found.push(format!(
            "WAKEUP: {early} replies were posted ({turns} turns asked of the model) while the soul was still waking (its wakeup call held {:.1} s after the first daemon started): the daemon that joined answered without waiting for the wakeup",
            opened.duration_since(started).as_secs_f64()
        ));
    }
    found.extend(checked_answers(
        &slack,
        &model,
        &daemons,
        &mut conns,
        (THREADS, total),
        60,
        " of the wakeup",
        &[("start", started), ("awake", opened)],
    ));
    let moves = moves(&home);
    let into = |s: &str| moves.iter().filter(|m| m.to == s).count();
    if into("WAKEUP") != 1 {
        found.push(format!(
            "STATES: {} moves to WAKEUP, not 1: {:?}",
            into("WAKEUP"),
            path(&moves)
        ));
    }
    verdict(
        &slack,
        &daemons,
        found,
        &format!("two daemons started together, the wakeup held, {THREADS} conversations × {MESSAGES} messages"),
        &conns,
    );
}

/// The body of `/healthz` from each daemon: (status, body), or the error.
fn health(d: &Daemon) -> Result<(u16, String), String> {
    try_http("GET", &d.url("/healthz"), &[], "")
}

#[test]
fn the_database_unreachable_for_30_s_under_two_daemons_stalls_them_loses_nothing_and_doubles_nothing(
) {
    let _one = one_at_a_time();
    const THREADS: usize = 20;
    const MESSAGES: usize = 14;
    const OUTAGE: Duration = Duration::from_secs(30);
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    // Slow answers: when the database goes, turns are in flight and conversations have
    // messages waiting.
    model.slow_echo(400);
    slack.redeliver_unacked_after(REDELIVER);
    slack.spread(SPREAD);
    let Some(home) = shared_home(&model, &slack, LEASE, "") else {
        return;
    };
    let Some((relay, through)) = support::relay::to_database(home.database().unwrap()) else {
        return eprintln!("skipped: the test server is not on TCP");
    };
    let env = [
        ("ANIMA_LOG", "anima=info"),
        ("ANIMA_DATABASE_URL", through.as_str()),
    ];
    let daemons = Daemons::start(&home, &slack, 2, &env);
    let mut conns = Vec::new();
    note_connections(&slack, &daemons, &mut conns);
    // Messages Slack sends while no daemon can store them are not acknowledged, and the fake
    // gives them up after 3 retries, 3 s apart (Slack itself waits minutes): the first part of
    // the load is sent and stored before the outage, the rest after it.
    let total = THREADS * MESSAGES;
    let before = THREADS * 10;
    for i in 0..before {
        send(&slack, i, THREADS);
    }
    until(&slack, 30, "every message sent to be stored", |s| {
        recorded_events(s).len() >= before
    });
    until(&slack, 60, "a fifth of the replies", |s| {
        answered_count(s, THREADS, before) >= before / 5
    });
    relay.down();
    let cut = Instant::now();
    let left = before - answered_count(&slack, THREADS, before);
    assert!(
        left >= before / 3,
        "HARNESS: only {left} of {before} messages were left when the database went: the outage proves little"
    );
    let posts_at_cut = slack.posts().len();
    // While it is down, each daemon says so: 503 with the reason.
    let mut found = Vec::new();
    let password = home
        .database()
        .unwrap()
        .split("://")
        .nth(1)
        .and_then(|r| r.split('@').next())
        .and_then(|r| r.split_once(':'))
        .map(|(_, p)| p.to_string())
        .unwrap_or_default();
    for (i, d) in daemons.list.iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(10);
        let seen = loop {
            match health(d) {
                Ok((503, body)) => break Some(body),
                _ if Instant::now() > deadline => break None,
                _ => std::thread::sleep(Duration::from_millis(100)),
            }
        };
        match seen {
            Some(body) if body.contains("store cannot take writes") => {
                if password.len() >= 8 && body.contains(&password) {
                    found.push(format!("HEALTH: daemon {i}'s /healthz shows the password"));
                }
            }
            Some(body) => found.push(format!(
                "HEALTH: daemon {i}'s /healthz said 503 without the reason: {body:?}"
            )),
            None => found.push(format!(
                "HEALTH: daemon {i}'s /healthz did not say 503 within 10 s of the database going away (last: {:?})",
                health(d)
            )),
        }
    }
    while cut.elapsed() < OUTAGE {
        std::thread::sleep(Duration::from_millis(100));
    }
    // Still down at the end: the reason is still given.
    for (i, d) in daemons.list.iter().enumerate() {
        match health(d) {
            Ok((503, body)) if body.contains("store cannot take writes") => {}
            other => found.push(format!(
                "HEALTH: daemon {i}'s /healthz after {} s without the database: {other:?}",
                cut.elapsed().as_secs()
            )),
        }
    }
    // What was posted while no daemon could check its claim or commit: turns whose check came
    // just before the cut may post; a conversation goes on only once the database is back.
    let during = slack.posts()[posts_at_cut..]
        .iter()
        .filter(|p| p.at > cut + Duration::from_secs(2))
        .count();
    relay.up();
    let restored = Instant::now();
    // The daemons come back by themselves: healthy again, then the rest of the load.
    for (i, d) in daemons.list.iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(40);
        loop {
            match health(d) {
                Ok((200, _)) => break,
                other if Instant::now() > deadline => {
                    found.push(format!(
                        "HEALTH: daemon {i} not healthy within 40 s of the database's return: {other:?}"
                    ));
                    break;
                }
                _ => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }
    let healthy = restored.elapsed();
    for i in before..total {
        send(&slack, i, THREADS);
    }
    found.extend(checked_answers(
        &slack,
        &model,
        &daemons,
        &mut conns,
        (THREADS, total),
        LEASE + 60,
        " of the database's return",
        &[("cut", cut), ("restored", restored)],
    ));
    eprintln!(
        "{during} posts while the database was away (more than 2 s after the cut); both healthy {:.1} s after its return",
        healthy.as_secs_f64()
    );
    verdict(
        &slack,
        &daemons,
        found,
        &format!(
            "the database away {} s with {left} of {before} messages unanswered, {} more sent after",
            OUTAGE.as_secs(),
            total - before
        ),
        &conns,
    );
    home.assert_backend_kept();
}

/// `n` daemons on PostgreSQL, the first through a relay: the first's connections to the
/// database are reset and refused for 20 s while it stays connected to Slack (a partition),
/// under 72 messages sent before, during and after. It cannot record what Slack sends it, so
/// it steps aside (its Socket Mode connections closed) until the database answers again, and
/// Slack's retries go to the other daemon, or to it once it is back: every message is
/// answered exactly once, and Slack gives none up.
fn a_partition_loses_nothing(n: usize) {
    let _one = one_at_a_time();
    const THREADS: usize = 12;
    const MESSAGES: usize = 6;
    const OUTAGE: Duration = Duration::from_secs(20);
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.slow_echo(200);
    slack.redeliver_unacked_after(REDELIVER);
    slack.spread(SPREAD);
    let Some(home) = shared_home(&model, &slack, LEASE, "") else {
        return;
    };
    let Some((relay, through)) = support::relay::to_database(home.database().unwrap()) else {
        return eprintln!("skipped: the test server is not on TCP");
    };
    let cut_off = [
        ("ANIMA_LOG", "anima=info"),
        ("ANIMA_DATABASE_URL", through.as_str()),
    ];
    let mut daemons = Daemons::start(&home, &slack, 1, &cut_off);
    for _ in 1..n {
        daemons.add(&home, &slack, ENV);
    }
    let mut conns = Vec::new();
    note_connections(&slack, &daemons, &mut conns);
    let total = THREADS * MESSAGES;
    let third = total / 3;
    for i in 0..third {
        send(&slack, i, THREADS);
    }
    until(&slack, 30, "the first third to be stored", |s| {
        recorded_events(s).len() >= third
    });
    relay.down();
    let cut = Instant::now();
    let mut found = Vec::new();
    // A message every 250 ms while the database is away from the first daemon.
    let mut aside = false;
    for i in third..2 * third {
        send(&slack, i, THREADS);
        std::thread::sleep(Duration::from_millis(250));
        aside |= daemons[0].slack_connections(&slack).is_empty();
    }
    while cut.elapsed() < OUTAGE {
        aside |= daemons[0].slack_connections(&slack).is_empty();
        std::thread::sleep(Duration::from_millis(100));
    }
    if !aside {
        found.push(
            "ASIDE: the daemon cut off from the database kept its Socket Mode connections open"
                .to_string(),
        );
    }
    relay.up();
    let restored = Instant::now();
    // It comes back by itself: its connections open again, and it says it is healthy.
    daemons[0].wait_slack_connections(&slack, 2, 40);
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        match health(&daemons[0]) {
            Ok((200, _)) => break,
            other if Instant::now() > deadline => {
                found.push(format!(
                    "HEALTH: the cut-off daemon not healthy within 20 s of holding its connections again: {other:?}"
                ));
                break;
            }
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
    for i in 2 * third..total {
        send(&slack, i, THREADS);
    }
    found.extend(checked_answers(
        &slack,
        &model,
        &daemons,
        &mut conns,
        (THREADS, total),
        LEASE + 60,
        " of the database's return",
        &[("cut", cut), ("restored", restored)],
    ));
    if !slack.given_up().is_empty() {
        found.push(format!(
            "GIVEN UP: Slack gave up {} events after 3 retries: {}",
            slack.given_up().len(),
            first(&slack.given_up())
        ));
    }
    verdict(
        &slack,
        &daemons,
        found,
        &format!(
            "{n} daemon(s), the first cut off from the database for {} s",
            OUTAGE.as_secs()
        ),
        &conns,
    );
}

#[test]
fn a_daemon_cut_off_from_the_database_steps_aside_and_every_message_is_answered_once() {
    a_partition_loses_nothing(2);
}

#[test]
fn of_three_daemons_one_cut_off_from_the_database_steps_aside_and_every_message_is_answered_once() {
    a_partition_loses_nothing(3);
}

#[test]
fn a_daemon_alone_cut_off_from_the_database_steps_aside_and_answers_every_message_once_back() {
    a_partition_loses_nothing(1);
}

/// Where Debian's `faketime` package puts the library.
const FAKETIME_LIB: &str = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";

/// The wall-clock time of a log line (`2026-01-02T03:04:05.678901Z  INFO …`).
fn logged_at(line: &str) -> SystemTime {
    let stamp = line.split_whitespace().next().unwrap_or("");
    humantime::parse_rfc3339_weak(stamp.trim_end_matches('Z'))
        .unwrap_or_else(|e| panic!("no time at the start of the log line {line:?}: {e}"))
}

/// A daemon's wall clock `secs` off, with libfaketime (tokio's timers run on the monotonic
/// clock, which stays true). Fails loudly when the library is missing.
struct ClockOff {
    secs: i64,
    faketime: String,
}

fn clock_off(secs: i64) -> ClockOff {
    assert!(
        std::path::Path::new(FAKETIME_LIB).exists(),
        "{FAKETIME_LIB} is missing: install Debian's faketime package (apt-get install faketime)"
    );
    ClockOff {
        secs,
        faketime: format!("{secs:+}s"),
    }
}

impl ClockOff {
    /// The environment of a daemon whose clock is off (and logs at info).
    fn env(&self) -> [(&str, &str); 4] {
        [
            ("ANIMA_LOG", "anima=info"),
            ("LD_PRELOAD", FAKETIME_LIB),
            ("FAKETIME", self.faketime.as_str()),
            ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
        ]
    }

    /// The daemon's clock is off by about this much: its log, begun after `asked`, says so.
    fn check(&self, d: &Daemon, asked: SystemTime) {
        let line = d.wait_log("http listening", 1);
        let shift = match logged_at(&line).duration_since(asked) {
            Ok(ahead) => ahead.as_secs_f64(),
            Err(behind) => -behind.duration().as_secs_f64(),
        };
        assert!(
            (shift - self.secs as f64).abs() < 60.0,
            "HARNESS: the daemon under libfaketime logs a time {shift:+.0} s from ours, not about {:+} s: {line}",
            self.secs
        );
    }
}

/// Two daemons, one of them (the first, which wakes the soul and leads its scheduled work)
/// with its wall clock `offset_secs` off (libfaketime; tokio's timers run on the monotonic
/// clock, which stays true): every message answered once and in order.
fn a_daemon_whose_clock_is_off_changes_nothing(offset_secs: i64) {
    let _one = one_at_a_time();
    const THREADS: usize = 100;
    const MESSAGES: usize = 4;
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    slack.redeliver_unacked_after(REDELIVER);
    slack.spread(SPREAD);
    let Some(home) = shared_home(&model, &slack, LEASE, "") else {
        return;
    };
    let off = clock_off(offset_secs);
    let mut daemons = Daemons::start(&home, &slack, 1, &off.env());
    let asked = SystemTime::now();
    daemons.add(&home, &slack, ENV);
    off.check(&daemons[0], asked);
    let line = daemons[1].wait_log("http listening", 1);
    let true_shift = match logged_at(&line).duration_since(asked) {
        Ok(ahead) => ahead.as_secs_f64(),
        Err(behind) => -behind.duration().as_secs_f64(),
    };
    assert!(
        true_shift.abs() < 60.0,
        "HARNESS: the other daemon's clock is off too ({true_shift:+.0} s): {line}"
    );
    let mut conns = Vec::new();
    note_connections(&slack, &daemons, &mut conns);
    let total = THREADS * MESSAGES;
    let sent = Instant::now();
    for i in 0..total {
        send(&slack, i, THREADS);
    }
    let mut found = checked_answers(
        &slack,
        &model,
        &daemons,
        &mut conns,
        (THREADS, total),
        90,
        "",
        &[("sent", sent)],
    );
    let wakeups = model
        .state_requests()
        .iter()
        .filter(|(k, _)| k == "wakeup")
        .count();
    if wakeups != 1 {
        found.push(format!(
            "WAKEUP: the soul was woken {wakeups} times, not once"
        ));
    }
    let leads = daemons
        .logs()
        .matches("leading the soul's scheduled work")
        .count();
    if leads != 1 {
        found.push(format!(
            "LEAD: {leads} daemons said they lead the scheduled work, not one"
        ));
    }
    verdict(
        &slack,
        &daemons,
        found,
        &format!("two daemons, the first one's clock {offset_secs:+} s off, {THREADS} conversations × {MESSAGES} messages"),
        &conns,
    );
    home.assert_backend_kept();
}

#[test]
fn a_daemon_whose_clock_is_10_minutes_ahead_answers_every_message_once_and_in_order() {
    a_daemon_whose_clock_is_off_changes_nothing(600);
}

#[test]
fn a_daemon_whose_clock_is_10_minutes_behind_answers_every_message_once_and_in_order() {
    a_daemon_whose_clock_is_off_changes_nothing(-600);
}

/// The scheduled work judges quiet by the time the database holds: a daemon whose clock is
/// 10 minutes ahead, leading the scans, does not take a conversation answered seconds ago by
/// a daemon with a true clock for one quiet for 10 minutes (`[processes]
/// proactive_idle_minutes = 10`), and follows nothing up.
#[test]
fn a_leader_whose_clock_is_ahead_follows_up_no_conversation_answered_seconds_ago() {
    let _one = one_at_a_time();
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("I'll look into the loader."));
    let extra = "\n[processes]\nproactive_idle_minutes = 10\nproactive_scan_secs = 1\n";
    let Some(home) = shared_home(&model, &slack, LEASE, extra) else {
        return;
    };
    let ahead = clock_off(600);
    // The shipped processes, `proactive` among them.
    let processes = home.dir.path().join("processes");
    std::fs::create_dir_all(&processes).unwrap();
    for f in std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/processes")).unwrap() {
        let f = f.unwrap();
        std::fs::copy(f.path(), processes.join(f.file_name())).unwrap();
    }
    // A daemon with a true clock answers a mention, and stops.
    let mut first = Daemons::start(&home, &slack, 1, ENV);
    slack.send_event(
        serde_json::json!({"type":"app_mention","user":"U061F7AUR",
               "text":format!("<@{}> can you check the loader?", support::slack::BOT_USER),
               "ts":"8.000001","channel":"C1","event_ts":"8.000001"}),
        "E1",
        0,
    );
    slack.wait(10, "the reply", |s| s.posts().len() == 1);
    let answered = Instant::now();
    assert_eq!(first.list[0].terminate(), 0, "{}", first.logs());
    // The soul starts again: first the daemon whose clock is ahead (it wakes the soul and
    // leads the scans), then one with a true clock.
    model.reply(&format!(
        "<internal_monologue>hm</internal_monologue><mental_query question=\"{}\">true</mental_query><mental_query question=\"{}\">false</mental_query><external_dialogue>Did the loader port work out?</external_dialogue>",
        anima::engine::FOLLOW_UP_QUESTION,
        anima::engine::CLOSED_QUESTION
    ));
    let asked = SystemTime::now();
    let mut daemons = Daemons::start(&home, &slack, 1, &ahead.env());
    daemons.add(&home, &slack, ENV);
    ahead.check(&daemons[0], asked);
    assert!(
        daemons[0]
            .log()
            .contains("leading the soul's scheduled work"),
        "HARNESS: the daemon whose clock is ahead leads:\n{}",
        daemons.logs()
    );
    // It scans every second: a few scans, a few seconds after the reply.
    std::thread::sleep(Duration::from_secs(4));
    let posts = slack.posts();
    assert_eq!(
        posts.len(),
        1,
        "a conversation answered {:.0} s ago was followed up as quiet for 10 minutes by the daemon whose clock is 10 minutes ahead: {:?}\n{}",
        answered.elapsed().as_secs_f64(),
        posts.iter().map(|p| &p.text).collect::<Vec<_>>(),
        daemons.logs()
    );
}

/// Another machine's home for the soul in `home`'s database: the same config (so the same
/// soul, Slack and model), its own folder (its own `memory/`, logs and lock files). Its
/// processes need `ANIMA_DATABASE_URL` given.
fn another_machine(home: &Home, model: &FakeModel) -> Home {
    let other = Home::on(Backend::Sqlite, "anthropic", &model.url(), "");
    std::fs::copy(home.config(), other.config()).unwrap();
    other
}

/// A quiet soul with something to dream about: two conversations of ten messages each, two
/// hours old (past `[states] solitude_after_idle_minutes` = 60 and the hour a dream keeps), of
/// which a dream keeps the last four. Dreams' model calls wait behind `gate`; the model's
/// timeout is long enough for that. Scans every second.
fn a_quiet_soul(model: &FakeModel, slack: &FakeSlack, gate: &Gate) -> Option<Home> {
    let extra = "\n[processes]\nproactive_scan_secs = 1\n\n[states]\nsolitude_after_idle_minutes = 60\n\n[dream]\nkeep_recent = 4\n";
    let home = shared_home(model, slack, LEASE, extra)?;
    model_timeout(&home, 60);
    let s = home.store();
    for thread in ["C1:1.0", "C2:1.0"] {
        for i in 0..10 {
            wait(s.record_user_message(thread, "U1", "Tom", &format!("crab fact {i} 🦀"), None))
                .unwrap();
        }
    }
    home.backdate(2 * 3_600_000);
    model.gate_state("dream", gate);
    Some(home)
}

/// Each dream in the database: (id, started, finished or None, cause), in ms.
fn dreams(home: &Home) -> Vec<(i64, i64, Option<i64>, String)> {
    support::postgres::query(
        home.database().unwrap(),
        "SELECT id || '|' || (extract(epoch FROM started_at) * 1000)::bigint || '|'
                || coalesce(((extract(epoch FROM finished_at) * 1000)::bigint)::text, '') || '|' || cause
           FROM dreams ORDER BY id",
    )
    .into_iter()
    .map(|row| {
        let f: Vec<&str> = row.splitn(4, '|').collect();
        (
            f[0].parse().unwrap(),
            f[1].parse().unwrap(),
            f[2].parse().ok(),
            f[3].to_string(),
        )
    })
    .collect()
}

/// Dreams that ran at the same time as another: each pair, in words.
fn overlapping(dreams: &[(i64, i64, Option<i64>, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (i, a) in dreams.iter().enumerate() {
        for b in &dreams[i + 1..] {
            let a_end = a.2.unwrap_or(i64::MAX);
            let b_end = b.2.unwrap_or(i64::MAX);
            if a.1 < b_end && b.1 < a_end {
                out.push(format!(
                    "dream {} ({:?}) and dream {} ({:?}) ran at once",
                    a.0, a.3, b.0, b.3
                ));
            }
        }
    }
    out
}

fn dream_calls(model: &FakeModel) -> usize {
    model
        .state_requests()
        .iter()
        .filter(|(k, _)| k == "dream")
        .count()
}

/// Waits for the first dream's first model call (held behind its gate); the index of the
/// daemon that leads.
fn a_dream_under_way(model: &FakeModel, daemons: &Daemons) -> usize {
    let deadline = Instant::now() + Duration::from_secs(30);
    while dream_calls(model) == 0 {
        assert!(
            Instant::now() < deadline,
            "no scheduled dream within 30 s:\n{}",
            daemons.logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let leaders: Vec<usize> = (0..daemons.list.len())
        .filter(|&i| {
            daemons[i]
                .log()
                .contains("leading the soul's scheduled work")
        })
        .collect();
    assert_eq!(leaders.len(), 1, "one daemon leads:\n{}", daemons.logs());
    leaders[0]
}

/// The scheduled work is the soul's: two daemons on two machines (each its own home, so no
/// lock file of one is seen by the other), scanning every second, make one dream of a quiet
/// soul, not one each, even while that dream is long under way.
#[test]
fn two_daemons_on_two_machines_make_one_dream_for_a_quiet_soul() {
    let _one = one_at_a_time();
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let gate = Gate::default();
    let Some(home) = a_quiet_soul(&model, &slack, &gate) else {
        return;
    };
    let other = another_machine(&home, &model);
    let url = home.database().unwrap().to_string();
    let there = [
        ("ANIMA_LOG", "anima=info"),
        ("ANIMA_DATABASE_URL", url.as_str()),
    ];
    let mut daemons = Daemons::start(&home, &slack, 1, ENV);
    daemons.add(&other, &slack, &there);
    a_dream_under_way(&model, &daemons);
    // Both scan every second: for a few scans, the dream is held; no second one begins.
    std::thread::sleep(Duration::from_secs(3));
    let mut found = Vec::new();
    let held = dreams(&home);
    if held.len() != 1 || dream_calls(&model) != 1 {
        found.push(format!(
            "while the first dream was under way: {} dreams began ({held:?}), {} dream calls",
            held.len(),
            dream_calls(&model)
        ));
    }
    gate.open();
    let deadline = Instant::now() + Duration::from_secs(30);
    while dreams(&home).iter().any(|d| d.2.is_none()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    // A few more scans after it ended: it is not due again.
    std::thread::sleep(Duration::from_secs(3));
    let all = dreams(&home);
    if all.len() != 1 || all[0].2.is_none() {
        found.push(format!("dreams: {all:?}, not one that ended"));
    }
    found.extend(overlapping(&all));
    let moves = moves(&home);
    let into_dream = moves.iter().filter(|m| m.to == "DREAM").count();
    if into_dream != 1 {
        found.push(format!(
            "{into_dream} moves into DREAM, not 1: {:?}",
            path(&moves)
        ));
    }
    assert!(found.is_empty(), "{}\n{}", found.join("\n"), daemons.logs());
    assert!(
        !other.data().join("anima.db").exists(),
        "the other machine's daemon used SQLite"
    );
}

/// `anima dream` started in `home` (on the database at `url`) beside the running daemons.
fn anima_dream(home: &Home, url: &str) -> std::process::Child {
    let mut cmd = anima_command(&home.config(), home.dir.path(), &["dream"]);
    cmd.env("ANIMA_DATABASE_URL", url);
    let mut child = spawn(&mut cmd);
    drop(child.stdin.take());
    child
}

/// Its exit status and output once it ends, or `None` if it has not within `secs`.
fn ended(child: &mut std::process::Child, secs: u64) -> Option<Run> {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let read = |r: Option<&mut dyn std::io::Read>| {
        let mut text = String::new();
        if let Some(r) = r {
            let _ = r.read_to_string(&mut text);
        }
        text
    };
    let stdout = read(child.stdout.as_mut().map(|o| o as &mut dyn std::io::Read));
    let stderr = read(child.stderr.as_mut().map(|e| e as &mut dyn std::io::Read));
    Some(Run {
        status: child
            .try_wait()
            .unwrap()
            .and_then(|s| s.code())
            .unwrap_or(-1),
        stdout,
        stderr,
    })
}

/// `anima dream` beside two running daemons (each on a machine of its own), while their
/// scheduled dream is under way, on the machine of the daemon dreaming and on a third
/// machine: neither dreams at the same time (it may refuse, or wait for the first to end),
/// and the soul ends awake.
#[test]
fn anima_dream_beside_two_running_daemons_never_dreams_at_the_same_time_as_theirs() {
    let _one = one_at_a_time();
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let gate = Gate::default();
    let Some(home) = a_quiet_soul(&model, &slack, &gate) else {
        return;
    };
    let url = home.database().unwrap().to_string();
    let there = [
        ("ANIMA_LOG", "anima=info"),
        ("ANIMA_DATABASE_URL", url.as_str()),
    ];
    let other = another_machine(&home, &model);
    let third = another_machine(&home, &model);
    let mut daemons = Daemons::start(&home, &slack, 1, ENV);
    daemons.add(&other, &slack, &there);
    let leader = a_dream_under_way(&model, &daemons);
    let leaders_home = if leader == 0 { &home } else { &other };
    let mut found = Vec::new();
    // Each `anima dream` while the scheduled dream is held: one that ends at once refused (or
    // waited and gave up); one still running after a while dreams too (its model call is held
    // behind the same gate) and is let finish once the gate opens.
    let mut still_running = Vec::new();
    for (place, machine) in [
        ("on the machine of the daemon dreaming", leaders_home),
        ("on a third machine", &third),
    ] {
        let mut child = anima_dream(machine, &url);
        let run = ended(&mut child, 10);
        let calls = dream_calls(&model);
        let now = dreams(&home);
        match run {
            None => {
                found.push(format!(
                    "{place}: `anima dream` was still running 10 s after it started, beside the scheduled dream held in its model call ({calls} dream calls, dreams {now:?})"
                ));
                still_running.push((place, child));
            }
            Some(r) if r.status == 0 => found.push(format!(
                "{place}: `anima dream` dreamt while the scheduled dream was under way (exit 0): {}",
                r.stdout.trim()
            )),
            Some(r) if !r.stderr.contains("another dream is running") => found.push(format!(
                "{place}: `anima dream` failed, not for the dream under way (exit {}): {}",
                r.status,
                r.stderr.trim()
            )),
            Some(_) => {}
        }
        if calls != 1 || now.len() != 1 {
            found.push(format!(
                "{place}: beside the scheduled dream, {calls} dream model calls (not 1) and dreams {now:?}"
            ));
        }
    }
    gate.open();
    for (place, mut child) in still_running {
        match ended(&mut child, 30) {
            Some(r) => found.push(format!(
                "{place}: `anima dream` then ended (exit {}): {}{}",
                r.status,
                r.stdout.trim(),
                r.stderr.trim()
            )),
            None => {
                let _ = child.kill();
                let _ = child.wait();
                found.push(format!("{place}: `anima dream` never ended"));
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    while dreams(&home).iter().any(|d| d.2.is_none()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let all = dreams(&home);
    found.extend(overlapping(&all));
    if all.iter().any(|d| d.2.is_none()) {
        found.push(format!("a dream never ended: {all:?}"));
    }
    let state = wait(home.store().cognitive_state()).unwrap();
    if state.state != "WORK" && state.state != "SOLITUDE" {
        found.push(format!(
            "the soul is in {} ({}) after the dreams, not awake",
            state.state, state.cause
        ));
    }
    assert!(
        found.is_empty(),
        "{}\nthe moves: {:?}\n{}",
        found.join("\n"),
        path(&moves(&home)),
        daemons.logs()
    );
}

/// Two daemons from different versions of anima: a newer one has migrated the database past
/// what this one understands. A daemon of this version started then refuses to run (exit 2,
/// saying why, before it touches Slack), and the daemon already running goes on answering.
#[test]
fn a_daemon_older_than_the_schema_refuses_to_start_and_the_running_one_goes_on() {
    let _one = one_at_a_time();
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    let Some(home) = shared_home(&model, &slack, LEASE, "") else {
        return;
    };
    let running = Daemons::start(&home, &slack, 1, ENV);
    let newer = anima::memory::postgres::SCHEMA_VERSION + 1;
    support::postgres::query(
        home.database().unwrap(),
        &format!("UPDATE anima_schema SET version = {newer}"),
    );
    let mut older = Daemon::spawn(&home, ENV);
    assert_eq!(older.wait_exit(30), 2, "{}", older.log());
    assert!(
        older.log().contains("newer than this anima"),
        "{}",
        older.log()
    );
    assert_eq!(
        running[0].slack_connections(&slack).len(),
        slack.sockets(),
        "the refused daemon never connected to Slack"
    );
    slack.send_event(
        serde_json::json!({"type":"message","channel":"D1","user":"U1","text":"still there?",
                           "ts":"1700000000.000100","event_ts":"1700000000.000100","channel_type":"im"}),
        "Ev1",
        0,
    );
    slack.wait(20, "the running daemon's answer", |s| {
        s.posts().iter().any(|p| p.text == "echo: still there?")
    });
}
