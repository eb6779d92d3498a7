//! What the engine perceives, and the small explicit policy each kind of perception runs with.

use crate::parse::{Cognition, ReplySource};

/// Asked on every proactive turn: is a follow-up worth it?
pub const FOLLOW_UP_QUESTION: &str =
    "Is there an open thread of thought worth one short follow-up?";
/// Asked on every proactive turn: did the person close the conversation?
pub const CLOSED_QUESTION: &str =
    "Has the person closed this conversation (said goodbye, or that they are done)?";

/// One thing that happened to the soul.
#[derive(Debug, Clone)]
pub enum Perception {
    /// Someone said something: owed a reply.
    Message(Message),
    /// A conversation the soul took part in has been quiet: maybe one follow-up.
    Quiet(Quiet),
}

/// An incoming message, wherever it came from.
#[derive(Debug, Clone)]
pub struct Message {
    /// The conversation: a Slack thread or a terminal thread id.
    pub thread: String,
    pub user_id: String,
    pub display_name: String,
    pub text: String,
    /// The files shared with it (their description only): fetched and read in the turn, so
    /// a turn retried reads them again. Empty: the turn pays nothing for files.
    pub attachments: Vec<crate::files::Attachment>,
    /// Where the message came from (an inbox row), so a retried turn records it once.
    pub source: Option<String>,
    /// The inbox row this turn answers; its reply is fixed in the turn's transaction.
    pub inbox_id: Option<i64>,
    /// The claim on the conversation this turn runs under (its epoch): the turn commits only
    /// while the daemon still holds it. `None` outside the router.
    pub claim: Option<i64>,
    /// Tells whether a newer message has arrived in the same conversation (an ISM's loop
    /// stops for it); `None` where messages come one at a time.
    pub newer: Option<Newer>,
    /// Shows the reply while it is written (only speech that will stand); `None`: the reply
    /// is shown whole when the turn ends.
    pub speech: Option<Speech>,
}

/// Receives the dialogue as the model writes it, piece by piece, in order.
#[derive(Clone)]
pub struct Speech(std::sync::Arc<dyn Fn(&str) + Send + Sync>);

impl Speech {
    pub fn new(say: impl Fn(&str) + Send + Sync + 'static) -> Speech {
        Speech(std::sync::Arc::new(say))
    }

    pub fn say(&self, text: &str) {
        (self.0)(text)
    }
}

impl std::fmt::Debug for Speech {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Speech(..)")
    }
}

/// Asks whoever delivers messages whether a newer one is waiting in this conversation.
#[derive(Clone)]
pub struct Newer(std::sync::Arc<dyn Fn() -> bool + Send + Sync>);

impl Newer {
    pub fn new(arrived: impl Fn() -> bool + Send + Sync + 'static) -> Newer {
        Newer(std::sync::Arc::new(arrived))
    }

    pub fn arrived(&self) -> bool {
        (self.0)()
    }
}

impl std::fmt::Debug for Newer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Newer(..)")
    }
}

/// A quiet conversation, as of `now_ms` (a clock the caller controls).
#[derive(Debug, Clone)]
pub struct Quiet {
    pub thread: String,
    pub now_ms: i64,
    /// The claim on the conversation the follow-up runs under (its epoch), as a message's.
    pub claim: Option<i64>,
}

/// How a kind of perception runs through the one pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Policy {
    /// Counted as an interaction, a thread turn and a user turn.
    pub counted: bool,
    /// A pending whisper may shape it.
    pub whisper: bool,
    /// execute_now may run another process on the same perception.
    pub chains: bool,
    /// Questions the engine adds to the process's own.
    pub extra_queries: &'static [&'static str],
    /// Its entries are marked `proactive` (a quiet spell gets one attempt).
    pub proactive: bool,
}

impl Perception {
    pub fn thread(&self) -> &str {
        match self {
            Perception::Message(m) => &m.thread,
            Perception::Quiet(q) => &q.thread,
        }
    }

    pub(super) fn policy(&self) -> Policy {
        match self {
            Perception::Message(_) => Policy {
                counted: true,
                whisper: true,
                chains: true,
                extra_queries: &[],
                proactive: false,
            },
            Perception::Quiet(_) => Policy {
                counted: false,
                whisper: false,
                chains: false,
                extra_queries: &[FOLLOW_UP_QUESTION, CLOSED_QUESTION],
                proactive: true,
            },
        }
    }
}

impl Policy {
    /// Whether the last run's dialogue is said. A message is always answered; after a quiet
    /// spell, only an open thought in a conversation the person has not closed is.
    pub fn speaks(&self, c: &Cognition) -> bool {
        !self.proactive
            || (answer(c, FOLLOW_UP_QUESTION) == Some(true)
                && answer(c, CLOSED_QUESTION) != Some(true)
                && c.reply_source == ReplySource::Dialogue)
    }

    /// The metadata every entry of a run carries.
    pub fn entry_meta(&self, process: &str) -> serde_json::Value {
        if self.proactive {
            serde_json::json!({ "proactive": true })
        } else {
            serde_json::json!({ "process": process })
        }
    }

    /// The metadata of the said dialogue.
    pub fn said_meta(&self) -> serde_json::Value {
        if self.proactive {
            serde_json::json!({ "proactive": true })
        } else {
            serde_json::json!({})
        }
    }
}

/// The answer to a mental query of this run, matched loosely on its text.
pub(super) fn answer(c: &Cognition, question: &str) -> Option<bool> {
    c.mental_queries
        .iter()
        .rev()
        .find(|m| m.question.trim().eq_ignore_ascii_case(question))
        .and_then(|m| m.answer)
}
