//! Model providers behind one trait: Anthropic Messages, OpenAI-compatible chat completions,
//! and the Claude Code CLI; `select` picks one, `retry` wraps calls.
//!
//! Owns its own request and message types, the wire formats and error classification.
//! Knows nothing about souls, how a prompt is built, parsing or Slack: it takes a `ChatRequest` (a system
//! text, earlier messages, this turn's text) and returns text, usage and (for the CLI) a
//! session id. A request may carry a `Constraint` (a grammar or a schema, opaque here) that
//! `structured` puts where the server reads it, when the server takes one.

pub mod anthropic;
pub mod claude_cli;
mod error;
mod http;
pub mod image;
pub mod openai;
pub mod retry;
pub mod select;
mod sse;
pub mod structured;

use std::future::Future;
use std::pin::Pin;

pub use error::LlmError;
pub use image::{Image, ImageError, ImageLimits};
pub use structured::{Constraint, Form};

/// Who wrote an earlier message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

/// One earlier message of the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Message<'a> {
    pub role: Role,
    pub text: &'a str,
}

/// One model call.
#[derive(Debug, Clone, Copy)]
pub struct ChatRequest<'a> {
    /// The stable part, the same turn after turn, so providers can cache it.
    pub system: &'a str,
    /// Earlier messages, starting with the user, roles alternating. It may end with a user
    /// message left unanswered; providers merge it with `user`.
    pub history: &'a [Message<'a>],
    /// This turn's text.
    pub user: &'a str,
    pub max_tokens: u32,
    /// For providers that keep sessions (claude-cli): the thread's session to resume.
    pub session: Option<&'a str>,
    /// A model for this request instead of the provider's own (same provider), e.g. a
    /// cheaper one for an ISM's action selection.
    pub model: Option<&'a str>,
    /// What the answer is held to, for a provider whose server takes it (see
    /// [`Provider::structured`]); others ignore it.
    pub constraint: Option<&'a Constraint>,
    /// Images shared with this turn's message, already fitted to [`Provider::image_limits`];
    /// empty for a provider that reads none.
    pub images: &'a [Image],
}

impl ChatRequest<'_> {
    /// The system part and this turn's as one text, for transports that take a single
    /// message (and keep the history themselves).
    pub fn full_text(&self) -> String {
        format!("{}\n\n{}", self.system, self.user)
    }
}

/// Token counts as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_tokens: u64,
    pub cache_read_tokens: u64,
}

/// A model's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    pub text: String,
    pub model: String,
    pub stop_reason: Option<String>,
    pub usage: Usage,
    /// The session this answer belongs to (claude-cli), to resume next turn.
    pub session: Option<String>,
}

/// Receives text as it streams in. A provider that does not stream sends nothing.
pub type Deltas = tokio::sync::mpsc::UnboundedSender<String>;

pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A model provider.
pub trait Provider: Send + Sync {
    /// `anthropic`, `openai` or `claude-cli`.
    fn name(&self) -> &'static str;
    /// The model asked for.
    fn model(&self) -> &str;
    /// True when the provider keeps the conversation itself (then the request carries no
    /// history, and the soul only in a session's first message).
    fn keeps_sessions(&self) -> bool {
        false
    }
    /// The form of constraint the server takes now: none when it takes none, when
    /// `[llm] structured_output` is off, or once it refused one.
    fn structured(&self) -> Option<Form> {
        None
    }
    /// What images the provider reads (scaled down to fit first), or `None` when it reads
    /// none: the soul is then told an image was shared that it cannot see.
    fn image_limits(&self) -> Option<ImageLimits> {
        None
    }
    /// One call. When `deltas` is given and the provider streams, text arrives there as it
    /// is generated; the returned completion always holds the whole text.
    fn complete<'a>(
        &'a self,
        req: ChatRequest<'a>,
        deltas: Option<&'a Deltas>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>>;
}

#[cfg(test)]
mod image_wire_tests;
