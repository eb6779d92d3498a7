//! Socket Mode, through slack-morphism: apps.connections.open with the app token, the
//! WebSocket, acknowledgements, reconnection on `disconnect` frames and dropped sockets.
//!
//! slack-morphism acknowledges an envelope when the callback returns, and runs the callback
//! inside the socket reader: the callback only records the message (`Gate::handle`) or the
//! click (`interactive` envelopes: `Gate::interaction`) and returns. A failure to record leaves the envelope unacknowledged, so Slack redelivers it;
//! a payload that cannot be read is logged and acknowledged, so it is not redelivered forever.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use slack_morphism::errors::{SlackClientError, SlackClientProtocolError};
use slack_morphism::prelude::*;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
use tracing::{debug, info, warn};

use super::Gate;
use crate::config::secret::Secret;
use crate::metrics::Metrics;

pub type Listener = SlackClientSocketModeListener<SlackClientHyperHttpsConnector>;

/// Builds the listener; `Listener::listen_for` and `start` connect it.
pub fn listener(client: Arc<SlackHyperClient>, gate: Arc<Gate>) -> Listener {
    let metrics = gate.metrics.clone();
    let env = Arc::new(
        SlackClientEventsListenerEnvironment::new(client)
            .with_error_handler(on_error)
            .with_user_state(gate)
            .with_user_state(metrics),
    );
    let callbacks = SlackSocketModeListenerCallbacks::new()
        .with_hello_events(on_hello)
        .with_push_events(on_push)
        .with_interaction_events(on_interaction);
    let config = SlackClientSocketModeConfig::new()
        .with_initial_backoff_in_seconds(1)
        .with_reconnect_timeout_in_seconds(5);
    SlackClientSocketModeListener::new(&config, env, callbacks)
}

pub fn app_token(secret: &Secret) -> SlackApiToken {
    super::api::token(secret)
}

/// Generic because slack-morphism does not export the hello event's type by a public path.
async fn on_hello<E: std::fmt::Debug>(
    event: E,
    _client: Arc<SlackHyperClient>,
    states: SlackClientEventsUserState,
) {
    if let Some(m) = states.read().await.get_user_state::<Arc<Metrics>>() {
        m.slack_connected.store(true, Ordering::SeqCst);
    }
    info!(hello = ?event, "connected to Slack (Socket Mode)");
}

async fn on_push(
    event: SlackPushEventCallback,
    _client: Arc<SlackHyperClient>,
    states: SlackClientEventsUserState,
) -> UserCallbackResult<()> {
    let gate = states.read().await.get_user_state::<Arc<Gate>>().cloned();
    match gate {
        Some(gate) => gate.handle(event).await.map_err(|e| e.into()),
        None => Err("the intake gate is not installed".into()),
    }
}

async fn on_interaction(
    event: SlackInteractionEvent,
    _client: Arc<SlackHyperClient>,
    states: SlackClientEventsUserState,
) -> UserCallbackResult<()> {
    let gate = states.read().await.get_user_state::<Arc<Gate>>().cloned();
    match gate {
        Some(gate) => gate.interaction(event).await.map_err(|e| e.into()),
        None => Err("the intake gate is not installed".into()),
    }
}

fn on_error(
    err: BoxError,
    _client: Arc<SlackHyperClient>,
    states: SlackClientEventsUserState,
) -> HttpStatusCode {
    // An unreadable frame reaches here as the protocol error itself (slack-morphism then
    // acknowledges it); one from a callback as a `SlackClientError`.
    let protocol = err
        .downcast_ref::<SlackClientProtocolError>()
        .or_else(|| match err.downcast_ref::<SlackClientError>() {
            Some(SlackClientError::ProtocolError(p)) => Some(p),
            _ => None,
        });
    if let Some(SlackClientError::SocketModeProtocolError(e)) = err.downcast_ref() {
        // The connection itself failed (slack-morphism opens it again): about no event.
        warn!(error = %e.message, "the Socket Mode connection failed; reconnecting");
        return HttpStatusCode::OK;
    }
    if let Some(p) = protocol {
        // The body is user text (up to megabytes on one line): its size at warn, a cut of it
        // at debug only.
        let body = p.json_body.as_deref().unwrap_or("");
        warn!(reason = %p.json_error, bytes = body.len(), "a Slack payload could not be read; acknowledged and dropped");
        debug!(body = %cut(body, 500), "the unreadable payload");
        if let Ok(s) = states.try_read() {
            if let Some(m) = s.get_user_state::<Arc<Metrics>>() {
                Metrics::inc(&m.events_malformed);
            }
        }
        HttpStatusCode::OK
    } else {
        // Not recorded: no acknowledgement, so Slack sends it again.
        warn!(error = %err, "a Slack event was not recorded; leaving it unacknowledged");
        HttpStatusCode::INTERNAL_SERVER_ERROR
    }
}

/// The first `max` characters of `text`, marked when cut.
fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}… ({} bytes in all)", &text[..at], text.len()),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::cut;

    #[test]
    fn a_cut_keeps_whole_characters() {
        assert_eq!(cut("héllo", 10), "héllo");
        assert_eq!(cut("日本語テキスト", 3), "日本語… (21 bytes in all)");
        assert_eq!(cut("🦀🦀", 1), "🦀… (8 bytes in all)");
    }
}
