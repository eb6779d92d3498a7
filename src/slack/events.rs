//! The Events API door: `POST /slack/events`. The signature is checked first (url_verification
//! included), the body is capped before it is read, and a signed event goes to the `Gate`; a
//! 200 means it is recorded. Interactions (a button click) come to the same route as a signed
//! form post `payload=<json>`, verified the same way. In Socket Mode the route answers 404.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use serde_json::Value;
use slack_morphism::prelude::{SlackInteractionEvent, SlackPushEvent};
use tracing::{debug, info, warn};

use super::signature::{SignatureError, Verifier};
use super::Gate;
use crate::metrics::Metrics;

/// The largest body read (a Slack event is a few KB; a 40,000-character message with its
/// blocks stays well under this).
const MAX_EVENT_BYTES: usize = 512 * 1024;

pub struct EventsDoor {
    /// Events API mode: the signing secret's verifier; `None` in Socket Mode.
    pub verifier: Option<Verifier>,
    /// Set once Slack's identity is known; events before that get 503 (Slack retries).
    pub gate: OnceLock<Arc<Gate>>,
    pub metrics: Arc<Metrics>,
    pub stopping: Arc<AtomicBool>,
}

pub fn routes(door: Arc<EventsDoor>) -> Router {
    Router::new()
        .route(
            "/slack/events",
            post(slack_events).layer(DefaultBodyLimit::max(MAX_EVENT_BYTES)),
        )
        .with_state(door)
}

async fn slack_events(
    State(s): State<Arc<EventsDoor>>,
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
            s.metrics.refusals.refuse("/slack/events", &e.to_string());
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
    if let Some(payload) = form_field(&body, "payload") {
        return interaction(&s, &payload).await;
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
    let gate = match open_gate(&s) {
        Ok(gate) => gate,
        Err(refused) => return refused,
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

/// The gate events go through, or why none is open (shutting down, or Slack not connected
/// yet): Slack then sends the request again later.
#[allow(clippy::result_large_err)]
fn open_gate(s: &EventsDoor) -> Result<&super::Gate, Response> {
    if s.stopping.load(Ordering::SeqCst) {
        return Err((StatusCode::SERVICE_UNAVAILABLE, "shutting down").into_response());
    }
    s.gate.get().map(|g| g.as_ref()).ok_or_else(|| {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "not connected to Slack yet",
        )
            .into_response()
    })
}

/// A signed interaction (`payload=<json>`): handed to the `Gate`; one that cannot be read is
/// acknowledged and dropped, so Slack does not send it again.
async fn interaction(s: &EventsDoor, payload: &str) -> Response {
    let gate = match open_gate(s) {
        Ok(gate) => gate,
        Err(refused) => return refused,
    };
    match serde_json::from_str::<SlackInteractionEvent>(payload) {
        Ok(ev) => match gate.interaction(ev).await {
            Ok(()) => StatusCode::OK.into_response(),
            Err(e) => {
                warn!(error = %e, "interaction not recorded; Slack will retry");
                (StatusCode::INTERNAL_SERVER_ERROR, "not recorded").into_response()
            }
        },
        Err(e) => {
            Metrics::inc(&s.metrics.events_malformed);
            warn!(error = %e, bytes = payload.len(), "an interaction payload could not be read; acknowledged and dropped");
            StatusCode::OK.into_response()
        }
    }
}

/// The value of `name` in an `application/x-www-form-urlencoded` body (`+` is a space,
/// `%XX` a byte); `None` when the body is not such a form, lacks the field, or its value is
/// not UTF-8.
fn form_field(body: &[u8], name: &str) -> Option<String> {
    let text = std::str::from_utf8(body).ok()?;
    if text.trim_start().starts_with('{') {
        return None;
    }
    text.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (decode(k)? == name).then(|| decode(v)).flatten()
    })
}

fn decode(s: &str) -> Option<String> {
    let mut out = Vec::with_capacity(s.len());
    let mut bytes = s.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b'+' => out.push(b' '),
            b'%' => {
                let hi = (bytes.next()? as char).to_digit(16)?;
                let lo = (bytes.next()? as char).to_digit(16)?;
                out.push((hi * 16 + lo) as u8);
            }
            b => out.push(b),
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::form_field;

    #[test]
    fn a_form_field_is_decoded_whole_and_json_is_not_a_form() {
        let body = b"token=x&payload=%7B%22type%22%3A%22block_actions%22%2C%22t%22%3A%22caf%C3%A9+%F0%9F%A6%80%22%7D";
        assert_eq!(
            form_field(body, "payload").as_deref(),
            Some(r#"{"type":"block_actions","t":"café 🦀"}"#)
        );
        assert_eq!(form_field(body, "missing"), None);
        assert_eq!(form_field(br#"{"payload":"x"}"#, "payload"), None);
        assert_eq!(form_field(b"payload=%F0%9F", "payload"), None, "cut UTF-8");
        assert_eq!(form_field(b"payload=%Z1", "payload"), None, "not hex");
        assert_eq!(form_field(b"payload=%", "payload"), None);
    }
}
