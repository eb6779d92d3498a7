//! The soul's state as an operator reads it (`anima state`, the admin endpoint).

use serde::Serialize;

use super::{CognitiveRow, StateMove};

#[derive(Debug, Clone, Serialize)]
pub struct Snapshot {
    /// Soul-state keys and values.
    pub soul_state: Vec<(String, String)>,
    pub interactions: u64,
    pub conversations: Vec<ConversationState>,
    /// Messages accepted and not yet answered.
    pub inbox_depth: u64,
    /// Messages given up after every attempt.
    pub inbox_failed: u64,
    pub whispers_pending: u64,
    /// Unix ms of the last completed turn; `None` before the first.
    pub last_turn_ms: Option<i64>,
    /// The cognitive state: which, since when, why.
    pub cognitive: CognitiveRow,
    /// The latest moves, newest first.
    pub recent_moves: Vec<StateMove>,
    pub journal_entries: u64,
    /// The last dream: its row (`finished_ms` null: running, or killed) and its report.
    pub last_dream: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ConversationState {
    pub thread: String,
    pub process: Option<String>,
    pub turns: i64,
    pub updated_ms: i64,
    /// Messages of this conversation not yet answered.
    pub open: u64,
}
