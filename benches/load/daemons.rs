//! Several daemons on one PostgreSQL database, for `cargo bench --bench load`: who posted each
//! reply, and the failover measurement (`ANIMA_LOAD_FAILOVER=1`).
//!
//! Who posted: the fake Slack keeps the client's end of the connection each reply came on
//! (`Post::from`), and a sampler maps the daemons' open connections to the fake (from
//! `/proc`) to the daemon holding them. The daemons' Web API clients keep their connections
//! for reuse, so a reply's port is seen open by the sampler; one it never saw is counted as
//! unattributed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::json;

use super::check::{answers, check, first};
use super::support::daemon::{slack_ports, Daemon};
use super::support::slack::{FakeSlack, Post, Spread};
use super::support::{FakeModel, Home};
use super::THREADS;

/// As Slack does, the fake gives each envelope to any open connection (seeded: the same draws
/// each run), and sends one not acknowledged within `REDELIVER` again, to another connection.
pub const SPREAD: Spread = Spread::Random(0x5eed_a11a);
pub const REDELIVER: Duration = Duration::from_secs(3);

/// `ANIMA_LOAD_DAEMONS` (default 1), and whether `ANIMA_LOAD_FAILOVER` asks for the failover
/// (two daemons). Several daemons share one soul only on PostgreSQL, and run without the
/// stream and flood variants.
pub fn wanted() -> (usize, bool) {
    let failover = std::env::var_os("ANIMA_LOAD_FAILOVER").is_some_and(|v| v != "0");
    let n = match std::env::var("ANIMA_LOAD_DAEMONS") {
        Ok(v) if !v.is_empty() => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=8).contains(n))
            .unwrap_or_else(|| panic!("ANIMA_LOAD_DAEMONS={v:?}: expected 1 to 8")),
        _ if failover => 2,
        _ => 1,
    };
    if failover && n != 2 {
        panic!("ANIMA_LOAD_FAILOVER runs two daemons (ANIMA_LOAD_DAEMONS={n})");
    }
    if n > 1 || failover {
        if std::env::var("ANIMA_BENCH_POSTGRES_URL").map_or(true, |u| u.is_empty()) {
            panic!(
                "ANIMA_LOAD_DAEMONS={n}{}: several daemons share one soul only on PostgreSQL \
                 (on SQLite a daemon is always alone); set ANIMA_BENCH_POSTGRES_URL to a server \
                 the bench may create a database on",
                if failover {
                    " / ANIMA_LOAD_FAILOVER"
                } else {
                    ""
                }
            );
        }
        for var in ["ANIMA_LOAD_STREAM", "ANIMA_LOAD_FLOOD"] {
            if std::env::var_os(var).is_some() {
                panic!("{var} runs with one daemon only (ANIMA_LOAD_DAEMONS={n})");
            }
        }
    }
    (n, failover)
}

/// `[store] claim_lease_secs` for the run: `ANIMA_LOAD_LEASE` (default 30, anima's default).
pub fn lease() -> u64 {
    std::env::var("ANIMA_LOAD_LEASE")
        .ok()
        .filter(|v| !v.is_empty())
        .map_or(30, |v| {
            v.parse()
                .unwrap_or_else(|_| panic!("ANIMA_LOAD_LEASE={v:?}: seconds"))
        })
}

/// Starts `n` daemons on `home`, one after another, each once the one before holds its two
/// Socket Mode connections: the daemons and each one's start → connected.
pub fn start(
    home: &Home,
    slack: &FakeSlack,
    env: &[(&str, &str)],
    n: usize,
) -> (Vec<Daemon>, Vec<Duration>) {
    let mut ds = Vec::new();
    let mut connected = Vec::new();
    for _ in 0..n {
        let started = Instant::now();
        let d = Daemon::start_env(home, env);
        d.wait_slack_connections(slack, 2, 20);
        connected.push(started.elapsed());
        ds.push(d);
    }
    (ds, connected)
}

/// Message `m` of conversation `t`: a top-level DM, its ts growing with `m`.
pub fn dm(t: usize, m: usize, text: &str) -> serde_json::Value {
    json!({"type":"message","channel":format!("D{t:04}"),"user":format!("U{t}"),"text":text,
           "ts":format!("1700000000.{:06}", m + 1),"channel_type":"im"})
}

/// The conversation of a DM channel `D<t>`.
fn conversation_of(channel: &str) -> Option<usize> {
    let digits = channel.strip_prefix('D')?;
    (digits.len() == 4).then(|| digits.parse().ok()).flatten()
}

/// Which daemon held each local port connected to the fake Slack, and when it was seen.
#[derive(Default)]
struct Ports {
    /// port → (daemon, first seen, last seen), one entry per holder.
    seen: HashMap<u16, Vec<(usize, Instant, Instant)>>,
}

impl Ports {
    fn note(&mut self, daemon: usize, port: u16, now: Instant) {
        let holders = self.seen.entry(port).or_default();
        match holders.last_mut() {
            Some(last) if last.0 == daemon => last.2 = now,
            _ => holders.push((daemon, now, now)),
        }
    }
}

/// Samples the daemons' connections to the fake Slack every 100 ms: who posted what.
pub struct Posters {
    pids: Vec<u32>,
    port: u16,
    ports: Arc<Mutex<Ports>>,
    stop: Arc<AtomicBool>,
    sampler: Option<JoinHandle<()>>,
}

impl Posters {
    pub fn watch(ds: &[Daemon], slack: &FakeSlack) -> Posters {
        let pids: Vec<u32> = ds.iter().map(Daemon::pid).collect();
        let port = slack.addr.port();
        let ports = Arc::new(Mutex::new(Ports::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let sampler = {
            let (pids, ports, stop) = (pids.clone(), ports.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    sample(&pids, port, &ports);
                    std::thread::sleep(Duration::from_millis(100));
                }
            })
        };
        Posters {
            pids,
            port,
            ports,
            stop,
            sampler: Some(sampler),
        }
    }

    /// Samples now (right before a kill: the connections of the one killed).
    pub fn sample(&self) {
        sample(&self.pids, self.port, &self.ports);
    }

    /// The daemon that posted `p`, when the port it came from names one. A port used by two
    /// daemons in turn (the second after the first's connection closed) names the one that
    /// held it when the post came, give or take the sampling period.
    pub fn who(&self, p: &Post) -> Option<usize> {
        let ports = self.ports.lock().unwrap();
        let holders = ports.seen.get(&p.from.port())?;
        let margin = Duration::from_millis(250);
        let near: HashSet<usize> = holders
            .iter()
            .filter(|(_, first, last)| p.at + margin >= *first && p.at <= *last + margin)
            .map(|(d, _, _)| *d)
            .collect();
        let all: HashSet<usize> = holders.iter().map(|(d, _, _)| *d).collect();
        match (near.len(), all.len()) {
            (1, _) => near.into_iter().next(),
            (0, 1) => all.into_iter().next(),
            _ => None,
        }
    }

    /// Replies per daemon (the last entry: unattributed).
    pub fn count(&self, posts: &[Post]) -> Vec<usize> {
        let mut out = vec![0; self.pids.len() + 1];
        for p in posts.iter().filter(|p| answers(p).is_some()) {
            out[self.who(p).unwrap_or(self.pids.len())] += 1;
        }
        out
    }
}

impl Drop for Posters {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(s) = self.sampler.take() {
            let _ = s.join();
        }
    }
}

fn sample(pids: &[u32], port: u16, ports: &Mutex<Ports>) {
    let now = Instant::now();
    let held: Vec<(usize, Vec<u16>)> = pids
        .iter()
        .enumerate()
        .map(|(i, pid)| (i, slack_ports(*pid, port)))
        .collect();
    let mut ports = ports.lock().unwrap();
    for (i, list) in held {
        for p in list {
            ports.note(i, p, now);
        }
    }
}

/// "daemon 0 512, daemon 1 488 (unattributed 0)".
pub fn per_daemon(counts: &[usize]) -> String {
    let (unknown, each) = counts.split_last().unwrap();
    let each: Vec<String> = each
        .iter()
        .enumerate()
        .map(|(i, n)| format!("daemon {i} {n}"))
        .collect();
    format!("{} (unattributed {unknown})", each.join(", "))
}

/// The failover: the model's latency in this measurement, so that a turn lasts long enough
/// for the kill to find the daemon in the middle of some (holding their conversations'
/// claims), and short enough that the survivor alone, 8 turns at a time (`[slack]
/// max_concurrent_turns`' default), keeps up with the whole pace.
const MODEL_MS: u64 = 20;
/// Paced load before the kill.
const WARMUP: Duration = Duration::from_secs(5);
/// A message every 10 ms (100/s), round the conversations: each gets one a second.
const PACE: Duration = Duration::from_millis(10);

/// Sends the paced load on a thread of its own until stopped: (conversation, number, event
/// id) of each message sent, and when.
struct Sender {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<(usize, usize, String, Instant)>>,
}

impl Sender {
    fn start(slack: &FakeSlack) -> Sender {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (slack, stop) = (slack.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut sent = Vec::new();
                let mut next = Instant::now();
                while !stop.load(Ordering::SeqCst) {
                    let i = sent.len();
                    let (t, m) = (i % THREADS, i / THREADS);
                    let id = format!("F{t}-{m}");
                    slack.send_event(dm(t, m, &format!("t{t} m{m}")), &id, 0);
                    sent.push((t, m, id, Instant::now()));
                    next += PACE;
                    std::thread::sleep(next.saturating_duration_since(Instant::now()));
                }
                sent
            })
        };
        Sender { stop, thread }
    }

    fn stop(self) -> Vec<(usize, usize, String, Instant)> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap()
    }
}

/// The conversations whose claim the daemon of `pid` held in the store, with how long each
/// claim had left (s).
fn claims_of(database: &str, pid: u32) -> Vec<(String, f64)> {
    super::support::postgres::query(
        database,
        &format!(
            "SELECT conversation || ' ' || extract(epoch FROM lease_until - clock_timestamp())
               FROM conversation_claims
              WHERE lease_until > clock_timestamp()
                AND daemon IN (SELECT daemon FROM daemons WHERE pid = {pid})"
        ),
    )
    .into_iter()
    .filter_map(|row| {
        let (c, left) = row.rsplit_once(' ')?;
        Some((c.to_string(), left.parse().ok()?))
    })
    .collect()
}

/// The server processes of the sessions open on this database (the bench's own aside).
pub fn backends(database: &str) -> Vec<u32> {
    super::support::postgres::query(
        database,
        "SELECT pid::text FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid()",
    )
    .into_iter()
    .filter_map(|p| p.parse().ok())
    .collect()
}

/// The conversation (`D<t>`) a claim's key names.
fn claimed_conversation(key: &str) -> Option<usize> {
    key.split(|c: char| !c.is_ascii_alphanumeric())
        .find_map(conversation_of)
}

/// Waits until every message sent has a reply, or `secs` pass; then until no post has come for
/// a second (a doubled reply has had its chance).
fn wait_answered(slack: &FakeSlack, sent: &[(usize, usize, String, Instant)], secs: u64) {
    let want: HashSet<(usize, usize)> = sent.iter().map(|(t, m, _, _)| (*t, *m)).collect();
    let deadline = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < deadline {
        let posts = slack.posts();
        let have = posts
            .iter()
            .filter_map(answers)
            .filter(|k| want.contains(k))
            .collect::<HashSet<_>>()
            .len();
        if have >= want.len() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut last = (slack.posts().len(), Instant::now());
    while last.1.elapsed() < Duration::from_secs(1) {
        std::thread::sleep(Duration::from_millis(50));
        let n = slack.posts().len();
        if n != last.0 {
            last = (n, Instant::now());
        }
    }
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// The failover: two daemons under paced load (100/s over 100 conversations, the model
/// answering after `MODEL_MS`); daemon 1 is SIGKILLed after `WARMUP`, in the middle of a
/// turn, and the load goes on for the lease and 10 s more. Measured from the kill: the survivor's first reply in each
/// conversation the dead one had replied in, and in each whose claim it held at the kill.
pub fn failover(
    model: &FakeModel,
    slack: &FakeSlack,
    home: &Home,
    database: &str,
    env: &[(&str, &str)],
    lease: u64,
) {
    model.slow_echo(MODEL_MS);
    let (mut ds, connected) = start(home, slack, env, 2);
    let posters = Posters::watch(&ds, slack);
    let sender = Sender::start(slack);
    std::thread::sleep(WARMUP);
    // The kill comes while daemon 1 is in the middle of a turn (holds a claim), if that
    // happens within 10 s: the case the lease bounds.
    let dead = ds[1].pid();
    let looking = Instant::now();
    while claims_of(database, dead).is_empty() && looking.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(2));
    }
    posters.sample();
    let killed = Instant::now();
    ds[1].kill9();
    let claimed = claims_of(database, dead);
    std::thread::sleep(
        (killed + Duration::from_secs(lease + 10)).saturating_duration_since(Instant::now()),
    );
    let sent = sender.stop();
    wait_answered(slack, &sent, lease + 60);
    posters.sample();
    let posts = slack.posts();

    // The dead daemon's conversations: those it had replied in before the kill.
    let mut held: HashSet<usize> = HashSet::new();
    let mut after_kill_by_dead = Vec::new();
    let mut survivor_first: HashMap<usize, Instant> = HashMap::new();
    for p in &posts {
        let Some((t, _)) = answers(p) else { continue };
        match posters.who(p) {
            Some(1) if p.at < killed => {
                held.insert(t);
            }
            Some(1) => {
                after_kill_by_dead.push(format!("{} at kill+{}", p.text, secs(p.at - killed)))
            }
            Some(0) if p.at >= killed => {
                survivor_first.entry(t).or_insert(p.at);
            }
            _ => {}
        }
    }
    let taken = |ts: &mut dyn Iterator<Item = usize>| -> (Vec<Duration>, usize) {
        let mut times = Vec::new();
        let mut never = 0;
        for t in ts {
            match survivor_first.get(&t) {
                Some(at) => times.push(*at - killed),
                None => never += 1,
            }
        }
        times.sort();
        (times, never)
    };
    let (over, never) = taken(&mut held.iter().copied());
    let held_claims: BTreeMap<usize, f64> = claimed
        .iter()
        .filter_map(|(k, left)| Some((claimed_conversation(k)?, *left)))
        .collect();
    let (over_claimed, never_claimed) = taken(&mut held_claims.keys().copied());
    // Steady state, for reference: event → reply of the messages sent until a second before
    // the kill.
    let replied: HashMap<&str, Instant> = posts.iter().map(|p| (p.text.as_str(), p.at)).collect();
    let mut steady: Vec<Duration> = sent
        .iter()
        .filter(|s| s.3 + Duration::from_secs(1) < killed)
        .filter_map(|(t, m, _, at)| Some(*replied.get(format!("echo: t{t} m{m}").as_str())? - *at))
        .collect();
    steady.sort();
    let ids: Vec<(usize, usize, String)> = sent
        .iter()
        .map(|(t, m, e, _)| (*t, *m, e.clone()))
        .collect();
    let checked = check(slack, &ids);

    println!(
        "anima run ×2 on one PostgreSQL database, failover: {THREADS} conversations, paced 100/s, model {MODEL_MS} ms, claim lease {lease} s"
    );
    println!(
        "start → connected        {}",
        connected
            .iter()
            .map(|c| format!("{:.0} ms", c.as_secs_f64() * 1e3))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "messages                 {} in {:.1} s ({:.1} s before the kill); replies {}",
        sent.len(),
        sent.last().map_or(0.0, |s| (s.3 - sent[0].3).as_secs_f64()),
        (killed - sent[0].3).as_secs_f64(),
        per_daemon(&posters.count(&posts))
    );
    let q = |v: &[Duration], p: f64| {
        v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1)))
            .copied()
            .map_or("-".into(), secs)
    };
    let ms = |v: &[Duration], p: f64| {
        v.get(((v.len() as f64 * p) as usize).min(v.len().saturating_sub(1)))
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    println!(
        "up to 1 s before the kill event → reply p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        ms(&steady, 0.5),
        ms(&steady, 0.99),
        ms(&steady, 1.0)
    );
    println!(
        "dead one's conversations {} replied in before the kill; kill → the survivor's first reply there: first {}, median {}, last {} ({} never)",
        held.len(),
        q(&over, 0.0),
        q(&over, 0.5),
        q(&over, 1.0),
        never
    );
    let lefts: Vec<f64> = held_claims.values().copied().collect();
    println!(
        "claims held at the kill  {} (lease left {:.1}–{:.1} s; the survivor looks for unheld conversations every {:.2} s); kill → the survivor's first reply there: first {}, median {}, last {} ({} never)",
        held_claims.len(),
        lefts.iter().copied().fold(f64::INFINITY, f64::min),
        lefts.iter().copied().fold(0.0, f64::max),
        (lease as f64 / 4.0).clamp(0.1, 5.0),
        q(&over_claimed, 0.0),
        q(&over_claimed, 0.5),
        q(&over_claimed, 1.0),
        never_claimed
    );
    if !held_claims.is_empty() {
        let detail: Vec<String> = held_claims
            .iter()
            .map(|(t, left)| {
                let at = survivor_first
                    .get(t)
                    .map_or("never".into(), |at| secs(*at - killed));
                format!("t{t}: left {left:.1} s, answered {at}")
            })
            .collect();
        println!("  each                   {}", detail.join("; "));
    }
    let failover = over.last().copied();
    let target = Duration::from_secs(lease + 5);
    println!(
        "failover                 {} (kill → the survivor has replied in every conversation of the dead one); target ≤ {} s: {}",
        failover.map_or("-".into(), secs),
        lease + 5,
        match failover {
            Some(f) if f <= target && never == 0 => "met",
            _ => "MISSED",
        }
    );
    if !after_kill_by_dead.is_empty() {
        println!(
            "ODD: replies attributed to the dead daemon after its kill: {}",
            first(&after_kill_by_dead)
        );
    }
    let log = ds[0].log();
    println!(
        "survivor's log           {} × \"picking up open conversations no daemon holds\", {} warnings, {} errors",
        log.matches("picking up open conversations no daemon holds").count(),
        log.lines().filter(|l| l.contains("WARN")).count(),
        log.lines().filter(|l| l.contains("ERROR")).count()
    );
    println!("checks                   {}", checked.line(sent.len()));
    keep_logs(&ds);
    checked.or_fail(sent.len(), &ds);
}

/// With `ANIMA_LOAD_LOGS=<dir>`, each daemon's log is written there (`daemon-<i>.log`).
pub fn keep_logs(ds: &[Daemon]) {
    let Some(dir) = std::env::var_os("ANIMA_LOAD_LOGS") else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    std::fs::create_dir_all(&dir).unwrap();
    for (i, d) in ds.iter().enumerate() {
        std::fs::write(dir.join(format!("daemon-{i}.log")), d.log()).unwrap();
    }
}
