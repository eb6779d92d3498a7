//! Working memory entries: what was said and thought in one conversation.

use rusqlite::{Connection, Row};
use serde::Serialize;

use super::StoreError;

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
}

impl EntryType {
    pub fn as_str(self) -> &'static str {
        match self {
            EntryType::UserMessage => "userMessage",
            EntryType::InternalMonologue => "internalMonologue",
            EntryType::ExternalDialog => "externalDialog",
            EntryType::MentalQuery => "mentalQuery",
            EntryType::SoulStateUpdate => "soulStateUpdate",
            EntryType::UserModelUpdate => "userModelUpdate",
        }
    }

    fn parse(s: &str) -> Option<EntryType> {
        [
            EntryType::UserMessage,
            EntryType::InternalMonologue,
            EntryType::ExternalDialog,
            EntryType::MentalQuery,
            EntryType::SoulStateUpdate,
            EntryType::UserModelUpdate,
        ]
        .into_iter()
        .find(|t| t.as_str() == s)
    }
}

/// The content of a user-model check entry; the gate looks for it.
pub const USER_MODEL_CHECK: &str = "Did I learn something new about the user model?";
/// The content of a soul-state check entry.
pub const SOUL_STATE_CHECK: &str = "Has my soul state changed?";

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

pub(super) fn insert(
    conn: &Connection,
    thread: &str,
    e: &NewEntry,
    now: i64,
) -> Result<i64, StoreError> {
    conn.prepare_cached(
        "INSERT INTO working_memory (thread, entry_type, content, verb, user_id, metadata, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute((
        thread,
        e.entry_type.as_str(),
        &e.content,
        &e.verb,
        &e.user_id,
        e.metadata.to_string(),
        now,
    ))?;
    Ok(conn.last_insert_rowid())
}

const COLUMNS: &str = "id, thread, entry_type, content, verb, user_id, metadata, created_at";

fn from_row(r: &Row) -> rusqlite::Result<Entry> {
    let kind: String = r.get(2)?;
    let meta: String = r.get(6)?;
    Ok(Entry {
        id: r.get(0)?,
        thread: r.get(1)?,
        entry_type: EntryType::parse(&kind).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                2,
                rusqlite::types::Type::Text,
                format!("unknown entry_type {kind}").into(),
            )
        })?,
        content: r.get(3)?,
        verb: r.get(4)?,
        user_id: r.get(5)?,
        metadata: serde_json::from_str(&meta).unwrap_or(serde_json::Value::Null),
        created_at: r.get(7)?,
    })
}

/// The last `limit` entries of a thread, oldest first.
pub(super) fn recent(
    conn: &Connection,
    thread: &str,
    limit: u32,
) -> Result<Vec<Entry>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM (SELECT * FROM working_memory WHERE thread = ?1 ORDER BY id DESC LIMIT ?2) ORDER BY id"
    ))?;
    let rows = stmt.query_map((thread, limit), from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn all(conn: &Connection, thread: &str) -> Result<Vec<Entry>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM working_memory WHERE thread = ?1 ORDER BY id"
    ))?;
    let rows = stmt.query_map([thread], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}
