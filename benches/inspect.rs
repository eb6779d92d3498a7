//! The inspector's server time with 10,000 traces kept: `cargo bench --bench inspect`.
//!
//! A store (SQLite; PostgreSQL too when `ANIMA_BENCH_POSTGRES_URL` or
//! `ANIMA_TEST_POSTGRES_URL` names a server the bench may create a database on) holding
//! 10,000 traces of real turns over 2,000 conversations of 500 people, a week of the inner
//! life's samples (2,016, as the scans keep), and the people. The inspector's routes are
//! served on loopback as the daemon serves them; each page and API route is asked for in
//! turn, rounds of each, and its server time (the handler's, measured by a layer around the
//! routes) is reported as a median and p95, beside the round trip the client saw.
//!
//! Then the soul stream: a client follows `/api/inspect/stream` while the engine runs turns
//! (a zero-latency model); each record's latency is from its `at` (when it happened, unix
//! ms) to the client reading it.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anima::config::secret::Secret;
use anima::engine::{Engine, Message, Perception};
use anima::inspect::{routes, Inspector};
use anima::llm::{BoxFuture, ChatRequest, Completion, Deltas, LlmError, Provider, Usage};
use anima::memory::{PsycheSample, Store, TraceRow};
use anima::soul::SoulFiles;
use futures_util::StreamExt;

const TRACES: usize = 10_000;
const CONVERSATIONS: usize = 2_000;
const PEOPLE: usize = 500;
const TOKEN: &str = "bench-token-0123456789";

/// Answers at once with a 2 KB answer of every step.
struct Instant0;

impl Provider for Instant0 {
    fn name(&self) -> &'static str {
        "bench"
    }
    fn model(&self) -> &str {
        "fixed"
    }
    fn complete<'a>(
        &'a self,
        _req: ChatRequest<'a>,
        _d: Option<&'a Deltas>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            Ok(Completion {
                text: answer(),
                model: "fixed".into(),
                stop_reason: Some("end_turn".into()),
                usage: Usage::default(),
                session: None,
            })
        })
    }
}

fn answer() -> String {
    let dialogue = "The port is at 93%. The remaining work is the event loop shim and two failing \
                    tests in the loader; I would start with the loader. "
        .repeat(6);
    format!(
        "<internal_monologue verb=\"pondered\">Tom is asking about the port again; he wants a \
         status and a next step, not a lecture.</internal_monologue>\n\
         <external_dialogue verb=\"explained\">{dialogue}</external_dialogue>\n\
         <user_model_check>false</user_model_check>\n<soul_state_check>false</soul_state_check>"
    )
}

fn asked(thread: &str, user: &str) -> Perception {
    Perception::Message(Message {
        thread: thread.to_string(),
        user_id: user.to_string(),
        display_name: format!("Person {user}"),
        text: "What's the status of the port, and what should I do next?".into(),
        source: None,
        inbox_id: None,
        claim: None,
        newer: None,
        speech: None,
        attachments: Vec::new(),
    })
}

/// An engine on `store` with the repository's soul, and the template of a real turn's trace.
async fn soul_engine(dir: &Path, name: &str, store: Arc<dyn Store>) -> (Arc<Engine>, TraceRow) {
    let cfg = format!(
        "[paths]\nhome = \"{}\"\n\n[inspect]\nkeep_turns = {TRACES}\n",
        dir.join(name).display()
    );
    let config = Arc::new(anima::config::parse(&cfg, Path::new("bench.toml"), dir).unwrap());
    let soul = SoulFiles::load(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/soul"))).unwrap();
    let engine = Arc::new(Engine::with_soul(config, store, soul, Arc::new(Instant0)));
    engine.perceive(&asked("C0:0.0", "U0")).await.unwrap();
    engine.flush_traces().await;
    let newest = engine.store().traces(None, None, 1).await.unwrap();
    let row = engine
        .store()
        .trace(&newest[0].trace)
        .await
        .unwrap()
        .unwrap();
    (engine, row)
}

/// 10,000 traces over 2,000 conversations (each standing in `main` or `deep_work` by turns),
/// the people, and a week of samples.
async fn fill(store: &Arc<dyn Store>, template: &TraceRow) {
    let now = anima::memory::now_ms();
    for p in 0..PEOPLE {
        store
            .record_user_message(
                &format!("P{p}:1.0"),
                &format!("U{p}"),
                &format!("Person {p}"),
                "hello",
                None,
            )
            .await
            .unwrap();
    }
    let mut batch = Vec::new();
    for n in 0..TRACES {
        let mut row = template.clone();
        row.trace = format!("{n:032x}");
        row.thread = format!("C{}:1.0", n % CONVERSATIONS);
        row.person = Some(format!("U{}", n % PEOPLE));
        row.process = if (n / CONVERSATIONS).is_multiple_of(2) {
            "main"
        } else {
            "deep_work"
        }
        .into();
        row.at = now - (TRACES - n) as i64 * 1_000;
        row.inbox = None;
        batch.push(row);
        if batch.len() == 500 {
            store
                .record_traces(std::mem::take(&mut batch).into())
                .await
                .unwrap();
        }
    }
    for i in 0..2_016i64 {
        let at = now - (2_016 - i) * 300_000;
        let v = (i as f64 / 50.0).sin();
        let body = format!(
            "{{\"valence\":{v:.3},\"arousal\":{:.3},\"energy\":{:.3},\"drives\":{{\"curiosity\":{:.3},\"connection\":{:.3}}}}}",
            v.abs(),
            0.5 + v / 4.0,
            0.4 + v / 5.0,
            0.6 - v / 5.0
        );
        store
            .record_psyche_sample(PsycheSample { at, body }, 2_016)
            .await
            .unwrap();
    }
}

type Times = Arc<Mutex<HashMap<String, Vec<Duration>>>>;

/// Serves the inspector on loopback with a layer timing each request's handler.
async fn serve(engine: Arc<Engine>, times: Times) -> String {
    let inspector = Inspector::new(engine, Secret::new(TOKEN.to_string()));
    let app = routes(Some(inspector)).layer(axum::middleware::from_fn(
        move |req: axum::extract::Request, next: axum::middleware::Next| {
            let times = times.clone();
            async move {
                let route = route_of(req.uri());
                let t = Instant::now();
                let answer = next.run(req).await;
                let took = t.elapsed();
                times.lock().unwrap().entry(route).or_default().push(took);
                answer
            }
        },
    ));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

/// A request's route, ids and parameters' values left out.
fn route_of(uri: &axum::http::Uri) -> String {
    let path = uri.path();
    let path = if path.starts_with("/inspect/turn/") {
        "/inspect/turn/ID"
    } else if path.starts_with("/api/inspect/turns/") {
        "/api/inspect/turns/ID"
    } else {
        path
    };
    let keys: Vec<&str> = uri
        .query()
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split('=').next())
        .filter(|k| !k.is_empty())
        .collect();
    if keys.is_empty() {
        path.to_string()
    } else {
        format!("{path}?{}", keys.join("&"))
    }
}

fn pct(samples: &mut [Duration], p: usize) -> f64 {
    samples.sort();
    samples[(samples.len() * p / 100).min(samples.len() - 1)].as_secs_f64() * 1e3
}

/// Each page and API route, `rounds` times in turn; the server's and the client's times.
async fn pages(base: &str, times: &Times, backend: &str, rounds: usize) {
    let client = reqwest::Client::new();
    let auth = format!("Bearer {TOKEN}");
    let paths = |r: usize| -> Vec<String> {
        let id = format!("{:032x}", (r * 7_919) % TRACES);
        let older = anima::memory::now_ms() - (TRACES as i64 / 2) * 1_000;
        vec![
            "/inspect/".into(),
            "/api/inspect/turns?limit=50".into(),
            format!("/api/inspect/turns?limit=50&before={older}"),
            format!("/inspect/thread?thread=C{}%3A1.0", r % CONVERSATIONS),
            format!("/api/inspect/turns?thread=C{}%3A1.0", r % CONVERSATIONS),
            format!("/inspect/turn/{id}"),
            format!("/api/inspect/turns/{id}"),
            "/inspect/process".into(),
            "/inspect/soul".into(),
            "/inspect/inner".into(),
            "/inspect/people".into(),
            format!("/inspect/person?id=U{}", r % PEOPLE),
        ]
    };
    let mut round_trips: HashMap<String, Vec<Duration>> = HashMap::new();
    for r in 0..rounds + 5 {
        if r == 5 {
            times.lock().unwrap().clear();
            round_trips.clear();
        }
        for path in paths(r) {
            let t = Instant::now();
            let answer = client
                .get(format!("{base}{path}"))
                .header("authorization", &auth)
                .send()
                .await
                .unwrap();
            let status = answer.status();
            let body = answer.bytes().await.unwrap();
            assert!(status.is_success(), "{path}: {status}");
            let uri: axum::http::Uri = path.parse().unwrap();
            round_trips
                .entry(route_of(&uri))
                .or_default()
                .push(t.elapsed());
            std::hint::black_box(body);
        }
    }
    let mut server = times.lock().unwrap().clone();
    let mut routes: Vec<&String> = server.keys().collect();
    routes.sort();
    let routes: Vec<String> = routes.into_iter().cloned().collect();
    println!("{backend}: server time per route, {TRACES} traces kept, {rounds} requests each (ms)");
    for route in routes {
        let s = server.get_mut(&route).unwrap();
        let (m, p95) = (pct(s, 50), pct(s, 95));
        let rt = round_trips.get_mut(&route).unwrap();
        println!(
            "  {route:<44} median {m:>7.2}   p95 {p95:>7.2}   (round trip median {:>7.2})",
            pct(rt, 50)
        );
    }
}

/// The soul stream's latency: a client follows it while the engine runs `turns` turns.
async fn stream(base: &str, engine: &Arc<Engine>, turns: usize) {
    let client = reqwest::Client::new();
    let answer = client
        .get(format!("{base}/api/inspect/stream"))
        .header("authorization", format!("Bearer {TOKEN}"))
        .send()
        .await
        .unwrap();
    assert!(answer.status().is_success());
    let mut body = answer.bytes_stream();
    while !engine.hub().watched() {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let latencies = Arc::new(Mutex::new(Vec::<i64>::new()));
    let l = latencies.clone();
    let reader = tokio::spawn(async move {
        let mut buffer = String::new();
        while let Some(Ok(chunk)) = body.next().await {
            let now = anima::memory::now_ms();
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let event: String = buffer.drain(..end + 2).collect();
                for line in event.lines() {
                    let Some(json) = line.strip_prefix("data: ") else {
                        continue;
                    };
                    if let Ok(v) = serde_json::from_str::<serde_json::Value>(json) {
                        if let Some(at) = v["at"].as_i64() {
                            l.lock().unwrap().push(now - at);
                        }
                    }
                }
            }
        }
    });
    for n in 0..turns {
        let thread = format!("S{}:1.0", n % 50);
        engine.perceive(&asked(&thread, "U1")).await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    reader.abort();
    let mut l = latencies.lock().unwrap().clone();
    l.sort();
    println!(
        "soul stream, record → client: {} records of {turns} turns, median {} ms, p95 {} ms, max {} ms",
        l.len(),
        l[l.len() / 2],
        l[l.len() * 95 / 100],
        l[l.len() - 1]
    );
}

fn postgres_url() -> Option<String> {
    ["ANIMA_BENCH_POSTGRES_URL", "ANIMA_TEST_POSTGRES_URL"]
        .iter()
        .find_map(|k| std::env::var(k).ok().filter(|u| !u.is_empty()))
}

/// A new, empty database on the server at `url` (over its socket, no TLS); its URL.
async fn fresh_database(url: &str) -> String {
    use std::str::FromStr;
    let config = tokio_postgres::Config::from_str(url).unwrap();
    let (client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let name = format!("anima_bench_{}", uuid::Uuid::new_v4().simple());
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let (base, query) = url.split_once('?').map_or((url, ""), |(b, q)| (b, q));
    let root = &base[..base.rfind('/').unwrap()];
    if query.is_empty() {
        format!("{root}/{name}")
    } else {
        format!("{root}/{name}?{query}")
    }
}

fn main() {
    anima::tls::install();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    rt.block_on(async {
        let sqlite = anima::memory::sqlite::Sqlite::open(&dir.path().join("inspect.db"))
            .unwrap()
            .shared();
        let (engine, template) = soul_engine(dir.path(), "sqlite", sqlite.clone()).await;
        println!("a trace's body: {} bytes", template.body.len());
        let t = Instant::now();
        fill(&sqlite, &template).await;
        println!("filled in {:.1} s", t.elapsed().as_secs_f64());
        let times = Times::default();
        let base = serve(engine.clone(), times.clone()).await;
        pages(&base, &times, "SQLite", 100).await;
        stream(&base, &engine, 300).await;

        if let Some(url) = postgres_url() {
            let url = fresh_database(&url).await;
            let pg: Arc<dyn Store> =
                Arc::new(anima::memory::postgres::Postgres::connect(&url, 8).await.unwrap());
            let (engine, template) = soul_engine(dir.path(), "postgres", pg.clone()).await;
            fill(&pg, &template).await;
            let times = Times::default();
            let base = serve(engine.clone(), times.clone()).await;
            pages(&base, &times, "PostgreSQL", 100).await;
            stream(&base, &engine, 300).await;
        } else {
            println!("PostgreSQL figures skipped: set ANIMA_BENCH_POSTGRES_URL or ANIMA_TEST_POSTGRES_URL");
        }
    });
}
