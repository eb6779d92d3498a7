//! OpenAI-compatible chat completions: `POST {base}/chat/completions` (OpenAI, Ollama,
//! vLLM, llama.cpp server), plain or streamed. Read leniently: servers differ.
//!
//! This turn's images go into this turn's user message as `image_url` parts with `data:`
//! URLs, before its text (Ollama's `/v1` takes them so too). A server that refuses images (a
//! text-only model: HTTP 400, 422 or 500 naming images) answers `LlmError::ImagesRefused`,
//! so the caller can ask again without them and tell the soul it cannot see them; from then
//! on `image_limits` says none (and a request still carrying images is refused at once).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{json, Value};

use super::structured::Structured;
use super::{
    http, sse, BoxFuture, ChatRequest, Completion, Constraint, Deltas, Form, Image, ImageLimits,
    LlmError, Provider, Role, Usage,
};
use crate::config::secret::Secret;

pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";
pub const DEFAULT_MODEL: &str = "gpt-4o-mini";
const NAME: &str = "openai";

/// OpenAI's own API: its vision models take PNG, JPEG, WebP and (still) GIF, up to 20 MB an
/// image, and fit an image into 2,048 × 2,048 before reading it in tiles (so a longer edge
/// only costs upload).
pub const OPENAI_IMAGE_LIMITS: ImageLimits = ImageLimits {
    long_edge: 2048,
    max_bytes: 20 * 1024 * 1024,
    media_types: &["image/png", "image/jpeg", "image/webp", "image/gif"],
};

/// Any other OpenAI-compatible server (Ollama, vLLM, llama.cpp): PNG and JPEG, which every
/// one of them decodes, with a long edge of 1,024 pixels: local vision models read images
/// at 336 to 1,024 pixels, and an image's tokens must fit a small context window.
pub const LOCAL_IMAGE_LIMITS: ImageLimits = ImageLimits {
    long_edge: 1024,
    max_bytes: 10 * 1024 * 1024,
    media_types: &["image/png", "image/jpeg"],
};

pub struct OpenAi {
    client: reqwest::Client,
    base: String,
    key: Option<Secret>,
    model: String,
    stream: bool,
    timeout: Duration,
    structured: Structured,
    /// The server refused a request with images: none are sent from then on.
    images_refused: AtomicBool,
}

impl OpenAi {
    /// `model` must be resolved already (see [`OpenAi::first_model`]).
    pub fn new(
        base_url: &str,
        key: Option<Secret>,
        model: &str,
        stream: bool,
        timeout: Duration,
    ) -> Result<Self, LlmError> {
        Ok(OpenAi {
            client: http::client(timeout)?,
            base: base_or_default(base_url).to_string(),
            key,
            model: model.to_string(),
            stream,
            timeout,
            structured: Structured::default(),
            images_refused: AtomicBool::new(false),
        })
    }

    /// The provider's constrained output: which dialect it speaks (set once, at selection).
    pub fn structured_state(&self) -> &Structured {
        &self.structured
    }

    /// One call with the request's constraint when the server takes it; asked again plain
    /// when the server refuses it. Images the server refuses (now or before) are
    /// `LlmError::ImagesRefused`: nothing was answered.
    async fn call(
        &self,
        req: ChatRequest<'_>,
        deltas: Option<&Deltas>,
    ) -> Result<Completion, LlmError> {
        if !req.images.is_empty() && self.images_refused.load(Ordering::Relaxed) {
            // A turn that read its images before the refusal: told, not sent in vain.
            return Err(LlmError::ImagesRefused {
                provider: NAME,
                message: "the server refused images earlier".into(),
            });
        }
        let answer = self
            .structured
            .call(NAME, req.constraint, |c| self.send(req, c, deltas))
            .await;
        match answer {
            Err(e) if !req.images.is_empty() && self.refused_images(&e) => Err(images_refused(e)),
            other => other,
        }
    }

    /// Whether `e` is the server refusing images (HTTP 400 or 422, or llama.cpp's 500,
    /// naming images or vision); then it is remembered and warned about once.
    fn refused_images(&self, e: &LlmError) -> bool {
        let message = match e {
            LlmError::Refused {
                status: 400 | 422,
                message,
                ..
            }
            | LlmError::Transient {
                status: 500,
                message,
                ..
            } => message.to_ascii_lowercase(),
            _ => return false,
        };
        let named = ["image", "vision", "multimodal", "mmproj"]
            .iter()
            .any(|w| message.contains(w));
        if named && !self.images_refused.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                provider = NAME,
                model = %self.model,
                error = %message,
                "the model server refused images (a model that reads none?); the soul is told it cannot see them, from this message on (set [files] images = false to stop sending them)"
            );
        }
        named
    }

    /// The base URL requests go to.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The API key, if any.
    pub fn key(&self) -> Option<&Secret> {
        self.key.as_ref()
    }

    /// The first model a server lists at `GET {base}/models` (how Ollama's default is chosen).
    pub async fn first_model(
        base_url: &str,
        key: Option<&Secret>,
        timeout: Duration,
    ) -> Result<String, LlmError> {
        let client = http::client(timeout)?;
        let mut req = client.get(format!("{}/models", base_or_default(base_url)));
        if let Some(k) = key {
            req = req.bearer_auth(k.expose());
        }
        let resp = http::send(NAME, req, timeout).await?;
        let text = http::body(NAME, resp, timeout).await?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| bad(format!("model list is not JSON ({e})")))?;
        v.get("data")
            .and_then(Value::as_array)
            .and_then(|d| d.first())
            .and_then(|m| m.get("id"))
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| bad("the server lists no models; set [llm] model"))
    }

    async fn send(
        &self,
        req: ChatRequest<'_>,
        constraint: Option<&Constraint>,
        deltas: Option<&Deltas>,
    ) -> Result<Completion, LlmError> {
        let model = req.model.unwrap_or(&self.model);
        let mut body = request_body(model, &req, self.stream);
        if let Some(c) = constraint {
            self.structured.apply(&mut body, c);
        }
        let mut request = self
            .client
            .post(format!("{}/chat/completions", self.base))
            .json(&body);
        if let Some(k) = &self.key {
            request = request.bearer_auth(k.expose());
        }
        let resp = http::send(NAME, request, self.timeout).await?;
        if !self.stream {
            return parse_completion(&http::body(NAME, resp, self.timeout).await?, model);
        }
        let mut acc = StreamState {
            model: model.to_string(),
            ..StreamState::default()
        };
        let done = sse::read(NAME, resp, |frame| {
            Ok(acc.apply(&frame.data, deltas)?.then_some(()))
        })
        .await?;
        // Some servers end a finished stream without `[DONE]`.
        if done.is_some() || acc.stop_reason.is_some() {
            return Ok(acc.finish());
        }
        Err(LlmError::Stream {
            provider: NAME,
            message: "the stream closed before it finished".into(),
            retryable: true,
        })
    }
}

impl Provider for OpenAi {
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
        if self.images_refused.load(Ordering::Relaxed) {
            None
        } else if self.base == DEFAULT_BASE_URL {
            Some(OPENAI_IMAGE_LIMITS)
        } else {
            Some(LOCAL_IMAGE_LIMITS)
        }
    }

    fn complete<'a>(
        &'a self,
        req: ChatRequest<'a>,
        deltas: Option<&'a Deltas>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        Box::pin(self.call(req, deltas))
    }
}

fn base_or_default(base_url: &str) -> &str {
    if base_url.is_empty() {
        DEFAULT_BASE_URL
    } else {
        base_url.trim_end_matches('/')
    }
}

pub fn request_body(model: &str, req: &ChatRequest, stream: bool) -> Value {
    let mut messages = vec![json!({ "role": "system", "content": req.system })];
    for m in req.history {
        let role = match m.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        messages.push(json!({ "role": role, "content": m.text }));
    }
    messages.push(if req.images.is_empty() {
        json!({ "role": "user", "content": req.user })
    } else {
        json!({ "role": "user", "content": with_images(req.images, req.user) })
    });
    let mut body = json!({
        "model": model,
        "messages": messages,
        "max_tokens": req.max_tokens,
        "stream": stream,
    });
    if stream {
        body["stream_options"] = json!({ "include_usage": true });
    }
    body
}

/// A message's content as `image_url` parts (`data:` URLs) followed by its text.
fn with_images(images: &[Image], text: &str) -> Value {
    use base64::Engine as _;
    let mut parts: Vec<Value> = images
        .iter()
        .map(|i| {
            let data = base64::engine::general_purpose::STANDARD.encode(&i.data);
            json!({
                "type": "image_url",
                "image_url": { "url": format!("data:{};base64,{data}", i.media_type) },
            })
        })
        .collect();
    parts.push(json!({ "type": "text", "text": text }));
    Value::Array(parts)
}

/// A refusal of images (see [`OpenAi::refused_images`]) as the error that says so.
fn images_refused(e: LlmError) -> LlmError {
    match e {
        LlmError::Refused {
            status, message, ..
        }
        | LlmError::Transient {
            status, message, ..
        } => LlmError::ImagesRefused {
            provider: NAME,
            message: format!("HTTP {status}: {message}"),
        },
        other => other,
    }
}

fn bad(message: impl Into<String>) -> LlmError {
    LlmError::BadResponse {
        provider: NAME,
        message: message.into(),
    }
}

fn usage(u: &Value) -> Usage {
    let n = |p: &str| u.pointer(p).and_then(Value::as_u64).unwrap_or(0);
    Usage {
        input_tokens: n("/prompt_tokens"),
        output_tokens: n("/completion_tokens"),
        cache_creation_tokens: 0,
        cache_read_tokens: n("/prompt_tokens_details/cached_tokens"),
    }
}

/// An error object inside a 200 body or stream chunk.
fn embedded_error(v: &Value) -> Option<LlmError> {
    let is_error =
        v.get("error").is_some() || v.get("object").and_then(Value::as_str) == Some("error");
    is_error.then(|| LlmError::Stream {
        provider: NAME,
        message: http::provider_message(v).unwrap_or_else(|| v.to_string()),
        retryable: false,
    })
}

pub fn parse_completion(body: &str, requested_model: &str) -> Result<Completion, LlmError> {
    let v: Value = serde_json::from_str(body).map_err(|e| bad(format!("not JSON ({e})")))?;
    if let Some(e) = embedded_error(&v) {
        return Err(e);
    }
    let choice = v
        .pointer("/choices/0")
        .ok_or_else(|| bad("no choices in the answer"))?;
    let text = choice
        .pointer("/message/content")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    Ok(Completion {
        text,
        model: v
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or(requested_model)
            .to_string(),
        stop_reason: choice
            .get("finish_reason")
            .and_then(Value::as_str)
            .filter(|r| !r.is_empty())
            .map(str::to_string),
        usage: v.get("usage").map(usage).unwrap_or_default(),
        session: None,
    })
}

#[derive(Debug, Default)]
struct StreamState {
    text: String,
    model: String,
    stop_reason: Option<String>,
    usage: Usage,
}

impl StreamState {
    /// Applies one `data:` payload; true at `[DONE]`.
    fn apply(&mut self, data: &str, deltas: Option<&Deltas>) -> Result<bool, LlmError> {
        let data = data.trim();
        if data == "[DONE]" {
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let v: Value = serde_json::from_str(data)
            .map_err(|e| bad(format!("stream chunk is not JSON ({e})")))?;
        if let Some(e) = embedded_error(&v) {
            return Err(e);
        }
        if let Some(m) = v.get("model").and_then(Value::as_str) {
            self.model = m.to_string();
        }
        if let Some(u) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = usage(u);
        }
        if let Some(choice) = v.pointer("/choices/0") {
            if let Some(t) = choice.pointer("/delta/content").and_then(Value::as_str) {
                self.text.push_str(t);
                if let Some(tx) = deltas {
                    let _ = tx.send(t.to_string());
                }
            }
            if let Some(r) = choice
                .get("finish_reason")
                .and_then(Value::as_str)
                .filter(|r| !r.is_empty())
            {
                self.stop_reason = Some(r.to_string());
            }
        }
        Ok(false)
    }

    fn finish(&mut self) -> Completion {
        Completion {
            text: std::mem::take(&mut self.text),
            model: std::mem::take(&mut self.model),
            stop_reason: self.stop_reason.take(),
            usage: self.usage,
            session: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_refusing_images_gets_none_from_then_on() {
        let p = OpenAi::new(
            "http://127.0.0.1:9/v1",
            None,
            "m",
            false,
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(p.image_limits(), Some(LOCAL_IMAGE_LIMITS));
        let other = LlmError::Refused {
            provider: NAME,
            status: 400,
            message: "max_tokens is too large".into(),
        };
        assert!(!p.refused_images(&other));
        assert_eq!(p.image_limits(), Some(LOCAL_IMAGE_LIMITS));
        // llama.cpp's server without a vision projector.
        let llama = LlmError::Transient {
            provider: NAME,
            status: 500,
            message: "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj".into(),
            retry_after: None,
        };
        assert!(p.refused_images(&llama));
        assert_eq!(p.image_limits(), None);
        let hosted = OpenAi::new("", None, "gpt-4o-mini", false, Duration::from_secs(1)).unwrap();
        assert_eq!(hosted.image_limits(), Some(OPENAI_IMAGE_LIMITS));
    }

    #[test]
    fn lenient_completions_parse() {
        let c = parse_completion(
            r#"{"choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":""}],"usage":{}}"#,
            "llama",
        )
        .unwrap();
        assert_eq!(
            (c.text.as_str(), c.model.as_str(), c.stop_reason),
            ("hi", "llama", None)
        );
        let c = parse_completion(
            r#"{"object":"chat.completion","model":"gpt","choices":[{"message":{"content":null},"finish_reason":"length"}],
               "usage":{"prompt_tokens":9,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":4}}}"#,
            "x",
        )
        .unwrap();
        assert_eq!(c.text, "");
        assert_eq!(c.stop_reason.as_deref(), Some("length"));
        assert_eq!(c.usage.cache_read_tokens, 4);
    }

    #[test]
    fn errors_inside_a_200_are_errors() {
        assert!(parse_completion(r#"{"object":"error","message":"bad","code":400}"#, "m").is_err());
        let mut s = StreamState::default();
        assert!(s.apply(r#"{"error":{"message":"boom"}}"#, None).is_err());
    }

    #[test]
    fn a_stream_with_usage_chunk() {
        let mut s = StreamState::default();
        for d in [
            r#"{"choices":[{"delta":{"role":"assistant"}}]}"#,
            r#"{"choices":[{"delta":{"content":"<external_"}}]}"#,
            r#"{"choices":[{"delta":{"content":"dialogue>x"},"finish_reason":"stop"}]}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}"#,
        ] {
            assert!(!s.apply(d, None).unwrap());
        }
        assert!(s.apply("[DONE]", None).unwrap());
        let c = s.finish();
        assert_eq!(c.text, "<external_dialogue>x");
        assert_eq!(c.usage.output_tokens, 2);
    }
}
