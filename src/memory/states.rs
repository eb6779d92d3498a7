//! The soul's cognitive state as stored: where it is, since when and why; every move with
//! its cause; the solitude's journal; and what a shutdown's conditions read (recent
//! messages, a question's latest answers).
//!
//! Knows states only by name: whether a move is legal is decided by the caller's closure,
//! inside the move's own transaction, so two movers (a timer and an operator) cannot both
//! move from the same state.

use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

use super::{now_ms, SqliteStore, StoreError};

pub use super::records::states::{CognitiveRow, JournalEntry, NewMove, StateMove};

pub(super) fn current(conn: &Connection) -> Result<CognitiveRow, StoreError> {
    Ok(conn
        .prepare_cached("SELECT state, since, cause, degraded FROM cognitive_state WHERE id = 1")?
        .query_row([], |r| {
            Ok(CognitiveRow {
                state: r.get(0)?,
                since_ms: r.get(1)?,
                cause: r.get(2)?,
                degraded: r.get::<_, i64>(3)? != 0,
            })
        })?)
}

pub(super) fn moves(conn: &Connection, limit: usize) -> Result<Vec<StateMove>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT from_state, to_state, cause, detail, at FROM state_moves ORDER BY id DESC LIMIT ?1",
    )?;
    let rows = stmt.query_map([limit as i64], |r| {
        Ok(StateMove {
            from: r.get(0)?,
            to: r.get(1)?,
            cause: r.get(2)?,
            detail: serde_json::from_str(&r.get::<_, String>(3)?).unwrap_or(Value::Null),
            at_ms: r.get(4)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A move in the caller's write transaction (see [`SqliteStore::move_state`]).
fn apply<E>(
    tx: &Connection,
    decide: impl FnOnce(&CognitiveRow) -> Result<NewMove, E>,
) -> Result<Result<StateMove, E>, StoreError> {
    let row = current(tx)?;
    let m = match decide(&row) {
        Ok(m) => m,
        Err(e) => return Ok(Err(e)),
    };
    let at = now_ms();
    tx.prepare_cached(
        "UPDATE cognitive_state SET state = ?1, since = ?2, cause = ?3, degraded = ?4 WHERE id = 1",
    )?
    .execute((&m.to, at, &m.cause, m.degraded as i64))?;
    tx.prepare_cached(
        "INSERT INTO state_moves (from_state, to_state, cause, detail, at) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute((&row.state, &m.to, &m.cause, m.detail.to_string(), at))?;
    Ok(Ok(StateMove {
        from: row.state,
        to: m.to,
        cause: m.cause,
        detail: m.detail,
        at_ms: at,
    }))
}

fn newest_message_id(conn: &Connection) -> Result<Option<i64>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT max(id) FROM working_memory WHERE entry_type = 'userMessage'")?
        .query_row([], |r| r.get(0))?)
}

impl SqliteStore {
    /// The state now.
    pub fn cognitive_state(&self) -> Result<CognitiveRow, StoreError> {
        current(&self.conn())
    }

    /// Moves the state in one write transaction: `decide` sees the state as it is inside
    /// the transaction and returns the move, or why not (then nothing is written).
    pub fn move_state<E>(
        &self,
        decide: impl FnOnce(&CognitiveRow) -> Result<NewMove, E>,
    ) -> Result<Result<StateMove, E>, StoreError> {
        self.write(|tx| apply(tx, decide))
    }

    /// [`SqliteStore::move_state`], only if nobody has written since the newest message was
    /// `newest` (checked in the move's transaction: a message whose turn read the
    /// state before the move is seen here, and the move refused with `busy`).
    pub fn move_state_if_quiet<E>(
        &self,
        newest: Option<i64>,
        busy: E,
        decide: impl FnOnce(&CognitiveRow) -> Result<NewMove, E>,
    ) -> Result<Result<StateMove, E>, StoreError> {
        self.write(|tx| {
            if newest_message_id(tx)? != newest {
                return Ok(Err(busy));
            }
            apply(tx, decide)
        })
    }

    /// The newest person's message (its working-memory id), anywhere; `None` before the first.
    pub fn newest_message_id(&self) -> Result<Option<i64>, StoreError> {
        newest_message_id(&self.conn())
    }

    /// The latest moves, newest first.
    pub fn state_moves(&self, limit: usize) -> Result<Vec<StateMove>, StoreError> {
        moves(&self.conn(), limit)
    }

    pub fn add_journal(&self, entry: &str) -> Result<i64, StoreError> {
        self.write(|tx| {
            tx.prepare_cached("INSERT INTO journal (entry, at) VALUES (?1, ?2)")?
                .execute((entry, now_ms()))?;
            Ok(tx.last_insert_rowid())
        })
    }

    /// The latest journal entries, newest first.
    pub fn journal(&self, limit: usize) -> Result<Vec<JournalEntry>, StoreError> {
        let conn = self.conn();
        let mut stmt =
            conn.prepare_cached("SELECT id, entry, at FROM journal ORDER BY id DESC LIMIT ?1")?;
        let rows = stmt.query_map([limit as i64], |r| {
            Ok(JournalEntry {
                id: r.get(0)?,
                entry: r.get(1)?,
                at_ms: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// People's messages since `since_ms`, oldest first: (thread, text).
    pub fn messages_since(&self, since_ms: i64) -> Result<Vec<(String, String)>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT thread, content FROM working_memory
             WHERE entry_type = 'userMessage' AND created_at >= ?1 ORDER BY id",
        )?;
        let rows = stmt.query_map([since_ms], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Whether, in some thread, the latest answer to `question` is yes and was given since
    /// `since_ms`.
    pub fn answered_yes_since(&self, question: &str, since_ms: i64) -> Result<bool, StoreError> {
        let conn = self.conn();
        let found: Option<i64> = conn
            .prepare_cached(
                "SELECT 1 FROM working_memory w
                 WHERE w.entry_type = 'mentalQuery' AND w.content = ?1 AND w.created_at >= ?2
                   AND json_extract(w.metadata, '$.result') = 1
                   AND NOT EXISTS (SELECT 1 FROM working_memory l
                                   WHERE l.thread = w.thread AND l.entry_type = 'mentalQuery'
                                     AND l.content = ?1 AND l.id > w.id)
                 LIMIT 1",
            )?
            .query_row((question, since_ms), |r| r.get(0))
            .optional()?;
        Ok(found.is_some())
    }

    /// When a person last wrote (unix ms), anywhere; `None` before the first message.
    pub fn last_message_ms(&self) -> Result<Option<i64>, StoreError> {
        Ok(self.conn().query_row(
            "SELECT max(created_at) FROM working_memory WHERE entry_type = 'userMessage'",
            [],
            |r| r.get(0),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{EntryType, NewEntry, TurnRecord};

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("a.db")).unwrap();
        (dir, s)
    }

    fn to(state: &str, cause: &str) -> NewMove {
        NewMove {
            to: state.into(),
            cause: cause.into(),
            detail: serde_json::json!({ "by": "test" }),
            degraded: false,
        }
    }

    #[test]
    fn a_fresh_store_is_shut_down_and_every_move_is_kept_with_its_cause() {
        let (_d, s) = store();
        let now = s.cognitive_state().unwrap();
        assert_eq!((now.state.as_str(), now.since_ms), ("SHUTDOWN", 0));
        let m = s
            .move_state(|_| Ok::<_, String>(to("WAKEUP", "daemon started")))
            .unwrap()
            .unwrap();
        assert_eq!((m.from.as_str(), m.to.as_str()), ("SHUTDOWN", "WAKEUP"));
        let refused = s
            .move_state(|row| Err::<NewMove, _>(format!("not from {}", row.state)))
            .unwrap();
        assert_eq!(refused.unwrap_err(), "not from WAKEUP");
        s.move_state(|_| {
            Ok::<_, String>(NewMove {
                degraded: true,
                ..to("WORK", "wakeup failed 3 times")
            })
        })
        .unwrap()
        .unwrap();
        let now = s.cognitive_state().unwrap();
        assert_eq!(now.state, "WORK");
        assert!(now.degraded && now.since_ms > 0);
        let moves = s.state_moves(10).unwrap();
        assert_eq!(moves.len(), 2, "a refused move writes nothing");
        assert_eq!(moves[0].cause, "wakeup failed 3 times");
        assert_eq!(moves[1].detail["by"], "test");
    }

    #[test]
    fn a_move_for_a_quiet_spell_is_refused_once_someone_wrote() {
        let (_d, s) = store();
        s.move_state(|_| Ok::<_, String>(to("WORK", "t")))
            .unwrap()
            .unwrap();
        s.record_user_message("t1", "U1", "Tom", "hi", None)
            .unwrap();
        let seen = s.newest_message_id().unwrap();
        // A message arrives (its turn reads WORK, so it will not leave SOLITUDE) between the
        // solitude's look at the store and its move; in the same millisecond, even.
        s.record_user_message("t1", "U1", "Tom", "still there? 🦀", None)
            .unwrap();
        let refused = s
            .move_state_if_quiet(seen, "someone wrote".to_string(), |_| {
                Ok(to("SOLITUDE", "idle"))
            })
            .unwrap();
        assert_eq!(refused.unwrap_err(), "someone wrote");
        assert_eq!(s.cognitive_state().unwrap().state, "WORK");
        let seen = s.newest_message_id().unwrap();
        let m = s
            .move_state_if_quiet(seen, "someone wrote".to_string(), |_| {
                Ok(to("SOLITUDE", "idle"))
            })
            .unwrap()
            .unwrap();
        assert_eq!((m.from.as_str(), m.to.as_str()), ("WORK", "SOLITUDE"));
    }

    #[test]
    fn the_latest_answer_of_each_thread_decides() {
        let (_d, s) = store();
        let q = "Am I referring them on?";
        let answer = |thread: &str, yes: bool| {
            s.commit_turn(&TurnRecord {
                thread: thread.into(),
                user_id: "U1".into(),
                interaction: 1,
                entries: vec![NewEntry::new(EntryType::MentalQuery, q)
                    .metadata(serde_json::json!({ "result": yes }))],
                proactive: true,
                ..Default::default()
            })
            .unwrap();
        };
        assert!(!s.answered_yes_since(q, 0).unwrap());
        answer("C1:1.0", true);
        assert!(s.answered_yes_since(q, 0).unwrap());
        assert!(
            !s.answered_yes_since(q, now_ms() + 1000).unwrap(),
            "too old"
        );
        answer("C1:1.0", false);
        assert!(!s.answered_yes_since(q, 0).unwrap(), "taken back");
        answer("C2:1.0", true);
        assert!(s.answered_yes_since(q, 0).unwrap());
    }

    #[test]
    fn the_journal_keeps_entries_newest_first() {
        let (_d, s) = store();
        s.add_journal("Quiet day. 🦀 Ça va.").unwrap();
        s.add_journal("second").unwrap();
        let j = s.journal(10).unwrap();
        assert_eq!(j[0].entry, "second");
        assert_eq!(j[1].entry, "Quiet day. 🦀 Ça va.");
        assert_eq!(s.last_message_ms().unwrap(), None);
        s.record_user_message("C1:1.0", "U1", "Tom", "hi", None)
            .unwrap();
        assert!(s.last_message_ms().unwrap().is_some());
        assert_eq!(
            s.messages_since(0).unwrap(),
            [("C1:1.0".to_string(), "hi".to_string())]
        );
    }
}
