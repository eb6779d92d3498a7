//! A streamable-HTTP server: its transport, with the bearer token read from the environment
//! (never logged, never said), and a failed handshake said in words: the HTTP status the
//! server answers and what to check, or why it cannot be reached.

use std::time::Duration;

use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;

use super::words::words;

pub type HttpTransport = StreamableHttpClientTransport<reqwest::Client>;

/// The transport to `url`, with the token in `bearer_env` (empty: none), and the client
/// (connecting within `within`) to say why a handshake failed.
pub fn transport(
    url: &str,
    bearer_env: &str,
    within: Duration,
) -> Result<(HttpTransport, Probe), String> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    let mut token = None;
    if !bearer_env.is_empty() {
        let t = std::env::var(bearer_env)
            .map_err(|_| format!("the bearer token's variable `{bearer_env}` is not set"))?;
        config = config.auth_header(t.clone());
        token = Some(t);
    }
    let client = reqwest::Client::builder()
        .connect_timeout(within)
        .build()
        .map_err(|e| format!("no HTTP client: {}", words(&e)))?;
    let probe = Probe {
        client: client.clone(),
        url: url.to_string(),
        bearer_env: bearer_env.to_string(),
        token,
        within,
    };
    Ok((
        StreamableHttpClientTransport::with_client(client, config),
        probe,
    ))
}

/// What is needed to ask the server again, plainly, why the handshake failed.
pub struct Probe {
    client: reqwest::Client,
    url: String,
    bearer_env: String,
    token: Option<String>,
    within: Duration,
}

impl Probe {
    /// Why the handshake failed (`error`: the SDK's error in words): the `initialize`
    /// request is sent again, plainly, and an HTTP status other than success is named with
    /// what to check.
    pub async fn failed(&self, error: String) -> String {
        let url = &self.url;
        let mut request = self
            .client
            .post(url)
            .timeout(self.within)
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            .body(INITIALIZE);
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        match request.send().await {
            Ok(r) if !r.status().is_success() => said(r.status(), url, &self.bearer_env),
            Ok(_) => format!("the MCP handshake with {url} failed: {error}"),
            Err(e) => format!("cannot reach {url}: {}", words(&e)),
        }
    }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"anima","version":"0"}}}"#;

/// An HTTP status from `url` in words, with what to check.
fn said(status: reqwest::StatusCode, url: &str, bearer_env: &str) -> String {
    let check = match status.as_u16() {
        401 | 403 if bearer_env.is_empty() => {
            ": the server wants a token; name the environment variable holding it in `bearer_env`"
                .to_string()
        }
        401 | 403 => format!(": check bearer_env {bearer_env} (the server refused its token)"),
        404 => ": check the server's `url`".to_string(),
        _ => String::new(),
    };
    format!("HTTP {status} from {url}{check}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_names_the_status_and_what_to_check() {
        let u = "https://h/mcp";
        assert_eq!(
            said(reqwest::StatusCode::UNAUTHORIZED, u, "KB_TOKEN"),
            "HTTP 401 Unauthorized from https://h/mcp: check bearer_env KB_TOKEN (the server refused its token)"
        );
        assert!(said(reqwest::StatusCode::FORBIDDEN, u, "").contains("`bearer_env`"));
        assert_eq!(
            said(reqwest::StatusCode::BAD_GATEWAY, u, ""),
            "HTTP 502 Bad Gateway from https://h/mcp"
        );
    }
}
