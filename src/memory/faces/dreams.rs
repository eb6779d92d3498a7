//! The faces of the soul's slow work: dreams (consolidation of working memory, and upkeep)
//! and the psychology substrate.

use async_trait::async_trait;
use serde_json::Value;

use super::Result;
use crate::memory::dream::{
    Backlog, Consolidated, Consolidation, DreamHold, DreamRow, Episode, Keep, Upkeep,
};
use crate::memory::psyche::{LoggedDecision, Mind, Place};
use crate::psyche::gate::{Decision, GateRules};
use crate::psyche::mapping::{IntentionUpdate, StanceShift};
use crate::psyche::packet::Packet;
use crate::psyche::update::Effects;
use crate::psyche::{Event, Psyche};

/// Dreams: each conversation's backlog (its working memory older than what it keeps: the
/// newest `Keep::entries` and those written since `Keep::since_ms`), the consolidation of one
/// batch of it, the dream's own record and report, and the upkeep after.
///
/// Never deletes an entry among a conversation's newest `keep.entries`, nor one written since
/// `keep.since_ms`, nor one no committed summary covers. Knows nothing about how a summary is
/// written: the caller brings it.
#[async_trait]
pub trait Dreams: Send + Sync {
    /// Takes the soul's one dream at a time, without waiting: `None` while another process
    /// (or another dream of this one) holds it. The hold is let go when dropped, and by the
    /// system when its process ends however it ends.
    async fn hold_dream(&self) -> Result<Option<DreamHold>>;
    /// Records that a dream begins, and why: its id. One write.
    async fn begin_dream(&self, cause: &str) -> Result<i64>;
    /// Records how dream `id` ended (`complete` or cut short), with its report. One write.
    async fn finish_dream(&self, id: i64, complete: bool, report: &Value) -> Result<()>;
    /// The latest dream, finished or not (`finished_ms` `None`: running, or killed). A read.
    async fn last_dream(&self) -> Result<Option<DreamRow>>;
    /// Threads whose current conversation has a backlog (entries before what it keeps), the
    /// least recently active first. A read.
    async fn dream_threads(&self, keep: Keep) -> Result<Vec<String>>;
    /// The next batch of a conversation's backlog: at most `max_entries` of its oldest
    /// entries, cut once they hold `max_chars` characters, one at least (`dream::batch_len`),
    /// with the summary so far and the people who wrote in it. `None`: nothing to
    /// consolidate. A read.
    async fn backlog(
        &self,
        thread: &str,
        keep: Keep,
        max_entries: usize,
        max_chars: usize,
    ) -> Result<Option<Backlog>>;
    /// Commits one consolidation in one write transaction: the summary that now covers the
    /// batch, its episodic memories, the user models it refreshed (each only if nobody
    /// changed it since the version the dream read), and the deletion of exactly the entries
    /// the summary covers. A crash before the commit leaves everything as it was; a batch
    /// another dream consolidated meanwhile writes nothing (`written` false).
    async fn consolidate(&self, c: Consolidation, keep: Keep) -> Result<Consolidated>;
    /// The current conversation's summary, if a dream wrote one. A read.
    async fn thread_summary(&self, thread: &str) -> Result<Option<String>>;
    /// The thread's episodic memories, the most important first. A read.
    async fn episodes(&self, thread: &str) -> Result<Vec<Episode>>;
    /// The upkeep after a dream: the psyche's (old event keys forgotten, its full-text index
    /// merged), then the backend's own (SQLite: ANALYZE and an incremental vacuum when the
    /// database allows one). What it did.
    async fn upkeep(&self) -> Result<Upkeep>;
}

/// The psychology substrate of soul `soul`. Every number is computed by `psyche`'s pure
/// functions; the store reads the rows they need and writes what they return. An event is one
/// transaction, so two never interleave.
#[async_trait]
pub trait Psychology: Send + Sync {
    /// Applies one event to the substrate and decides whether it deserves cognition (the gate,
    /// under `rules`), in one write transaction; the decision is logged with its inputs. A
    /// `Speak` starts the cooldown. The effects and the decision.
    async fn psyche_event(
        &self,
        soul: &str,
        psyche: &Psyche,
        rules: &GateRules,
        event: &Event,
        place: &Place,
    ) -> Result<(Effects, Decision)>;
    /// `psyche_event` for an event that may come again (a message whose turn is retried):
    /// applied the first time `key` is seen for this soul, and `None` every time after, so a
    /// retry does not move the substrate twice. One write transaction.
    async fn psyche_event_once(
        &self,
        soul: &str,
        psyche: &Psyche,
        rules: &GateRules,
        event: &Event,
        place: &Place,
        key: &str,
    ) -> Result<Option<(Effects, Decision)>>;
    /// The context packet for a turn at `now`: the state in words, the people present (id,
    /// name), the top memories for `query`. A read.
    async fn psyche_packet(
        &self,
        soul: &str,
        psyche: &Psyche,
        people: &[(String, String)],
        query: &str,
        now: i64,
    ) -> Result<Packet>;
    /// Applies the model's stance shifts and intention updates through the psyche's table, in
    /// one write transaction: what changed, one line each (empty: nothing).
    async fn psyche_post_cognition(
        &self,
        soul: &str,
        psyche: &Psyche,
        shifts: &[StanceShift],
        updates: &[IntentionUpdate],
        now: i64,
    ) -> Result<Vec<String>>;
    /// The substrate in numbers at `now`, for the operator: everything, or `person`'s part.
    /// A read.
    async fn psyche_mind(
        &self,
        soul: &str,
        psyche: &Psyche,
        person: Option<&str>,
        now: i64,
    ) -> Result<Mind>;
    /// The newest `limit` gate decisions, newest first. A read.
    async fn psyche_decisions(&self, soul: &str, limit: usize) -> Result<Vec<LoggedDecision>>;
}
