//! A fake Slack: the Web API methods anima uses (JSON, form or query arguments, Slack's
//! envelopes and errors), apps.connections.open returning a ws:// URL on loopback, a Socket
//! Mode WebSocket that sends hello and events_api envelopes and records acks, and a signer
//! for Events API posts.
//!
//! Like Slack, it holds every Socket Mode connection the app opens (each `anima run` opens
//! two; several daemons, several more) and gives each envelope to ONE open connection, in
//! turn (round robin). With `redeliver_unacked_after`, an events_api envelope not
//! acknowledged in time is sent again as Slack does (a new envelope, the same event,
//! `retry_attempt` 1..3, `retry_reason: "timeout"`), to another open connection when there is
//! one; with no connection open, an event (a first delivery or a retry) waits for one. What
//! went where is kept: `deliveries`, `acks_on`, `connections`.
#![allow(dead_code)]

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use axum::Router;
use serde_json::{json, Value};
use tokio::sync::mpsc;

pub mod files;

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
    /// The client's end of the HTTP connection that posted it (chat.postMessage or
    /// chat.startStream): which process posted (`daemon::slack_ports`).
    pub from: SocketAddr,
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
    /// The Socket Mode connections held (closed ones stay until `drop_all` or
    /// `disconnect_all` forgets them).
    sockets: Vec<Conn>,
    /// Every connection ever opened, by id: its peer (the client's end).
    peers: Vec<SocketAddr>,
    /// The round robin's turn.
    next_socket: usize,
    /// How envelopes are spread over the open connections.
    spread: Spread,
    acks: Vec<String>,
    /// (connection, envelope id, when) of each acknowledgement, in order.
    acks_on: Vec<(usize, String, Instant)>,
    acked: HashSet<String>,
    sent: HashMap<String, Instant>,
    /// Every envelope sent, in order: to which connection.
    deliveries: Vec<Delivery>,
    /// Redelivery of unacknowledged events_api envelopes (off: `None`).
    redeliver_after: Option<Duration>,
    redeliverer: bool,
    /// The latest envelope of each event that is not acknowledged yet, while redelivery is on.
    pending: Vec<Pending>,
    /// Events whose last retry was not acknowledged either: Slack gives them up.
    given_up: Vec<String>,
    /// Methods that answer `{"ok":false,"error":code}`.
    refused: HashMap<String, String>,
    /// Every method called with the bot token answers `{"ok":false,"error":code}` (a revoked
    /// token).
    bot_token_refused: Option<String>,
    /// conversations.replies and conversations.history answer without any message's
    /// metadata, even when asked for it.
    drop_metadata: bool,
}

/// How the fake chooses the one open connection an envelope goes to.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub enum Spread {
    /// Each in turn (the default). A load whose conversations are a multiple of the
    /// connections in number then sends each conversation to one connection only.
    #[default]
    RoundRobin,
    /// Any open connection, drawn from a generator seeded with this (the same seed, the
    /// same draws): one conversation's messages land on several connections, as with Slack.
    Random(u64),
}

/// One Socket Mode connection the fake holds.
struct Conn {
    id: usize,
    tx: mpsc::UnboundedSender<String>,
}

/// An envelope the fake sent, and where.
#[derive(Debug, Clone)]
pub struct Delivery {
    pub envelope_id: String,
    /// The event's `event_id` (events_api envelopes; empty for others).
    pub event_id: String,
    /// The connection (`connections()` id) it was given to.
    pub connection: usize,
    /// Its `retry_attempt` (0: the first delivery).
    pub attempt: u32,
    pub at: Instant,
}

/// A Socket Mode connection, open or not.
#[derive(Debug, Clone, PartialEq)]
pub struct Connection {
    pub id: usize,
    /// The client's end of the TCP connection: which process holds it
    /// (`daemon::Daemon::slack_connections`).
    pub peer: SocketAddr,
    pub open: bool,
}

/// An events_api envelope waiting for its acknowledgement (redelivery on).
struct Pending {
    envelope_id: String,
    event_id: String,
    payload: Value,
    attempt: u32,
    /// Where it was sent; `None`: not sent yet (no connection was open).
    connection: Option<usize>,
    sent: Instant,
}

#[derive(Clone)]
pub struct FakeSlack {
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
    next_ts: Arc<AtomicU64>,
    /// When false, every Web API method answers HTTP 503 (Slack unreachable).
    pub up: Arc<AtomicBool>,
    /// The files it serves, and every fetch of them (`files`).
    files: Arc<Mutex<files::FileHost>>,
}

impl FakeSlack {
    pub fn start() -> FakeSlack {
        let inner = Arc::new(Mutex::new(Inner::default()));
        let up = Arc::new(AtomicBool::new(true));
        let next_ts = Arc::new(AtomicU64::new(1_800_000_000_000_000));
        let (tx, rx) = std::sync::mpsc::channel();
        let file_host = Arc::new(Mutex::new(files::FileHost::default()));
        let state = Shared {
            inner: inner.clone(),
            next_ts: next_ts.clone(),
            up: up.clone(),
            addr: Arc::new(Mutex::new(None)),
            files: file_host.clone(),
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
                    .route("/files/{id}", get(files::serve))
                    .with_state(state)
                    .into_make_service_with_connect_info::<SocketAddr>();
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
            files: file_host,
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

    /// The text of every ephemeral message shown to `user` (chat.postEphemeral), in order.
    pub fn ephemerals_to(&self, user: &str) -> Vec<String> {
        self.calls("chat.postEphemeral")
            .iter()
            .filter(|c| c["user"] == user)
            .map(|c| c["text"].as_str().unwrap_or("").to_string())
            .collect()
    }

    /// Sends an `interactive` envelope (a block_actions click, a message_action shortcut);
    /// returns the envelope id.
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

    /// Makes every call with the bot token answer `{"ok":false,"error":code}`, as Slack does
    /// once the token is revoked (`token_revoked`).
    pub fn refuse_bot_token(&self, code: &str) {
        self.inner.lock().unwrap().bot_token_refused = Some(code.to_string());
    }

    /// Slack takes the bot token again (after `refuse_bot_token`).
    pub fn accept_bot_token(&self) {
        self.inner.lock().unwrap().bot_token_refused = None;
    }

    /// `method` answers again (after `refuse`).
    pub fn accept(&self, method: &str) {
        self.inner.lock().unwrap().refused.remove(method);
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

    /// How many Socket Mode connections are open.
    pub fn sockets(&self) -> usize {
        self.inner
            .lock()
            .unwrap()
            .sockets
            .iter()
            .filter(|s| !s.tx.is_closed())
            .count()
    }

    /// Every Socket Mode connection opened so far, in order, with whether it is still open.
    pub fn connections(&self) -> Vec<Connection> {
        let inner = self.inner.lock().unwrap();
        inner
            .peers
            .iter()
            .enumerate()
            .map(|(id, peer)| Connection {
                id,
                peer: *peer,
                open: inner
                    .sockets
                    .iter()
                    .any(|s| s.id == id && !s.tx.is_closed()),
            })
            .collect()
    }

    /// Waits until at least `n` Socket Mode connections are open (each `anima run` opens two).
    pub fn wait_sockets(&self, n: usize, secs: u64) {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while self.sockets() < n {
            assert!(
                Instant::now() < deadline,
                "{} Socket Mode connections open after {secs} s, not {n}",
                self.sockets()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// How envelopes are spread over the open connections from now on.
    pub fn spread(&self, spread: Spread) {
        self.inner.lock().unwrap().spread = spread;
    }

    /// The envelope ids acknowledged on these connections, in order.
    pub fn acks_on(&self, connections: &[usize]) -> Vec<String> {
        self.inner
            .lock()
            .unwrap()
            .acks_on
            .iter()
            .filter(|(c, _, _)| connections.contains(c))
            .map(|(_, e, _)| e.clone())
            .collect()
    }

    /// Every acknowledgement, in order: (connection, envelope id, when it came).
    pub fn acks_with_times(&self) -> Vec<(usize, String, Instant)> {
        self.inner.lock().unwrap().acks_on.clone()
    }

    /// For each acknowledged envelope, in order of the acknowledgements: how long after it
    /// was sent the acknowledgement came.
    pub fn ack_delays(&self) -> Vec<Duration> {
        let inner = self.inner.lock().unwrap();
        inner
            .acks_on
            .iter()
            .filter_map(|(_, e, at)| Some(at.saturating_duration_since(*inner.sent.get(e)?)))
            .collect()
    }

    /// Every envelope sent, in order, with the connection it went to.
    pub fn deliveries(&self) -> Vec<Delivery> {
        self.inner.lock().unwrap().deliveries.clone()
    }

    /// From now on, an events_api envelope not acknowledged within `after` is sent again, as
    /// Slack does: a new envelope with the same event, `retry_attempt` one more, `retry_reason`
    /// "timeout", to another open connection if there is one (else the same), at most 3
    /// retries; then Slack gives the event up (`given_up`). With no open connection the retry
    /// waits for one. Off by default.
    pub fn redeliver_unacked_after(&self, after: Duration) {
        let start = {
            let mut inner = self.inner.lock().unwrap();
            inner.redeliver_after = Some(after);
            !std::mem::replace(&mut inner.redeliverer, true)
        };
        if start {
            let inner = Arc::downgrade(&self.inner);
            std::thread::spawn(move || redeliver(inner));
        }
    }

    /// The event ids whose every delivery (the first and 3 retries) went unacknowledged.
    pub fn given_up(&self) -> Vec<String> {
        self.inner.lock().unwrap().given_up.clone()
    }

    /// How many events_api envelopes still wait for an acknowledgement (redelivery on).
    pub fn unacked(&self) -> usize {
        let inner = self.inner.lock().unwrap();
        inner
            .pending
            .iter()
            .filter(|p| !inner.acked.contains(&p.envelope_id))
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

    /// Sends a raw text frame on one open socket (the next in turn).
    pub fn send_frame(&self, frame: String) {
        let mut inner = self.inner.lock().unwrap();
        send_on(&mut inner, frame, None).expect("an open Socket Mode connection");
    }

    /// Sends an event as an events_api envelope; returns the envelope id. With redelivery
    /// on and no connection open, the event waits for one (as a retry does), and the id is
    /// empty: its envelope is made when it is sent.
    pub fn send_event(&self, event: Value, event_id: &str, retry_attempt: u32) -> String {
        let payload = event_callback(event, event_id);
        let mut inner = self.inner.lock().unwrap();
        let sent = send_envelope(&mut inner, &payload, retry_attempt, None);
        if inner.redeliver_after.is_none() {
            return sent.expect("an open Socket Mode connection").0;
        }
        let (envelope_id, connection) = sent.map_or((String::new(), None), |(e, c)| (e, Some(c)));
        inner.pending.push(Pending {
            envelope_id: envelope_id.clone(),
            event_id: event_id.to_string(),
            payload,
            attempt: retry_attempt,
            connection,
            sent: Instant::now(),
        });
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
            let _ = s.tx.send(CLOSE.to_string());
        }
    }

    pub fn disconnect_all(&self, reason: &str) {
        let frame = json!({"type":"disconnect","reason":reason,"debug_info":{"host":"applink-1"}})
            .to_string();
        let mut inner = self.inner.lock().unwrap();
        for s in inner.sockets.drain(..) {
            let _ = s.tx.send(frame.clone());
            let _ = s.tx.send(CLOSE.to_string());
        }
    }
}

const CLOSE: &str = "\u{0}close";

/// Sends `frame` on the next open connection in turn (`Spread`); records the delivery.
/// Returns the connection, or `None` when none is open.
///
/// A retry (`avoid`: the connection that did not acknowledge) goes to another open
/// connection, one that is keeping up (no envelope unacknowledged past the redelivery time)
/// when there is one: a paused client holds several connections, and Slack does not keep
/// giving an event to connections that do not answer.
fn send_on(inner: &mut Inner, frame: String, avoid: Option<usize>) -> Option<usize> {
    let open: Vec<usize> = (0..inner.sockets.len())
        .filter(|&i| !inner.sockets[i].tx.is_closed())
        .collect();
    if open.is_empty() {
        return None;
    }
    let mut choice = open.clone();
    if avoid.is_some() {
        let after = inner.redeliver_after.unwrap_or(Duration::MAX);
        let overdue: HashSet<usize> = inner
            .pending
            .iter()
            .filter(|p| p.sent.elapsed() >= after && !inner.acked.contains(&p.envelope_id))
            .filter_map(|p| p.connection)
            .collect();
        for narrower in [
            |id: usize, avoid: Option<usize>, overdue: &HashSet<usize>| {
                Some(id) != avoid && !overdue.contains(&id)
            },
            |id: usize, avoid: Option<usize>, _: &HashSet<usize>| Some(id) != avoid,
        ] {
            let kept: Vec<usize> = open
                .iter()
                .copied()
                .filter(|&i| narrower(inner.sockets[i].id, avoid, &overdue))
                .collect();
            if !kept.is_empty() {
                choice = kept;
                break;
            }
        }
    }
    let choice = &choice;
    let turn = match &mut inner.spread {
        Spread::RoundRobin => inner.next_socket,
        Spread::Random(state) => {
            // xorshift64*: small, seeded, good enough to spread.
            let mut x = (*state).max(1);
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            *state = x;
            (x.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize
        }
    };
    let at = choice[turn % choice.len()];
    inner.next_socket = inner.next_socket.wrapping_add(1);
    let sock = &inner.sockets[at];
    let id = sock.id;
    sock.tx.send(frame.clone()).ok()?;
    let v: Value = serde_json::from_str(&frame).unwrap_or(Value::Null);
    if let Some(envelope_id) = v.get("envelope_id").and_then(Value::as_str) {
        inner.deliveries.push(Delivery {
            envelope_id: envelope_id.to_string(),
            event_id: v["payload"]["event_id"].as_str().unwrap_or("").to_string(),
            connection: id,
            attempt: v["retry_attempt"].as_u64().unwrap_or(0) as u32,
            at: Instant::now(),
        });
    }
    Some(id)
}

/// Sends an events_api envelope around `payload` (a new envelope id); returns the id and the
/// connection it went to.
fn send_envelope(
    inner: &mut Inner,
    payload: &Value,
    retry_attempt: u32,
    avoid: Option<usize>,
) -> Option<(String, usize)> {
    let envelope_id = uuid::Uuid::new_v4().to_string();
    let frame = json!({
        "envelope_id": envelope_id,
        "payload": payload,
        "type": "events_api",
        "accepts_response_payload": false,
        "retry_attempt": retry_attempt,
        "retry_reason": if retry_attempt > 0 { "timeout" } else { "" },
    });
    let connection = send_on(inner, frame.to_string(), avoid)?;
    inner.sent.insert(envelope_id.clone(), Instant::now());
    Some((envelope_id, connection))
}

/// Slack's redelivery: every few ms, each pending envelope acknowledged is forgotten, and
/// each one unacknowledged for `redeliver_after` is sent again (at most 3 retries). Lasts as
/// long as the fake's state does (its server thread keeps it for the test process's life).
fn redeliver(inner: std::sync::Weak<Mutex<Inner>>) {
    while let Some(inner) = inner.upgrade() {
        {
            let mut guard = inner.lock().unwrap();
            let inner = &mut *guard;
            let after = inner.redeliver_after.unwrap_or(Duration::MAX);
            let acked = &inner.acked;
            inner.pending.retain(|p| !acked.contains(&p.envelope_id));
            let mut given_up = Vec::new();
            for i in 0..inner.pending.len() {
                let p = &inner.pending[i];
                if p.connection.is_none() {
                    // Never sent: its first delivery, once a connection is open.
                    let (payload, attempt) = (p.payload.clone(), p.attempt);
                    if let Some((envelope_id, connection)) =
                        send_envelope(inner, &payload, attempt, None)
                    {
                        let p = &mut inner.pending[i];
                        p.envelope_id = envelope_id;
                        p.connection = Some(connection);
                        p.sent = Instant::now();
                    }
                    continue;
                }
                if p.sent.elapsed() < after {
                    continue;
                }
                if p.attempt >= 3 {
                    given_up.push(i);
                    continue;
                }
                let (payload, attempt, connection) = (p.payload.clone(), p.attempt, p.connection);
                // With no connection open, the retry waits for one.
                if let Some((envelope_id, connection)) =
                    send_envelope(inner, &payload, attempt + 1, connection)
                {
                    let p = &mut inner.pending[i];
                    p.envelope_id = envelope_id;
                    p.connection = Some(connection);
                    p.attempt += 1;
                    p.sent = Instant::now();
                }
            }
            for i in given_up.into_iter().rev() {
                let p = inner.pending.remove(i);
                inner.given_up.push(p.event_id);
            }
        }
        drop(inner);
        std::thread::sleep(Duration::from_millis(20));
    }
}

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

/// A message shortcut's `message_action` payload, as Slack sends it: `person` used the
/// shortcut `callback_id` on the message `ts` in `channel`, posted by `author` (a user id;
/// with `bot_id` when an app posted it).
pub fn message_action(
    callback_id: &str,
    person: &str,
    channel: &str,
    ts: &str,
    author: &str,
    bot_id: Option<&str>,
) -> Value {
    let mut message = json!({"type": "message", "user": author, "text": "…", "ts": ts});
    if let Some(b) = bot_id {
        message["bot_id"] = json!(b);
    }
    json!({
        "type": "message_action",
        "token": "XXYYZZ",
        "action_ts": "1700000001.000100",
        "team": {"id": "T111", "domain": "fake"},
        "user": {"id": person, "username": person.to_lowercase(), "name": person.to_lowercase(), "team_id": "T111"},
        "channel": {"id": channel, "name": "directmessage"},
        "callback_id": callback_id,
        "trigger_id": "1.2.abc",
        "message_ts": ts,
        "message": message,
        "response_url": "https://hooks.slack.com/app/T111/1/x",
    })
}

/// An Events API interactivity post's form body (`payload=<json>`), to sign and POST.
pub fn interaction_form(payload: &Value) -> String {
    serde_urlencoded::to_string([("payload", payload.to_string())]).unwrap()
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
    files: Arc<Mutex<files::FileHost>>,
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
    ConnectInfo(from): ConnectInfo<SocketAddr>,
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
    if method != "apps.connections.open" {
        if let Some(code) = s.inner.lock().unwrap().bot_token_refused.clone() {
            return ok_false(&code);
        }
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
                from,
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
                from,
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
        "chat.postEphemeral" => {
            // Only to `user`, in `channel` (its thread with `thread_ts`); never a message of
            // the conversation's: `calls("chat.postEphemeral")` is what was shown.
            if str_arg("channel").is_none() || str_arg("user").is_none() {
                return ok_false("invalid_arguments");
            }
            let n = s.next_ts.fetch_add(100, Ordering::SeqCst);
            ok(json!({"message_ts": format!("{}.{:06}", n / 1_000_000, n % 1_000_000)}))
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

async fn socket(
    State(s): State<Shared>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    ws: WebSocketUpgrade,
) -> impl IntoResponse {
    ws.on_upgrade(move |socket| serve_socket(s, socket, peer))
}

async fn serve_socket(s: Shared, mut socket: WebSocket, peer: SocketAddr) {
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let hello = json!({"type":"hello","num_connections":1,"debug_info":{"host":"applink-1","build_number":10,"approximate_connection_time":18060},"connection_info":{"app_id":"A111"}});
    if socket
        .send(Message::Text(hello.to_string().into()))
        .await
        .is_err()
    {
        return;
    }
    let id = {
        let mut inner = s.inner.lock().unwrap();
        let id = inner.peers.len();
        inner.peers.push(peer);
        inner.sockets.push(Conn { id, tx });
        id
    };
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
                        if let Some(envelope) = v.get("envelope_id").and_then(Value::as_str) {
                            let mut inner = s.inner.lock().unwrap();
                            inner.acks.push(envelope.to_string());
                            inner.acks_on.push((id, envelope.to_string(), Instant::now()));
                            inner.acked.insert(envelope.to_string());
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
