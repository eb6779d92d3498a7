//! A streamable-HTTP server: its transport, with the bearer token read from the environment
//! (never logged, never said), and a failed handshake said in words: the HTTP status the
//! server answers and what to check, or why it cannot be reached.
//!
//! rmcp's reqwest client does the HTTP, but for the answer to a tool call: [`Bounded`] sends
//! that itself and reads a JSON answer up to the bound the server's `max_result_chars` sets
//! ([`Bounds`]); past it, a [`Scan`] reads the rest without keeping it, and the call is
//! answered with the result cut (or an error for an answer that is no result) as soon as the
//! body ends; an answer sent as SSE events goes through [`pump`] line by line, as a stdio
//! server's output does, and an event past the bound is cut the same way. Any other message
//! keeps rmcp's client and its limits (16 MiB).

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use futures_util::stream::{BoxStream, StreamExt};
use reqwest::header::{
    HeaderName, HeaderValue, ACCEPT, CONTENT_TYPE, RETRY_AFTER, WWW_AUTHENTICATE,
};
use reqwest::StatusCode;
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, ServerJsonRpcMessage};
use rmcp::transport::common::http_header::{
    EVENT_STREAM_MIME_TYPE, HEADER_SESSION_ID, JSON_MIME_TYPE,
};
use rmcp::transport::streamable_http_client::{
    AuthRequiredError, HttpStatusError, InsufficientScopeError, SseError, StreamableHttpClient,
    StreamableHttpClientTransportConfig, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use rmcp::transport::StreamableHttpClientTransport;
use sse_stream::{Sse, SseStream};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tracing::info;

use super::scan::Scan;
use super::stdio::{pump, Bounds, PIPE};
use super::words::words;

pub type HttpTransport = StreamableHttpClientTransport<Bounded>;

type Failed = StreamableHttpError<reqwest::Error>;

/// The transport to the server `server` at `url`, with the token in `bearer_env` (empty:
/// none), a tool's result read up to `bounds`, and the client (connecting within `within`) to
/// say why a handshake failed.
pub fn transport(
    server: &str,
    url: &str,
    bearer_env: &str,
    within: Duration,
    bounds: Bounds,
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
    let bounded = Bounded {
        client,
        server: server.to_string(),
        bounds,
    };
    Ok((
        StreamableHttpClientTransport::with_client(bounded, config),
        probe,
    ))
}

/// rmcp's reqwest client, but for a tool call's answer, read within [`Bounds`].
#[derive(Clone)]
pub struct Bounded {
    client: reqwest::Client,
    /// The server's name, for the log.
    server: String,
    bounds: Bounds,
}

impl StreamableHttpClient for Bounded {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Failed> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    /// Any message but a tool call goes to rmcp's client with rmcp's `limits`; a tool call is
    /// sent here, headers as rmcp sends them, and its answer read within [`Bounds`].
    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Failed> {
        if !is_tool_call(&message) {
            return self
                .client
                .post_message_with_response_limits(
                    uri,
                    message,
                    session_id,
                    auth_header,
                    custom_headers,
                    limits,
                )
                .await;
        }
        let mut request = self.client.post(uri.as_ref()).header(
            ACCEPT,
            format!("{EVENT_STREAM_MIME_TYPE}, {JSON_MIME_TYPE}"),
        );
        if let Some(token) = auth_header {
            request = request.bearer_auth(token);
        }
        for (name, value) in custom_headers {
            request = request.header(name, value);
        }
        let session_was_attached = session_id.is_some();
        if let Some(session) = session_id {
            request = request.header(HEADER_SESSION_ID, session.as_ref());
        }
        let response = request.json(&message).send().await?;
        let status = response.status();
        let challenge = response
            .headers()
            .get(WWW_AUTHENTICATE)
            .and_then(|h| h.to_str().ok())
            .map(str::to_string);
        match (status, challenge) {
            (StatusCode::UNAUTHORIZED, Some(header)) => {
                return Err(StreamableHttpError::AuthRequired(AuthRequiredError::new(
                    header,
                )))
            }
            (StatusCode::FORBIDDEN, Some(header)) => {
                return Err(StreamableHttpError::InsufficientScope(
                    InsufficientScopeError::new(header, None),
                ))
            }
            (StatusCode::ACCEPTED | StatusCode::NO_CONTENT, _) => {
                return Ok(StreamableHttpPostResponse::Accepted)
            }
            (StatusCode::NOT_FOUND, _) if session_was_attached => {
                return Err(StreamableHttpError::SessionExpired)
            }
            _ => {}
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .map(|ct| String::from_utf8_lossy(ct.as_bytes()).into_owned());
        let session = response
            .headers()
            .get(HEADER_SESSION_ID)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let is = |mime: &str| {
            content_type
                .as_deref()
                .is_some_and(|ct| media_type_is(ct, mime))
        };
        if !status.is_success() {
            return refused(response, is(JSON_MIME_TYPE), limits, session).await;
        }
        if is(EVENT_STREAM_MIME_TYPE) {
            let events = bounded_events(&self.server, response, self.bounds);
            return Ok(StreamableHttpPostResponse::Sse(events, session));
        }
        if !is(JSON_MIME_TYPE) {
            return Err(StreamableHttpError::UnexpectedContentType(content_type));
        }
        let answer = read_answer(&self.server, response, self.bounds).await?;
        Ok(StreamableHttpPostResponse::Json(answer, session))
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Failed> {
        self.client
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Failed> {
        self.client
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Failed> {
        self.client
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}

/// Whether `message` calls a tool: its answer is read within the server's [`Bounds`].
fn is_tool_call(message: &ClientJsonRpcMessage) -> bool {
    match message {
        ClientJsonRpcMessage::Request(r) => matches!(r.request, ClientRequest::CallToolRequest(_)),
        _ => false,
    }
}

/// Whether the `Content-Type` value `value` is `mime`, whatever its parameters and case.
fn media_type_is(value: &str, mime: &str) -> bool {
    value
        .split(';')
        .next()
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case(mime))
}

/// The answer to a tool call, read up to the result's bound; past it, the rest is read by a
/// [`Scan`] without being kept, and what it makes of the answer stands in its place.
async fn read_answer(
    server: &str,
    mut response: reqwest::Response,
    bounds: Bounds,
) -> Result<ServerJsonRpcMessage, Failed> {
    let mut body = Vec::new();
    let mut scan: Option<Scan> = None;
    while let Some(chunk) = response.chunk().await? {
        if let Some(s) = scan.as_mut() {
            s.feed(&chunk);
        } else if body.len() + chunk.len() > bounds.result {
            let mut s = Scan::new(bounds.max_chars);
            s.feed(&body);
            s.feed(&chunk);
            body = Vec::new();
            scan = Some(s);
        } else {
            body.extend_from_slice(&chunk);
        }
    }
    let Some(s) = scan else {
        return serde_json::from_slice(&body).map_err(|e| {
            StreamableHttpError::UnexpectedServerResponse(Cow::Owned(format!(
                "the answer is not a JSON-RPC message: {e}"
            )))
        });
    };
    let Some(answer) = s.answer(bounds.result) else {
        return Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
            format!(
                "the answer was {} bytes, more than the {} bytes max_result_chars sets, and no answer to the call",
                s.bytes(),
                bounds.result
            ),
        )));
    };
    info!(
        server = %server,
        bytes = s.bytes(),
        "an answer of {} bytes from the tool server was cut (its bound: {} bytes)",
        s.bytes(),
        bounds.result
    );
    Ok(serde_json::from_str(&answer)?)
}

/// A refusal of a tool call (an HTTP status other than success) as rmcp's client says it: a
/// JSON-RPC error in a JSON body (within rmcp's limit) is the call's answer; otherwise a rate
/// limit or server error is its status (with `Retry-After`), and any other refusal its status
/// and the start of its body.
async fn refused(
    mut response: reqwest::Response,
    json: bool,
    limits: StreamableHttpResponseLimits,
    session: Option<String>,
) -> Result<StreamableHttpPostResponse, Failed> {
    let status = response.status();
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    // A rate limit is said as its status, whatever its body.
    let json = json && status != StatusCode::TOO_MANY_REQUESTS;
    let keep = if json {
        limits.max_json_response_size
    } else {
        limits.max_error_response_size
    };
    let mut body = Vec::new();
    while let Ok(Some(chunk)) = response.chunk().await {
        if body.len() + chunk.len() > keep {
            break;
        }
        body.extend_from_slice(&chunk);
    }
    if json {
        if let Ok(error @ ServerJsonRpcMessage::Error(_)) = serde_json::from_slice(&body) {
            return Ok(StreamableHttpPostResponse::Json(error, session));
        }
    }
    if status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error() {
        return Err(HttpStatusError::new(status.as_u16(), retry_after).into());
    }
    let text = String::from_utf8_lossy(&body);
    let start: String = text.chars().take(limits.max_error_response_size).collect();
    Err(StreamableHttpError::UnexpectedServerResponse(Cow::Owned(
        format!("HTTP {status}: {start}"),
    )))
}

/// The SSE events of `response`, each line of them through [`pump`]: an event whose data is
/// a tool's result past its bound comes out with the result cut, as soon as the event's line
/// has streamed past.
fn bounded_events(
    server: &str,
    response: reqwest::Response,
    bounds: Bounds,
) -> BoxStream<'static, Result<Sse, SseError>> {
    let (mut into_pump, from_http) = tokio::io::duplex(PIPE);
    let (to_rmcp, out) = tokio::io::duplex(PIPE);
    tokio::spawn(async move {
        let mut body = response.bytes_stream();
        while let Some(Ok(chunk)) = body.next().await {
            if into_pump.write_all(&chunk).await.is_err() {
                break;
            }
        }
    });
    tokio::spawn(pump(
        server.to_string(),
        from_http,
        to_rmcp,
        bounds,
        b"data: ",
    ));
    let lines =
        futures_util::stream::unfold((out, vec![0u8; PIPE]), |(mut out, mut buf)| async move {
            match out.read(&mut buf).await {
                Ok(0) | Err(_) => None,
                Ok(n) => {
                    let chunk = Bytes::copy_from_slice(&buf[..n]);
                    Some((Ok::<_, std::io::Error>(chunk), (out, buf)))
                }
            }
        });
    SseStream::from_bytes_stream(lines).boxed()
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
