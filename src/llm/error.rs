//! Provider errors, typed where the retry loop branches on them.

use std::time::Duration;

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum LlmError {
    #[error("{provider} could not be reached: {message}")]
    Connect {
        provider: &'static str,
        message: String,
    },
    #[error("{provider} did not answer within {secs} s")]
    Timeout { provider: &'static str, secs: u64 },
    /// A status the provider says may succeed later (408, 409, 429, 5xx, 529).
    #[error("{provider} answered HTTP {status}: {message}")]
    Transient {
        provider: &'static str,
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// A status that will not change by asking again (400, 401, 403, 404, 413, spend limit…).
    #[error("{provider} refused the request (HTTP {status}): {message}")]
    Refused {
        provider: &'static str,
        status: u16,
        message: String,
    },
    /// A stream that broke off or reported an error mid-way.
    #[error("{provider} stream failed: {message}")]
    Stream {
        provider: &'static str,
        message: String,
        retryable: bool,
    },
    #[error("{provider} sent an answer anima cannot read: {message}")]
    BadResponse {
        provider: &'static str,
        message: String,
    },
    #[error("the claude CLI failed: {message}")]
    Cli { message: String },
    /// The server refused a request for the images it carried (a model that reads none):
    /// nothing was answered. The caller asks again without them, and the provider offers
    /// none from then on (`Provider::image_limits` is `None`).
    #[error("{provider} refused the images sent with the message: {message}")]
    ImagesRefused {
        provider: &'static str,
        message: String,
    },
}

impl LlmError {
    /// Whether asking again may help.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::Connect { .. } | LlmError::Timeout { .. } | LlmError::Transient { .. } => {
                true
            }
            LlmError::Stream { retryable, .. } => *retryable,
            _ => false,
        }
    }

    /// The wait the provider asked for.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::Transient { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}
