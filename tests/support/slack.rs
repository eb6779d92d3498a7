//! A fake Slack: the Web API methods anima uses (JSON, form or query arguments, Slack's
//! envelopes and errors), apps.connections.open returning a ws:// URL on loopback, a Socket
//! Mode WebSocket that sends hello and events_api envelopes and records acks, and a signer
//! for Events API posts.
#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use serde_json::{json, Value};
use tokio::sync::mpsc;

pub const BOT_USER: &str = "UBOT";
pub const BOT_ID: &str = "BBOT";
pub const BOT_TOKEN: &str = "xoxb-test-bot-token";
pub const APP_TOKEN: &str = "xapp-test-app-token";
pub const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";

/// A bot message in the fake's conversations: posted with chat.postMessage, or streamed
/// (chat.startStream … appendStream … stopStream), as chat.update last left it.
#[derive(Debug, Clone, PartialEq)]
pub struct Post {
    pub channel: String,
    pub thread_ts: Option<String>,
    /// `text`, or `markdown_text` when it was sent as Markdown (then `markdown` is true).
    pub text: String,
    pub ts: String,
    pub at: Instant,
    /// The message's `metadata` (event_type and event_payload), as posted.
    pub metadata: Option<Value>,
    pub markdown: bool,
    /// Begun with chat.startStream.
    pub streamed: bool,
    /// Still streaming: appends and a stop are accepted.
    pub streaming: bool,
    /// The `blocks` given by chat.stopStream or chat.postMessage.
    pub blocks: Option<Value>,
    /// How many times chat.update rewrote it.
    pub updates: u32,
}

/// How the next chat.postMessage calls fail.
#[derive(Debug, Clone)]
pub enum PostFailure {
    /// HTTP 429 with `Retry-After: secs`.
    RateLimited(u64),
    /// The message is stored, but the client gets HTTP 500 (it cannot know it arrived).
    StoredThenError,
    /// `{"ok":false,"error":code}`.
    Api(&'static str),
    /// The message is stored at once; the answer comes this many ms later (a slow Slack: a
    /// client killed meanwhile never learns that its message arrived).
    StoredThenDelay(u64),
}

#[derive(Default)]
struct Inner {
    posts: Vec<Post>,
    calls: Vec<(String, Value, Option<String>)>,
    /// When each call arrived, in the order of `calls`.
    call_times: Vec<Instant>,
    /// (method, code) answered once each, in order, before anything else.
    once: VecDeque<(String, String)>,
    /// The next chat.startStream begins the message, then answers HTTP 500.
    start_stored_then_error: bool,
    /// The next chat.startStream begins a stream that expires at once (`expire_next_stream`).
    expire_next_stream: bool,
    /// Slack's per-minute tiers for the stream methods are enforced (HTTP 429 beyond them).
    tiers: bool,
    /// 429s answered because of the tiers.
    rate_limited: u32,
    post_failures: VecDeque<PostFailure>,
    sockets: Vec<mpsc::UnboundedSender<String>>,
    acks: Vec<String>,
    sent: HashMap<String, Instant>,
    /// Methods that answer `{"ok":false,"error":code}`.
    refused: HashMap<String, String>,
    /// conversations.replies and conversations.history answer without any message's
    /// metadata, even when asked for it.
    drop_metadata: bool,
}

#[derive(Clone)]
pub struct FakeSlack {
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    next_ts: Arc<AtomicU64>,
    /// When false, every Web API method answers HTTP 503 (Slack unreachable).
    pub up: Arc<AtomicBool>,
}

impl FakeSlack {
    pub fn start() -> FakeSlack {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let up = Arc::new(AtomicBool::new(true));
        let next_ts = Arc::new(AtomicU64::new(1_800_000_000_000_000));
        let (tx, rx) = std::sync::mpsc::channel();
        let state = Shared {
            inner: inner.clone(),
            next_ts: next_ts.clone(),
            up: up.clone(),
            addr: Arc::new(Mutex::new(None)),
        };
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap();
                *state.addr.lock().unwrap() = Some(addr);
                let app = Router::new()
                    .route("/api/{method}", any(web_api))
                    .route("/link/", get(socket))
                    .with_state(state);
                tx.send(addr).unwrap();
                // As a real server streaming events does: each small write goes at once
                // (with Nagle's algorithm, a stream of small frames waits for delayed ACKs).
                let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
                    let _ = tcp.set_nodelay(true);
                });
                axum::serve(listener, app).await.unwrap();
            });
        });
        let addr = rx.recv().unwrap();
        FakeSlack {
            addr,
            inner,
            next_ts,
            up,
        }
    }

    pub fn api_url(&self) -> String {
        format!("http://{}/api", self.addr)
    }

    pub fn posts(&self) -> Vec<Post> {
        self.inner.lock().unwrap().posts.clone()
    }

    /// Every call of `method` with the moment it arrived.
    pub fn timed_calls(&self, method: &str) -> Vec<(Instant, Value)> {
        let inner = self.inner.lock().unwrap();
        inner
            .calls
            .iter()
            .zip(&inner.call_times)
            .filter(|((m, _, _), _)| m == method)
            .map(|((_, v, _), at)| (*at, v.clone()))
            .collect()
    }

    /// The names of the methods called, in order.
    pub fn methods(&self) -> Vec<String> {
        let inner = self.inner.lock().unwrap();
        inner.calls.iter().map(|(m, _, _)| m.clone()).collect()
    }

    /// Enforces Slack's tiers on the stream methods, per workspace over any 60 s: start and
    /// stop 20 (Tier 2), append 100 (Tier 4); beyond them, HTTP 429 with Retry-After.
    pub fn enforce_stream_tiers(&self) {
        self.inner.lock().unwrap().tiers = true;
    }

    /// The next chat.startStream begins its message but answers HTTP 500 (the client cannot
    /// know it began).
    pub fn fail_next_stream_start_after_storing(&self) {
        self.inner.lock().unwrap().start_stored_then_error = true;
    }

    /// conversations.replies and conversations.history leave out every message's metadata,
    /// even when asked for it (real Slack keeps it: the defensive case).
    pub fn drop_metadata(&self) {
        self.inner.lock().unwrap().drop_metadata = true;
    }

    /// How many 429s the tiers brought.
    pub fn rate_limited(&self) -> u32 {
        self.inner.lock().unwrap().rate_limited
    }

    /// Makes the next call of `method` (one call) answer `{"ok":false,"error":code}`.
    pub fn refuse_once(&self, method: &str, code: &str) {
        self.inner
            .lock()
            .unwrap()
            .once
            .push_back((method.to_string(), code.to_string()));
    }

    /// The next stream expires as soon as it starts, as if the five minutes Slack allows
    /// passed before its next call: that append or stop fails with
    /// `message_not_in_streaming_state`. (Expiring streams from the test's thread raced the
    /// stream's end on a loaded machine.)
    pub fn expire_next_stream(&self) {
        self.inner.lock().unwrap().expire_next_stream = true;
    }

    /// Sends an `interactive` envelope (a block_actions click); returns the envelope id.
    pub fn send_interactive(&self, payload: Value) -> String {
        let envelope_id = uuid::Uuid::new_v4().to_string();
        let frame = json!({
            "envelope_id": envelope_id,
            "payload": payload,
            "type": "interactive",
            "accepts_response_payload": false,
        });
        self.send_frame(frame.to_string());
        envelope_id
    }

    pub fn calls(&self, method: &str) -> Vec<Value> {
        self.inner
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|(m, _, _)| m == method)
            .map(|(_, v, _)| v.clone())
            .collect()
    }

    /// The Authorization header of every call of `method`.
    pub fn auth_headers(&self, method: &str) -> Vec<Option<String>> {
        self.inner
            .lock()
            .unwrap()
            .calls
            .iter()
            .filter(|(m, _, _)| m == method)
            .map(|(_, _, a)| a.clone())
            .collect()
    }

    /// Makes every call of `method` answer `{"ok":false,"error":code}`.
    pub fn refuse(&self, method: &str, code: &str) {
        self.inner
            .lock()
            .unwrap()
            .refused
            .insert(method.to_string(), code.to_string());
    }

    pub fn fail_next_post(&self, f: PostFailure) {
        self.inner.lock().unwrap().post_failures.push_back(f);
    }

    pub fn acks(&self) -> Vec<String> {
        self.inner.lock().unwrap().acks.clone()
    }

    pub fn sockets(&self) -> usize {
        self.inner
            .lock()
            .unwrap()
            .sockets
            .iter()
            .filter(|s| !s.is_closed())
            .count()
    }

    /// Waits until `cond` holds or `secs` pass.
    pub fn wait(&self, secs: u64, what: &str, mut cond: impl FnMut(&FakeSlack) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if cond(self) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("timed out waiting for {what}; posts: {:#?}", self.posts());
    }

    pub fn wait_connected(&self) {
        self.wait(20, "a Socket Mode connection", |s| s.sockets() > 0);
    }

    /// Like `wait_connected`, showing the daemon's log on failure.
    pub fn wait_connected_or(&self, log: impl Fn() -> String) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if self.sockets() > 0 {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "no Socket Mode connection within 20 s; daemon log:\n{}",
            log()
        );
    }

    /// Sends a raw text frame on an open socket.
    pub fn send_frame(&self, frame: String) {
        let inner = self.inner.lock().unwrap();
        let sock = inner
            .sockets
            .iter()
            .find(|s| !s.is_closed())
            .expect("an open Socket Mode connection");
        sock.send(frame).unwrap();
    }

    /// Sends an event as an events_api envelope; returns the envelope id.
    pub fn send_event(&self, event: Value, event_id: &str, retry_attempt: u32) -> String {
        let envelope_id = uuid::Uuid::new_v4().to_string();
        let frame = json!({
            "envelope_id": envelope_id,
            "payload": event_callback(event, event_id),
            "type": "events_api",
            "accepts_response_payload": false,
            "retry_attempt": retry_attempt,
            "retry_reason": if retry_attempt > 0 { "timeout" } else { "" },
        });
        self.inner
            .lock()
            .unwrap()
            .sent
            .insert(envelope_id.clone(), Instant::now());
        self.send_frame(frame.to_string());
        envelope_id
    }

    /// When an envelope was sent.
    pub fn sent_at(&self, envelope_id: &str) -> Option<Instant> {
        self.inner.lock().unwrap().sent.get(envelope_id).copied()
    }

    /// Closes every socket with no disconnect frame (a dropped connection).
    pub fn drop_all(&self) {
        let mut inner = self.inner.lock().unwrap();
        for s in inner.sockets.drain(..) {
            let _ = s.send(CLOSE.to_string());
        }
    }

    pub fn disconnect_all(&self, reason: &str) {
        let frame = json!({"type":"disconnect","reason":reason,"debug_info":{"host":"applink-1"}})
            .to_string();
        let mut inner = self.inner.lock().unwrap();
        for s in inner.sockets.drain(..) {
            let _ = s.send(frame.clone());
            let _ = s.send(CLOSE.to_string());
        }
    }
}

const CLOSE: &str = "\u{0}close";

/// The Events API envelope around an event.
pub fn event_callback(event: Value, event_id: &str) -> Value {
    json!({
        "token": "XXYYZZ",
        "team_id": "T111",
        "api_app_id": "A111",
        "event": event,
        "type": "event_callback",
        "event_id": event_id,
        "event_time": 1_700_000_000,
        "authorizations": [{"enterprise_id": null, "team_id": "T111", "user_id": BOT_USER, "is_bot": true, "is_enterprise_install": false}],
    })
}

/// `X-Slack-Signature` for a body at a timestamp.
pub fn sign(secret: &str, timestamp: &str, body: &str) -> String {
    use hmac::{KeyInit, Mac};
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    let bytes = mac.finalize().into_bytes();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("v0={hex}")
}

pub fn now_secs() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[derive(Clone)]
struct Shared {
    inner: Arc<Mutex<Inner>>,
    next_ts: Arc<AtomicU64>,
    up: Arc<AtomicBool>,
    addr: Arc<Mutex<Option<SocketAddr>>>,
}

fn ok(mut v: Value) -> Response {
    v["ok"] = json!(true);
    json_response(200, v)
}

fn json_response(status: u16, v: Value) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", "application/json; charset=utf-8")
        .body(Body::from(v.to_string()))
        .unwrap()
}

async fn web_api(
    State(s): State<Shared>,
    Path(method): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let mut args: Value = serde_json::from_slice(&body).unwrap_or_else(|_| {
        let form: HashMap<String, String> = serde_urlencoded::from_bytes(&body).unwrap_or_default();
        json!(form)
    });
    if !args.is_object() {
        args = json!({});
    }
    for (k, v) in query {
        args[k] = json!(v);
    }
    {
        let mut inner = s.inner.lock().unwrap();
        inner
            .calls
            .push((method.clone(), args.clone(), auth.clone()));
        inner.call_times.push(Instant::now());
    }
    if !s.up.load(Ordering::SeqCst) {
        return Response::builder()
            .status(503)
            .body(Body::from("upstream down"))
            .unwrap();
    }
    let expected = if method == "apps.connections.open" {
        APP_TOKEN
    } else {
        BOT_TOKEN
    };
    if auth.as_deref() != Some(&format!("Bearer {expected}")) {
        return ok_false("invalid_auth");
    }
    if let Some(code) = s.inner.lock().unwrap().refused.get(&method).cloned() {
        return ok_false(&code);
    }
    {
        let mut inner = s.inner.lock().unwrap();
        let limit = match method.as_str() {
            "chat.startStream" | "chat.stopStream" => 20,
            "chat.appendStream" => 100,
            _ => usize::MAX,
        };
        if inner.tiers && limit < usize::MAX {
            let now = Instant::now();
            // The calls of this method in the last minute, this one included.
            let recent = inner
                .calls
                .iter()
                .zip(&inner.call_times)
                .filter(|((m, _, _), at)| {
                    *m == method && now.duration_since(**at) < Duration::from_secs(60)
                })
                .count();
            if recent > limit {
                inner.rate_limited += 1;
                return Response::builder()
                    .status(429)
                    .header("retry-after", "5")
                    .header("content-type", "application/json; charset=utf-8")
                    .body(Body::from(r#"{"ok":false,"error":"ratelimited"}"#))
                    .unwrap();
            }
        }
        if let Some(i) = inner.once.iter().position(|(m, _)| *m == method) {
            let (_, code) = inner.once.remove(i).unwrap();
            return ok_false(&code);
        }
    }
    let str_arg = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
    match method.as_str() {
        "auth.test" => ok(
            json!({"url":"https://fake.slack.test/","team":"Fake Team","user":"anima","team_id":"T111","user_id":BOT_USER,"bot_id":BOT_ID}),
        ),
        "users.info" => {
            let id = str_arg("user").unwrap_or_default();
            let name = format!("Person {id}");
            ok(
                json!({"user":{"id":id,"team_id":"T111","name":id.to_lowercase(),"real_name":name,"profile":{"display_name":name,"real_name":name}}}),
            )
        }
        "apps.connections.open" => {
            let addr = s.addr.lock().unwrap().unwrap();
            ok(json!({"url": format!("ws://{addr}/link/?ticket=test-ticket&app_id=A111")}))
        }
        "chat.postMessage" => {
            let failure = s.inner.lock().unwrap().post_failures.pop_front();
            let channel = str_arg("channel").unwrap_or_default();
            let thread_ts = str_arg("thread_ts");
            let markdown = args.get("markdown_text").is_some();
            let text = str_arg(if markdown { "markdown_text" } else { "text" }).unwrap_or_default();
            if markdown && (args.get("text").is_some() || args.get("blocks").is_some()) {
                return ok_false("invalid_arguments");
            }
            // A `markdown` block is the message's text as Slack shows it.
            let (markdown, text) = match markdown_block(&args) {
                Some(md) => (true, md),
                None => (markdown, text),
            };
            match failure {
                Some(PostFailure::RateLimited(secs)) => {
                    return Response::builder()
                        .status(429)
                        .header("retry-after", secs.to_string())
                        .header("content-type", "application/json; charset=utf-8")
                        .body(Body::from(r#"{"ok":false,"error":"ratelimited"}"#))
                        .unwrap();
                }
                Some(PostFailure::Api(code)) => return ok_false(code),
                _ => {}
            }
            let n = s.next_ts.fetch_add(100, Ordering::SeqCst);
            let ts = format!("{}.{:06}", n / 1_000_000, n % 1_000_000);
            s.inner.lock().unwrap().posts.push(Post {
                channel: channel.clone(),
                thread_ts: thread_ts.clone(),
                text: text.clone(),
                ts: ts.clone(),
                at: Instant::now(),
                metadata: args.get("metadata").cloned(),
                markdown,
                streamed: false,
                streaming: false,
                blocks: args.get("blocks").cloned(),
                updates: 0,
            });
            if let Some(PostFailure::StoredThenDelay(ms)) = failure {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            if matches!(failure, Some(PostFailure::StoredThenError)) {
                return Response::builder()
                    .status(500)
                    .body(Body::from("internal error"))
                    .unwrap();
            }
            ok(
                json!({"channel":channel,"ts":ts,"message":{"type":"message","text":text,"user":BOT_USER,"bot_id":BOT_ID,"ts":ts,"thread_ts":thread_ts}}),
            )
        }
        "conversations.replies" | "conversations.history" => {
            let channel = str_arg("channel").unwrap_or_default();
            let thread = str_arg("ts");
            // Slack returns a message's metadata only when asked for it.
            let with_metadata = args
                .get("include_all_metadata")
                .is_some_and(|v| v == &json!(true) || v == &json!("true"))
                && !s.inner.lock().unwrap().drop_metadata;
            let posts = s.inner.lock().unwrap().posts.clone();
            let messages: Vec<Value> = posts
                .into_iter()
                .filter(|p| p.channel == channel && (thread.is_none() || p.thread_ts == thread))
                .map(|p| {
                    let mut m = json!({"type":"message","user":BOT_USER,"bot_id":BOT_ID,"text":p.text,"ts":p.ts,"thread_ts":p.thread_ts});
                    if let (true, Some(meta)) = (with_metadata, &p.metadata) {
                        m["metadata"] = meta.clone();
                    }
                    m
                })
                .collect();
            ok(json!({"messages": messages, "has_more": false}))
        }
        "chat.startStream" => {
            let channel = str_arg("channel").unwrap_or_default();
            let Some(thread_ts) = str_arg("thread_ts") else {
                return ok_false("invalid_thread_ts");
            };
            // In a channel (not a DM) the stream needs its recipient.
            if !channel.starts_with('D') {
                if str_arg("recipient_user_id").is_none() {
                    return ok_false("missing_recipient_user_id");
                }
                if str_arg("recipient_team_id").is_none() {
                    return ok_false("missing_recipient_team_id");
                }
            }
            let n = s.next_ts.fetch_add(100, Ordering::SeqCst);
            let ts = format!("{}.{:06}", n / 1_000_000, n % 1_000_000);
            s.inner.lock().unwrap().posts.push(Post {
                channel: channel.clone(),
                thread_ts: Some(thread_ts),
                text: str_arg("markdown_text").unwrap_or_default(),
                ts: ts.clone(),
                at: Instant::now(),
                metadata: None,
                markdown: true,
                streamed: true,
                streaming: true,
                blocks: None,
                updates: 0,
            });
            let mut inner = s.inner.lock().unwrap();
            if std::mem::take(&mut inner.expire_next_stream) {
                if let Some(p) = inner.posts.last_mut() {
                    p.streaming = false;
                }
            }
            if std::mem::take(&mut inner.start_stored_then_error) {
                return Response::builder()
                    .status(500)
                    .body(Body::from("internal error"))
                    .unwrap();
            }
            ok(json!({"channel": channel, "ts": ts}))
        }
        "chat.appendStream" | "chat.stopStream" => {
            let (channel, ts) = (str_arg("channel"), str_arg("ts"));
            let mut inner = s.inner.lock().unwrap();
            let Some(p) = inner
                .posts
                .iter_mut()
                .find(|p| Some(&p.channel) == channel.as_ref() && Some(&p.ts) == ts.as_ref())
            else {
                return ok_false("message_not_found");
            };
            if !p.streaming {
                return ok_false("message_not_in_streaming_state");
            }
            if let Some(more) = str_arg("markdown_text") {
                p.text.push_str(&more);
            }
            if method == "chat.stopStream" {
                p.streaming = false;
                p.blocks = args.get("blocks").cloned();
                if let Some(meta) = args.get("metadata") {
                    p.metadata = Some(meta.clone());
                }
            }
            ok(json!({"channel": p.channel, "ts": p.ts}))
        }
        "chat.update" => {
            let (channel, ts) = (str_arg("channel"), str_arg("ts"));
            let mut inner = s.inner.lock().unwrap();
            let Some(p) = inner
                .posts
                .iter_mut()
                .find(|p| Some(&p.channel) == channel.as_ref() && Some(&p.ts) == ts.as_ref())
            else {
                return ok_false("message_not_found");
            };
            if p.streaming {
                return ok_false("streaming_state_conflict");
            }
            let markdown = args.get("markdown_text").is_some();
            if markdown && (args.get("text").is_some() || args.get("blocks").is_some()) {
                return ok_false("invalid_arguments");
            }
            p.text = str_arg(if markdown { "markdown_text" } else { "text" }).unwrap_or_default();
            p.markdown = markdown;
            if let Some(md) = markdown_block(&args) {
                p.text = md;
                p.markdown = true;
            }
            if let Some(blocks) = args.get("blocks") {
                p.blocks = Some(blocks.clone());
            }
            if let Some(meta) = args.get("metadata") {
                p.metadata = Some(meta.clone());
            }
            p.updates += 1;
            // As Slack answers: the message as it now reads (slack-morphism requires it).
            ok(
                json!({"channel": p.channel, "ts": p.ts, "text": p.text, "message": {"type": "message", "text": p.text, "user": BOT_USER, "bot_id": BOT_ID}}),
            )
        }
        "reactions.add"
        | "reactions.remove"
        | "assistant.threads.setStatus"
        | "assistant.threads.setTitle"
        | "assistant.threads.setSuggestedPrompts"
        | "agents.sessions.setStatus" => ok(json!({})),
        _ => ok_false("unknown_method"),
    }
}

/// The text of a message's `markdown` block, if it has one.
fn markdown_block(args: &Value) -> Option<String> {
    let blocks = match args.get("blocks")? {
        Value::String(s) => serde_json::from_str::<Value>(s).ok()?,
        v => v.clone(),
    };
    blocks
        .as_array()?
        .iter()
        .find(|b| b["type"] == "markdown")
        .and_then(|b| b["text"].as_str())
        .map(str::to_string)
}

fn ok_false(code: &str) -> Response {
    json_response(200, json!({"ok": false, "error": code}))
}

async fn socket(State(s): State<Shared>, ws: WebSocketUpgrade) -> impl IntoResponse {
    ws.on_upgrade(move |socket| serve_socket(s, socket))
}

async fn serve_socket(s: Shared, mut socket: WebSocket) {
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let hello = json!({"type":"hello","num_connections":1,"debug_info":{"host":"applink-1","build_number":10,"approximate_connection_time":18060},"connection_info":{"app_id":"A111"}});
    if socket
        .send(Message::Text(hello.to_string().into()))
        .await
        .is_err()
    {
        return;
    }
    s.inner.lock().unwrap().sockets.push(tx);
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                Some(frame) if frame == CLOSE => { let _ = socket.send(Message::Close(None)).await; break; }
                Some(frame) => { if socket.send(Message::Text(frame.into())).await.is_err() { break; } }
                None => break,
            },
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Text(t))) => {
                    if let Ok(v) = serde_json::from_str::<Value>(&t) {
                        if let Some(id) = v.get("envelope_id").and_then(Value::as_str) {
                            s.inner.lock().unwrap().acks.push(id.to_string());
                        }
                    }
                }
                Some(Ok(Message::Ping(p))) => { let _ = socket.send(Message::Pong(p)).await; }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                _ => {}
            },
        }
    }
}
