//! The daemon's HTTP routes on `[http] listen`: `GET /healthz`, `GET /metrics`,
//! `POST /api/whisper`, `POST /api/counsel` (`counsel`), `/api/admin/…`, Slack's `POST /slack/events` door (which `slack::events`
//! owns), and the inspector's `/inspect/` and `/api/inspect/…` (which `inspect` owns; mounted
//! only with `ANIMA_INSPECT_TOKEN` set, else 404).
//!
//! Bodies are capped per route before they are read, and a whisper's token is checked before
//! its body is read at all. Refused requests are logged at warn at most once a minute per
//! route (the rest at debug) and counted.

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::Value;
use subtle::ConstantTimeEq;

use crate::admin::MAX_WHISPER_CHARS;
use crate::config::secret::Secret;
use crate::memory::{now_ms, Store};
use crate::metrics::{Metrics, StoreSample};
use crate::slack::credentials::Refusals;

/// The longest whisper source accepted, in characters.
const MAX_SOURCE_CHARS: usize = 100;
/// The largest whisper or admin body read.
const MAX_BODY_BYTES: usize = 16 * 1024;
/// Without a write for this long, `/healthz` proves the store with one.
const PROBE_AFTER_MS: i64 = 5_000;
/// While writes fail, `/healthz` tries again at most this often.
const RETRY_PROBE_MS: i64 = 1_000;
/// How long `/healthz` waits for that write.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

pub struct HttpState {
    pub store: Arc<dyn Store>,
    /// The soul's files in force (its template, for the cognitive state).
    pub library: Arc<crate::process::Library>,
    pub metrics: Arc<Metrics>,
    pub whisper_token: Option<Secret>,
    pub admin_token: Option<Secret>,
    /// `/api/counsel`, when `ANIMA_COUNSEL_TOKEN` is set.
    pub counsel: Option<super::counsel::Counsel>,
    pub stopping: Arc<AtomicBool>,
    /// When `/healthz` last probed the store (unix ms).
    pub last_probe_ms: AtomicI64,
    /// The tokens Slack refuses now.
    pub slack_refusals: Arc<Refusals>,
}

/// The daemon's own routes, with Slack's Events API door (owned by `slack`) and the
/// inspector (owned by `inspect`: none without its token) beside them.
pub fn routes(
    state: Arc<HttpState>,
    slack_door: Router,
    inspector: Option<Arc<crate::inspect::Inspector>>,
) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics))
        .route("/api/whisper", post(whisper))
        .route("/api/counsel", post(super::counsel::counsel))
        .route("/api/admin/{action}", get(admin).post(admin))
        .with_state(state)
        .merge(slack_door)
        .merge(crate::inspect::routes(inspector))
}

async fn healthz(State(s): State<Arc<HttpState>>) -> Response {
    if let Err(why) = store_health(&s).await {
        return (StatusCode::SERVICE_UNAVAILABLE, why).into_response();
    }
    if let Some(why) = s.slack_refusals.why() {
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
    // While writes fail, a probe (at most every RETRY_PROBE_MS) is what can say they work
    // again: an idle daemon writes nothing else.
    let failing = health.failing();
    let since_probe = now_ms() - s.last_probe_ms.load(Ordering::Relaxed);
    match &failing {
        Some(why) if since_probe < RETRY_PROBE_MS => {
            return Err(format!("store cannot take writes: {why}"))
        }
        None if now_ms() - health.last_ok_ms() < PROBE_AFTER_MS => return Ok(()),
        _ => {}
    }
    s.last_probe_ms.store(now_ms(), Ordering::Relaxed);
    match tokio::time::timeout(PROBE_TIMEOUT, s.store.probe()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("store cannot take writes: {e}")),
        Err(_) => Err(format!(
            "store cannot take writes: a write did not finish within {} s",
            PROBE_TIMEOUT.as_secs()
        )),
    }
}

async fn metrics(State(s): State<Arc<HttpState>>) -> Response {
    let health = s.store.write_health();
    let inbox_depth = s.store.inbox_depth().await.unwrap_or(0);
    let text = s.metrics.render(StoreSample {
        write_errors: health.errors(),
        writable: health.failing().is_none(),
        inbox_depth,
    });
    (
        [(
            "content-type",
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

/// Checks `Authorization: Bearer …` against `token` in constant time; a refusal is counted
/// and answered 401.
pub(super) fn authorised(
    s: &HttpState,
    route: &'static str,
    request: &Request,
    token: &Secret,
) -> Result<(), Refused> {
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
        == 1
    {
        return Ok(());
    }
    s.metrics.refusals.refuse(route, "bad bearer token");
    Err((StatusCode::UNAUTHORIZED, "bad bearer token".to_string()))
}

/// The body of an authorised request as JSON, read up to `MAX_BODY_BYTES`.
async fn json_body(request: Request) -> Result<Value, Refused> {
    let Ok(body) = axum::body::to_bytes(request.into_body(), MAX_BODY_BYTES).await else {
        return Err((
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("the body is over {MAX_BODY_BYTES} bytes"),
        ));
    };
    serde_json::from_slice::<Value>(&body).map_err(|_| {
        (
            StatusCode::BAD_REQUEST,
            "expected a JSON object".to_string(),
        )
    })
}

/// A request turned away: its status and why.
pub(super) type Refused = (StatusCode, String);

async fn whisper(State(s): State<Arc<HttpState>>, request: Request) -> Response {
    let Some(token) = &s.whisper_token else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "the whisper endpoint is off: set ANIMA_WHISPER_TOKEN",
        )
            .into_response();
    };
    if let Err(r) = authorised(&s, "/api/whisper", &request, token) {
        return r.into_response();
    }
    // The token is good: now the body, up to its cap.
    match json_body(request).await {
        Ok(json) => queue_whisper(&s, &json).await,
        Err(r) => r.into_response(),
    }
}

async fn queue_whisper(s: &HttpState, json: &Value) -> Response {
    let field = |k: &str| {
        json.get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim()
            .to_string()
    };
    // One rule for both doors (`/api/whisper`, `/api/admin/whisper`): the prompt names who
    // whispered, so a whisper without its source is refused, not stored as "unknown".
    let (text, source) = (field("whisper"), field("source"));
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
    match s.store.add_whisper(&text, &source).await {
        Ok(id) => (
            StatusCode::ACCEPTED,
            axum::Json(serde_json::json!({ "ok": true, "id": id })),
        )
            .into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "not stored").into_response(),
    }
}

/// `/api/admin/…`: 404 unless `ANIMA_ADMIN_TOKEN` is set, 401 without it; never echoes a
/// secret.
async fn admin(
    State(s): State<Arc<HttpState>>,
    axum::extract::Path(action): axum::extract::Path<String>,
    request: Request,
) -> Response {
    let Some(token) = &s.admin_token else {
        return (StatusCode::NOT_FOUND, "not found").into_response();
    };
    if let Err(r) = authorised(&s, "/api/admin", &request, token) {
        return r.into_response();
    }
    let method = request.method().clone();
    match (method.as_str(), action.as_str()) {
        ("GET", "state") => match s.store.snapshot().await {
            Ok(snap) => {
                let template = s.library.current().template.clone();
                axum::Json(crate::admin::state_report(snap, &template)).into_response()
            }
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        },
        ("POST", "state") => {
            let json = match json_body(request).await {
                Ok(j) => j,
                Err(r) => return r.into_response(),
            };
            let Some(to) = json
                .get("state")
                .and_then(Value::as_str)
                .and_then(crate::states::State::from_name)
            else {
                return (
                    StatusCode::BAD_REQUEST,
                    "expected {\"state\": \"PLAY\"} or {\"state\": \"WORK\"}",
                )
                    .into_response();
            };
            let template = s.library.current().template.clone();
            let moved =
                crate::admin::request_state(s.store.as_ref(), &template, to, "the admin API").await;
            match moved {
                Ok(m) => axum::Json(serde_json::json!({
                    "ok": true, "from": m.from, "to": m.to, "cause": m.cause
                }))
                .into_response(),
                Err(crate::admin::RequestError::Store(e)) => {
                    (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response()
                }
                Err(refused) => (
                    StatusCode::CONFLICT,
                    axum::Json(serde_json::json!({ "error": refused.to_string() })),
                )
                    .into_response(),
            }
        }
        ("POST", "whisper") => match json_body(request).await {
            Ok(json) => queue_whisper(&s, &json).await,
            Err(r) => r.into_response(),
        },
        ("POST", "reset-thread") => {
            let json = match json_body(request).await {
                Ok(j) => j,
                Err(r) => return r.into_response(),
            };
            let Some(thread) = json
                .get("thread")
                .and_then(Value::as_str)
                .map(str::to_string)
            else {
                return (StatusCode::BAD_REQUEST, "expected {\"thread\": \"…\"}").into_response();
            };
            let t = thread.clone();
            match s.store.reset_thread(&t).await {
                Ok(true) => {
                    axum::Json(serde_json::json!({ "ok": true, "thread": thread })).into_response()
                }
                Ok(false) => (
                    StatusCode::NOT_FOUND,
                    axum::Json(serde_json::json!({ "error": "no such thread" })),
                )
                    .into_response(),
                Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
            }
        }
        _ => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}
