//! What people say of the soul's replies: a verdict (`feedback.value`) and what became of it.

use super::stored;

/// A person's judgement of one reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Verdict {
    Good,
    Bad,
}

stored!(Verdict in "feedback"."value" {
    Good = "good",
    Bad = "bad",
});

impl Verdict {
    /// The verdict a surface's text names (a button's value), if it names one.
    pub fn parse(text: &str) -> Option<Verdict> {
        text.parse().ok()
    }
}

/// What became of a judgement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    /// Stored on this inbox row; `changed`: the person's value for it is new or different.
    Stored { inbox: i64, changed: bool },
    /// No reply of the soul's went into that message.
    UnknownReply,
}
