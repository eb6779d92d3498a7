//! The inspector (`/inspect/`, `/api/inspect/…`, `anima inspect`): its login, its refusals,
//! its JSON, its headers, its bounds, the stream, and (`inspector/browser.rs`) the pages in a
//! real browser. Traces are recorded through the store's face and stream records emitted on
//! the engine's hub by the tests themselves, where a real turn is not what is tested.

#[path = "inspector/browser.rs"]
mod browser;
#[path = "inspector/history.rs"]
mod history;
#[path = "inspector/http.rs"]
mod http;
#[path = "inspector/live.rs"]
mod live;
#[path = "inspector/webdriver.rs"]
mod webdriver;

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anima::config::secret::Secret;
use anima::engine::Engine;
use anima::inspect::{random_token, routes, Inspector, CSP};
use anima::memory::TraceRow;
use anima::window::{CognitionStep, Decision, Kind, ModelCall, Phase, Record, Section, TraceBody};
use serde_json::{json, Value};

use crate::support::daemon::{home as daemon_home, Daemon};
use crate::support::slack::FakeSlack;
use crate::support::{anima_command, answer, current_message, wait, FakeModel, Home};

/// `anima inspect --no-open` on a home: the login URL it printed.
pub struct Served {
    child: Child,
    pub login: String,
    pub base: String,
    pub token: String,
}

impl Served {
    pub fn start(home: &Home) -> Served {
        let mut cmd = anima_command(&home.config(), home.dir.path(), &["inspect", "--no-open"]);
        cmd.stdin(Stdio::null()).stderr(Stdio::null());
        let mut child = cmd.spawn().expect("anima inspect starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let login = line.trim().to_string();
        let (base, token) = login
            .split_once("/inspect/?token=")
            .unwrap_or_else(|| panic!("not a login URL: {login:?}"));
        assert!(base.starts_with("http://127.0.0.1:"), "{login}");
        assert_eq!(token.len(), 64, "32 random bytes in hex: {token}");
        Served {
            base: base.to_string(),
            token: token.to_string(),
            login,
            child,
        }
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The inspector's routes served in this process over an engine on `home`, so a test can
/// emit stream records on its hub.
pub struct InProcess {
    pub base: String,
    pub token: String,
    pub engine: Arc<Engine>,
}

pub fn in_process(model: &FakeModel, home: &Home) -> InProcess {
    let engine = Arc::new(crate::support::engine(model, home));
    let token = random_token();
    let inspector = Inspector::new(engine.clone(), Secret::new(token.clone()));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, routes(Some(inspector)))
                .await
                .unwrap();
        });
    });
    InProcess {
        base: format!("http://{}", rx.recv().unwrap()),
        token,
        engine,
    }
}

/// An answer: status, headers (lower-case names), body. Redirects are not followed.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
}

pub fn request(method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    anima::tls::install();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let mut req = client
        .request(method.parse().unwrap(), url)
        .body(body.to_string());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    wait(async move {
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp
            .headers()
            .iter()
            .map(|(k, v)| (k.as_str().to_string(), v.to_str().unwrap_or("").to_string()))
            .collect();
        Answer {
            status,
            headers,
            body: resp.text().await.unwrap(),
        }
    })
}

pub fn get(url: &str, headers: &[(&str, &str)]) -> Answer {
    request("GET", url, headers, "")
}

/// A trace id: 32 hex digits.
pub fn id(n: u64) -> String {
    format!("{n:032x}")
}

/// The sections every recorded turn's call has, in order.
pub const SECTIONS: [&str; 4] = ["soul", "history", "user_model", "message"];

/// A turn's trace as the engine records it: one call whose prompt is `SECTIONS`' texts, in
/// order (the sections tile the prompt).
pub fn trace(n: u64, thread: &str, person: &str, said: &str, reply: &str, at: i64) -> TraceRow {
    let texts: Vec<String> = SECTIONS
        .iter()
        .zip(["I am Wren.", "earlier words", "likes rivers", said])
        .map(|(name, text)| format!("<{name}>\n{text}\n</{name}>\n"))
        .collect();
    let body = TraceBody {
        kind: Kind::Message,
        stimulus: said.to_string(),
        processes: vec!["main".into()],
        calls: vec![ModelCall {
            purpose: "turn".into(),
            sections: SECTIONS
                .iter()
                .zip(&texts)
                .map(|(name, text)| Section::of(name, text, *name == "soul"))
                .collect(),
            prompt: texts.concat(),
            raw: format!("<internal_monologue verb=\"mused\">thinking of {said}</internal_monologue>\n<external_dialogue verb=\"said\">{reply}</external_dialogue>"),
            model: "m".into(),
            latency_ms: 12,
            ..ModelCall::default()
        }],
        cognition: vec![
            CognitionStep { step: "internal_monologue".into(), verb: "mused".into(), text: format!("thinking of {said}") },
            CognitionStep { step: "external_dialogue".into(), verb: "said".into(), text: reply.into() },
        ],
        decisions: vec![Decision { kind: "process".into(), text: "main stays main".into() }],
        total_ms: 40,
        ..TraceBody::default()
    };
    TraceRow {
        trace: id(n),
        kind: "message".into(),
        thread: thread.into(),
        person: Some(person.into()),
        inbox: None,
        process: "main".into(),
        at,
        reply: Some(reply.into()),
        body: body.to_json(),
        pieces: Vec::new(),
    }
}

pub fn record(home: &Home, row: TraceRow) {
    wait(home.store().record_trace(row)).unwrap();
}

/// A stream record of the response phase of trace `n` in `thread`.
pub fn response(n: u64, thread: &str) -> Record {
    Record {
        phase: Phase::Response,
        trace: id(n),
        thread: thread.into(),
        at: anima::memory::now_ms(),
        text: "the reply".into(),
        data: Value::Null,
    }
}

/// Every route the inspector declares (`inspect::PATHS`), each `{param}` filled in.
pub fn every_path() -> Vec<String> {
    anima::inspect::PATHS
        .iter()
        .map(|p| {
            p.split('/')
                .map(|part| if part.starts_with('{') { "x" } else { part })
                .collect::<Vec<_>>()
                .join("/")
        })
        .collect()
}

pub fn bearer(token: &str) -> String {
    format!("Bearer {token}")
}
