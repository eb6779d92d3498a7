//! The cognitive state's records: where the soul is, a move made or to make, a journal entry.

use serde::Serialize;
use serde_json::Value;

/// Where the soul is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CognitiveRow {
    pub state: String,
    /// Unix ms (0: never started).
    pub since_ms: i64,
    pub cause: String,
    /// In WORK after a wakeup that failed.
    pub degraded: bool,
}

/// One move, as recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StateMove {
    pub from: String,
    pub to: String,
    pub cause: String,
    pub detail: Value,
    pub at_ms: i64,
}

/// A move to make.
#[derive(Debug, Clone, PartialEq)]
pub struct NewMove {
    pub to: String,
    pub cause: String,
    pub detail: Value,
    pub degraded: bool,
}

/// A journal entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct JournalEntry {
    pub id: i64,
    pub entry: String,
    pub at_ms: i64,
}
