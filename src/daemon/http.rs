//! The daemon's HTTP routes on `[http] listen`: `GET /healthz`, `GET /metrics`,
//! `POST /api/whisper`, and Slack's `POST /slack/events` door (which `slack::events` owns).
//!
//! Bodies are capped per route before they are read, and a whisper's token is checked before
//! its body is read at all. Refused requests are logged at warn at most once a minute per
//! route (the rest at debug) and counted.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::Value;
use subtle::ConstantTimeEq;

use crate::config::secret::Secret;
use crate::memory::{now_ms, Store};
use crate::metrics::Metrics;

/// The longest whisper accepted, in characters.
const MAX_WHISPER_CHARS: usize = 2_000;
/// The longest whisper source accepted, in characters.
const MAX_SOURCE_CHARS: usize = 100;
/// The largest whisper body read.
const MAX_WHISPER_BYTES: usize = 16 * 1024;
/// Without a write for this long, `/healthz` proves the store with one.
const PROBE_AFTER_MS: i64 = 5_000;
/// How long `/healthz` waits for that write.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

pub struct HttpState {
    pub store: Arc<Store>,
    pub metrics: Arc<Metrics>,
    pub whisper_token: Option<Secret>,
    pub stopping: Arc<AtomicBool>,
}

/// The daemon's own routes, with Slack's Events API door (owned by `slack`) beside them.
pub fn routes(state: Arc<HttpState>, slack_door: Router) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/api/whisper", post(whisper))
        .with_state(state)
        .merge(slack_door)
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
        s.metrics.refusals.count(),
    );
    ([("content-type", "text/plain; version=0.0.4")], text).into_response()
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
        s.metrics
            .refusals
            .refuse("/api/whisper", "bad bearer token");
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
