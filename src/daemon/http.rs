//! The daemon's HTTP routes on `[http] listen`: `POST /slack/events` (Events API mode),
//! `GET /healthz`, `GET /metrics`, `POST /api/whisper`.
//!
//! Bodies are capped per route before they are read, and a whisper's token is checked before
//! its body is read at all. Refused requests are logged at warn at most once a minute per
//! route (the rest at debug) and counted.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::Value;
use slack_morphism::prelude::SlackPushEvent;
use subtle::ConstantTimeEq;
use tracing::{debug, info, warn};

use crate::config::secret::Secret;
use crate::memory::{now_ms, Store};
use crate::metrics::Metrics;
use crate::slack::signature::{SignatureError, Verifier};
use crate::slack::Gate;

/// The longest whisper accepted, in characters.
const MAX_WHISPER_CHARS: usize = 2_000;
/// The longest whisper source accepted, in characters.
const MAX_SOURCE_CHARS: usize = 100;
/// The largest Events API body read (a Slack event is a few KB; a 40,000-character message
/// with its blocks stays well under this).
const MAX_EVENT_BYTES: usize = 512 * 1024;
/// The largest whisper body read.
const MAX_WHISPER_BYTES: usize = 16 * 1024;
/// Without a write for this long, `/healthz` proves the store with one.
const PROBE_AFTER_MS: i64 = 5_000;
/// How long `/healthz` waits for that write.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

pub struct HttpState {
    pub store: Arc<Store>,
    pub metrics: Arc<Metrics>,
    /// Set once Slack's identity is known; events before that get 503 (Slack retries).
    pub gate: OnceLock<Arc<Gate>>,
    /// Events API mode: the signing secret's verifier.
    pub verifier: Option<Verifier>,
    pub whisper_token: Option<Secret>,
    pub stopping: AtomicBool,
    pub refusals: Refusals,
}

/// Refused requests: counted, and logged at warn at most once a minute per route.
#[derive(Debug, Default)]
pub struct Refusals {
    count: AtomicU64,
    last_warned: Mutex<Vec<(&'static str, Instant)>>,
}

impl Refusals {
    fn refuse(&self, route: &'static str, why: &str) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut last = self.last_warned.lock().unwrap_or_else(|e| e.into_inner());
        let due = match last.iter_mut().find(|(r, _)| *r == route) {
            Some((_, at)) if at.elapsed() < Duration::from_secs(60) => false,
            Some((_, at)) => {
                *at = Instant::now();
                true
            }
            None => {
                last.push((route, Instant::now()));
                true
            }
        };
        if due {
            warn!(
                route,
                why, "request refused (more refusals within a minute are logged at debug)"
            );
        } else {
            debug!(route, why, "request refused");
        }
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

pub fn routes(state: Arc<HttpState>) -> Router {
    Router::new()
        .route(
            "/slack/events",
            post(slack_events).layer(DefaultBodyLimit::max(MAX_EVENT_BYTES)),
        )
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/api/whisper", post(whisper))
        .with_state(state)
}

async fn healthz(State(s): State<Arc<HttpState>>) -> Response {
    if let Err(why) = store_health(&s).await {
        return (StatusCode::SERVICE_UNAVAILABLE, why).into_response();
    }
    if !s.metrics.slack_connected.load(Ordering::SeqCst) {
        return (StatusCode::SERVICE_UNAVAILABLE, "slack not connected").into_response();
    }
    if s.stopping.load(Ordering::SeqCst) {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down").into_response();
    }
    if let Some(why) = s.metrics.degraded(now_ms()) {
        return (StatusCode::OK, why).into_response();
    }
    (StatusCode::OK, "ok").into_response()
}

/// The store takes writes: its last write succeeded, and (after a quiet spell) a probe write
/// does too, within `PROBE_TIMEOUT`.
async fn store_health(s: &HttpState) -> Result<(), String> {
    let health = s.store.write_health();
    if let Some(why) = health.failing() {
        return Err(format!("store cannot take writes: {why}"));
    }
    if now_ms() - health.last_ok_ms() < PROBE_AFTER_MS {
        return Ok(());
    }
    let store = s.store.clone();
    let probe = tokio::task::spawn_blocking(move || store.probe());
    match tokio::time::timeout(PROBE_TIMEOUT, probe).await {
        Ok(Ok(Ok(()))) => Ok(()),
        Ok(Ok(Err(e))) => Err(format!("store cannot take writes: {e}")),
        Ok(Err(e)) => Err(format!("store probe failed: {e}")),
        Err(_) => Err(format!(
            "store cannot take writes: a write did not finish within {} s",
            PROBE_TIMEOUT.as_secs()
        )),
    }
}

async fn metrics(State(s): State<Arc<HttpState>>) -> Response {
    let mut text = s.metrics.render();
    let health = s.store.write_health();
    Metrics::render_store(&mut text, health.errors(), health.failing().is_none());
    Metrics::render_counter(
        &mut text,
        "anima_http_refused_total",
        "HTTP requests refused for a bad signature or token",
        s.refusals.count(),
    );
    ([("content-type", "text/plain; version=0.0.4")], text).into_response()
}

async fn slack_events(
    State(s): State<Arc<HttpState>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(verifier) = &s.verifier else {
        return (
            StatusCode::NOT_FOUND,
            "the Events API is off ([slack] mode = \"socket\")",
        )
            .into_response();
    };
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let text = String::from_utf8_lossy(&body);
    match verifier.verify(
        header("x-slack-signature"),
        header("x-slack-request-timestamp"),
        &text,
    ) {
        Ok(()) => {}
        Err(e @ (SignatureError::Mismatch | SignatureError::Stale | SignatureError::Missing)) => {
            s.refusals.refuse("/slack/events", &e.to_string());
            return (StatusCode::UNAUTHORIZED, e.to_string()).into_response();
        }
        Err(e) => {
            warn!(error = %e, "Events API request could not be verified");
            return (StatusCode::INTERNAL_SERVER_ERROR, "cannot verify").into_response();
        }
    }
    if let Some(n) = header("x-slack-retry-num") {
        debug!(
            retry = n,
            reason = header("x-slack-retry-reason").unwrap_or(""),
            "Slack retry"
        );
    }
    let Ok(json) = serde_json::from_slice::<Value>(&body) else {
        Metrics::inc(&s.metrics.events_malformed);
        warn!(
            bytes = body.len(),
            "Events API body is not JSON; acknowledged and dropped"
        );
        return StatusCode::OK.into_response();
    };
    if json.get("type").and_then(Value::as_str) == Some("url_verification") {
        let challenge = json.get("challenge").and_then(Value::as_str).unwrap_or("");
        info!("Events API URL verified");
        return axum::Json(serde_json::json!({ "challenge": challenge })).into_response();
    }
    if s.stopping.load(Ordering::SeqCst) {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down").into_response();
    }
    let Some(gate) = s.gate.get() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "not connected to Slack yet",
        )
            .into_response();
    };
    match serde_json::from_value::<SlackPushEvent>(json) {
        Ok(SlackPushEvent::EventCallback(cb)) => match gate.handle(cb).await {
            Ok(()) => StatusCode::OK.into_response(),
            Err(e) => {
                warn!(error = %e, "event not recorded; Slack will retry");
                (StatusCode::INTERNAL_SERVER_ERROR, "not recorded").into_response()
            }
        },
        Ok(other) => {
            debug!(event = ?std::mem::discriminant(&other), "Events API payload without a message");
            StatusCode::OK.into_response()
        }
        Err(e) => {
            Metrics::inc(&s.metrics.events_malformed);
            warn!(error = %e, "Events API payload could not be read; acknowledged and dropped");
            StatusCode::OK.into_response()
        }
    }
}

async fn whisper(State(s): State<Arc<HttpState>>, request: Request) -> Response {
    let Some(token) = &s.whisper_token else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "the whisper endpoint is off: set ANIMA_WHISPER_TOKEN",
        )
            .into_response();
    };
    let given = request
        .headers()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("");
    if given
        .as_bytes()
        .ct_eq(token.expose().as_bytes())
        .unwrap_u8()
        != 1
    {
        s.refusals.refuse("/api/whisper", "bad bearer token");
        return (StatusCode::UNAUTHORIZED, "bad bearer token").into_response();
    }
    // The token is good: now the body, up to its cap.
    let Ok(body) = axum::body::to_bytes(request.into_body(), MAX_WHISPER_BYTES).await else {
        return (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is over {MAX_WHISPER_BYTES} bytes"),
        )
            .into_response();
    };
    let Ok(json) = serde_json::from_slice::<Value>(&body) else {
        return (
            StatusCode::BAD_REQUEST,
            "expected JSON: {\"whisper\": \"...\", \"source\": \"...\"}",
        )
            .into_response();
    };
    let text = json
        .get("whisper")
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
        .to_string();
    let source = json
        .get("source")
        .and_then(Value::as_str)
        .unwrap_or("unknown")
        .trim()
        .to_string();
    if text.is_empty() || text.chars().count() > MAX_WHISPER_CHARS {
        return (
            StatusCode::BAD_REQUEST,
            "`whisper` must be 1 to 2000 characters",
        )
            .into_response();
    }
    if source.is_empty() || source.chars().count() > MAX_SOURCE_CHARS {
        return (
            StatusCode::BAD_REQUEST,
            "`source` must be 1 to 100 characters",
        )
            .into_response();
    }
    let store = s.store.clone();
    match tokio::task::spawn_blocking(move || store.add_whisper(&text, &source)).await {
        Ok(Ok(id)) => (
            StatusCode::ACCEPTED,
            axum::Json(serde_json::json!({ "ok": true, "id": id })),
        )
            .into_response(),
        _ => (StatusCode::INTERNAL_SERVER_ERROR, "not stored").into_response(),
    }
}
