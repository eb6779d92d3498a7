//! Model providers behind one trait: Anthropic Messages, OpenAI-compatible chat completions,
//! and the Claude Code CLI; `select` picks one, `retry` wraps calls.
//!
//! Owns the wire formats and error classification. Knows nothing about souls, parsing or
//! Slack: it takes a built `Prompt` and returns text, usage and (for the CLI) a session id.

pub mod anthropic;
pub mod claude_cli;
mod error;
mod http;
pub mod openai;
pub mod retry;
pub mod select;
mod sse;

use std::future::Future;
use std::pin::Pin;

pub use error::LlmError;

use crate::prompt::Prompt;

/// One model call.
#[derive(Debug, Clone, Copy)]
pub struct ChatRequest<'a> {
    pub prompt: &'a Prompt,
    pub max_tokens: u32,
    /// For providers that keep sessions (claude-cli): the thread's session to resume.
    pub session: Option<&'a str>,
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
    /// True when the provider keeps the conversation itself (then the prompt carries no
    /// history, and the soul only in a session's first message).
    fn keeps_sessions(&self) -> bool {
        false
    }
    /// One call. When `deltas` is given and the provider streams, text arrives there as it
    /// is generated; the returned completion always holds the whole text.
    fn complete<'a>(
        &'a self,
        req: ChatRequest<'a>,
        deltas: Option<&'a Deltas>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>>;
}
