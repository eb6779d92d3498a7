//! The cognitive state's face: where the soul is, its moves, the solitude's journal, and what
//! a shutdown's conditions read.

use async_trait::async_trait;

use super::Result;
use crate::memory::{CognitiveRow, JournalEntry, NewMove, StateMove, StoreError};

/// Decides a move of the cognitive state from the row as it is, inside the move's transaction:
/// `None` refuses it.
pub type Decide = Box<dyn FnOnce(&CognitiveRow) -> Option<NewMove> + Send>;

/// A move conditioned on silence: made only if the newest person's message (its working-memory
/// id; `None` before the first) is still this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quiet(pub Option<i64>);

/// How a move came out.
#[derive(Debug)]
pub enum Moved {
    Moved(StateMove),
    /// `decide` refused.
    Refused,
    /// A message was written after the one the move was conditioned on.
    NotQuiet,
}

/// The cognitive state, its moves and the journal.
#[async_trait]
pub trait States: Send + Sync {
    /// Where the soul is now (state, since, cause, degraded). A read.
    async fn cognitive_state(&self) -> Result<CognitiveRow>;
    /// Moves the state in one write transaction: reads the row, asks `decide` (which sees the
    /// state as it is inside the transaction, so two movers cannot both move from one state),
    /// and writes the move and its record; `Refused` when `decide` refuses (nothing written).
    /// With `quiet`, first checks in the same transaction that the newest person's message is
    /// still the one the caller saw: `NotQuiet` otherwise (nothing written).
    async fn move_state(&self, quiet: Option<Quiet>, decide: Decide) -> Result<Moved>;
    /// The newest person's message (its working-memory id), anywhere; `None` before the
    /// first. A read.
    async fn newest_message_id(&self) -> Result<Option<i64>>;
    /// When a person last wrote (unix ms), anywhere; `None` before the first message. A read.
    async fn last_message_ms(&self) -> Result<Option<i64>>;
    /// The latest `limit` moves, newest first. A read.
    async fn state_moves(&self, limit: usize) -> Result<Vec<StateMove>>;
    /// Adds an entry to the solitude's journal: its id. One write.
    async fn add_journal(&self, entry: &str) -> Result<i64>;
    /// The latest `limit` journal entries, newest first. A read.
    async fn journal(&self, limit: usize) -> Result<Vec<JournalEntry>>;
    /// People's messages since `since_ms` (unix ms), oldest first: (thread, text). A read.
    async fn messages_since(&self, since_ms: i64) -> Result<Vec<(String, String)>>;
    /// Whether, in some thread, the latest answer to the mental query `question` is yes and
    /// was given since `since_ms` (unix ms). A read.
    async fn answered_yes_since(&self, question: &str, since_ms: i64) -> Result<bool>;
}

/// `States::move_state` with a typed refusal: `decide` says why it refuses, and that reason
/// comes back as `Err`; `quiet` pairs the condition with the reason given when it fails.
pub async fn move_state<E: Send + 'static>(
    store: &dyn States,
    quiet: Option<(Quiet, E)>,
    decide: impl FnOnce(&CognitiveRow) -> std::result::Result<NewMove, E> + Send + 'static,
) -> Result<std::result::Result<StateMove, E>> {
    let refusal = std::sync::Arc::new(std::sync::Mutex::new(None));
    let slot = refusal.clone();
    let (quiet, busy) = match quiet {
        Some((q, busy)) => (Some(q), Some(busy)),
        None => (None, None),
    };
    let decide: Decide = Box::new(move |row| match decide(row) {
        Ok(m) => Some(m),
        Err(e) => {
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            None
        }
    });
    let moved = store.move_state(quiet, decide).await?;
    let (reason, what) = match moved {
        Moved::Moved(m) => return Ok(Ok(m)),
        Moved::Refused => (
            refusal.lock().unwrap_or_else(|p| p.into_inner()).take(),
            "refused",
        ),
        Moved::NotQuiet => (busy, "not quiet"),
    };
    reason
        .map(Err)
        .ok_or_else(|| StoreError::Task(format!("the store answered \"{what}\" unasked")))
}
