//! `anima watch` through the real binary, against a small server here that speaks the soul
//! stream's contract (`GET /api/inspect/stream`: server-sent events, each `data:` one record
//! as JSON, `Authorization: Bearer $ANIMA_INSPECT_TOKEN`, 401 for any other): lines filtered
//! by phase and thread, `--json` lines that read back as records, escape sequences shown and
//! never sent raw, usage errors for an unknown phase and a missing token, a clear error on
//! 401 and 404, reconnecting when the stream ends, and on PostgreSQL every daemon the store
//! lists, merged.

use crate::support;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::Child;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::get;
use serde_json::json;
use support::*;

const TOKEN: &str = "watch-token-123";

/// What the test server does once it has sent its frames.
#[derive(Clone, Copy, PartialEq)]
enum Then {
    /// Keeps the stream open (a daemon that runs on).
    Hold,
    /// Ends the stream (a daemon that restarts): the next connection gets the frames again.
    Close,
}

/// The test's stand-in for a daemon's stream route.
struct StreamServer {
    addr: SocketAddr,
    /// Connections that passed the token check.
    connections: Arc<AtomicUsize>,
}

/// Serves `frames` (raw SSE text, sent in order, each its own chunk) to every request with the
/// right token; 401 to any other, 404 when `no_token` (a daemon without ANIMA_INSPECT_TOKEN).
fn serve(frames: Vec<String>, then: Then, no_token: bool) -> StreamServer {
    let connections = Arc::new(AtomicUsize::new(0));
    let count = connections.clone();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            let route = move |headers: HeaderMap| {
                let (frames, count) = (frames.clone(), count.clone());
                async move {
                    if no_token {
                        return Response::builder().status(404).body(Body::empty()).unwrap();
                    }
                    let auth = headers.get("authorization").and_then(|v| v.to_str().ok());
                    if auth != Some(&format!("Bearer {TOKEN}")) {
                        return Response::builder().status(401).body(Body::empty()).unwrap();
                    }
                    count.fetch_add(1, Ordering::SeqCst);
                    let chunks = futures_util::stream::iter(
                        frames
                            .into_iter()
                            .map(|f| Ok::<_, std::io::Error>(Bytes::from(f))),
                    );
                    let body = match then {
                        Then::Hold => Body::from_stream(futures_util::StreamExt::chain(
                            chunks,
                            futures_util::stream::pending(),
                        )),
                        Then::Close => Body::from_stream(chunks),
                    };
                    Response::builder()
                        .header("content-type", "text/event-stream")
                        .body(body)
                        .unwrap()
                }
            };
            let app = axum::Router::new().route("/api/inspect/stream", get(route));
            axum::serve(listener, app).await.unwrap();
        });
    });
    StreamServer {
        addr: rx.recv().unwrap(),
        connections,
    }
}

/// A record's SSE frame.
fn frame(phase: &str, thread: &str, text: &str, at: i64) -> String {
    let record = json!({"phase": phase, "trace": "0123456789abcdef", "thread": thread, "at": at, "text": text});
    format!("data: {record}\n\n")
}

/// The frames every test server sends: a comment, a record whose JSON is split over two data
/// lines, a terminal escape sequence, a keep-alive, other phases and threads, and a last one.
fn frames() -> Vec<String> {
    vec![
        ": connected\n\n".into(),
        frame("stimulus", "D1", "a message from U1", 1_700_000_000_000),
        "data: {\"phase\": \"model\", \"trace\": \"t2\",\r\ndata: \"thread\": \"D1\", \"at\": 1700000000100, \"text\": \"claude: 120 tokens in\"}\r\n\r\n".into(),
        frame("cognition", "D2", "\u{1b}[2J\u{1b}]0;pwned\u{7}thought", 1_700_000_000_200),
        ": keep-alive\n\n".into(),
        frame("model", "D2", "another thread's call", 1_700_000_000_300),
        frame("response", "D1", "the reply", 1_700_000_000_400),
        frame("model", "D1", "the last call", 1_700_000_000_500),
    ]
}

/// A home whose `[http] listen` is `addr` (the daemon `watch` follows on SQLite).
fn home_listening(addr: SocketAddr) -> Home {
    Home::on(
        Backend::Sqlite,
        "anthropic",
        "http://127.0.0.1:9",
        &format!("\n[http]\nlisten = \"{addr}\"\n"),
    )
}

/// `anima watch ARGS` running, with `token` (none: unset).
fn watch(home: &Home, args: &[&str], token: Option<&str>) -> Child {
    let mut all = vec!["watch"];
    all.extend_from_slice(args);
    let mut cmd = anima_command(&home.config(), home.dir.path(), &all);
    if let Some(t) = token {
        cmd.env("ANIMA_INSPECT_TOKEN", t);
    }
    spawn(&mut cmd)
}

/// The first `n` lines `child` prints (within `secs`), then it is stopped; its stderr too.
fn lines(mut child: Child, n: usize, secs: u64) -> (Vec<String>, String) {
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).split(b'\n') {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(secs);
    let mut got = Vec::new();
    while got.len() < n {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(line) => {
                assert!(
                    !line.contains(&0x1b) && !line.contains(&0x07),
                    "a control character reached the terminal: {line:?}"
                );
                got.push(String::from_utf8(line).unwrap());
            }
            Err(_) => break,
        }
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(got.len(), n, "lines: {got:#?}\nstderr: {stderr}");
    (got, stderr)
}

#[test]
fn lines_are_filtered_by_phase_and_thread() {
    let server = serve(frames(), Then::Hold, false);
    let home = home_listening(server.addr);
    let child = watch(&home, &["--phase", "model", "--thread", "D1"], Some(TOKEN));
    let (got, _) = lines(child, 2, 20);
    assert!(got[0].contains(" model "), "{got:?}");
    assert!(got[0].contains(" D1 claude: 120 tokens in"), "{got:?}");
    assert!(got[0].starts_with("22:13:20.100 "), "{got:?}");
    assert!(got[1].ends_with(" D1 the last call"), "{got:?}");

    let child = watch(
        &home,
        &["--phase", "stimulus", "--phase", "response"],
        Some(TOKEN),
    );
    let (got, _) = lines(child, 2, 20);
    assert!(got[0].contains("stimulus  D1 a message from U1"), "{got:?}");
    assert!(got[1].contains("response  D1 the reply"), "{got:?}");
}

#[test]
fn json_lines_read_back_as_records_and_escapes_are_never_printed_raw() {
    let server = serve(frames(), Then::Hold, false);
    let home = home_listening(server.addr);
    let (got, _) = lines(watch(&home, &["--json"], Some(TOKEN)), 6, 20);
    let records: Vec<anima::window::Record> = got
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let phases: Vec<&str> = records.iter().map(|r| r.phase.as_str()).collect();
    assert_eq!(
        phases,
        [
            "stimulus",
            "model",
            "cognition",
            "model",
            "response",
            "model"
        ]
    );
    assert_eq!(records[2].text, "\u{1b}[2J\u{1b}]0;pwned\u{7}thought");

    let (got, _) = lines(watch(&home, &["--thread", "D2"], Some(TOKEN)), 2, 20);
    assert!(
        got[0].contains("cognition D2 \\u{1b}[2J\\u{1b}]0;pwned\\u{7}thought"),
        "{got:?}"
    );
}

#[test]
fn an_unknown_phase_and_a_missing_token_are_usage_errors() {
    let home = home_listening("127.0.0.1:9".parse().unwrap());
    let r = home.run_env(
        &["watch", "--phase", "dreaming"],
        "",
        &[("ANIMA_INSPECT_TOKEN", TOKEN)],
    );
    assert_eq!(r.status, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("\"dreaming\" is not a phase"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains(
            "stimulus, plan, prompt, model, cognition, decision, memory, response, error"
        ),
        "{}",
        r.stderr
    );
    let r = home.run(&["watch"], "");
    assert_eq!(r.status, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("ANIMA_INSPECT_TOKEN is not set: the daemon serves its stream only with ANIMA_INSPECT_TOKEN set"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
}

#[test]
fn a_refused_token_or_a_daemon_without_one_is_a_clear_error() {
    let server = serve(frames(), Then::Hold, false);
    let home = home_listening(server.addr);
    let r = home.run_env(&["watch"], "", &[("ANIMA_INSPECT_TOKEN", "wrong")]);
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert!(r.stderr.contains("answered HTTP 401"), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("the daemon serves its stream only with ANIMA_INSPECT_TOKEN set"),
        "{}",
        r.stderr
    );
    let tokenless = serve(frames(), Then::Hold, true);
    let home = home_listening(tokenless.addr);
    let r = home.run_env(&["watch"], "", &[("ANIMA_INSPECT_TOKEN", TOKEN)]);
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert!(r.stderr.contains("answered HTTP 404"), "{}", r.stderr);
}

#[test]
fn a_stream_that_ends_is_followed_again_and_the_restart_is_named() {
    let server = serve(
        vec![frame("model", "D1", "a call", 1_700_000_000_000)],
        Then::Close,
        false,
    );
    let home = home_listening(server.addr);
    let (got, stderr) = lines(watch(&home, &[], Some(TOKEN)), 3, 20);
    assert!(got.iter().all(|l| l.ends_with(" D1 a call")), "{got:?}");
    assert!(server.connections.load(Ordering::SeqCst) >= 3);
    assert!(stderr.contains("the stream ended"), "{stderr}");
    assert!(stderr.contains("connecting again in"), "{stderr}");
    assert!(stderr.contains(&server.addr.to_string()), "{stderr}");
}

/// On PostgreSQL, every daemon the store lists is followed at the address it joined with (one
/// listening on every address of this machine through the loopback), their lines merged,
/// each naming its daemon.
#[test]
fn on_postgres_every_daemon_is_followed_and_named() {
    if std::env::var(support::postgres::POSTGRES_URL).map_or(true, |u| u.is_empty()) {
        eprintln!("skipped: {} is not set", support::postgres::POSTGRES_URL);
        return;
    }
    let one = serve(
        vec![frame("model", "D1", "from one", 1_700_000_000_000)],
        Then::Hold,
        false,
    );
    let two = serve(
        vec![frame("model", "D2", "from two", 1_700_000_000_001)],
        Then::Hold,
        false,
    );
    let home = Home::on(Backend::Postgres, "anthropic", "http://127.0.0.1:9", "");
    let here = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap()
        .trim()
        .to_string();
    let config = anima::config::StoreConfig {
        backend: anima::config::StoreBackend::Postgres,
        pool_size: 2,
        claim_lease_secs: 60,
    };
    let url = anima::config::secret::Secret::new(home.database().unwrap());
    let daemon = || {
        wait(anima::memory::open::open_with(
            &config,
            &home.data().join("anima.db"),
            Some(&url),
        ))
        .unwrap()
    };
    let (a, b) = (daemon(), daemon());
    let lease = Duration::from_secs(60);
    wait(a.join("elsewhere", 11, &one.addr.to_string(), lease)).unwrap();
    let unspecified = format!("0.0.0.0:{}", two.addr.port());
    wait(b.join(&here, 22, &unspecified, lease)).unwrap();
    let listed: Vec<String> = wait(a.daemons())
        .unwrap()
        .into_iter()
        .map(|d| d.listen)
        .collect();
    assert_eq!(listed, [one.addr.to_string(), unspecified]);

    let (mut got, stderr) = lines(watch(&home, &[], Some(TOKEN)), 2, 30);
    got.sort();
    assert!(
        got[0].contains("[elsewhere pid 11] model     D1 from one"),
        "{got:?}"
    );
    assert!(
        got[1].contains(&format!("[{here} pid 22] model     D2 from two")),
        "{got:?}"
    );
    assert!(stderr.contains("following elsewhere pid 11"), "{stderr}");
    home.assert_backend_kept();
}

/// A real daemon listening on `127.0.0.1:0` (a port chosen at start) is found where it bound
/// (the daemon row on PostgreSQL, the file beside the database on SQLite) and followed: a
/// message's turn goes by as JSON lines, its stimulus and its response.
#[test]
fn a_daemon_on_a_port_chosen_at_start_is_followed() {
    let (model, slack) = (FakeModel::start(), support::slack::FakeSlack::start());
    model.respond_with(|turn| answer(&format!("heard: {}", current_message(turn))));
    let home = support::daemon::home(&model, &slack, "socket", "");
    assert!(
        std::fs::read_to_string(home.config())
            .unwrap()
            .contains("listen = \"127.0.0.1:0\""),
        "the daemon takes a free port"
    );
    let d = support::daemon::Daemon::start_env(&home, &[("ANIMA_INSPECT_TOKEN", TOKEN)]);
    slack.wait_connected_or(|| d.log());
    let mut child = watch(
        &home,
        &["--json", "--phase", "stimulus,response"],
        Some(TOKEN),
    );
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    // The stream holds no past: a message every 2 s until one's turn goes by whole.
    let ours = |r: &anima::window::Record| r.thread.starts_with("C0LAN2Q65:");
    let deadline = Instant::now() + Duration::from_secs(30);
    let (mut sent, mut next) = (0, Instant::now());
    let mut seen: Vec<anima::window::Record> = Vec::new();
    while !seen
        .iter()
        .any(|r| r.phase.as_str() == "response" && ours(r))
    {
        if Instant::now() >= next {
            sent += 1;
            let ts = format!("1515449522.{sent:06}");
            let text = format!("<@{}> hello {sent}", support::slack::BOT_USER);
            slack.send_event(
                json!({"type": "app_mention", "user": "U061F7AUR", "text": text, "ts": ts,
                       "channel": "C0LAN2Q65", "event_ts": ts}),
                &format!("Ev{sent}"),
                0,
            );
            next = Instant::now() + Duration::from_secs(2);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "no response record; seen: {seen:?}\n{}",
            d.log()
        );
        if let Ok(line) = rx.recv_timeout(left.min(Duration::from_millis(100))) {
            seen.push(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}")));
        }
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("fixed port"), "{stderr}");
    assert!(
        seen.iter()
            .any(|r| r.phase.as_str() == "stimulus" && ours(r)),
        "{seen:?}"
    );
    assert!(seen
        .iter()
        .all(|r| ["stimulus", "response"].contains(&r.phase.as_str())));
}

/// Ctrl-C while records pour in (twenty thousand sent at once, then the stream held open) ends
/// the watch at once, with success: the interrupt is heard even when it comes mid-print.
#[test]
fn ctrl_c_mid_flood_ends_the_watch() {
    let mut flood = vec![": connected\n\n".to_string()];
    flood.extend(
        (0..20_000).map(|n| frame("model", "D1", &format!("call {n}"), 1_700_000_000_000 + n)),
    );
    let server = serve(flood, Then::Hold, false);
    let home = home_listening(server.addr);
    let mut child = watch(&home, &["--json"], Some(TOKEN));
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut n = 0usize;
        for line in BufReader::new(stdout).split(b'\n') {
            if line.is_err() {
                break;
            }
            n += 1;
            if n == 1 {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(20))
        .expect("a first line");
    let interrupted = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupted.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("anima watch did not stop on Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
}
