//! A dream's records: what it keeps, a conversation's backlog and what was made of it, the
//! upkeep after, the hold on the soul's one dream, the dream's own row; and how a backlog is
//! cut into batches (every backend cuts them here).

use serde::Serialize;
use serde_json::Value;

use super::Entry;

/// What a dream leaves in each conversation's working memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keep {
    /// The newest entries (`[dream] keep_recent`).
    pub entries: u32,
    /// And every entry written since this time: the conditional shutdown reads the last
    /// hour's messages (a crisis keyword), which a dream must not summarise away.
    pub since_ms: i64,
}

/// One conversation's backlog: a batch of its oldest entries that a dream may consolidate.
#[derive(Debug, Clone, PartialEq)]
pub struct Backlog {
    pub thread: String,
    /// The conversation (`threads.since_id`): entries up to it belong to one an operator
    /// closed, and are left alone.
    pub since_id: i64,
    /// What earlier dreams consolidated of this conversation.
    pub summary: Option<String>,
    /// The batch, oldest first (never empty).
    pub entries: Vec<Entry>,
    /// Backlog entries after this batch.
    pub left: u64,
    /// The people who wrote in the batch, with their models as they are now.
    pub people: Vec<Person>,
}

/// Someone who wrote in a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Person {
    pub user_id: String,
    pub display_name: String,
    pub model: Option<String>,
    pub model_version: i64,
}

/// A user model a dream refreshes: saved only if nobody changed it since `version`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRefresh {
    pub user_id: String,
    pub version: i64,
    pub model: String,
    pub note: String,
}

/// What a dream made of one batch.
#[derive(Debug, Clone, PartialEq)]
pub struct Consolidation {
    pub thread: String,
    pub since_id: i64,
    /// The new summary: it covers the old one and the batch.
    pub summary: String,
    /// The batch's first and last entry ids.
    pub first_id: i64,
    pub through_id: i64,
    /// (memory, importance 1–10).
    pub episodes: Vec<(String, u8)>,
    pub models: Vec<ModelRefresh>,
}

/// What one consolidation did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Consolidated {
    /// Entries deleted: the ones the committed summary covers.
    pub pruned: u64,
    /// User ids whose model was refreshed.
    pub models: Vec<String>,
    /// False when another dream had consolidated the batch meanwhile (nothing written).
    pub written: bool,
}

/// An episodic memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Episode {
    pub thread: String,
    pub memory: String,
    pub importance: u8,
    pub at_ms: i64,
}

/// What the upkeep after a dream did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Upkeep {
    pub analyzed: bool,
    /// `none`, `full` or `incremental` (SQLite's `PRAGMA auto_vacuum`).
    pub auto_vacuum: String,
    /// Whether `PRAGMA incremental_vacuum` ran (only in `incremental` mode).
    pub vacuumed: bool,
    pub free_pages_before: i64,
    pub free_pages_after: i64,
    /// Keys of psyche events old enough to forget (`memory::psyche::upkeep`).
    pub forgotten_event_keys: i64,
}

/// The soul's one dream at a time, held while a dream runs (`Dreams::hold_dream`) and let go
/// when dropped. Whatever holds it is let go by the system when its process ends, however it
/// ends: a file lock on SQLite, a session's advisory lock on PostgreSQL (its connection closes).
pub struct DreamHold {
    _held: Box<dyn Send + Sync>,
    /// Whether it still holds (a database session's lock goes with its connection).
    holds: Box<dyn Fn() -> bool + Send + Sync>,
}

impl DreamHold {
    /// A hold that lasts as long as `held` lives.
    pub(crate) fn new(held: impl Send + Sync + 'static) -> DreamHold {
        DreamHold {
            _held: Box::new(held),
            holds: Box::new(|| true),
        }
    }

    /// A hold that lasts while `holds(held)` says so.
    pub(crate) fn checked<T: Send + Sync + 'static>(
        held: T,
        holds: impl Fn(&T) -> bool + Send + Sync + 'static,
    ) -> DreamHold {
        let held = std::sync::Arc::new(held);
        let kept = held.clone();
        DreamHold {
            _held: Box::new(held),
            holds: Box::new(move || holds(&kept)),
        }
    }

    /// Whether the dream is still the soul's one.
    pub fn holds(&self) -> bool {
        (self.holds)()
    }
}

impl std::fmt::Debug for DreamHold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("DreamHold")
    }
}

/// A dream as recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DreamRow {
    pub id: i64,
    pub started_ms: i64,
    /// `None`: still running, or killed before it ended.
    pub finished_ms: Option<i64>,
    pub complete: bool,
    pub cause: String,
    pub report: Value,
}

/// How many of a backlog's oldest entries make one batch: at most `max_entries`, cut once they
/// hold `max_chars` characters (one at least). Every backend cuts batches here.
pub(crate) fn batch_len(backlog: &[Entry], max_entries: usize, max_chars: usize) -> usize {
    let mut chars = 0;
    let mut take = 0;
    for e in backlog.iter().take(max_entries.max(1)) {
        if take > 0 && chars + e.content.chars().count() > max_chars {
            break;
        }
        chars += e.content.chars().count();
        take += 1;
    }
    take
}
