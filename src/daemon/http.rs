//! The daemon's HTTP routes on `[http] listen`: `POST /slack/events` (Events API mode),
//! `GET /healthz`, `GET /metrics`, `POST /api/whisper`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::Value;
use slack_morphism::prelude::SlackPushEvent;
use subtle::ConstantTimeEq;
use tracing::{debug, info, warn};

use crate::config::secret::Secret;
use crate::memory::Store;
use crate::metrics::Metrics;
use crate::slack::signature::{SignatureError, Verifier};
use crate::slack::Gate;

/// The longest whisper accepted, in characters.
const MAX_WHISPER_CHARS: usize = 2_000;

pub struct HttpState {
    pub store: Arc<Store>,
    pub metrics: Arc<Metrics>,
    /// Set once Slack's identity is known; events before that get 503 (Slack retries).
    pub gate: OnceLock<Arc<Gate>>,
    /// Events API mode: the signing secret's verifier.
    pub verifier: Option<Verifier>,
    pub whisper_token: Option<Secret>,
    pub stopping: AtomicBool,
}

pub fn routes(state: Arc<HttpState>) -> Router {
    Router::new()
        .route("/slack/events", post(slack_events))
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/api/whisper", post(whisper))
        .with_state(state)
}

async fn healthz(State(s): State<Arc<HttpState>>) -> Response {
    let store = s.store.clone();
    let writable = tokio::task::spawn_blocking(move || store.check_writable()).await;
    if !matches!(writable, Ok(Ok(()))) {
        return (StatusCode::SERVICE_UNAVAILABLE, "store not writable").into_response();
    }
    if !s.metrics.slack_connected.load(Ordering::SeqCst) {
        return (StatusCode::SERVICE_UNAVAILABLE, "slack not connected").into_response();
    }
    if s.stopping.load(Ordering::SeqCst) {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down").into_response();
    }
    (StatusCode::OK, "ok").into_response()
}

async fn metrics(State(s): State<Arc<HttpState>>) -> Response {
    (
        [("content-type", "text/plain; version=0.0.4")],
        s.metrics.render(),
    )
        .into_response()
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
            warn!(error = %e, "Events API request refused");
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

async fn whisper(State(s): State<Arc<HttpState>>, headers: HeaderMap, body: Bytes) -> Response {
    let Some(token) = &s.whisper_token else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "the whisper endpoint is off: set ANIMA_WHISPER_TOKEN",
        )
            .into_response();
    };
    let given = headers
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
        return (StatusCode::UNAUTHORIZED, "bad bearer token").into_response();
    }
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
