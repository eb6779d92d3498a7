//! Working memory's records: an entry to write, an entry as read back, its type as stored
//! (`working_memory.entry_type`), and the cap on what one entry keeps.

use serde::Serialize;

use super::stored;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum EntryType {
    #[serde(rename = "userMessage")]
    UserMessage,
    #[serde(rename = "internalMonologue")]
    InternalMonologue,
    #[serde(rename = "externalDialog")]
    ExternalDialog,
    /// A yes/no check: user model check, soul state check or a process's mental query.
    /// `metadata.result` holds the answer.
    #[serde(rename = "mentalQuery")]
    MentalQuery,
    #[serde(rename = "soulStateUpdate")]
    SoulStateUpdate,
    #[serde(rename = "userModelUpdate")]
    UserModelUpdate,
    /// One iteration of an implicit semantic machine: `content` is the soul's reasoning,
    /// `metadata` the iteration, the actions chosen, skipped and run, and how the loop ended.
    #[serde(rename = "actionSelection")]
    ActionSelection,
}

stored!(EntryType in "working_memory"."entry_type" {
    UserMessage = "userMessage",
    InternalMonologue = "internalMonologue",
    ExternalDialog = "externalDialog",
    MentalQuery = "mentalQuery",
    SoulStateUpdate = "soulStateUpdate",
    UserModelUpdate = "userModelUpdate",
    ActionSelection = "actionSelection",
});

/// An entry about to be written.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEntry {
    pub entry_type: EntryType,
    pub content: String,
    pub verb: Option<String>,
    pub user_id: Option<String>,
    pub metadata: serde_json::Value,
}

impl NewEntry {
    pub fn new(entry_type: EntryType, content: impl Into<String>) -> Self {
        NewEntry {
            entry_type,
            content: content.into(),
            verb: None,
            user_id: None,
            metadata: serde_json::Value::Object(Default::default()),
        }
    }

    pub fn verb(mut self, verb: Option<String>) -> Self {
        self.verb = verb;
        self
    }

    pub fn user(mut self, user_id: &str) -> Self {
        self.user_id = Some(user_id.to_string());
        self
    }

    pub fn metadata(mut self, metadata: serde_json::Value) -> Self {
        self.metadata = metadata;
        self
    }
}

/// A stored entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Entry {
    pub id: i64,
    pub thread: String,
    pub entry_type: EntryType,
    pub content: String,
    pub verb: Option<String>,
    pub user_id: Option<String>,
    pub metadata: serde_json::Value,
    pub created_at: i64,
}

impl Entry {
    /// `metadata.result` as a boolean, for check entries.
    pub fn result(&self) -> Option<bool> {
        self.metadata.get("result").and_then(|v| v.as_bool())
    }
}

/// The most characters of one entry that are stored. A longer entry (a runaway monologue, a
/// pasted log) is cut there and marked, so one answer cannot fill the disk or every later
/// prompt's history.
pub const MAX_ENTRY_CHARS: usize = 32_000;

/// What is marked at the end of a cut entry.
pub const CUT_MARK: &str = " […cut]";

/// `text` as every backend can keep it: cut to `MAX_ENTRY_CHARS` characters (never inside a
/// character), and each NUL, which PostgreSQL's text cannot hold, written as U+FFFD.
pub(crate) fn capped(text: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    let cut = match text.char_indices().nth(MAX_ENTRY_CHARS) {
        None => Cow::Borrowed(text),
        Some((at, _)) => Cow::Owned(format!("{}{CUT_MARK}", &text[..at])),
    };
    if cut.contains('\0') {
        Cow::Owned(cut.replace('\0', "\u{FFFD}"))
    } else {
        cut
    }
}
