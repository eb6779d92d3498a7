//! Anthropic Messages API: `POST {base}/v1/messages`, plain or streamed (SSE).
//!
//! The stable part (soul, skills, the catalogue of cognitive steps) goes in one system block
//! marked `cache_control: ephemeral`, and the last message before this turn's is a second
//! breakpoint, so every turn reads from the prompt cache what the turn before wrote; usage
//! records cache writes and reads.
//!
//! This turn's images go into this turn's user message, as `image` blocks before its text:
//! the cached prefix (system block, earlier messages) is the same with or without them.

use std::time::Duration;

use serde_json::{json, Value};

use super::structured::Structured;
use super::{
    http, sse, BoxFuture, ChatRequest, Completion, Constraint, Deltas, Form, Image, ImageLimits,
    LlmError, Provider, Role, Usage,
};
use crate::config::secret::Secret;

pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com";
pub const DEFAULT_MODEL: &str = "claude-sonnet-4-5";
const NAME: &str = "anthropic";

/// What every current Claude model reads: a long edge of 1,568 pixels (Anthropic's
/// recommended largest; a larger image is scaled down by the API, costing time and no
/// detail), the four types the API takes, and at most 5 MB an image, counted here on its
/// base64 form, so 3.75 MB of image (4/3 of that is 5 MiB).
pub const IMAGE_LIMITS: ImageLimits = ImageLimits {
    long_edge: 1568,
    max_bytes: 5 * 1024 * 1024 / 4 * 3,
    media_types: &["image/jpeg", "image/png", "image/gif", "image/webp"],
};

pub struct Anthropic {
    client: reqwest::Client,
    url: String,
    key: Secret,
    model: String,
    stream: bool,
    timeout: Duration,
    structured: Structured,
}

impl Anthropic {
    pub fn new(
        base_url: &str,
        key: Secret,
        model: &str,
        stream: bool,
        timeout: Duration,
    ) -> Result<Self, LlmError> {
        let base = if base_url.is_empty() {
            DEFAULT_BASE_URL
        } else {
            base_url
        };
        Ok(Anthropic {
            client: http::client(timeout)?,
            url: format!("{}/v1/messages", base.trim_end_matches('/')),
            key,
            model: if model.is_empty() {
                DEFAULT_MODEL.into()
            } else {
                model.into()
            },
            stream,
            timeout,
            structured: Structured::default(),
        })
    }

    /// The provider's constrained output: which dialect it speaks (set once, at selection).
    pub fn structured_state(&self) -> &Structured {
        &self.structured
    }

    /// One call with the request's constraint when the server takes it; asked again plain
    /// when the server refuses it.
    async fn call(
        &self,
        req: ChatRequest<'_>,
        deltas: Option<&Deltas>,
    ) -> Result<Completion, LlmError> {
        self.structured
            .call(NAME, req.constraint, |c| self.send(req, c, deltas))
            .await
    }

    async fn send(
        &self,
        req: ChatRequest<'_>,
        constraint: Option<&Constraint>,
        deltas: Option<&Deltas>,
    ) -> Result<Completion, LlmError> {
        let mut body = request_body(req.model.unwrap_or(&self.model), &req, self.stream);
        if let Some(c) = constraint {
            self.structured.apply(&mut body, c);
        }
        let request = self
            .client
            .post(&self.url)
            .header("x-api-key", self.key.expose())
            .header("anthropic-version", "2023-06-01")
            .json(&body);
        let resp = http::send(NAME, request, self.timeout).await?;
        if !self.stream {
            return parse_message(&http::body(NAME, resp, self.timeout).await?);
        }
        let mut acc = StreamState::default();
        sse::read(NAME, resp, |frame| acc.apply(frame, deltas))
            .await?
            .ok_or_else(|| LlmError::Stream {
                provider: NAME,
                message: "the stream closed before message_stop".into(),
                retryable: true,
            })
    }
}

impl Provider for Anthropic {
    fn name(&self) -> &'static str {
        NAME
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn structured(&self) -> Option<Form> {
        self.structured.form()
    }

    fn image_limits(&self) -> Option<ImageLimits> {
        Some(IMAGE_LIMITS)
    }

    fn complete<'a>(
        &'a self,
        req: ChatRequest<'a>,
        deltas: Option<&'a Deltas>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        Box::pin(self.call(req, deltas))
    }
}

/// The request body: the cached system block, the history (its last message a cache
/// breakpoint too), the turn.
pub fn request_body(model: &str, req: &ChatRequest, stream: bool) -> Value {
    let mut messages: Vec<Value> = Vec::new();
    for m in req.history {
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        messages.push(json!({ "role": role, "content": m.text }));
    }
    // The API wants alternating roles: an unanswered earlier message joins this turn's.
    match messages.last_mut() {
        Some(last) if last["role"] == "user" => {
            let joined = format!("{}\n\n{}", last["content"].as_str().unwrap_or(""), req.user);
            last["content"] = Value::String(joined);
        }
        _ => messages.push(json!({ "role": "user", "content": req.user })),
    }
    // The conversation so far is the cached prefix as it grows: a breakpoint on the last
    // message before this turn's (every dynamic byte comes after it). The cache finds the
    // previous turn's prefix within its look-back, so each turn reads what the last wrote.
    let mut cacheable = req.system.chars().count();
    if messages.len() >= 2 {
        let stable = messages.len() - 2;
        cacheable += messages[..=stable]
            .iter()
            .map(|m| m["content"].as_str().map_or(0, |t| t.chars().count()))
            .sum::<usize>();
        let text = messages[stable]["content"]
            .as_str()
            .unwrap_or("")
            .to_string();
        messages[stable]["content"] = json!([{
            "type": "text",
            "text": text,
            "cache_control": { "type": "ephemeral" }
        }]);
    }
    note_cache_floor(model, cacheable / 4);
    if !req.images.is_empty() {
        if let Some(turn) = messages.last_mut() {
            let text = turn["content"].as_str().unwrap_or("").to_string();
            turn["content"] = with_images(req.images, text);
        }
    }
    let mut body = json!({
        "model": model,
        "max_tokens": req.max_tokens,
        "system": [{
            "type": "text",
            "text": req.system,
            "cache_control": { "type": "ephemeral" }
        }],
        "messages": messages,
    });
    if stream {
        body["stream"] = Value::Bool(true);
    }
    body
}

/// A message's content as `image` blocks (base64) followed by its text.
fn with_images(images: &[Image], text: String) -> Value {
    use base64::Engine as _;
    let mut blocks: Vec<Value> = images
        .iter()
        .map(|i| {
            json!({
                "type": "image",
                "source": {
                    "type": "base64",
                    "media_type": i.media_type,
                    "data": base64::engine::general_purpose::STANDARD.encode(&i.data),
                }
            })
        })
        .collect();
    blocks.push(json!({ "type": "text", "text": text }));
    Value::Array(blocks)
}

/// The smallest prefix a model caches, in tokens (Anthropic's published minimums).
fn cache_floor(model: &str) -> usize {
    let m = model.to_ascii_lowercase();
    if [
        "opus-4-5",
        "opus-4.5",
        "opus-4-6",
        "opus-4.6",
        "haiku-4-5",
        "haiku-4.5",
    ]
    .iter()
    .any(|v| m.contains(v))
    {
        4096
    } else if ["sonnet-4-6", "sonnet-4.6", "haiku-3"]
        .iter()
        .any(|v| m.contains(v))
    {
        2048
    } else {
        1024
    }
}

/// Says once (per process) that a request's cacheable prefix is under the model's minimum,
/// so nothing is cached yet; it is cached once the conversation grows past it.
fn note_cache_floor(model: &str, approx_tokens: usize) {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let floor = cache_floor(model);
    if approx_tokens < floor && !SAID.swap(true, std::sync::atomic::Ordering::Relaxed) {
        tracing::info!(
            model,
            approx_tokens,
            floor,
            "prompt cache: the cacheable prefix (soul, skills, step catalogue, history) is under this model's minimum; nothing is cached until the conversation grows past it"
        );
    }
}

fn bad(message: impl Into<String>) -> LlmError {
    LlmError::BadResponse {
        provider: NAME,
        message: message.into(),
    }
}

fn usage(u: &Value) -> Usage {
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input_tokens: n("input_tokens"),
        output_tokens: n("output_tokens"),
        cache_creation_tokens: n("cache_creation_input_tokens"),
        cache_read_tokens: n("cache_read_input_tokens"),
    }
}

/// Reads a non-streamed message.
pub fn parse_message(body: &str) -> Result<Completion, LlmError> {
    let v: Value = serde_json::from_str(body).map_err(|e| bad(format!("not JSON ({e})")))?;
    if v.get("type").and_then(Value::as_str) == Some("error") {
        return Err(bad(
            http::provider_message(&v).unwrap_or_else(|| "error".into())
        ));
    }
    let content = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no `content` array"))?;
    let text: String = content
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .collect();
    Ok(Completion {
        text,
        model: v
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        stop_reason: v
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(str::to_string),
        usage: v.get("usage").map(usage).unwrap_or_default(),
        session: None,
    })
}

/// What a stream has said so far.
#[derive(Debug, Default)]
struct StreamState {
    text: String,
    model: String,
    stop_reason: Option<String>,
    usage: Usage,
}

impl StreamState {
    /// Applies one frame; `Some` when the message is complete.
    fn apply(
        &mut self,
        frame: &sse::Frame,
        deltas: Option<&Deltas>,
    ) -> Result<Option<Completion>, LlmError> {
        let v: Value = match serde_json::from_str(&frame.data) {
            Ok(v) => v,
            Err(_) if frame.data.trim().is_empty() => return Ok(None),
            Err(e) => return Err(bad(format!("stream frame is not JSON ({e})"))),
        };
        let kind = frame
            .event
            .as_deref()
            .or_else(|| v.get("type").and_then(Value::as_str))
            .unwrap_or("");
        match kind {
            "message_start" => {
                if let Some(m) = v.get("message") {
                    self.model = m.get("model").and_then(Value::as_str).unwrap_or("").into();
                    if let Some(u) = m.get("usage") {
                        self.usage = usage(u);
                    }
                }
            }
            "content_block_delta" => {
                let d = &v["delta"];
                if d.get("type").and_then(Value::as_str) == Some("text_delta") {
                    if let Some(t) = d.get("text").and_then(Value::as_str) {
                        self.text.push_str(t);
                        if let Some(tx) = deltas {
                            let _ = tx.send(t.to_string());
                        }
                    }
                }
            }
            "message_delta" => {
                if let Some(r) = v.pointer("/delta/stop_reason").and_then(Value::as_str) {
                    self.stop_reason = Some(r.into());
                }
                if let Some(u) = v.get("usage") {
                    // Cumulative: take every count that is present.
                    let later = usage(u);
                    let keep = |new: u64, old: u64| if new > 0 { new } else { old };
                    self.usage = Usage {
                        input_tokens: keep(later.input_tokens, self.usage.input_tokens),
                        output_tokens: keep(later.output_tokens, self.usage.output_tokens),
                        cache_creation_tokens: keep(
                            later.cache_creation_tokens,
                            self.usage.cache_creation_tokens,
                        ),
                        cache_read_tokens: keep(
                            later.cache_read_tokens,
                            self.usage.cache_read_tokens,
                        ),
                    };
                }
            }
            "message_stop" => {
                return Ok(Some(Completion {
                    text: std::mem::take(&mut self.text),
                    model: std::mem::take(&mut self.model),
                    stop_reason: self.stop_reason.take(),
                    usage: self.usage,
                    session: None,
                }))
            }
            "error" => {
                let kind = v
                    .pointer("/error/type")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let message = http::provider_message(&v).unwrap_or_else(|| kind.to_string());
                return Err(LlmError::Stream {
                    provider: NAME,
                    message: format!("{kind}: {message}"),
                    retryable: matches!(
                        kind,
                        "overloaded_error" | "api_error" | "rate_limit_error" | "timeout_error"
                    ),
                });
            }
            // ping, content_block_start/stop and anything new: nothing to do.
            _ => {}
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::Message;

    const HISTORY: [Message; 3] = [
        Message {
            role: Role::User,
            text: "Tom: hi",
        },
        Message {
            role: Role::Assistant,
            text: "hello",
        },
        Message {
            role: Role::User,
            text: "Tom: unanswered",
        },
    ];

    fn request() -> ChatRequest<'static> {
        ChatRequest {
            system: "<soul>x</soul>",
            history: &HISTORY,
            user: "<current_message>…</current_message>",
            max_tokens: 100,
            session: None,
            model: None,
            constraint: None,
            images: &[],
        }
    }

    #[test]
    fn the_body_caches_the_system_block_and_alternates_roles() {
        let b = request_body("m", &request(), false);
        assert_eq!(b["system"][0]["cache_control"]["type"], "ephemeral");
        assert_eq!(b["system"][0]["text"], "<soul>x</soul>");
        let roles: Vec<&str> = b["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "user"]);
        // The last stable message is a cache breakpoint; this turn's comes after it.
        assert_eq!(
            b["messages"][1]["content"][0]["cache_control"]["type"],
            "ephemeral"
        );
        assert!(b["messages"][2]["content"]
            .as_str()
            .unwrap()
            .starts_with("Tom: unanswered\n\n<current_message>"));
        assert!(b.get("stream").is_none());
        assert!(
            b.get("temperature").is_none(),
            "no sampling parameters by default"
        );
    }

    #[test]
    fn a_padded_real_response_parses() {
        let body = r#"{
          "id": "msg_01", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
          "content": [ {"type": "text", "text": "Hi "}, {"type": "tool_use", "id": "x"}, {"type": "text", "text": "there"} ],
          "stop_reason": "end_turn", "stop_sequence": null,
          "usage": {"input_tokens": 10, "cache_creation_input_tokens": 5, "cache_read_input_tokens": 100, "output_tokens": 3, "service_tier": "standard"}
        }"#;
        let c = parse_message(body).unwrap();
        assert_eq!(c.text, "Hi there");
        assert_eq!(c.stop_reason.as_deref(), Some("end_turn"));
        assert_eq!(
            c.usage,
            Usage {
                input_tokens: 10,
                output_tokens: 3,
                cache_creation_tokens: 5,
                cache_read_tokens: 100
            }
        );
    }

    #[test]
    fn a_stream_error_after_200_is_a_retryable_failure() {
        let mut s = StreamState::default();
        let f = sse::Frame {
            event: Some("error".into()),
            data: r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
                .into(),
        };
        let e = s.apply(&f, None).unwrap_err();
        assert!(e.is_retryable());
        assert!(e.to_string().contains("Overloaded"));
    }
}
