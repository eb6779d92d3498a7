//! MCP tool calls' cost: `cargo bench --bench tools`.
//!
//! Against the fake stdio server of the tests (`tests/support/fake_mcp.py`), reports the
//! median and p90 of
//!   * a whole call through `Tools::call` (may it run, the arguments read and checked against
//!     the schema, the JSON-RPC round trip through rmcp, the result cut, the span and log),
//!   * the same request written to a second copy of the server by hand (one line out, one line
//!     back, no SDK): the server's own time and the pipe's, which a tool call cannot avoid,
//!   * the difference, anima's overhead beyond the tool's own time (target: median ≤ 2 ms),
//!   * the schema check alone.
//!
//! And the start-up of three stdio servers (spawned, `initialize`, `tools/list`), until all
//! three are ready (target: ≤ 200 ms beyond anima's own start); and a 50 MB result, read and
//! cut to the default 16,000 characters as it streams past: how long the call takes and the
//! peak resident memory it costs over idle (Linux: VmHWM after resetting it; target < 10 MB,
//! answered at once rather than after the timeout). Figures are printed, not asserted.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anima::config::{ToolServer, ToolTransport};
use anima::tools::{schema, Outcome, Tools};

const FAKE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/fake_mcp.py");
const CALLS: usize = 500;

fn python() -> String {
    let out = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3 is on the PATH");
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn server(name: &str, python: &str) -> ToolServer {
    ToolServer {
        name: name.into(),
        transport: ToolTransport::Stdio {
            command: vec![python.into(), FAKE.into()],
            env: Vec::new(),
            dir: std::env::temp_dir(),
        },
        allow: Vec::new(),
        timeout: Duration::from_secs(30),
        max_result_chars: 16_000,
    }
}

fn report(what: &str, mut us: Vec<f64>) -> f64 {
    us.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| us[((us.len() as f64 - 1.0) * q).round() as usize];
    println!(
        "{what:<44} median {:>8.1} µs   p90 {:>8.1} µs",
        at(0.5),
        at(0.9)
    );
    at(0.5)
}

/// The same `tools/call` by hand: one line to the server, one line back.
fn raw_round_trips(python: &str) -> Vec<f64> {
    let mut child = Command::new(python)
        .arg(FAKE)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    let mut send = |msg: String| {
        writeln!(stdin, "{msg}").unwrap();
        stdin.flush().unwrap();
        line.clear();
        stdout.read_line(&mut line).unwrap();
    };
    send(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#.into());
    let mut times = Vec::with_capacity(CALLS);
    for i in 0..CALLS + 20 {
        let began = Instant::now();
        send(format!(
            r#"{{"jsonrpc":"2.0","id":{},"method":"tools/call","params":{{"name":"lookup","arguments":{{"term":"rust"}}}}}}"#,
            i + 1
        ));
        if i >= 20 {
            times.push(began.elapsed().as_secs_f64() * 1e6);
        }
    }
    let _ = child.kill();
    let _ = child.wait();
    times
}

fn main() {
    anima::tls::install();
    let python = python();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();

    // Start-up: three servers, until all are ready.
    let mut starts = Vec::new();
    for _ in 0..10 {
        let servers: Vec<ToolServer> = ["a", "b", "c"].iter().map(|n| server(n, &python)).collect();
        let began = Instant::now();
        let ms = rt.block_on(async {
            let tools = Tools::start(&servers);
            tools.settled(Duration::from_secs(30)).await;
            let ms = began.elapsed().as_secs_f64() * 1e3;
            assert!(tools.report().iter().all(|s| s.started));
            tools.shutdown().await;
            ms
        });
        starts.push(ms * 1000.0);
    }
    println!("three stdio servers started, in parallel (10 runs):");
    report("  spawn + initialize + tools/list, all three", starts);

    // Calls.
    let (whole, check) = rt.block_on(async {
        let tools = Tools::start(&[server("kb", &python)]);
        tools.settled(Duration::from_secs(30)).await;
        let mut whole = Vec::with_capacity(CALLS);
        for i in 0..CALLS + 20 {
            let began = Instant::now();
            let c = tools
                .call("kb", "lookup", Some("{\"term\": \"rust\"}"))
                .await;
            assert_eq!(c.outcome, Outcome::Ok, "{}", c.text);
            if i >= 20 {
                whole.push(began.elapsed().as_secs_f64() * 1e6);
            }
        }
        let info = tools.tool("kb", "lookup").ok().unwrap();
        let mut check = Vec::with_capacity(CALLS);
        for _ in 0..CALLS {
            let began = Instant::now();
            let args = schema::arguments(info.compiled(), Some("{\"term\": \"rust\"}"));
            std::hint::black_box(args.unwrap());
            check.push(began.elapsed().as_secs_f64() * 1e6);
        }
        tools.shutdown().await;
        (whole, check)
    });
    let raw = raw_round_trips(&python);
    println!("one tool call ({CALLS} calls, after 20 to warm up):");
    let w = report("  Tools::call, whole", whole);
    let r = report("  the same request by hand (server + pipe)", raw);
    println!(
        "{:<44} median {:>8.1} µs   (target ≤ 2000 µs)",
        "  anima's overhead (difference of medians)",
        w - r
    );
    report("  the schema check alone", check);

    big_result(&rt, &python);
}

/// A 50 MB result: its call's time, and the peak resident memory it costs over idle.
fn big_result(rt: &tokio::runtime::Runtime, python: &str) {
    let mut big = server("big", python);
    if let ToolTransport::Stdio { command, .. } = &mut big.transport {
        command.extend(["--big-mb".to_string(), "50".to_string()]);
    }
    big.timeout = Duration::from_secs(120);
    rt.block_on(async {
        let tools = Tools::start(&[big]);
        tools.settled(Duration::from_secs(30)).await;
        let mut runs = Vec::new();
        for _ in 0..3 {
            let idle = status_kb("VmRSS");
            // Resets VmHWM, the peak, to the memory resident now.
            let _ = std::fs::write("/proc/self/clear_refs", "5");
            let began = Instant::now();
            let c = tools.call("big", "big", None).await;
            let ms = began.elapsed().as_secs_f64() * 1e3;
            let peak = status_kb("VmHWM");
            assert!(
                c.text.contains("[cut: the result had 52428800 characters"),
                "{}",
                c.outcome.word()
            );
            runs.push((ms, idle, peak.saturating_sub(idle)));
        }
        tools.shutdown().await;
        println!("a 50 MB result, cut to 16,000 characters (3 runs):");
        for (ms, idle, over) in runs {
            println!(
                "  answered in {ms:>8.1} ms   idle RSS {idle} kB, peak over idle {over} kB   (target < 10 MB)"
            );
        }
    });
}

/// A figure of /proc/self/status, in kB (0 where there is none).
fn status_kb(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}
