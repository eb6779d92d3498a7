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

/// Whether a person's stop closes a row (`Inbox::mark_stopped`), from what the row holds as
/// the stop comes: a row whose turn had not committed (pending) is closed; so is one whose
/// reply was fixed as the stop came (replying), unless the stop cut nothing — part of the
/// reply was delivered, or what was said (`said`) is the whole reply. Every backend asks here.
pub fn stop_closes(
    status: InboxStatus,
    reply: Option<&str>,
    parts_posted: i64,
    said: &str,
) -> bool {
    parts_posted == 0
        && match status {
            InboxStatus::Pending => true,
            InboxStatus::Replying => reply.map(str::trim) != Some(said.trim()),
            _ => false,
        }
}

/// What picking a row up (`Inbox::claim_next`) writes, by the row as read and the instance
/// picking it up. Every backend asks here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pickup {
    /// Another instance began an attempt and never ended it: an interruption to count.
    pub interrupted: bool,
    /// The row's reply is fixed: delivering it is an attempt, counted and marked as under
    /// way by this instance (unless the row is exhausted once the interruption is counted).
    pub begins: bool,
}

impl Pickup {
    /// `in_flight`: the instance whose attempt is under way on the row, if any.
    pub fn of(item: &InboxItem, in_flight: Option<&str>, instance: &str) -> Pickup {
        Pickup {
            interrupted: in_flight.is_some_and(|by| by != instance),
            begins: item.status == InboxStatus::Replying,
        }
    }

    /// Whether the pick-up writes nothing: the row is read and handed on as it is.
    pub fn reads_only(self) -> bool {
        !self.interrupted && !self.begins
    }

    /// Whether an attempt begins, once the row's interruptions are `interruptions` (counted
    /// in the same transaction).
    pub fn attempt_begins(self, item: &InboxItem, interruptions: i64) -> bool {
        self.begins
            && !InboxItem {
                interruptions,
                ..item.clone()
            }
            .exhausted()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(status: InboxStatus, failures: i64, interruptions: i64) -> InboxItem {
        InboxItem {
            id: 1,
            origin: "o".into(),
            conversation: "c".into(),
            address: "a".into(),
            note: None,
            user_id: "U1".into(),
            text: "hi".into(),
            status,
            reply: None,
            parts_posted: 0,
            reply_ref: None,
            received_us: 0,
            attempts: 0,
            failures,
            interruptions,
            seq: 1.0,
            others_waiting: false,
            stream_ref: None,
        }
    }

    #[test]
    fn a_stop_closes_a_row_only_where_it_cuts_something_not_yet_delivered() {
        use InboxStatus::*;
        let cases = [
            (Pending, None, 0, "Half", true),
            (Pending, None, 1, "Half", false),
            (Replying, Some("The whole answer"), 0, "The wh", true),
            (
                Replying,
                Some("The whole answer"),
                0,
                "The whole answer\n",
                false,
            ),
            (Replying, Some(" x "), 0, "x", false),
            (Replying, None, 0, "", true),
            (Replying, Some("Long"), 1, "", false),
            (Done, Some("a"), 0, "b", false),
            (Failed, None, 0, "", false),
            (Stopped, Some("a"), 0, "b", false),
            (Overheard, None, 0, "", false),
        ];
        for (status, reply, parts, said, closes) in cases {
            assert_eq!(
                stop_closes(status, reply, parts, said),
                closes,
                "{status:?} {reply:?} {parts} {said:?}"
            );
        }
    }

    #[test]
    fn a_pickup_counts_another_instances_attempt_and_begins_one_on_a_fixed_reply() {
        let pending = item(InboxStatus::Pending, 0, 0);
        assert!(Pickup::of(&pending, None, "me").reads_only());
        assert!(Pickup::of(&pending, Some("me"), "me").reads_only());
        let other = Pickup::of(&pending, Some("them"), "me");
        assert_eq!(
            other,
            Pickup {
                interrupted: true,
                begins: false
            }
        );
        assert!(!other.attempt_begins(&pending, 1));

        let replying = item(InboxStatus::Replying, 0, MAX_INTERRUPTIONS - 1);
        let p = Pickup::of(&replying, None, "me");
        assert!(!p.reads_only());
        assert!(p.attempt_begins(&replying, MAX_INTERRUPTIONS - 1));
        assert!(
            !p.attempt_begins(&replying, MAX_INTERRUPTIONS),
            "exhausted by the interruption just counted"
        );
        let poisoned = item(InboxStatus::Replying, MAX_FAILURES, 0);
        assert!(!Pickup::of(&poisoned, None, "me").attempt_begins(&poisoned, 0));
    }
}
