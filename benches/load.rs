//! Load harness for `anima run`: `cargo bench --bench load`.
//!
//! The real (release) binary against the fake Slack (Socket Mode) and a zero-latency fake
//! model, all on loopback. 100 threads × 10 messages; each thread's messages are sent in order,
//! the threads interleaved. Reports start → connected, throughput, the latency from an event
//! leaving the fake Slack to its reply arriving there (this includes the fake model's HTTP
//! round trip, so it is an upper bound on anima's own overhead), and the daemon's idle and
//! peak resident memory.
//!
//! With `ANIMA_LOAD_STREAM=1`, replies may stream (`[llm] stream` on, each message in a DM
//! thread): the same figures with the workspace's stream budget in play (most replies then
//! go whole, as the budget allows about 20 streams a minute), and the stream calls counted.
//! `ANIMA_LOAD_STREAM=model`: the model's answers stream but Slack replies do not.
//!
//! With `ANIMA_LOAD_FLOOD=1`, the paced phase lasts a minute, and beside it 1,000 top-level
//! messages that do not address the soul arrive in a channel of `[autonomy] channels` (one in
//! ten heated, on the soul's arcs): the model calls they cost (only what the gate lets
//! through) and the paced overhead of the addressed messages under the flood.
//! `ANIMA_LOAD_FLOOD=none`: the same minute without the flood, to compare.
//!
//! With `ANIMA_BENCH_POSTGRES_URL` (a server the bench may create a database on), the soul's
//! store is PostgreSQL instead of SQLite (`[store] backend = "postgres"`).
//!
//! With `ANIMA_LOAD_DAEMONS=2` (PostgreSQL only), that many daemons share the one database,
//! and the fake Slack gives each envelope to any of their Socket Mode connections, sending one
//! not acknowledged within 3 s again, as Slack does: the same figures for all of them
//! together, and the replies each posted. `ANIMA_LOAD_FAILOVER=1`: two daemons under paced
//! load, one SIGKILLed, and how soon the survivor answers the dead one's conversations
//! (`ANIMA_LOAD_LEASE`: `[store] claim_lease_secs`, default 30). See `load/daemons.rs`.
//!
//! Every run ends with the checks: each message answered exactly once, each conversation in
//! order. A run that fails them fails the bench.

#[path = "../tests/support/mod.rs"]
mod support;

#[path = "load/check.rs"]
mod check;
#[path = "load/daemons.rs"]
mod daemons;
#[path = "load/watch.rs"]
mod watch;

use std::time::{Duration, Instant};

use serde_json::json;
use support::daemon::{home, Daemon};
use support::slack::FakeSlack;
use support::FakeModel;

const THREADS: usize = 100;
const MESSAGES: usize = 10;

fn rss_kb(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// CPU time process `pid` has used (user + system), in clock ticks (10 ms).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // The fields after the command's name, which is in parentheses: utime and stime are the
    // 14th and 15th of the whole line.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(2)
        .filter_map(|v| v.parse().ok())
        .collect();
    f.iter().sum()
}

/// CPU ticks used by each of these processes now.
fn cpu_now(pids: &[u32]) -> std::collections::HashMap<u32, u64> {
    pids.iter().map(|p| (*p, cpu_ticks(*p))).collect()
}

/// The CPU (ms) these processes used between two `cpu_now`s (a process first seen in the
/// second used all of its own since).
fn cpu_ms(
    before: &std::collections::HashMap<u32, u64>,
    after: &std::collections::HashMap<u32, u64>,
) -> f64 {
    after
        .iter()
        .map(|(p, t)| t.saturating_sub(*before.get(p).unwrap_or(&0)))
        .sum::<u64>() as f64
        * 10.0
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() as f64 * p) as usize).min(sorted.len() - 1)]
}

/// For each sent message, the time until its echo was posted, sorted.
fn latencies(slack: &FakeSlack, sent: &[(String, Instant)]) -> Vec<Duration> {
    let posts = slack.posts();
    let by_text: std::collections::HashMap<&str, Instant> =
        posts.iter().map(|p| (p.text.as_str(), p.at)).collect();
    let mut out: Vec<Duration> = sent
        .iter()
        .filter_map(|(text, at)| by_text.get(text.as_str()).map(|p| p.duration_since(*at)))
        .collect();
    out.sort();
    out
}

/// The cumulative buckets of `anima_reply_overhead_seconds`, summed over the daemons: (upper
/// bound s, count).
fn overhead_buckets(ds: &[Daemon]) -> Vec<(f64, u64)> {
    let mut sum: Vec<(f64, u64)> = Vec::new();
    for d in ds {
        let (_, text) = support::daemon::http("GET", &d.url("/metrics"), &[], "");
        let buckets = text
            .lines()
            .filter_map(|l| l.strip_prefix("anima_reply_overhead_seconds_bucket{le=\""))
            .filter_map(|l| {
                let (le, n) = l.split_once("\"} ")?;
                Some((le.parse().unwrap_or(f64::INFINITY), n.parse().ok()?))
            });
        if sum.is_empty() {
            sum = buckets.collect();
        } else {
            for (s, (_, n)) in sum.iter_mut().zip(buckets) {
                s.1 += n;
            }
        }
    }
    sum
}

/// "≤ X ms": the smallest bucket bound holding the `p` quantile.
fn bucket_bound(buckets: &[(f64, u64)], p: f64) -> String {
    let total = buckets.last().map_or(0, |b| b.1);
    let want = (total as f64 * p).ceil() as u64;
    match buckets.iter().find(|(_, n)| *n >= want) {
        Some((le, _)) if le.is_finite() => format!("≤ {:.2} ms", le * 1e3),
        _ => "> 30 s".to_string(),
    }
}

/// Unaddressed messages in the flood.
const FLOOD: usize = 1_000;

/// The `n`th message of the flood: top level in a listened channel, mostly small talk, one in
/// ten heated on the soul's arcs.
fn flood_event(n: usize) -> serde_json::Value {
    const CHAT: [&str; 4] = [
        "morning all",
        "anyone up for lunch later?",
        "lol same",
        "the coffee machine is fixed",
    ];
    const HEATED: [&str; 2] = [
        "This refactor is stupid, you broke the compiler build AGAIN!",
        "I hate this design, your test suite is useless",
    ];
    let text = if n % 10 == 9 {
        HEATED[n / 10 % 2]
    } else {
        CHAT[n % 4]
    };
    json!({"type":"message","channel":"CFLOOD","channel_type":"channel","user":format!("U9{:03}", n % 40),
           "text":text,"ts":format!("1700001000.{:06}", n + 1)})
}

fn main() {
    let (n, failover) = daemons::wanted();
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    let stream = std::env::var_os("ANIMA_LOAD_STREAM").is_some();
    // ANIMA_LOAD_FLOOD=none: the same minute of paced messages, without the flood.
    let minute = std::env::var_os("ANIMA_LOAD_FLOOD").is_some();
    let flood = minute && std::env::var("ANIMA_LOAD_FLOOD").map_or(true, |v| v != "none");
    let autonomy = if flood {
        "\n[autonomy]\nchannels = [\"CFLOOD\"]\n"
    } else {
        ""
    };
    let home = if stream {
        support::Home::new(
            "anthropic",
            &model.url(),
            &format!(
                "stream = true\n\n[slack]\nmode = \"socket\"\napi_base_url = \"{}\"\nstream_replies = {}\n\n[http]\nlisten = \"127.0.0.1:0\"\n\n[pipeline]\nmemory_window = 20\n{autonomy}",
                slack.api_url(),
                // ANIMA_LOAD_STREAM=model: the model's answers stream, Slack replies do not.
                std::env::var("ANIMA_LOAD_STREAM").map_or(true, |v| v != "model")
            ),
        )
    } else {
        home(
            &model,
            &slack,
            "socket",
            &format!("[pipeline]\nmemory_window = 20\n{autonomy}"),
        )
    };
    // A DM thread's message may be answered by a stream; a top-level one never is.
    let event = |t: usize, m: usize, text: &str| {
        let mut ev = daemons::dm(t, m, text);
        if stream {
            ev["thread_ts"] = json!("1690000000.000001");
        }
        ev
    };

    let mut env = vec![(
        "ANIMA_LOG",
        if n > 1 {
            "anima=warn,anima::daemon=info,anima::router::claims=info"
        } else {
            "anima=warn,anima::daemon=info"
        }
        .to_string(),
    )];
    let watching = watch::wanted();
    if watching {
        env.push(("ANIMA_INSPECT_TOKEN", watch::TOKEN.to_string()));
    }
    let keep = watch::keep_lines();
    if !keep.is_empty() {
        let cfg = std::fs::read_to_string(home.config()).unwrap();
        std::fs::write(home.config(), format!("{cfg}{keep}")).unwrap();
    }
    let lease = daemons::lease();
    let mut database = None;
    if let Ok(server) = std::env::var("ANIMA_BENCH_POSTGRES_URL") {
        let url = support::postgres::fresh_database_on(&server);
        let cfg = std::fs::read_to_string(home.config()).unwrap();
        std::fs::write(
            home.config(),
            format!("{cfg}\n[store]\nbackend = \"postgres\"\nclaim_lease_secs = {lease}\n"),
        )
        .unwrap();
        env.push(("ANIMA_DATABASE_URL", url.clone()));
        database = Some(url);
        println!("store                    PostgreSQL");
    }
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    if n > 1 {
        slack.spread(daemons::SPREAD);
        slack.redeliver_unacked_after(daemons::REDELIVER);
    }
    if failover {
        let database = database.expect("PostgreSQL (daemons::wanted)");
        daemons::failover(&model, &slack, &home, &database, &env, lease);
        return;
    }
    let started = Instant::now();
    let (ds, connected) = if n == 1 {
        let d = Daemon::start_env(&home, &env);
        slack.wait(20, "a Socket Mode connection", |s| s.sockets() > 0);
        (vec![d], vec![started.elapsed()])
    } else {
        daemons::start(&home, &slack, &env, n)
    };
    let posters = daemons::Posters::watch(&ds, &slack);
    // One `anima watch` following the (first) daemon's soul stream throughout, if asked.
    let watcher = watching.then(|| watch::Watcher::start(&home, &ds[0]));
    std::thread::sleep(Duration::from_secs(if watching { 2 } else { 1 }));
    let idle_rss: Vec<u64> = ds.iter().map(|d| rss_kb(d.pid(), "VmRSS:")).collect();

    let total = THREADS * MESSAGES;
    let mut sent = Vec::with_capacity(total);
    let mut ids = Vec::new();
    // The CPU the burst costs: the daemons', and their PostgreSQL backends'.
    let anima_pids: Vec<u32> = ds.iter().map(Daemon::pid).collect();
    let backends = || database.as_deref().map_or(Vec::new(), daemons::backends);
    let me = [std::process::id()];
    let cpu_before = (cpu_now(&anima_pids), cpu_now(&backends()), cpu_now(&me));
    let run = Instant::now();
    for m in 0..MESSAGES {
        for t in 0..THREADS {
            let text = format!("t{t} m{m}");
            let id = format!("E{t}-{m}");
            slack.send_event(event(t, m, &text), &id, 0);
            sent.push((format!("echo: {text}"), Instant::now()));
            ids.push((t, m, id));
        }
    }
    // Replies to the addressed messages (in their DMs), whole.
    let done = |s: &FakeSlack| {
        s.posts()
            .iter()
            .filter(|p| !p.streaming && p.channel.starts_with('D'))
            .count()
    };
    slack.wait(300, "every reply", |s| done(s) >= total);
    let elapsed = run.elapsed();
    let cpu = (
        cpu_ms(&cpu_before.0, &cpu_now(&anima_pids)),
        cpu_ms(&cpu_before.1, &cpu_now(&backends())),
        cpu_ms(&cpu_before.2, &cpu_now(&me)),
    );

    let burst_latencies = latencies(&slack, &sent);
    let duplicates = done(&slack) - total;

    let before = overhead_buckets(&ds);
    // Paced: 500 more messages at 250/s, well under capacity, for latency without queueing;
    // with the flood, a minute of them, and one unaddressed message every 60 ms beside.
    let paced_total = if minute { 15_000 } else { 500 };
    let model_calls_before = model.requests().len();
    let mut flooded = 0;
    let mut paced = Vec::new();
    let pace = Duration::from_millis(4);
    let mut next = Instant::now();
    for i in 0..paced_total {
        let (t, m) = (i % THREADS, MESSAGES + i / THREADS);
        let text = format!("t{t} m{m}");
        let id = format!("P{t}-{m}");
        slack.send_event(event(t, m, &text), &id, 0);
        paced.push((format!("echo: {text}"), Instant::now()));
        ids.push((t, m, id));
        if flood && i % 15 == 0 && flooded < FLOOD {
            slack.send_event(flood_event(flooded), &format!("F{flooded}"), 0);
            flooded += 1;
        }
        next += pace;
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
    }
    slack.wait(300, "the paced replies", |s| {
        done(s) >= total + paced_total + duplicates
    });
    let paced_latencies = latencies(&slack, &paced);
    let after = overhead_buckets(&ds);
    let paced_overhead: Vec<(f64, u64)> = after
        .iter()
        .zip(&before)
        .map(|((le, a), (_, b))| (*le, a - b))
        .collect();
    let peak_rss: Vec<u64> = ds.iter().map(|d| rss_kb(d.pid(), "VmHWM:")).collect();
    // A doubled reply may come late (a redelivered message answered again): give it a second.
    std::thread::sleep(Duration::from_secs(1));
    posters.sample();
    let checked = check::check(&slack, &ids);
    let mb = |kb: &[u64]| {
        kb.iter()
            .map(|k| format!("{:.1}", *k as f64 / 1024.0))
            .collect::<Vec<_>>()
            .join(" / ")
    };

    let streamed = if stream { ", replies may stream" } else { "" };
    println!("anima run, {THREADS} threads × {MESSAGES} messages, zero-latency model, loopback{streamed}");
    if n > 1 {
        println!(
            "daemons                  {n} on one PostgreSQL database (claim lease {lease} s); figures for all together, RSS each"
        );
    }
    println!(
        "start → connected        {:>8} ms",
        connected
            .iter()
            .map(|c| format!("{:.0}", c.as_secs_f64() * 1e3))
            .collect::<Vec<_>>()
            .join(" / ")
    );
    println!(
        "burst turns              {:>8}   ({} duplicates)",
        burst_latencies.len(),
        duplicates
    );
    println!(
        "burst throughput         {:>8.0} turns/s",
        total as f64 / elapsed.as_secs_f64()
    );
    println!(
        "burst CPU per turn       {:>8.2} ms anima{}",
        cpu.0 / total as f64,
        if database.is_some() {
            format!(", {:.2} ms its PostgreSQL backends", cpu.1 / total as f64)
        } else {
            String::new()
        },
    );
    println!(
        "                         {:>8.2} ms the fakes and the bench; {} cores, busy {:.0} % over the burst",
        cpu.2 / total as f64,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        (cpu.0 + cpu.1 + cpu.2) / 10.0
            / elapsed.as_secs_f64()
            / std::thread::available_parallelism().map_or(1, |n| n.get()) as f64
    );
    println!(
        "burst event → reply p99  {:>8.1} ms (includes queueing)",
        percentile(&burst_latencies, 0.99).as_secs_f64() * 1e3
    );
    println!(
        "paced 250/s → reply p50  {:>8.1} ms",
        percentile(&paced_latencies, 0.50).as_secs_f64() * 1e3
    );
    println!(
        "paced 250/s → reply p99  {:>8.1} ms",
        percentile(&paced_latencies, 0.99).as_secs_f64() * 1e3
    );
    println!(
        "paced overhead p50       {:>8}    (anima's own: accepted → posted, less model time)",
        bucket_bound(&paced_overhead, 0.50)
    );
    println!(
        "paced overhead p99       {:>8}",
        bucket_bound(&paced_overhead, 0.99)
    );
    println!("idle RSS                 {:>8} MB", mb(&idle_rss));
    println!("peak RSS                 {:>8} MB", mb(&peak_rss));
    if n > 1 {
        println!(
            "replies by daemon        {}",
            daemons::per_daemon(&posters.count(&slack.posts()))
        );
    }
    println!(
        "traces                   {}",
        if keep.is_empty() {
            "kept (keep_turns default)".to_string()
        } else {
            keep.trim().replace('\n', " ")
        }
    );
    if let Some(w) = &watcher {
        println!(
            "watching                 one `anima watch --json`: {} records read",
            w.records.load(std::sync::atomic::Ordering::Relaxed)
        );
        assert!(
            w.records.load(std::sync::atomic::Ordering::Relaxed) > 0,
            "the watcher read nothing"
        );
    }
    println!("checks                   {}", checked.line(ids.len()));
    if flood {
        // Give the last unaddressed messages time to be heard and any unasked reply to go.
        std::thread::sleep(Duration::from_secs(2));
        // Counted in the inbox: the gate's log keeps only the newest decisions.
        let db = rusqlite::Connection::open(home.data().join("anima.db")).unwrap();
        let (heard, spoken): (i64, i64) = db
            .query_row(
                "SELECT count(*), coalesce(sum(status != 'overheard'), 0) FROM inbox WHERE heard_in = 'CFLOOD'",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        let flood_calls = model.requests().len() - model_calls_before - paced_total;
        let unasked = slack
            .posts()
            .iter()
            .filter(|p| p.channel == "CFLOOD")
            .count();
        println!(
            "flood                    {flooded} unaddressed in a minute: {heard} heard, {spoken} spoken to, model calls {flood_calls}, unasked replies {unasked}"
        );
    }
    if stream {
        let span = run.elapsed().as_secs_f64() / 60.0;
        let n = |m: &str| slack.calls(m).len();
        println!(
            "stream calls             start {} / append {} / stop {} / update {} in {:.1} min (429s: {})",
            n("chat.startStream"),
            n("chat.appendStream"),
            n("chat.stopStream"),
            n("chat.update"),
            span,
            ds[0].log().matches("rate limited").count()
        );
    }
    daemons::keep_logs(&ds);
    checked.or_fail(ids.len(), &ds);
}
