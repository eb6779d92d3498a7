//! Slack's errors as anima tells them apart: a refusal with Slack's code, a rate limit, or a
//! transport failure said in words; and which of them trying again later can mend. Knows
//! nothing of calls or retries (`api` owns them).

use std::time::Duration;

use slack_morphism::errors::SlackClientError;

#[derive(Debug, thiserror::Error)]
pub enum SlackError {
    #[error("Slack {method} failed: {code}")]
    Api { method: &'static str, code: String },
    #[error("Slack {method} is rate limited")]
    RateLimited {
        method: &'static str,
        retry_after: Option<Duration>,
    },
    #[error("Slack {method}: {message}")]
    Transport {
        method: &'static str,
        message: String,
    },
}

impl SlackError {
    pub(super) fn from_client(method: &'static str, e: SlackClientError) -> Self {
        match e {
            SlackClientError::ApiError(api) => SlackError::Api {
                method,
                code: api.code,
            },
            SlackClientError::RateLimitError(rl) => SlackError::RateLimited {
                method,
                retry_after: rl.retry_after,
            },
            other => SlackError::Transport {
                method,
                message: transport_words(&other),
            },
        }
    }
}

/// A transport failure in words: each cause's own message, never slack-morphism's debug dump
/// of it (its Display prints an HTTP or system error's cause with `{:?}`).
fn transport_words(e: &SlackClientError) -> String {
    let (what, cause) = match e {
        SlackClientError::HttpProtocolError(p) => ("cannot reach Slack", p.cause.as_deref()),
        SlackClientError::SystemError(s) => (
            s.message.as_deref().unwrap_or("Slack's client failed"),
            s.cause.as_deref(),
        ),
        other => return other.to_string(),
    };
    let mut words = what.to_string();
    let mut next = cause.map(|c| c as &(dyn std::error::Error + 'static));
    while let Some(c) = next {
        let said = c.to_string();
        // hyper repeats its cause in its own message at times: each words once.
        if !words.contains(&said) {
            words.push_str(": ");
            words.push_str(&said);
        }
        next = c.source();
    }
    words
}

/// Slack error codes that say "not now" rather than "never".
pub(super) fn transient(code: &str) -> bool {
    matches!(
        code,
        "internal_error"
            | "fatal_error"
            | "service_unavailable"
            | "request_timeout"
            | "team_added_to_org"
    )
}

impl SlackError {
    /// Whether trying again later can succeed (Slack unreachable, busy or rate limiting, or
    /// refusing a token: the operator mends that, and the replies wait for it).
    pub fn is_temporary(&self) -> bool {
        match self {
            SlackError::Transport { .. } | SlackError::RateLimited { .. } => true,
            SlackError::Api { code, .. } => {
                code == "ratelimited" || transient(code) || super::credentials::refuses(code)
            }
        }
    }
}
