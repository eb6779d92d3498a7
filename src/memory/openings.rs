//! Things a surface does once per place, remembered across restarts (a greeting when a
//! person opens a conversation, a title from its first message), and the surface's note on a
//! conversation. Places and kinds are the surface's own words; nothing here reads them.

use rusqlite::OptionalExtension;

use super::{now_ms, SqliteStore, StoreError};

impl SqliteStore {
    /// Records that `kind` is done for `place`: true the first time only, so a retried event
    /// or a restart never does it twice.
    pub fn first_time(&self, kind: &str, place: &str) -> Result<bool, StoreError> {
        self.write(|tx| {
            let n = tx
                .prepare_cached(
                    "INSERT INTO openings (kind, place, at_ms) VALUES (?1, ?2, ?3)
                     ON CONFLICT (kind, place) DO NOTHING",
                )?
                .execute((kind, place, now_ms()))?;
            Ok(n == 1)
        })
    }

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
    fn the_first_time_only_and_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        {
            let s = SqliteStore::open(&path).unwrap();
            assert!(s.first_time("greeting", "D1").unwrap());
            assert!(!s.first_time("greeting", "D1").unwrap());
            assert!(s.first_time("title", "D1").unwrap(), "another kind");
            assert!(s.first_time("greeting", "D2").unwrap(), "another place");
        }
        let s = SqliteStore::open(&path).unwrap();
        assert!(!s.first_time("greeting", "D1").unwrap(), "remembered");
    }

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
