//! The window's face: the traces of model-facing turns, and the inner life's samples.

use std::sync::Arc;

use async_trait::async_trait;

use super::{Result, SamePlace};
use crate::memory::{PsycheSample, TraceRow, TraceSummary, TracedBody, TracedConversation};

/// The turns' traces (the newest `[inspect] keep_turns`) and the inner life sampled over time,
/// both bounded, for the inspector, `anima watch`'s readers and Slack's "why".
#[async_trait]
pub trait Traces: Send + Sync {
    /// Keeps a turn's trace; one already kept under the same id is replaced (a turn retried
    /// after a crash leaves its last attempt). One write transaction.
    async fn record_trace(&self, trace: TraceRow) -> Result<()>;
    /// Keeps several turns' traces at once, each as `record_trace` keeps one (a later one of
    /// the same id replaces an earlier): the trace writer's batch. One write transaction for
    /// them all; nothing is kept when it fails (the caller still holds them, to try again).
    async fn record_traces(&self, traces: Arc<[TraceRow]>) -> Result<()>;
    /// Traces newest first (by `at`, then id): of `thread` when given, begun before `before`
    /// (unix ms, exclusive) when given, at most `limit`; each reply cut to
    /// `SUMMARY_REPLY_CHARS` characters. A read.
    async fn traces(
        &self,
        thread: Option<&str>,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<TraceSummary>>;
    /// The newest traces' bodies, without their pieces, begun before `before` (unix ms,
    /// exclusive) when given, newest first, at most `limit`: one read for many. A read.
    async fn trace_bodies(&self, before: Option<i64>, limit: usize) -> Result<Vec<TracedBody>>;
    /// One trace, whole; `None` when none is kept under `id` (never kept, or pruned). A read.
    async fn trace(&self, id: &str) -> Result<Option<TraceRow>>;
    /// The trace of the turn whose reply went into the message `reference` (its first part
    /// delivered, any part, or the message it streamed into), found as `Feedback` finds a
    /// reply: the first inbox row whose address `same_place` accepts, then that row's newest
    /// trace. `None` when no reply of the soul's went there or its trace is gone. A read.
    async fn trace_of_reply(
        &self,
        reference: &str,
        same_place: SamePlace,
    ) -> Result<Option<TraceRow>>;
    /// Conversations with traces, the most recently traced first (ties by thread), at most
    /// `limit`; with `after` (a listed conversation's `last_at` and thread), those listed
    /// after it, so a list pages on. A read.
    async fn traced_conversations(
        &self,
        after: Option<(i64, String)>,
        limit: usize,
    ) -> Result<Vec<TracedConversation>>;
    /// Keeps the newest `keep` traces (0 keeps none) and deletes the rest; how many went. One
    /// write transaction.
    async fn prune_traces(&self, keep: u64) -> Result<u64>;
    /// Keeps a sample of the inner life, and only the newest `keep` samples. One write
    /// transaction.
    async fn record_psyche_sample(&self, sample: PsycheSample, keep: u64) -> Result<()>;
    /// Samples taken at or after `since` (unix ms), oldest first, at most `limit`. A read.
    async fn psyche_samples(&self, since: i64, limit: usize) -> Result<Vec<PsycheSample>>;
}
