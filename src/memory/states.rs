//! The soul's cognitive state as stored: where it is, since when and why; every move with
//! its cause; the solitude's journal; and what a shutdown's conditions read (recent
//! messages, a question's latest answers).
//!
//! Knows states only by name: whether a move is legal is decided by the caller's closure,
//! inside the move's own transaction, so two movers (a timer and an operator) cannot both
//! move from the same state.

use rusqlite::Connection;
use serde_json::Value;

#[cfg(test)]
use super::SqliteStore;
use super::{now_ms, StoreError};

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

/// A move in the caller's write transaction: `decide` sees the state as it is inside the
/// transaction and returns the move, or why not (then nothing is written).
pub(super) fn apply<E>(
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

/// The newest person's message (its working-memory id), anywhere; `None` before the first.
pub(super) fn newest_message_id(conn: &Connection) -> Result<Option<i64>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT max(id) FROM working_memory WHERE entry_type = 'userMessage'")?
        .query_row([], |r| r.get(0))?)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::memory::faces::{Decide, Moved, Quiet, States, Turns};
    use crate::memory::sqlite::{run, Block, Sqlite};
    use crate::memory::{EntryType, NewEntry, TurnRecord};

    fn store() -> (tempfile::TempDir, Arc<SqliteStore>) {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("a.db")).unwrap();
        (dir, Arc::new(s))
    }

    fn to(state: &str, cause: &str) -> NewMove {
        NewMove {
            to: state.into(),
            cause: cause.into(),
            detail: serde_json::json!({ "by": "test" }),
            degraded: false,
        }
    }

    fn going(m: NewMove) -> Decide {
        Box::new(move |_| Some(m))
    }

    fn moved(m: Moved) -> StateMove {
        match m {
            Moved::Moved(m) => m,
            other => panic!("not moved: {other:?}"),
        }
    }

    #[test]
    fn a_fresh_store_is_shut_down_and_every_move_is_kept_with_its_cause() {
        let (_d, s) = store();
        let f = Sqlite::on(&s);
        let now = run(f.cognitive_state()).unwrap();
        assert_eq!((now.state.as_str(), now.since_ms), ("SHUTDOWN", 0));
        let m = moved(run(f.move_state(None, going(to("WAKEUP", "daemon started")))).unwrap());
        assert_eq!((m.from.as_str(), m.to.as_str()), ("SHUTDOWN", "WAKEUP"));
        let seen = Arc::new(Mutex::new(String::new()));
        let saw = seen.clone();
        let refused = run(f.move_state(
            None,
            Box::new(move |row| {
                *saw.lock().unwrap() = row.state.clone();
                None
            }),
        ))
        .unwrap();
        assert!(matches!(refused, Moved::Refused), "{refused:?}");
        assert_eq!(
            *seen.lock().unwrap(),
            "WAKEUP",
            "decided on the state as it is"
        );
        moved(
            run(f.move_state(
                None,
                going(NewMove {
                    degraded: true,
                    ..to("WORK", "wakeup failed 3 times")
                }),
            ))
            .unwrap(),
        );
        let now = run(f.cognitive_state()).unwrap();
        assert_eq!(now.state, "WORK");
        assert!(now.degraded && now.since_ms > 0);
        let moves = run(f.state_moves(10)).unwrap();
        assert_eq!(moves.len(), 2, "a refused move writes nothing");
        assert_eq!(moves[0].cause, "wakeup failed 3 times");
        assert_eq!(moves[1].detail["by"], "test");
    }

    #[test]
    fn a_move_for_a_quiet_spell_is_refused_once_someone_wrote() {
        let (_d, s) = store();
        let f = Sqlite::on(&s);
        moved(run(f.move_state(None, going(to("WORK", "t")))).unwrap());
        Sqlite::on(&s)
            .record_user_message("t1", "U1", "Tom", "hi", None)
            .block()
            .unwrap();
        let seen = run(f.newest_message_id()).unwrap();
        // A message arrives (its turn reads WORK, so it will not leave SOLITUDE) between the
        // solitude's look at the store and its move; in the same millisecond, even.
        Sqlite::on(&s)
            .record_user_message("t1", "U1", "Tom", "still there? 🦀", None)
            .block()
            .unwrap();
        let refused = run(f.move_state(Some(Quiet(seen)), going(to("SOLITUDE", "idle")))).unwrap();
        assert!(matches!(refused, Moved::NotQuiet), "{refused:?}");
        assert_eq!(run(f.cognitive_state()).unwrap().state, "WORK");
        let seen = run(f.newest_message_id()).unwrap();
        let m = moved(run(f.move_state(Some(Quiet(seen)), going(to("SOLITUDE", "idle")))).unwrap());
        assert_eq!((m.from.as_str(), m.to.as_str()), ("WORK", "SOLITUDE"));
    }

    #[test]
    fn the_latest_answer_of_each_thread_decides() {
        let (_d, s) = store();
        let f = Sqlite::on(&s);
        let q = "Am I referring them on?";
        let answer = |thread: &str, yes: bool| {
            Sqlite::on(&s)
                .commit_turn(TurnRecord {
                    thread: thread.into(),
                    user_id: "U1".into(),
                    interaction: 1,
                    entries: vec![NewEntry::new(EntryType::MentalQuery, q)
                        .metadata(serde_json::json!({ "result": yes }))],
                    proactive: true,
                    ..Default::default()
                })
                .block()
                .unwrap();
        };
        let yes_since = |since: i64| run(f.answered_yes_since(q, since)).unwrap();
        assert!(!yes_since(0));
        answer("C1:1.0", true);
        assert!(yes_since(0));
        assert!(!yes_since(now_ms() + 1000), "too old");
        answer("C1:1.0", false);
        assert!(!yes_since(0), "taken back");
        answer("C2:1.0", true);
        assert!(yes_since(0));
    }

    #[test]
    fn the_journal_keeps_entries_newest_first() {
        let (_d, s) = store();
        let f = Sqlite::on(&s);
        run(f.add_journal("Quiet day. 🦀 Ça va.")).unwrap();
        run(f.add_journal("second")).unwrap();
        let j = run(f.journal(10)).unwrap();
        assert_eq!(j[0].entry, "second");
        assert_eq!(j[1].entry, "Quiet day. 🦀 Ça va.");
        assert_eq!(run(f.last_message_ms()).unwrap(), None);
        Sqlite::on(&s)
            .record_user_message("C1:1.0", "U1", "Tom", "hi", None)
            .block()
            .unwrap();
        assert!(run(f.last_message_ms()).unwrap().is_some());
        assert_eq!(
            run(f.messages_since(0)).unwrap(),
            [("C1:1.0".to_string(), "hi".to_string())]
        );
    }
}
