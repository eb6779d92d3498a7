//! Retries with backoff and jitter: connection errors, timeouts and transient statuses are
//! tried again up to `max_retries` times, waiting what the provider asked (`retry-after-ms`,
//! `retry-after`), else min(0.5·2ⁿ, 8) s less up to a quarter of jitter.

use std::future::Future;
use std::time::Duration;

use super::LlmError;

/// The longest wait honoured from a `retry-after` header.
const MAX_SERVER_WAIT: Duration = Duration::from_secs(60);

/// The wait before retry number `attempt` (0-based).
pub fn backoff(attempt: u32, err: &LlmError) -> Duration {
    if let Some(wait) = err.retry_after() {
        return wait.min(MAX_SERVER_WAIT);
    }
    let base = (0.5 * 2f64.powi(attempt.min(8) as i32)).min(8.0);
    let jitter = 1.0 - fastrand::f64() * 0.25;
    Duration::from_secs_f64(base * jitter)
}

/// Runs `call` until it succeeds, fails for good, or `max_retries` retries are spent.
pub async fn with_retries<T, F, Fut>(max_retries: u32, mut call: F) -> Result<T, LlmError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, LlmError>>,
{
    let mut attempt = 0;
    loop {
        match call().await {
            Ok(v) => return Ok(v),
            Err(e) if e.is_retryable() && attempt < max_retries => {
                let wait = backoff(attempt, &e);
                tracing::warn!(error = %e, attempt = attempt + 1, wait_ms = wait.as_millis() as u64, "model call failed; retrying");
                tokio::time::sleep(wait).await;
                attempt += 1;
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transient(retry_after: Option<Duration>) -> LlmError {
        LlmError::Transient {
            provider: "anthropic",
            status: 529,
            message: "overloaded".into(),
            retry_after,
        }
    }

    #[test]
    fn backoff_doubles_to_a_cap_with_jitter() {
        for attempt in 0..10 {
            let want = (0.5 * 2f64.powi(attempt)).min(8.0);
            let got = backoff(attempt as u32, &transient(None)).as_secs_f64();
            assert!(
                got <= want && got >= want * 0.75,
                "attempt {attempt}: {got}"
            );
        }
    }

    #[test]
    fn the_servers_wait_is_honoured_up_to_a_minute() {
        let w = backoff(0, &transient(Some(Duration::from_millis(1500))));
        assert_eq!(w, Duration::from_millis(1500));
        let w = backoff(0, &transient(Some(Duration::from_secs(3600))));
        assert_eq!(w, Duration::from_secs(60));
    }

    #[tokio::test(start_paused = true)]
    async fn retries_stop_at_the_limit_and_skip_refusals() {
        let mut calls = 0;
        let r: Result<(), _> = with_retries(3, || {
            calls += 1;
            async { Err(transient(None)) }
        })
        .await;
        assert!(r.is_err());
        assert_eq!(calls, 4, "one call and three retries");

        let mut calls = 0;
        let r: Result<(), _> = with_retries(3, || {
            calls += 1;
            async {
                Err(LlmError::Refused {
                    provider: "openai",
                    status: 401,
                    message: "bad key".into(),
                })
            }
        })
        .await;
        assert!(r.is_err());
        assert_eq!(calls, 1, "a refusal is not retried");
    }
}
