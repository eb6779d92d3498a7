//! The operator's faces: feedback on replies and first times, admin commands and the
//! snapshot, forgetting, and the store's health.

use async_trait::async_trait;

use super::Result;
use crate::memory::{Forgotten, Judged, Pruned, Snapshot, Verdict, WriteHealth};

/// Tells whether a stored reply's address is the place a click came from.
pub type SamePlace = Box<dyn Fn(&str) -> bool + Send + Sync>;

/// Feedback on replies, and the first times (greetings, titles) that happen once per place.
#[async_trait]
pub trait Feedback: Send + Sync {
    /// Records `person`'s verdict on the reply that went into the message `reference` (the
    /// first part delivered, or the message it streamed into), in one write transaction.
    /// `same_place` is asked about each candidate row's address (a reference is unique only
    /// within its place): the first row it accepts is judged, and the person's value for it
    /// replaced. `UnknownReply` when no reply of the soul's went there.
    async fn record_feedback(
        &self,
        reference: &str,
        same_place: SamePlace,
        person: &str,
        verdict: Verdict,
    ) -> Result<Judged>;
    /// Every person's latest verdict on the reply that went into the message `reference`, by
    /// person. A read; a stored verdict this anima does not know is `StoreError::Unknown`.
    async fn feedback_on(&self, reference: &str) -> Result<Vec<(String, Verdict)>>;
    /// Records that `kind` is done for `place`: true the first time only, so a retried event
    /// or a restart never does it twice. One write.
    async fn first_time(&self, kind: &str, place: &str) -> Result<bool>;
}

/// What operators do and see.
#[async_trait]
pub trait Admin: Send + Sync {
    /// Closes the thread's conversation: its working memory stays, but the next message
    /// starts a new conversation (no history, turns from 0, its process from the start, a new
    /// provider session). False when the soul has no such thread. One write transaction.
    async fn reset_thread(&self, thread: &str) -> Result<bool>;
    /// Records an admin command (`allowed`: whether its sender may give it); false when this
    /// one (its origin) was carried out before. One recorded but never finished (a crash, a
    /// store error) is to be carried out again. One write.
    async fn log_admin(
        &self,
        origin: &str,
        user_id: &str,
        command: &str,
        allowed: bool,
    ) -> Result<bool>;
    /// The admin command `origin` was carried out and answered. One write.
    async fn admin_done(&self, origin: &str) -> Result<()>;
    /// The state an operator reads (`anima state`, the admin endpoint), in one read
    /// transaction, so its counts agree with each other. Works beside a running daemon.
    async fn snapshot(&self) -> Result<Snapshot>;
}

/// Forgetting: a person, on an operator's word, and conversations quiet for long. Each call is
/// one transaction, so every daemon on the store sees the person whole or gone.
#[async_trait]
pub trait Forgetting: Send + Sync {
    /// Removes what the store keeps of `user_id`: their row and every version of their model;
    /// the conversations no one else spoke in, whole (entries, summaries, episodes, process,
    /// usage); elsewhere their messages and the notes on their model; the psyche's
    /// relationships with them, the memories they are in, facts, intentions about them and
    /// gate decisions on their events; their feedback. Inbox rows of theirs already answered
    /// keep only their origin (a late retry stays known, never answered twice), as admin
    /// commands of theirs carried out do; rows not yet answered are kept and counted. A person
    /// the store does not know removes nothing (`known` false).
    async fn forget_person(&self, user_id: &str) -> Result<Forgotten>;
    /// Drops the working memory of every conversation with nothing written and no message
    /// received since `quiet_since` (unix ms, the store's clock) and none waiting, and those
    /// conversations' inbox rows that are finished. Summaries and episodes a dream made stay.
    /// The inbox's newest row stays whatever its age (SQLite would number the next after it).
    async fn forget_quiet(&self, quiet_since: i64) -> Result<Pruned>;
}

/// Whether the store takes writes, and what it is.
#[async_trait]
pub trait Health: Send + Sync {
    /// Writes one row: proves the store takes writes right now. One write.
    async fn probe(&self) -> Result<()>;
    /// The outcome of the last write, and when the last good one was.
    fn write_health(&self) -> &WriteHealth;
    /// Write transactions begun so far (for tests and benchmarks of what a turn costs).
    fn write_transactions(&self) -> u64;
    /// Which backend, and where (a path; never a password).
    fn describe(&self) -> String;
}
