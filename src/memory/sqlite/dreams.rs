//! What a dream reads and writes on SQLite: each conversation's backlog, the consolidation of
//! one batch of it (one write transaction; `dream::consolidate`), the dream's own record and
//! report, and the upkeep after (ANALYZE, an incremental vacuum). The rules are `dream`'s
//! module docs.

use async_trait::async_trait;
use rusqlite::Connection;
use serde_json::Value;

use super::{Result, Sqlite};
use crate::memory::dream::{
    batch_len, consolidate, last, oldest_kept, since_id, summary, Backlog, Consolidated,
    Consolidation, DreamHold, DreamRow, Episode, Keep, Person, Upkeep,
};
use crate::memory::faces::Dreams;
use crate::memory::{now_ms, psyche, working, Entry, StoreError};

#[async_trait]
impl Dreams for Sqlite {
    /// The soul's one dream at a time: `dream.lock` beside the database, locked without
    /// waiting.
    async fn hold_dream(&self) -> Result<Option<DreamHold>> {
        self.call(move |db| {
            let path = db.path.with_file_name("dream.lock");
            let failed = |source| StoreError::File {
                path: path.clone(),
                source,
            };
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .map_err(failed)?;
            match file.try_lock() {
                Ok(()) => Ok(Some(DreamHold::new(file))),
                Err(std::fs::TryLockError::WouldBlock) => Ok(None),
                Err(std::fs::TryLockError::Error(e)) => Err(failed(e)),
            }
        })
        .await
    }

    /// Threads whose current conversation has a backlog (entries before what it keeps), the
    /// least recently active first.
    async fn dream_threads(&self, keep: Keep) -> Result<Vec<String>> {
        self.call(move |db| {
            let conn = db.conn();
            let mut stmt = conn.prepare_cached(
                "SELECT w.thread, coalesce(t.since_id, 0) FROM working_memory w
             LEFT JOIN threads t ON t.thread = w.thread
             WHERE w.id > coalesce(t.since_id, 0)
             GROUP BY w.thread HAVING count(*) > ?1 ORDER BY max(w.id)",
            )?;
            let rows = stmt
                .query_map([i64::from(keep.entries.max(1))], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
                })?
                .collect::<std::result::Result<Vec<_>, _>>()?;
            let mut threads = Vec::with_capacity(rows.len());
            // Those with more entries than the count keeps, but all of them of the last hour,
            // have none: listed, they would count as threads with a backlog, and a dream
            // interrupted after its last batch would say it yielded work it did not leave.
            for (thread, since) in rows {
                if oldest_kept(&conn, &thread, since, keep)?.is_some() {
                    threads.push(thread);
                }
            }
            Ok(threads)
        })
        .await
    }

    /// The next batch of a conversation's backlog: at most `max_entries` of its oldest
    /// entries, cut once they hold `max_chars` characters (one at least). `None`: nothing to
    /// consolidate.
    async fn backlog(
        &self,
        thread: &str,
        keep: Keep,
        max_entries: usize,
        max_chars: usize,
    ) -> Result<Option<Backlog>> {
        let thread = thread.to_owned();
        self.call(move |db| {
            let thread = thread.as_str();
            let conn = db.conn();
            let since = since_id(&conn, thread)?;
            let Some(oldest) = oldest_kept(&conn, thread, since, keep)? else {
                return Ok(None);
            };
            let mut entries: Vec<Entry> = working::all(&conn, thread)?
                .into_iter()
                .filter(|e| e.id > since && e.id < oldest)
                .collect();
            let total = entries.len();
            let take = batch_len(&entries, max_entries, max_chars);
            entries.truncate(take);
            let mut people: Vec<Person> = Vec::new();
            for e in &entries {
                let Some(uid) = &e.user_id else { continue };
                if people.iter().any(|p| &p.user_id == uid) {
                    continue;
                }
                if let Some(u) = crate::memory::users::get(&conn, uid)? {
                    people.push(Person {
                        user_id: u.user_id,
                        display_name: u.display_name,
                        model: u.model,
                        model_version: u.model_version,
                    });
                }
            }
            Ok(Some(Backlog {
                thread: thread.to_string(),
                since_id: since,
                summary: summary(&conn, thread, since)?,
                left: (total - take) as u64,
                entries,
                people,
            }))
        })
        .await
    }

    /// Commits one consolidation in one transaction (see the module's docs).
    async fn consolidate(&self, c: Consolidation, keep: Keep) -> Result<Consolidated> {
        self.call(move |db| {
            let c = &c;
            db.write(|tx| consolidate(tx, c, keep, &mut || Ok(())))
        })
        .await
    }

    /// A conversation's summary (the current conversation's), if a dream wrote one.
    async fn thread_summary(&self, thread: &str) -> Result<Option<String>> {
        let thread = thread.to_owned();
        self.call(move |db| {
            let thread = thread.as_str();
            let conn = db.conn();
            let since = since_id(&conn, thread)?;
            summary(&conn, thread, since)
        })
        .await
    }

    /// A thread's episodic memories, the most important first.
    async fn episodes(&self, thread: &str) -> Result<Vec<Episode>> {
        let thread = thread.to_owned();
        self.call(move |db| {
            let thread = thread.as_str();
            let conn = db.conn();
            let mut stmt = conn.prepare_cached(
                "SELECT thread, memory, importance, created_at FROM episodic_memories
             WHERE thread = ?1 ORDER BY importance DESC, id",
            )?;
            let rows = stmt.query_map([thread], |r| {
                Ok(Episode {
                    thread: r.get(0)?,
                    memory: r.get(1)?,
                    importance: r.get(2)?,
                    at_ms: r.get(3)?,
                })
            })?;
            Ok(rows.collect::<std::result::Result<_, _>>()?)
        })
        .await
    }

    /// Records that a dream begins; returns its id.
    async fn begin_dream(&self, cause: &str) -> Result<i64> {
        let cause = cause.to_owned();
        self.call(move |db| {
            let cause = cause.as_str();
            db.write(|tx| {
                tx.prepare_cached("INSERT INTO dreams (started_at, cause) VALUES (?1, ?2)")?
                    .execute((now_ms(), cause))?;
                Ok(tx.last_insert_rowid())
            })
        })
        .await
    }

    /// Records how a dream ended, with its report.
    async fn finish_dream(&self, id: i64, complete: bool, report: &Value) -> Result<()> {
        let report = report.clone();
        self.call(move |db| {
            let report = &report;
            db.write(|tx| {
                tx.prepare_cached(
                    "UPDATE dreams SET finished_at = ?2, complete = ?3, report = ?4 WHERE id = ?1",
                )?
                .execute((id, now_ms(), complete as i64, report.to_string()))?;
                Ok(())
            })
        })
        .await
    }

    /// The latest dream, finished or not.
    async fn last_dream(&self) -> Result<Option<DreamRow>> {
        self.call(move |db| last(&db.conn())).await
    }

    /// The psyche's upkeep (old event keys forgotten, its full-text index merged), ANALYZE,
    /// then an incremental vacuum when the database allows one.
    async fn upkeep(&self) -> Result<Upkeep> {
        self.call(move |db| {
            db.write(|tx| {
                let mode: i64 = tx.query_row("PRAGMA auto_vacuum", [], |r| r.get(0))?;
                let free = |tx: &Connection| -> Result<i64> {
                    Ok(tx.query_row("PRAGMA freelist_count", [], |r| r.get(0))?)
                };
                let free_pages_before = free(tx)?;
                let forgotten_event_keys = psyche::upkeep(tx, now_ms())?;
                tx.execute_batch("ANALYZE")?;
                let vacuumed = mode == 2;
                if vacuumed {
                    tx.execute_batch("PRAGMA incremental_vacuum")?;
                }
                Ok(Upkeep {
                    analyzed: true,
                    auto_vacuum: match mode {
                        1 => "full",
                        2 => "incremental",
                        _ => "none",
                    }
                    .into(),
                    vacuumed,
                    free_pages_before,
                    free_pages_after: free(tx)?,
                    forgotten_event_keys,
                })
            })
        })
        .await
    }
}
