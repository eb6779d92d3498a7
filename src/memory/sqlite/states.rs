//! The soul's cognitive state on SQLite: where it is, every move with its cause (each in one
//! write transaction, decided inside it), the solitude's journal, and what a shutdown's
//! conditions read.

use async_trait::async_trait;
use rusqlite::OptionalExtension;

use super::{Result, Sqlite};
use crate::memory::faces::{Decide, Moved, Quiet, States};
use crate::memory::now_ms;
use crate::memory::states::{self, CognitiveRow, JournalEntry, StateMove};

#[async_trait]
impl States for Sqlite {
    async fn cognitive_state(&self) -> Result<CognitiveRow> {
        self.call(|db| states::current(&db.conn())).await
    }

    async fn move_state(&self, quiet: Option<Quiet>, decide: Decide) -> Result<Moved> {
        self.call(move |db| {
            db.write(|tx| {
                if let Some(Quiet(newest)) = quiet {
                    if states::newest_message_id(tx)? != newest {
                        return Ok(Moved::NotQuiet);
                    }
                }
                Ok(match states::apply(tx, |row| decide(row).ok_or(()))? {
                    Ok(m) => Moved::Moved(m),
                    Err(()) => Moved::Refused,
                })
            })
        })
        .await
    }

    async fn newest_message_id(&self) -> Result<Option<i64>> {
        self.call(|db| states::newest_message_id(&db.conn())).await
    }

    async fn last_message_ms(&self) -> Result<Option<i64>> {
        self.call(|db| {
            Ok(db.conn().query_row(
                "SELECT max(created_at) FROM working_memory WHERE entry_type = 'userMessage'",
                [],
                |r| r.get(0),
            )?)
        })
        .await
    }

    async fn state_moves(&self, limit: usize) -> Result<Vec<StateMove>> {
        self.call(move |db| states::moves(&db.conn(), limit)).await
    }

    async fn add_journal(&self, entry: &str) -> Result<i64> {
        let entry = entry.to_owned();
        self.call(move |db| {
            db.write(|tx| {
                tx.prepare_cached("INSERT INTO journal (entry, at) VALUES (?1, ?2)")?
                    .execute((&entry, now_ms()))?;
                Ok(tx.last_insert_rowid())
            })
        })
        .await
    }

    async fn journal(&self, limit: usize) -> Result<Vec<JournalEntry>> {
        self.call(move |db| {
            let conn = db.conn();
            let mut stmt =
                conn.prepare_cached("SELECT id, entry, at FROM journal ORDER BY id DESC LIMIT ?1")?;
            let rows = stmt.query_map([limit as i64], |r| {
                Ok(JournalEntry {
                    id: r.get(0)?,
                    entry: r.get(1)?,
                    at_ms: r.get(2)?,
                })
            })?;
            Ok(rows.collect::<std::result::Result<_, _>>()?)
        })
        .await
    }

    async fn messages_since(&self, since_ms: i64) -> Result<Vec<(String, String)>> {
        self.call(move |db| {
            let conn = db.conn();
            let mut stmt = conn.prepare_cached(
                "SELECT thread, content FROM working_memory
             WHERE entry_type = 'userMessage' AND created_at >= ?1 ORDER BY id",
            )?;
            let rows = stmt.query_map([since_ms], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok(rows.collect::<std::result::Result<_, _>>()?)
        })
        .await
    }

    async fn answered_yes_since(&self, question: &str, since_ms: i64) -> Result<bool> {
        let question = question.to_owned();
        self.call(move |db| {
            let conn = db.conn();
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
                .query_row((&question, since_ms), |r| r.get(0))
                .optional()?;
            Ok(found.is_some())
        })
        .await
    }
}
