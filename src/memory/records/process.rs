//! A thread's transitions through the process machine, as stored.

use crate::process::TransitionRecord;

/// A stored transition, with when it happened.
#[derive(Debug, Clone, PartialEq)]
pub struct TransitionRow {
    pub interaction: i64,
    pub record: TransitionRecord,
    pub at: i64,
}
