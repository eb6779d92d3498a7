//! Test doubles: a fake model server speaking the Anthropic Messages and OpenAI chat
//! completions formats (plain and SSE, scripted replies and failures, recorded requests), a
//! fake `claude` executable, and helpers that run the real `anima` binary.
#![allow(dead_code)]

pub mod daemon;
pub mod daimon;
pub mod images;
pub mod many;
pub mod mcp;
pub mod postgres;
pub mod relay;
pub mod slack;

use std::collections::VecDeque;
use std::convert::Infallible;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;
use serde_json::{json, Value};

/// One scripted answer.
#[derive(Debug, Clone)]
pub enum Script {
    /// A well-formed answer with this text.
    Reply(String),
    /// The same text, streamed in these pieces (each piece is one or more SSE writes).
    Stream(Vec<String>),
    /// Streamed in these pieces, each written after this many ms (Anthropic only).
    SlowStream(Vec<String>, u64),
    /// A status with headers and a body.
    Status(u16, Vec<(&'static str, String)>, String),
    /// HTTP 200, then an SSE error event (Anthropic) / error chunk (OpenAI).
    StreamError,
    /// HTTP 200, a few deltas, then the connection closes without the end marker.
    StreamCutOff,
    /// Never answers.
    Hang,
    /// Answers this text after a delay.
    Delay(u64, String),
    /// Streamed: the first piece `first_ms` after the request, the others every `every_ms`
    /// (Anthropic only). When the first piece leaves is recorded (`first_pieces`).
    Paced {
        pieces: Vec<String>,
        first_ms: u64,
        every_ms: u64,
    },
    /// Answers this text once the test opens the gate (the request is recorded at once).
    Gated(Gate, String),
}

/// A gate a scripted answer waits behind: the test opens it when what it needs is in place,
/// so an answer's timing is the test's, not a guess of how long the daemon takes.
#[derive(Debug, Clone, Default)]
pub struct Gate(Arc<std::sync::atomic::AtomicBool>);

impl Gate {
    pub fn open(&self) {
        self.0.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    async fn passed(&self) {
        while !self.0.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

/// A gated answer waits here; any other passes as it is.
async fn through_gate(script: Script) -> Script {
    match script {
        Script::Gated(gate, text) => {
            gate.passed().await;
            Script::Reply(text)
        }
        other => other,
    }
}

#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The whole text the model was shown (system + messages), for assertions.
    pub fn prompt_text(&self) -> String {
        let mut out = String::new();
        match &self.body["system"] {
            Value::String(s) => out += s,
            Value::Array(blocks) => {
                for b in blocks {
                    out += b["text"].as_str().unwrap_or("");
                }
            }
            _ => {}
        }
        for m in self.body["messages"].as_array().into_iter().flatten() {
            out += "\n";
            out += &content_text(&m["content"]);
        }
        out
    }

    /// The last message's content: this turn's sections (its text blocks, when it carries
    /// images too).
    pub fn turn_text(&self) -> String {
        self.body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .map(|m| content_text(&m["content"]))
            .unwrap_or_default()
    }

    /// The images this request carried, decoded (see `images::SeenImage`).
    pub fn images(&self) -> Vec<images::SeenImage> {
        images::in_body(&self.body)
    }
}

/// A message's text, whether its content is a string or an array of text blocks.
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| b["text"].as_str().unwrap_or(""))
            .collect(),
        _ => String::new(),
    }
}

#[derive(Default)]
struct Inner {
    script: VecDeque<Script>,
    recorded: Vec<Recorded>,
    /// With an empty script: answer `echo: <the current message>` instead of the default.
    echo: bool,
    /// Added before every echo answer.
    echo_delay_ms: u64,
    /// Prompt caching as Anthropic does it: the prefixes written so far.
    cache: Option<std::collections::HashSet<u64>>,
    /// (input, cache_read, cache_write) tokens of each answered request, with caching on.
    cache_usage: Vec<(u64, u64, u64)>,
    /// The cognitive states' own calls (wakeup, shutdown, solitude, dream): scripted and recorded
    /// apart from conversation turns, so a test's turn script is not spent on them.
    state_script: VecDeque<Script>,
    state_recorded: Vec<(String, Recorded)>,
    /// Unscripted state calls of these kinds answer their default once the gate opens.
    state_gates: std::collections::HashMap<String, Gate>,
    /// When the first piece of each `Paced` answer was written.
    first_pieces: Vec<Instant>,
    /// What the server says it is (`/props`, `/version`, `/api/version`, the model list's
    /// `owned_by`): "llama.cpp", "llama-cpp-python", "vllm 0.11.0", "vllm 0.9.1", "ollama"; none
    /// by default (then it says nothing).
    identity: Option<String>,
    /// With an empty script: the answer to a conversation turn, from its turn text (before
    /// echo and the default).
    responder: Option<Arc<Responder>>,
    /// Each conversation turn's current message, and when the model was asked about it.
    asked: Vec<(String, Instant)>,
}

type Responder = dyn Fn(&str) -> String + Send + Sync;

/// The kind of a cognitive state's call (`wakeup`, `shutdown`, `solitude`), if it is one.
pub fn state_call_kind(rec: &Recorded) -> Option<String> {
    let text = rec.prompt_text();
    let rest = text.split("<state_call kind=\"").nth(1)?;
    Some(rest.split('"').next()?.to_string())
}

/// What the fake answers a state call with when nothing is scripted.
fn state_default(kind: &str) -> String {
    match kind {
        "wakeup" => "<affirmation>I am Wren, and I am here to help.</affirmation>".into(),
        "shutdown" => "<consent>yes</consent>".into(),
        "dream" => "<summary>Tom and I talked about crabs. 🦀</summary><memory importance=\"7\">Tom loves crabs.</memory>".into(),
        _ => "<journal>A quiet day; I thought about the last conversation.</journal>".into(),
    }
}

/// Anthropic's smallest cacheable prefix for the Sonnet 4 family, in tokens.
pub const CACHE_FLOOR_TOKENS: u64 = 1024;

/// Tokens of a text, as the fake counts them (about four characters a token).
pub fn tokens_of(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// Prompt caching as Anthropic describes it: blocks in order (system, then messages), a
/// breakpoint wherever `cache_control` is; the longest prefix already written that ends at a
/// block boundary within 20 blocks before the last breakpoint is read; the prefix up to each
/// breakpoint of at least `CACHE_FLOOR_TOKENS` is written. Returns (input, read, write).
fn cache_usage(cache: &mut std::collections::HashSet<u64>, body: &Value) -> (u64, u64, u64) {
    use std::hash::{Hash, Hasher};
    let mut blocks: Vec<(String, bool)> = Vec::new();
    let mut push = |content: &Value| match content {
        Value::String(s) => blocks.push((s.clone(), false)),
        Value::Array(items) => {
            for b in items {
                blocks.push((
                    b["text"].as_str().unwrap_or("").to_string(),
                    b.get("cache_control").is_some(),
                ));
            }
        }
        _ => {}
    };
    push(&body["system"]);
    for m in body["messages"].as_array().into_iter().flatten() {
        push(&m["content"]);
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let (mut hashes, mut tokens, mut total) = (Vec::new(), Vec::new(), 0);
    for (text, _) in &blocks {
        text.hash(&mut hasher);
        hashes.push(hasher.clone().finish());
        total += tokens_of(text);
        tokens.push(total);
    }
    let Some(last_bp) = blocks.iter().rposition(|b| b.1) else {
        return (total, 0, 0);
    };
    let read = (last_bp.saturating_sub(19)..=last_bp)
        .rev()
        .find(|&i| cache.contains(&hashes[i]))
        .map_or(0, |i| tokens[i]);
    let mut write = 0;
    if tokens[last_bp] >= CACHE_FLOOR_TOKENS {
        write = tokens[last_bp] - read;
        for (i, b) in blocks.iter().enumerate() {
            if b.1 && tokens[i] >= CACHE_FLOOR_TOKENS {
                cache.insert(hashes[i]);
            }
        }
    }
    (total - read - write, read, write)
}

#[derive(Clone)]
pub struct FakeModel {
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
}

pub const DEFAULT_REPLY: &str = "<internal_monologue verb=\"noted\">A plain turn.</internal_monologue>\n<external_dialogue verb=\"replied\">Default reply.</external_dialogue>\n<user_model_check>false</user_model_check>";

impl FakeModel {
    pub fn start() -> FakeModel {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let state = inner.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let app = Router::new()
                    .route("/v1/messages", post(anthropic))
                    .route("/v1/chat/completions", post(openai))
                    .route("/v1/models", get(models))
                    .route("/props", get(props))
                    .route("/version", get(version))
                    .route("/api/version", get(api_version))
                    .with_state(state);
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                // As a real server streaming events does: each small write goes at once
                // (with Nagle's algorithm, a stream of small frames waits for delayed ACKs).
                let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                    let _ = tcp.set_nodelay(true);
                });
                axum::serve(listener, app).await.unwrap();
            });
        });
        let addr = rx.recv().unwrap();
        FakeModel { addr, inner }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn push(&self, s: Script) -> &Self {
        self.inner.lock().unwrap().script.push_back(s);
        self
    }

    /// The server says it is `who` (see `Inner::identity`).
    pub fn identify_as(&self, who: &str) -> &Self {
        self.inner.lock().unwrap().identity = Some(who.to_string());
        self
    }

    /// When the first piece of each `Paced` answer was written, in order.
    /// Each conversation turn's current message and when the model was asked about it, in
    /// the order asked.
    pub fn asked(&self) -> Vec<(String, Instant)> {
        self.inner.lock().unwrap().asked.clone()
    }

    pub fn first_pieces(&self) -> Vec<Instant> {
        self.inner.lock().unwrap().first_pieces.clone()
    }

    pub fn reply(&self, text: &str) -> &Self {
        self.push(Script::Reply(text.to_string()))
    }

    /// With an empty script, answer each turn with `echo: <its message text>`.
    pub fn echo(&self) -> &Self {
        self.inner.lock().unwrap().echo = true;
        self
    }

    /// With an empty script, answer each conversation turn with `f(its turn text)`: the
    /// answer follows what is asked, whatever order concurrent turns come in.
    pub fn respond_with(&self, f: impl Fn(&str) -> String + Send + Sync + 'static) -> &Self {
        self.inner.lock().unwrap().responder = Some(Arc::new(f));
        self
    }

    /// Echo, each answer after `ms`.
    pub fn slow_echo(&self, ms: u64) -> &Self {
        let mut inner = self.inner.lock().unwrap();
        inner.echo = true;
        inner.echo_delay_ms = ms;
        self
    }

    /// Answers report prompt caching computed from each request (`cache_usage`), not fixed
    /// numbers.
    pub fn simulate_cache(&self) -> &Self {
        self.inner.lock().unwrap().cache = Some(Default::default());
        self
    }

    /// (input, cache_read, cache_write) tokens of each request answered with caching on.
    pub fn cache_usage(&self) -> Vec<(u64, u64, u64)> {
        self.inner.lock().unwrap().cache_usage.clone()
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.inner.lock().unwrap().recorded.clone()
    }

    /// Every image the conversation turns carried so far (both formats), in order: media
    /// type, decoded size and dimensions. Per request: `requests()[i].images()`.
    pub fn images(&self) -> Vec<images::SeenImage> {
        self.requests().iter().flat_map(Recorded::images).collect()
    }

    /// Scripts the next cognitive-state call (wakeup, shutdown consent, journal).
    pub fn state(&self, s: Script) -> &Self {
        self.inner.lock().unwrap().state_script.push_back(s);
        self
    }

    /// State calls of `kind` (`dream`, `wakeup` …) that nothing scripted answer their default
    /// only once `gate` opens: the test holds such a call in flight as long as it needs.
    pub fn gate_state(&self, kind: &str, gate: &Gate) -> &Self {
        self.inner
            .lock()
            .unwrap()
            .state_gates
            .insert(kind.to_string(), gate.clone());
        self
    }

    /// The cognitive states' calls so far: (kind, request).
    pub fn state_requests(&self) -> Vec<(String, Recorded)> {
        self.inner.lock().unwrap().state_recorded.clone()
    }
}

fn take(state: &Arc<Mutex<Inner>>, path: &str, headers: &HeaderMap, body: &Bytes) -> Script {
    let mut inner = state.lock().unwrap();
    let rec = Recorded {
        path: path.to_string(),
        headers: headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_string()))
            .collect(),
        body: serde_json::from_slice(body).unwrap_or(Value::Null),
    };
    if let Some(kind) = state_call_kind(&rec) {
        inner.state_recorded.push((kind.clone(), rec));
        let gated = inner.state_gates.get(&kind).cloned();
        return inner
            .state_script
            .pop_front()
            .unwrap_or_else(|| match gated {
                Some(gate) => Script::Gated(gate, state_default(&kind)),
                None => Script::Reply(state_default(&kind)),
            });
    }
    inner
        .asked
        .push((current_message(&rec.turn_text()), Instant::now()));
    let echo = inner.echo.then(|| current_message(&rec.turn_text()));
    let responded = inner.responder.as_ref().map(|f| f(&rec.turn_text()));
    inner.recorded.push(rec);
    if let (true, Some(text)) = (inner.script.is_empty(), responded) {
        return Script::Reply(text);
    }
    let delay = inner.echo_delay_ms;
    inner.script.pop_front().unwrap_or_else(|| match echo {
        Some(m) => {
            let text = format!(
                "<internal_monologue>secret thought</internal_monologue><external_dialogue>echo: {m}</external_dialogue>"
            );
            if delay > 0 {
                Script::Delay(delay, text)
            } else {
                Script::Reply(text)
            }
        }
        None => Script::Reply(DEFAULT_REPLY.to_string()),
    })
}

/// The message text inside the prompt's fence (after `Name: `).
pub fn current_message(turn_text: &str) -> String {
    let section = turn_text.rsplit("<current_message>").next().unwrap_or("");
    let line = section
        .lines()
        .skip_while(|l| !l.starts_with("```"))
        .nth(1)
        .unwrap_or("");
    line.split_once(": ").map_or(line, |(_, t)| t).to_string()
}

fn respond(status: u16, headers: &[(&str, String)], body: Body, content_type: &str) -> Response {
    let mut b = Response::builder()
        .status(status)
        .header("content-type", content_type);
    for (k, v) in headers {
        b = b.header(*k, v);
    }
    b.body(body).unwrap()
}

/// `text` in pieces of `n` characters.
pub fn pieces(text: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(n.max(1)).map(|c| c.iter().collect()).collect()
}

fn sse(frames: Vec<String>) -> Body {
    Body::from_stream(futures_util::stream::iter(
        frames
            .into_iter()
            .map(|f| Ok::<_, Infallible>(Bytes::from(f))),
    ))
}

/// Splits text into SSE writes at awkward places: every frame is also cut mid-way.
fn split_writes(frames: Vec<String>) -> Vec<String> {
    let mut out = Vec::new();
    for f in frames {
        let mid = f
            .char_indices()
            .nth(f.chars().count() / 2)
            .map_or(0, |(i, _)| i);
        out.push(f[..mid].to_string());
        out.push(f[mid..].to_string());
    }
    out
}

async fn anthropic(
    State(state): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let script = through_gate(take(&state, "/v1/messages", &headers, &body)).await;
    // A request that asks for a stream gets one, whatever the script: a whole answer streams
    // in pieces of a few characters, as a real model's would.
    let streamed = serde_json::from_slice::<Value>(&body)
        .ok()
        .is_some_and(|b| b["stream"] == Value::Bool(true));
    let script = match script {
        Script::Reply(text) if streamed => Script::Stream(pieces(&text, 7)),
        Script::Delay(ms, text) if streamed => Script::SlowStream(pieces(&text, 7), ms / 8),
        other => other,
    };
    let model = "claude-test";
    let simulated = {
        let mut inner = state.lock().unwrap();
        let request: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        let usage = inner.cache.as_mut().map(|c| cache_usage(c, &request));
        if let Some(u) = usage {
            inner.cache_usage.push(u);
        }
        usage
    };
    match script {
        Script::Reply(text) => {
            let (input, read, write) = simulated.unwrap_or((2095, 1800, 0));
            let body = json!({
                "id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": input, "cache_creation_input_tokens": write, "cache_read_input_tokens": read, "output_tokens": 503}
            });
            // Real payloads are pretty-printed; the client must not care.
            respond(
                200,
                &[],
                Body::from(serde_json::to_string_pretty(&body).unwrap()),
                "application/json",
            )
        }
        Script::SlowStream(pieces, ms) => {
            let mut frames = vec![format!(
                "event: message_start\ndata: {}\n\n",
                json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":model,"stop_reason":null,"usage":{"input_tokens":25,"output_tokens":1}}})
            )];
            for p in pieces {
                frames.push(format!("event: content_block_delta\ndata: {}\n\n", json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":p}})));
            }
            frames.push(format!("event: message_delta\ndata: {}\n\n", json!({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}})));
            frames.push("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".to_string());
            let body = Body::from_stream(futures_util::StreamExt::then(
                futures_util::stream::iter(frames),
                move |f| async move {
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    Ok::<_, Infallible>(Bytes::from(f))
                },
            ));
            respond(200, &[], body, "text/event-stream")
        }
        Script::Paced {
            pieces,
            first_ms,
            every_ms,
        } => {
            let start = format!(
                "event: message_start\ndata: {}\n\n",
                json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":model,"stop_reason":null,"usage":{"input_tokens":25,"output_tokens":1}}})
            );
            let end = [
                format!(
                    "event: message_delta\ndata: {}\n\n",
                    json!({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}})
                ),
                "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".to_string(),
            ];
            let frames: Vec<(Option<usize>, String)> = std::iter::once((None, start))
                .chain(pieces.into_iter().enumerate().map(|(i, p)| {
                    (Some(i), format!("event: content_block_delta\ndata: {}\n\n", json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":p}})))
                }))
                .chain(end.into_iter().map(|f| (None, f)))
                .collect();
            let state = state.clone();
            let body = Body::from_stream(futures_util::StreamExt::then(
                futures_util::stream::iter(frames),
                move |(i, f)| {
                    let state = state.clone();
                    async move {
                        match i {
                            Some(0) => {
                                tokio::time::sleep(Duration::from_millis(first_ms)).await;
                                state.lock().unwrap().first_pieces.push(Instant::now());
                            }
                            Some(_) => tokio::time::sleep(Duration::from_millis(every_ms)).await,
                            None => {}
                        }
                        Ok::<_, Infallible>(Bytes::from(f))
                    }
                },
            ));
            respond(200, &[], body, "text/event-stream")
        }
        Script::Stream(pieces) => {
            let mut frames = vec![
                format!(
                    "event: message_start\ndata: {}\n\n",
                    json!({"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":model,"stop_reason":null,"usage":{"input_tokens":25,"cache_read_input_tokens":10,"output_tokens":1}}})
                ),
                format!(
                    "event: content_block_start\ndata: {}\n\n",
                    json!({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})
                ),
                "event: ping\ndata: {\"type\": \"ping\"}\n\n".to_string(),
            ];
            for p in pieces {
                frames.push(format!("event: content_block_delta\ndata: {}\n\n", json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":p}})));
            }
            frames.push(format!(
                "event: content_block_stop\ndata: {}\n\n",
                json!({"type":"content_block_stop","index":0})
            ));
            frames.push(format!("event: message_delta\ndata: {}\n\n", json!({"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":15}})));
            frames.push("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n".to_string());
            respond(200, &[], sse(split_writes(frames)), "text/event-stream")
        }
        Script::Status(code, headers, body) => {
            respond(code, &headers, Body::from(body), "application/json")
        }
        Script::StreamError => {
            let frames = vec![
                format!(
                    "event: message_start\ndata: {}\n\n",
                    json!({"type":"message_start","message":{"id":"m","model":model,"usage":{"input_tokens":1}}})
                ),
                format!(
                    "event: error\ndata: {}\n\n",
                    json!({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})
                ),
            ];
            respond(200, &[], sse(frames), "text/event-stream")
        }
        Script::StreamCutOff => {
            let frames = vec![
                format!(
                    "event: message_start\ndata: {}\n\n",
                    json!({"type":"message_start","message":{"id":"m","model":model,"usage":{"input_tokens":1}}})
                ),
                format!(
                    "event: content_block_delta\ndata: {}\n\n",
                    json!({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"<external_dialogue>Half an ans"}})
                ),
            ];
            respond(200, &[], sse(frames), "text/event-stream")
        }
        // (A gated answer has passed its gate by now.)
        Script::Hang | Script::Gated(..) => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            respond(200, &[], Body::empty(), "application/json")
        }
        Script::Delay(ms, text) => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            let body = json!({
                "id": "msg_02", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 10, "output_tokens": 5}
            });
            respond(200, &[], Body::from(body.to_string()), "application/json")
        }
    }
}

async fn openai(
    State(state): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let script = through_gate(take(&state, "/v1/chat/completions", &headers, &body)).await;
    let model = "llama-test";
    let chunk = |delta: Value, finish: Value| {
        format!(
            "data: {}\n\n",
            json!({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":model,"choices":[{"index":0,"delta":delta,"finish_reason":finish}]})
        )
    };
    match script {
        Script::Reply(text) => {
            let body = json!({
                "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150, "prompt_tokens_details": {"cached_tokens": 64}}
            });
            respond(200, &[], Body::from(body.to_string()), "application/json")
        }
        Script::Stream(pieces) => {
            let mut frames = vec![chunk(json!({"role":"assistant","content":""}), Value::Null)];
            for p in pieces {
                frames.push(chunk(json!({"content": p}), Value::Null));
            }
            frames.push(chunk(json!({}), json!("stop")));
            frames.push(format!("data: {}\n\n", json!({"id":"chatcmpl-1","object":"chat.completion.chunk","model":model,"choices":[],"usage":{"prompt_tokens":12,"completion_tokens":7}})));
            frames.push("data: [DONE]\n\n".to_string());
            respond(200, &[], sse(split_writes(frames)), "text/event-stream")
        }
        Script::Status(code, headers, body) => {
            respond(code, &headers, Body::from(body), "application/json")
        }
        Script::StreamError => {
            let frames = vec![format!(
                "data: {}\n\n",
                json!({"error":{"message":"model crashed","type":"server_error","code":null}})
            )];
            respond(200, &[], sse(frames), "text/event-stream")
        }
        Script::StreamCutOff => {
            let frames = vec![chunk(
                json!({"content":"<external_dialogue>Half"}),
                Value::Null,
            )];
            respond(200, &[], sse(frames), "text/event-stream")
        }
        Script::Hang
        | Script::Gated(..)
        | Script::Delay(..)
        | Script::SlowStream(..)
        | Script::Paced { .. } => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            respond(200, &[], Body::empty(), "application/json")
        }
    }
}

async fn models(State(state): State<Arc<Mutex<Inner>>>) -> Response {
    let owner = match identity(&state).as_deref() {
        Some("llama-cpp-python") => "me",
        Some("llama.cpp") => "llamacpp",
        _ => "library",
    };
    let body = json!({"object":"list","data":[{"id":"smollm2:135m","object":"model","created":1,"owned_by":owner,"permissions":[]},{"id":"other","object":"model"}]});
    respond(200, &[], Body::from(body.to_string()), "application/json")
}

fn identity(state: &Arc<Mutex<Inner>>) -> Option<String> {
    state.lock().unwrap().identity.clone()
}

fn not_found() -> Response {
    respond(404, &[], Body::from("Not Found"), "text/plain")
}

/// llama.cpp's server settings.
async fn props(State(state): State<Arc<Mutex<Inner>>>) -> Response {
    if identity(&state).as_deref() != Some("llama.cpp") {
        return not_found();
    }
    let body = json!({"default_generation_settings":{"n_ctx":4096,"params":{"temperature":0.8}},"total_slots":1,"model_path":"smollm2.gguf","build_info":"b6000-abc"});
    respond(200, &[], Body::from(body.to_string()), "application/json")
}

/// vLLM's version.
async fn version(State(state): State<Arc<Mutex<Inner>>>) -> Response {
    match identity(&state)
        .as_deref()
        .and_then(|i| i.strip_prefix("vllm "))
    {
        Some(v) => respond(
            200,
            &[],
            Body::from(json!({"version": v}).to_string()),
            "application/json",
        ),
        None => not_found(),
    }
}

/// Ollama's version.
async fn api_version(State(state): State<Arc<Mutex<Inner>>>) -> Response {
    if identity(&state).as_deref() != Some("ollama") {
        return not_found();
    }
    respond(
        200,
        &[],
        Body::from(json!({"version": "0.12.3"}).to_string()),
        "application/json",
    )
}

/// The variable choosing the store every `Home` uses: `sqlite` (or unset) or `postgres` (a
/// fresh database per home on the server at `ANIMA_TEST_POSTGRES_URL`).
pub const BACKEND_VAR: &str = "ANIMA_TEST_BACKEND";

/// The `[store]` section that puts a home on PostgreSQL.
pub const ON_POSTGRES: &str = "[store]\nbackend = \"postgres\"\n";

/// The store a home's anima uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The backend `ANIMA_TEST_BACKEND` chooses for this run.
pub fn backend() -> Backend {
    match std::env::var(BACKEND_VAR).as_deref() {
        Err(_) | Ok("") | Ok("sqlite") => Backend::Sqlite,
        Ok("postgres") => {
            if std::env::var(postgres::POSTGRES_URL).map_or(true, |u| u.is_empty()) {
                panic!(
                    "{BACKEND_VAR}=postgres needs {} to name a PostgreSQL server the tests may create databases on",
                    postgres::POSTGRES_URL
                );
            }
            Backend::Postgres
        }
        Ok(other) => panic!("{BACKEND_VAR}={other:?}: expected \"sqlite\" or \"postgres\""),
    }
}

/// True (and said on stderr) when the homes are on PostgreSQL and this test, about SQLite
/// itself, must not run: the caller returns.
pub fn skipped_on_postgres(why: &str) -> bool {
    let skip = backend() == Backend::Postgres;
    if skip {
        eprintln!("skipped on PostgreSQL: {why}");
    }
    skip
}

/// The runtime every store a test opens lives on: one for the whole test process, so a
/// PostgreSQL pool's connections outlive every call made through it.
fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("test-store")
            .enable_all()
            .build()
            .unwrap()
    })
}

/// Runs a store call (any future) to completion on the tests' runtime, from a plain test or
/// from inside an async one: `wait(home.store().thread_entries("D1"))`.
pub fn wait<F>(f: F) -> F::Output
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    if tokio::runtime::Handle::try_current().is_err() {
        return runtime().block_on(f);
    }
    // Inside a runtime a thread may not block on another: a thread of its own does.
    std::thread::scope(|s| match s.spawn(|| runtime().block_on(f)).join() {
        Ok(out) => out,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

/// The database of each PostgreSQL home, by its folder: what `anima_command` gives the
/// binaries it starts there.
fn databases() -> &'static Mutex<std::collections::HashMap<PathBuf, String>> {
    static DATABASES: std::sync::OnceLock<Mutex<std::collections::HashMap<PathBuf, String>>> =
        std::sync::OnceLock::new();
    DATABASES.get_or_init(Default::default)
}

/// A temporary anima home with a config file, on the backend `ANIMA_TEST_BACKEND` chooses.
pub struct Home {
    pub dir: tempfile::TempDir,
    /// On PostgreSQL: the home's own database.
    database: Option<String>,
    /// On PostgreSQL: the test's store, opened once.
    store: std::sync::OnceLock<Arc<dyn anima::memory::Store>>,
}

impl Home {
    /// A home whose config points the chosen provider at `base_url` with `extra` TOML lines
    /// added to `[llm]` (and any further sections after them).
    pub fn new(provider: &str, base_url: &str, extra: &str) -> Home {
        Self::on(backend(), provider, base_url, extra)
    }

    /// `new` on this backend. On SQLite the harness adds nothing to the config and the
    /// environment (a test that puts its home on PostgreSQL by hand manages that itself).
    pub fn on(backend: Backend, provider: &str, base_url: &str, extra: &str) -> Home {
        let dir = tempfile::tempdir().unwrap();
        let soul = concat!(env!("CARGO_MANIFEST_DIR"), "/soul");
        let mut cfg = format!(
            "[paths]\nhome = \"data\"\nsoul_dir = \"{soul}\"\n\n[llm]\nprovider = \"{provider}\"\nbase_url = \"{base_url}\"\ntimeout_secs = 5\nmax_retries = 2\n{extra}\n"
        );
        let database = match backend {
            Backend::Sqlite => None,
            Backend::Postgres => {
                cfg += &format!("\n{ON_POSTGRES}");
                let url = postgres::fresh_database().expect("ANIMA_TEST_POSTGRES_URL is set");
                databases()
                    .lock()
                    .unwrap()
                    .insert(dir.path().to_path_buf(), url.clone());
                Some(url)
            }
        };
        std::fs::write(dir.path().join("anima.toml"), cfg).unwrap();
        Home {
            dir,
            database,
            store: Default::default(),
        }
    }

    pub fn config(&self) -> PathBuf {
        self.dir.path().join("anima.toml")
    }

    pub fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// The home's PostgreSQL database, when it is on PostgreSQL.
    pub fn database(&self) -> Option<&str> {
        self.database.as_deref()
    }

    /// The home's store, through its faces, on the home's backend (run calls with `wait`).
    /// SQLite's is opened anew each time, as a separate process would; PostgreSQL's once.
    pub fn store(&self) -> Arc<dyn anima::memory::Store> {
        match &self.database {
            None => open_store(&self.data().join("anima.db"), None),
            Some(url) => self
                .store
                .get_or_init(|| open_store(&self.data().join("anima.db"), Some(url)))
                .clone(),
        }
    }

    /// Moves every working-memory entry `ms` into the past, on the home's backend.
    pub fn backdate(&self, ms: i64) {
        match &self.database {
            None => {
                rusqlite::Connection::open(self.data().join("anima.db"))
                    .unwrap()
                    .execute(
                        "UPDATE working_memory SET created_at = created_at - ?1",
                        [ms],
                    )
                    .unwrap();
            }
            Some(url) => {
                postgres::query(
                    url,
                    &format!(
                        "UPDATE working_memory SET created_at = created_at - {ms} * interval '1 millisecond'"
                    ),
                );
            }
        }
    }

    /// Runs `anima` with these arguments and stdin, in a clean environment.
    pub fn run(&self, args: &[&str], stdin: &str) -> Run {
        self.run_env(args, stdin, &[])
    }

    pub fn run_env(&self, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Run {
        let mut cmd = anima_command(&self.config(), self.dir.path(), args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let r = run(cmd, stdin);
        self.assert_backend_kept();
        r
    }

    /// A home on PostgreSQL never gets a SQLite file: a binary that fell back to SQLite (its
    /// config or environment lost on the way) fails the test rather than passing on SQLite.
    pub fn assert_backend_kept(&self) {
        if self.database.is_some() {
            let file = self.data().join("anima.db");
            assert!(
                !file.exists(),
                "{} exists: this home is on PostgreSQL ({BACKEND_VAR}=postgres), yet something used SQLite",
                file.display()
            );
        }
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let Some(url) = self.database.take() else {
            return;
        };
        databases().lock().unwrap().remove(self.dir.path());
        drop(self.store.take());
        let file = self.data().join("anima.db");
        if file.exists() && !std::thread::panicking() {
            panic!(
                "{} exists: this home is on PostgreSQL ({BACKEND_VAR}=postgres), yet something used SQLite",
                file.display()
            );
        }
        postgres::drop_database(&url);
    }
}

/// Opens a store through `anima::memory::open`: SQLite's file at `sqlite_path`, or the
/// PostgreSQL database at `database_url`.
fn open_store(sqlite_path: &Path, database_url: Option<&str>) -> Arc<dyn anima::memory::Store> {
    let config = anima::config::StoreConfig {
        backend: match database_url {
            None => anima::config::StoreBackend::Sqlite,
            Some(_) => anima::config::StoreBackend::Postgres,
        },
        pool_size: 4,
        claim_lease_secs: 60,
    };
    let url = database_url.map(anima::config::secret::Secret::new);
    wait(anima::memory::open::open_with(
        &config,
        sqlite_path,
        url.as_ref(),
    ))
    .unwrap()
}

pub struct Run {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

/// `anima --config CONFIG ARGS…` in `dir`, with a clean environment (`HOME` is `dir`, a fake
/// Anthropic key) and piped stdio: what every test that runs the binary starts from.
pub fn anima_command(config: &Path, dir: &Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_anima"));
    cmd.arg("--config")
        .arg(config)
        .args(args)
        .current_dir(dir)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", dir)
        .env("ANTHROPIC_API_KEY", "sk-ant-test-secret-key")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    database_env(&mut cmd, dir);
    cmd
}

/// Gives `cmd` the database of the PostgreSQL home at `dir`, if it is one.
pub fn database_env(cmd: &mut Command, dir: &Path) {
    if let Some(url) = databases().lock().unwrap().get(dir) {
        cmd.env(anima::config::DATABASE_URL_VAR, url);
    }
}

pub fn run(mut cmd: Command, stdin: &str) -> Run {
    let mut child = spawn(&mut cmd);
    // A command that exits without reading its input (`check` with a broken config) closes
    // the pipe first: that is its business, not the test's failure.
    match child.stdin.take().unwrap().write_all(stdin.as_bytes()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {}
        written => written.unwrap(),
    }
    let Output {
        status,
        stdout,
        stderr,
    } = child.wait_with_output().unwrap();
    Run {
        status: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

/// Starts `cmd`. A binary this test process has just copied can be "busy" for a moment: a
/// thread forking meanwhile inherits the copy's open file until its child execs. Try again.
pub fn spawn(cmd: &mut Command) -> std::process::Child {
    let mut tries = 0;
    loop {
        match cmd.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy && tries < 50 => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other.expect("anima starts"),
        }
    }
}

/// The replies of a plain-output chat run (each reply is followed by one empty line).
pub fn replies(stdout: &str) -> Vec<String> {
    stdout
        .split("\n\n")
        .map(|s| s.trim_matches('\n').to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// A well-formed answer.
pub fn answer(dialogue: &str) -> String {
    format!("<internal_monologue verb=\"pondered\">Thinking about: {dialogue}</internal_monologue>\n<external_dialogue verb=\"explained\">{dialogue}</external_dialogue>\n<user_model_check>false</user_model_check>")
}

/// An engine on a home's config (its soul and processes) and store, talking to the fake
/// model: for tests that drive the engine directly (a controlled clock, counting store writes).
pub fn engine(model: &FakeModel, home: &Home) -> anima::engine::Engine {
    let cfg = std::fs::read_to_string(home.config()).unwrap();
    let config = Arc::new(anima::config::parse(&cfg, &home.config(), home.dir.path()).unwrap());
    let url = home.database().map(anima::config::secret::Secret::new);
    let store = wait(anima::memory::open::open_with(
        &config.store,
        &config.db_path(),
        url.as_ref(),
    ))
    .unwrap();
    let library =
        Arc::new(anima::process::Library::load(&config.soul_dir, &config.processes_dir).unwrap());
    anima::tls::install();
    let provider = anima::llm::anthropic::Anthropic::new(
        &model.url(),
        anima::config::secret::Secret::new("k"),
        "m",
        false,
        std::time::Duration::from_secs(5),
    )
    .unwrap();
    anima::engine::Engine::new(config, store, library, Arc::new(provider))
}

/// Writes an executable script.
pub fn script(path: &Path, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}
