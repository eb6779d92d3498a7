//! A daimon at a URL: one POST of the whisper request with its bearer token, the answer
//! read up to `MAX_ANSWER_BYTES` (a longer one is refused, the rest never read), all within
//! the daimon's timeout. Errors are words without the token or the URL (reqwest's errors are
//! stripped of it), so they can be logged.

use std::time::Duration;

use super::protocol::{self, MAX_ANSWER_BYTES};
use crate::config::secret::Secret;

/// The client daimons are asked with (TLS as the process chose it at start).
pub(super) fn client() -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .user_agent(concat!("anima/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| format!("no HTTP client: {}", e.without_url()))
}

/// Asks the daimon at `url`; its whisper, `None` when it had nothing to say.
pub(super) async fn ask(
    client: &reqwest::Client,
    url: &str,
    token: Option<&Secret>,
    body: Vec<u8>,
    timeout: Duration,
) -> Result<Option<String>, String> {
    let asked = async {
        let mut request = client
            .post(url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(body);
        if let Some(t) = token {
            request = request.bearer_auth(t.expose());
        }
        let mut response = request.send().await.map_err(words)?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("it answered HTTP {}", status.as_u16()));
        }
        let mut read = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(words)? {
            if read.len() + chunk.len() > MAX_ANSWER_BYTES {
                return Err(format!(
                    "its answer is over {} KB; not read",
                    MAX_ANSWER_BYTES / 1024
                ));
            }
            read.extend_from_slice(&chunk);
        }
        protocol::read_answer(&read).map_err(|e| e.to_string())
    };
    match tokio::time::timeout(timeout, asked).await {
        Ok(answer) => answer,
        Err(_) => Err(no_answer_within(timeout)),
    }
}

/// Whether anything answers HTTP at `url` within `within` (any status will do: a whisper
/// endpoint may refuse a GET), for `anima check`; nothing is asked of the daimon.
pub async fn reachable(url: &str, within: Duration) -> Result<u16, String> {
    let client = client()?;
    let probe = async {
        client
            .get(url)
            .send()
            .await
            .map(|r| r.status().as_u16())
            .map_err(words)
    };
    match tokio::time::timeout(within, probe).await {
        Ok(answer) => answer,
        Err(_) => Err(no_answer_within(within)),
    }
}

fn no_answer_within(timeout: Duration) -> String {
    format!("no answer within {} ms", timeout.as_millis())
}

/// reqwest's error in words, without the URL (which may carry a key).
fn words(e: reqwest::Error) -> String {
    let timeout = e.is_timeout();
    let e = e.without_url();
    let mut out = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        out.push_str(": ");
        out.push_str(&s.to_string());
        source = s.source();
    }
    if timeout {
        out.push_str(" (timed out)");
    }
    out
}
