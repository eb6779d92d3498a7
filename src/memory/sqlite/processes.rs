//! Threads' processes on SQLite: where each thread is, the transitions it took, and the
//! threads gone quiet.

use async_trait::async_trait;
use rusqlite::OptionalExtension;

use super::{Result, Sqlite};
use crate::memory::faces::Processes;
use crate::memory::process_state::{self, TransitionRow};
use crate::process::{ThreadProcess, TransitionRecord};

#[async_trait]
impl Processes for Sqlite {
    async fn thread_process(&self, thread: &str) -> Result<Option<ThreadProcess>> {
        let thread = thread.to_owned();
        self.call(move |db| process_state::load(&db.conn(), &thread))
            .await
    }

    async fn standing(&self, threads: &[String]) -> Result<Vec<(String, String)>> {
        let threads = threads.to_vec();
        self.call(move |db| {
            let conn = db.conn();
            let mut stmt =
                conn.prepare_cached("SELECT current FROM thread_process WHERE thread = ?1")?;
            let mut out = Vec::with_capacity(threads.len());
            for t in threads {
                if let Some(current) = stmt.query_row([&t], |r| r.get::<_, String>(0)).optional()? {
                    out.push((t, current));
                }
            }
            Ok(out)
        })
        .await
    }

    async fn transitions(&self, thread: &str) -> Result<Vec<TransitionRow>> {
        let thread = thread.to_owned();
        self.call(move |db| {
            let conn = db.conn();
            let mut stmt = conn.prepare(
                "SELECT interaction, from_process, to_process, rule, execute_now, params, at, action
             FROM process_transitions WHERE thread = ?1 ORDER BY id",
            )?;
            let rows = stmt.query_map([&thread], |r| {
                let params: String = r.get(5)?;
                Ok(TransitionRow {
                    interaction: r.get(0)?,
                    record: TransitionRecord {
                        from: r.get(1)?,
                        to: r.get(2)?,
                        rule: r.get::<_, Option<i64>>(3)?.map(|v| v as usize),
                        execute_now: r.get(4)?,
                        params: serde_json::from_str(&params).unwrap_or_default(),
                        action: r.get(7)?,
                    },
                    at: r.get(6)?,
                })
            })?;
            Ok(rows.collect::<std::result::Result<_, _>>()?)
        })
        .await
    }

    async fn quiet_threads(&self, quiet_since: i64) -> Result<Vec<(String, i64)>> {
        self.call(move |db| {
            let conn = db.conn();
            let mut stmt = conn.prepare(
            "SELECT w.thread, w.metadata, w.created_at FROM working_memory w
             JOIN (SELECT thread, max(id) AS id FROM working_memory GROUP BY thread) last ON last.id = w.id
             JOIN threads t ON t.thread = w.thread AND t.turns > 0
             WHERE w.created_at <= ?1",
        )?;
            let rows = stmt.query_map([quiet_since], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                ))
            })?;
            let mut out = Vec::new();
            for row in rows {
                let (thread, meta, at) = row?;
                let proactive = serde_json::from_str::<serde_json::Value>(&meta)
                    .ok()
                    .and_then(|m| m.get("proactive").and_then(|p| p.as_bool()))
                    .unwrap_or(false);
                if !proactive {
                    out.push((thread, at));
                }
            }
            Ok(out)
        })
        .await
    }
}
