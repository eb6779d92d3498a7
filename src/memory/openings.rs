//! Things a surface does once per place, remembered across restarts (a greeting when a
//! person opens a conversation, a title from its first message), and the surface's note on a
//! conversation. Places and kinds are the surface's own words; nothing here reads them.

use rusqlite::OptionalExtension;

use super::{SqliteStore, StoreError};

impl SqliteStore {
    /// The surface's note on a conversation, if it made one.
    pub fn conversation_note(&self, key: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .conn()
            .prepare_cached("SELECT note FROM conversations WHERE key = ?1")?
            .query_row([key], |r| r.get::<_, Option<String>>(0))
            .optional()?
            .flatten())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_conversations_note() {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("a.db")).unwrap();
        assert_eq!(s.conversation_note("C1:1.0").unwrap(), None);
        s.note_conversation("C1:1.0", "assistant").unwrap();
        assert_eq!(
            s.conversation_note("C1:1.0").unwrap().as_deref(),
            Some("assistant")
        );
    }
}
