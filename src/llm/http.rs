//! What the HTTP providers share: the client, status classification, error messages.

use std::time::Duration;

use reqwest::header::HeaderMap;
use reqwest::StatusCode;

use super::LlmError;

/// The HTTP client of a provider. TLS is chosen once at start (`crate::tls::install`).
pub fn client(timeout: Duration) -> Result<reqwest::Client, LlmError> {
    reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout.min(Duration::from_secs(10)))
        .user_agent(concat!("anima/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| LlmError::Connect {
            provider: "http",
            message: format!("cannot build the HTTP client: {e}"),
        })
}

/// Sends a request; a non-success status becomes the provider's error.
pub async fn send(
    provider: &'static str,
    request: reqwest::RequestBuilder,
    timeout: Duration,
) -> Result<reqwest::Response, LlmError> {
    let resp = request
        .send()
        .await
        .map_err(|e| send_error(provider, e, timeout))?;
    let status = resp.status();
    if status.is_success() {
        return Ok(resp);
    }
    let headers = resp.headers().clone();
    let text = resp.text().await.unwrap_or_default();
    Err(status_error(provider, status, &headers, &text))
}

/// The whole body as text.
pub async fn body(
    provider: &'static str,
    resp: reqwest::Response,
    timeout: Duration,
) -> Result<String, LlmError> {
    resp.text()
        .await
        .map_err(|e| send_error(provider, e, timeout))
}

/// Maps a transport error.
pub fn send_error(provider: &'static str, e: reqwest::Error, timeout: Duration) -> LlmError {
    if e.is_timeout() {
        LlmError::Timeout {
            provider,
            secs: timeout.as_secs(),
        }
    } else {
        LlmError::Connect {
            provider,
            message: error_chain(&e),
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}

/// Classifies a non-success status, reading the provider's own message from the body.
pub fn status_error(
    provider: &'static str,
    status: StatusCode,
    headers: &HeaderMap,
    body: &str,
) -> LlmError {
    let json: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = json.as_ref().and_then(provider_message).unwrap_or_else(|| {
        let t = body.trim();
        if t.is_empty() {
            status
                .canonical_reason()
                .unwrap_or("no message")
                .to_string()
        } else {
            t.chars().take(300).collect()
        }
    });
    let spend_limit = json
        .as_ref()
        .and_then(|j| j.pointer("/error/details/error_code"))
        .and_then(|c| c.as_str())
        == Some("enforced_spend_limit_reached");
    let should_retry = headers
        .get("x-should-retry")
        .and_then(|v| v.to_str().ok())
        .map(|v| v.eq_ignore_ascii_case("true"));
    let code = status.as_u16();
    let transient = match should_retry {
        Some(v) => v,
        None => matches!(code, 408 | 409 | 429) || code >= 500,
    };
    if transient && !spend_limit {
        LlmError::Transient {
            provider,
            status: code,
            message,
            retry_after: retry_after(headers),
        }
    } else {
        LlmError::Refused {
            provider,
            status: code,
            message,
        }
    }
}

/// `{"error":{"message"}}` (Anthropic, OpenAI) or `{"object":"error","message"}` (vLLM).
pub fn provider_message(j: &serde_json::Value) -> Option<String> {
    let m = j
        .pointer("/error/message")
        .or_else(|| j.get("message"))
        .or_else(|| j.get("error").filter(|e| e.is_string()))?;
    m.as_str().map(str::to_string)
}

/// `retry-after-ms`, else `retry-after` in seconds.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let get = |name| headers.get(name).and_then(|v| v.to_str().ok());
    if let Some(ms) = get("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(Duration::from_secs_f64(ms / 1000.0));
        }
    }
    let secs = get("retry-after").and_then(|v| v.trim().parse::<f64>().ok())?;
    (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn statuses_are_classified_as_the_sdks_do() {
        let body = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        for code in [408, 409, 429, 500, 504, 529] {
            let e = status_error(
                "anthropic",
                StatusCode::from_u16(code).unwrap(),
                &HeaderMap::new(),
                body,
            );
            assert!(e.is_retryable(), "{code}");
        }
        for code in [400, 401, 402, 403, 404, 413] {
            let e = status_error(
                "anthropic",
                StatusCode::from_u16(code).unwrap(),
                &HeaderMap::new(),
                body,
            );
            assert!(!e.is_retryable(), "{code}");
            assert!(e.to_string().contains("Overloaded"), "{e}");
        }
    }

    #[test]
    fn the_spend_limit_is_not_retried() {
        let body = r#"{"type":"error","error":{"type":"rate_limit_error","message":"limit","details":{"error_code":"enforced_spend_limit_reached"}}}"#;
        let e = status_error(
            "anthropic",
            StatusCode::TOO_MANY_REQUESTS,
            &HeaderMap::new(),
            body,
        );
        assert!(!e.is_retryable());
    }

    #[test]
    fn x_should_retry_overrides_the_status() {
        let e = status_error(
            "anthropic",
            StatusCode::BAD_REQUEST,
            &headers(&[("x-should-retry", "true")]),
            "{}",
        );
        assert!(e.is_retryable());
        let e = status_error(
            "anthropic",
            StatusCode::SERVICE_UNAVAILABLE,
            &headers(&[("x-should-retry", "false")]),
            "{}",
        );
        assert!(!e.is_retryable());
    }

    #[test]
    fn retry_after_headers() {
        assert_eq!(
            retry_after(&headers(&[("retry-after-ms", "250")])),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "2")])),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            retry_after(&headers(&[(
                "retry-after",
                "Wed, 21 Oct 2015 07:28:00 GMT"
            )])),
            None
        );
    }

    #[test]
    fn messages_from_every_error_shape() {
        let m = |s: &str| provider_message(&serde_json::from_str(s).unwrap());
        assert_eq!(
            m(r#"{"error":{"message":"a","type":"x","code":null}}"#).as_deref(),
            Some("a")
        );
        assert_eq!(
            m(r#"{"object":"error","message":"b","code":400}"#).as_deref(),
            Some("b")
        );
        assert_eq!(m(r#"{"error":"c"}"#).as_deref(), Some("c"));
    }

    #[test]
    fn a_real_tls_client_builds_with_one_crypto_provider() {
        crate::tls::install();
        assert!(client(Duration::from_secs(5)).is_ok());
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        assert!(config.crypto_provider().cipher_suites.len() > 1);
    }
}
