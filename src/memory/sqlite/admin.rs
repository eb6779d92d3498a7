//! What an operator does to the store on SQLite: close a thread's conversation, the log of
//! admin commands received by DM (each once), and the snapshot an operator reads.

use async_trait::async_trait;

use super::{Result, Sqlite};
use crate::memory::faces::Admin;
use crate::memory::records::snapshot::{ConversationState, Snapshot};
use crate::memory::{dream, now_ms, soul_state, states};

/// How many moves the snapshot shows.
const RECENT_MOVES: usize = 5;

#[async_trait]
impl Admin for Sqlite {
    async fn reset_thread(&self, thread: &str) -> Result<bool> {
        let thread = thread.to_owned();
        self.call(move |db| {
            db.write(|tx| {
                // A thread is known by its row, or, before its first turn committed (the model
                // was down), by its entries alone: the row is written then.
                let changed = tx.execute(
                    "INSERT INTO threads (thread, turns, claude_session, since_id, updated_at)
                     SELECT ?1, 0, NULL, coalesce(max(id), 0), ?2 FROM working_memory
                     WHERE thread = ?1
                     HAVING count(*) > 0 OR EXISTS (SELECT 1 FROM threads WHERE thread = ?1)
                     ON CONFLICT (thread) DO UPDATE SET turns = 0, claude_session = NULL,
                         since_id = excluded.since_id, updated_at = excluded.updated_at",
                    (&thread, now_ms()),
                )?;
                tx.execute("DELETE FROM thread_process WHERE thread = ?1", [&thread])?;
                Ok(changed > 0)
            })
        })
        .await
    }

    async fn log_admin(
        &self,
        origin: &str,
        user_id: &str,
        command: &str,
        allowed: bool,
    ) -> Result<bool> {
        let (origin, user_id, command) =
            (origin.to_owned(), user_id.to_owned(), command.to_owned());
        self.call(move |db| {
            db.write(|tx| {
                tx.execute(
                "INSERT OR IGNORE INTO admin_log (origin, user_id, command, allowed, at) VALUES (?1, ?2, ?3, ?4, ?5)",
                (&origin, &user_id, &command, allowed, now_ms()),
            )?;
                let done: bool =
                    tx.query_row("SELECT done FROM admin_log WHERE origin = ?1", [&origin], |r| {
                        r.get(0)
                    })?;
                Ok(!done)
            })
        })
        .await
    }

    async fn admin_done(&self, origin: &str) -> Result<()> {
        let origin = origin.to_owned();
        self.call(move |db| {
            db.write(|tx| {
                tx.execute("UPDATE admin_log SET done = 1 WHERE origin = ?1", [&origin])?;
                Ok(())
            })
        })
        .await
    }

    async fn snapshot(&self) -> Result<Snapshot> {
        self.call(|db| {
            let mut conn = db.conn();
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Deferred)?;
            let count = |sql: &str| -> Result<u64> {
                Ok(tx.query_row(sql, [], |r| r.get::<_, i64>(0))? as u64)
            };
            let interactions = count("SELECT value FROM counters WHERE name = 'interactions'")?;
            let inbox_depth =
                count("SELECT count(*) FROM inbox WHERE status IN ('pending', 'replying')")?;
            let inbox_failed = count("SELECT count(*) FROM inbox WHERE status = 'failed'")?;
            let whispers_pending =
                count("SELECT count(*) FROM whispers WHERE consumed_at IS NULL")?;
            let last_turn_ms: Option<i64> = tx.query_row(
                "SELECT max(updated_at) FROM threads WHERE turns > 0",
                [],
                |r| r.get(0),
            )?;
            let mut stmt = tx.prepare(
            "SELECT t.thread, p.current, t.turns, t.updated_at,
                    (SELECT count(*) FROM inbox i WHERE i.conversation = t.thread AND i.status IN ('pending', 'replying'))
             FROM threads t LEFT JOIN thread_process p ON p.thread = t.thread
             ORDER BY t.updated_at DESC",
        )?;
            let conversations = stmt
                .query_map([], |r| {
                    Ok(ConversationState {
                        thread: r.get(0)?,
                        process: r.get(1)?,
                        turns: r.get(2)?,
                        updated_ms: r.get(3)?,
                        open: r.get::<_, i64>(4)? as u64,
                    })
                })?
                .collect::<std::result::Result<Vec<_>, _>>()?;
            drop(stmt);
            let soul_state = soul_state::load(&tx)?
                .all()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let cognitive = states::current(&tx)?;
            let recent_moves = states::moves(&tx, RECENT_MOVES)?;
            let journal_entries = count("SELECT count(*) FROM journal")?;
            let last_dream =
                dream::last(&tx)?.map(|d| serde_json::to_value(d).unwrap_or_default());
            tx.commit()?;
            Ok(Snapshot {
                cognitive,
                recent_moves,
                journal_entries,
                last_dream,
                soul_state,
                interactions,
                conversations,
                inbox_depth,
                inbox_failed,
                whispers_pending,
                last_turn_ms,
            })
        })
        .await
    }
}
