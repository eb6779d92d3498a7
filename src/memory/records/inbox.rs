//! The inbox's records: a message to accept, what became of it, a row as read back, and its
//! status as stored (`inbox.status`).

use super::stored;

/// A message to accept.
#[derive(Debug, Clone, PartialEq)]
pub struct Inbound {
    /// The surface's unique name of the message: its retries and twins are one row.
    pub origin: String,
    /// The conversation it belongs to: one ordered worker each.
    pub conversation: String,
    /// Its order within the conversation.
    pub seq: f64,
    /// Where the reply goes, for the surface alone.
    pub address: String,
    pub user_id: String,
    pub text: String,
    /// Accept only if the soul has spoken in the conversation.
    pub requires_spoken: bool,
}

/// A message that did not address the soul, and where it was heard.
#[derive(Debug, Clone, PartialEq)]
pub struct Overheard {
    pub item: InboxItem,
    pub place: String,
}

/// What became of an inbound message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intake {
    Accepted(i64),
    /// The same message (its origin) is already in the inbox.
    Duplicate,
    /// It needs a conversation the soul has spoken in, and this is not one.
    NotParticipating,
}

/// Where a row is in its life (`inbox.status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxStatus {
    Pending,
    Replying,
    Done,
    Failed,
    /// The person stopped the turn: its reply is what was shown by then.
    Stopped,
    /// Heard, not addressed to the soul, and not (yet) to be answered.
    Overheard,
}

stored!(InboxStatus in "inbox"."status" {
    Pending = "pending",
    Replying = "replying",
    Done = "done",
    Failed = "failed",
    Stopped = "stopped",
    Overheard = "overheard",
});

/// How many attempts at a row may fail (an error or a panic, caught) before it is given up:
/// a row that fails every time (a poison row) must not hold its conversation.
pub const MAX_FAILURES: i64 = 3;

/// How many attempts at a row may be interrupted (the process stopped while one was under
/// way) before it is given up. A crash loop (an OOM killer, a supervisor restarting a daemon
/// that keeps dying of something else) interrupts whatever was in flight at each crash, and
/// those messages are not at fault: far more interruptions than failures are allowed. Still
/// bounded: a message that itself kills the process (an abort, memory it exhausts) is given
/// up after this many restarts instead of killing every one that follows.
pub const MAX_INTERRUPTIONS: i64 = 10;

#[derive(Debug, Clone, PartialEq)]
pub struct InboxItem {
    pub id: i64,
    pub origin: String,
    pub conversation: String,
    pub address: String,
    /// The surface's note on the conversation when the message came.
    pub note: Option<String>,
    pub user_id: String,
    pub text: String,
    pub status: InboxStatus,
    pub reply: Option<String>,
    pub parts_posted: i64,
    /// The surface's reference of the first part delivered.
    pub reply_ref: Option<String>,
    /// When it was accepted (unix microseconds).
    pub received_us: i64,
    /// Attempts begun so far: turns begun, and pick-ups of its fixed reply (this one
    /// included).
    pub attempts: i64,
    /// Attempts that failed (an error or a panic, caught and recorded).
    pub failures: i64,
    /// Attempts that a stopping process left unfinished.
    pub interruptions: i64,
    /// Its order within the conversation.
    pub seq: f64,
    /// When it was claimed: other open rows of its conversation waited behind it.
    pub others_waiting: bool,
    /// The surface's reference of the message its reply is streamed into, once begun.
    pub stream_ref: Option<String>,
}

impl InboxItem {
    /// The working-memory source of this message's user entry.
    pub fn source(&self) -> String {
        format!("inbox:{}", self.id)
    }

    /// It has failed or been interrupted too often to be tried again: it is to be answered
    /// with the apology and closed.
    pub fn exhausted(&self) -> bool {
        self.failures >= MAX_FAILURES || self.interruptions >= MAX_INTERRUPTIONS
    }
}
