//! The window's face on SQLite: traces and the inner life's samples, each write one
//! transaction, each read one statement or two (and one a piece a whole trace refers to).
//! The traces are in their own file, on its own connection (`memory::trace_file`); the
//! samples in the database. A trace's pieces are kept once each in `trace_pieces`, its row
//! listing their keys.

use std::sync::Arc;

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension, Row};

use super::{Result, Sqlite};
use crate::memory::faces::{SamePlace, Traces};
use crate::memory::records::trace::{piece_keys, SUMMARY_REPLY_CHARS};
use crate::memory::{PsycheSample, TraceRow, TraceSummary, TracedBody, TracedConversation};

const WHOLE: &str =
    "SELECT trace, kind, thread, person, inbox, process, at, reply, body, pieces FROM traces";

/// A whole trace's row, and the keys of its pieces (read by `with_pieces`).
fn whole(r: &Row) -> rusqlite::Result<(TraceRow, String)> {
    Ok((
        TraceRow {
            trace: r.get(0)?,
            kind: r.get(1)?,
            thread: r.get(2)?,
            person: r.get(3)?,
            inbox: r.get(4)?,
            process: r.get(5)?,
            at: r.get(6)?,
            reply: r.get(7)?,
            body: r.get(8)?,
            pieces: Vec::new(),
        },
        r.get(9)?,
    ))
}

/// The trace with its pieces' texts, in the order its row lists them (one gone: empty).
fn with_pieces(
    conn: &rusqlite::Connection,
    found: Option<(TraceRow, String)>,
) -> rusqlite::Result<Option<TraceRow>> {
    let Some((mut row, keys)) = found else {
        return Ok(None);
    };
    let mut read = conn.prepare_cached("SELECT text FROM trace_pieces WHERE key = ?1")?;
    for key in keys.split_whitespace() {
        let text: Option<String> = read.query_row([key], |r| r.get(0)).optional()?;
        row.pieces.push(text.unwrap_or_default());
    }
    Ok(Some(row))
}

fn summary(r: &Row) -> rusqlite::Result<TraceSummary> {
    Ok(TraceSummary {
        trace: r.get(0)?,
        kind: r.get(1)?,
        thread: r.get(2)?,
        person: r.get(3)?,
        process: r.get(4)?,
        at: r.get(5)?,
        reply: r.get(6)?,
    })
}

#[async_trait]
impl Traces for Sqlite {
    async fn record_trace(&self, t: TraceRow) -> Result<()> {
        self.record_traces(Arc::from([t])).await
    }

    async fn record_traces(&self, traces: Arc<[TraceRow]>) -> Result<()> {
        if traces.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = traces.iter().map(|t| piece_keys(&t.pieces)).collect();
        self.call(move |db| {
            db.write_traces(|tx| {
                let mut insert = tx.prepare_cached(
                    "INSERT OR REPLACE INTO traces
                         (trace, kind, thread, person, inbox, process, at, reply, body, pieces)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                )?;
                let mut piece = tx.prepare_cached(
                    "INSERT OR IGNORE INTO trace_pieces (key, text) VALUES (?1, ?2)",
                )?;
                let mut kept = std::collections::HashSet::new();
                for (t, keys) in traces.iter().zip(&keys) {
                    for (key, text) in keys.split(' ').zip(&t.pieces) {
                        if kept.insert(key) {
                            piece.execute(params![key, text])?;
                        }
                    }
                    insert.execute(params![
                        t.trace, t.kind, t.thread, t.person, t.inbox, t.process, t.at, t.reply,
                        t.body, keys
                    ])?;
                }
                Ok(())
            })
        })
        .await
    }

    async fn traces(
        &self,
        thread: Option<&str>,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<TraceSummary>> {
        let thread = thread.map(str::to_owned);
        // One statement for a conversation and one for all, each with plain comparisons: a
        // statement is planned once (QPSG), and `?1 IS NULL OR thread = ?1` would be planned
        // without the thread's index, reading every trace to find a conversation's few.
        let before = before.unwrap_or(i64::MAX);
        self.call(move |db| {
            let conn = db.traces().conn();
            // substr counts characters in SQLite, so a reply is never cut inside one.
            let mut stmt = conn.prepare_cached(if thread.is_some() {
                "SELECT trace, kind, thread, person, process, at, substr(reply, 1, ?4) FROM traces
                 WHERE thread = ?1 AND at < ?2 ORDER BY at DESC, trace DESC LIMIT ?3"
            } else {
                "SELECT trace, kind, thread, person, process, at, substr(reply, 1, ?4) FROM traces
                 WHERE ?1 IS NULL AND at < ?2 ORDER BY at DESC, trace DESC LIMIT ?3"
            })?;
            let rows = stmt
                .query_map(
                    params![thread, before, limit as i64, SUMMARY_REPLY_CHARS as i64],
                    summary,
                )?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
        .await
    }

    async fn trace_bodies(&self, before: Option<i64>, limit: usize) -> Result<Vec<TracedBody>> {
        let before = before.unwrap_or(i64::MAX);
        self.call(move |db| {
            let conn = db.traces().conn();
            let rows = conn
                .prepare_cached(
                    "SELECT trace, kind, at, body FROM traces WHERE at < ?1
                     ORDER BY at DESC, trace DESC LIMIT ?2",
                )?
                .query_map(params![before, limit as i64], |r| {
                    Ok(TracedBody {
                        trace: r.get(0)?,
                        kind: r.get(1)?,
                        at: r.get(2)?,
                        body: r.get(3)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
        .await
    }

    async fn trace(&self, id: &str) -> Result<Option<TraceRow>> {
        let id = id.to_owned();
        self.call(move |db| {
            let conn = db.traces().conn();
            let found = conn
                .prepare_cached(&format!("{WHOLE} WHERE trace = ?1"))?
                .query_row([&id], whole)
                .optional()?;
            Ok(with_pieces(&conn, found)?)
        })
        .await
    }

    async fn trace_of_reply(
        &self,
        reference: &str,
        same_place: SamePlace,
    ) -> Result<Option<TraceRow>> {
        let reference = reference.to_owned();
        self.call(move |db| {
            let conn = db.conn();
            let rows: Vec<(i64, String)> = conn
                .prepare_cached(
                    "SELECT id, address FROM inbox WHERE reply_ref = ?1
                     UNION SELECT id, address FROM inbox WHERE stream_ref = ?1
                     UNION SELECT i.id, i.address FROM inbox i, json_each(i.part_refs) p
                           WHERE p.value = ?1
                     ORDER BY id",
                )?
                .query_map([&reference], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<rusqlite::Result<_>>()?;
            drop(conn);
            let Some((inbox, _)) = rows.into_iter().find(|(_, a)| same_place(a)) else {
                return Ok(None);
            };
            let conn = db.traces().conn();
            let found = conn
                .prepare_cached(&format!(
                    "{WHOLE} WHERE inbox = ?1 ORDER BY at DESC, trace DESC LIMIT 1"
                ))?
                .query_row([inbox], whole)
                .optional()?;
            Ok(with_pieces(&conn, found)?)
        })
        .await
    }

    async fn traced_conversations(
        &self,
        after: Option<(i64, String)>,
        limit: usize,
    ) -> Result<Vec<TracedConversation>> {
        // No cursor: after one later than any trace.
        let (at, thread) = after.unwrap_or((i64::MAX, String::new()));
        self.call(move |db| {
            let conn = db.traces().conn();
            let mut stmt = conn.prepare_cached(
                "SELECT thread, count(*), max(at) FROM traces WHERE thread <> ''
                 GROUP BY thread HAVING max(at) < ?2 OR (max(at) = ?2 AND thread > ?3)
                 ORDER BY max(at) DESC, thread LIMIT ?1",
            )?;
            let rows = stmt
                .query_map(params![limit as i64, at, thread], |r| {
                    Ok(TracedConversation {
                        thread: r.get(0)?,
                        traces: r.get::<_, i64>(1)? as u64,
                        last_at: r.get(2)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
        .await
    }

    async fn prune_traces(&self, keep: u64) -> Result<u64> {
        self.call(move |db| {
            db.write_traces(|tx| {
                let gone = tx
                    .prepare_cached(
                        "DELETE FROM traces WHERE trace NOT IN
                           (SELECT trace FROM traces ORDER BY at DESC, trace DESC LIMIT ?1)",
                    )?
                    .execute([keep as i64])?;
                // A piece no kept trace lists (few pieces: each a scan of the keys).
                tx.prepare_cached(
                    "DELETE FROM trace_pieces WHERE NOT EXISTS
                       (SELECT 1 FROM traces WHERE instr(traces.pieces, trace_pieces.key) > 0)",
                )?
                .execute([])?;
                Ok(gone as u64)
            })
        })
        .await
    }

    async fn record_psyche_sample(&self, sample: PsycheSample, keep: u64) -> Result<()> {
        self.call(move |db| {
            db.write(|tx| {
                tx.prepare_cached("INSERT INTO psyche_samples (at, body) VALUES (?1, ?2)")?
                    .execute(params![sample.at, sample.body])?;
                tx.prepare_cached(
                    "DELETE FROM psyche_samples WHERE id NOT IN
                       (SELECT id FROM psyche_samples ORDER BY at DESC, id DESC LIMIT ?1)",
                )?
                .execute([keep as i64])?;
                Ok(())
            })
        })
        .await
    }

    async fn psyche_samples(&self, since: i64, limit: usize) -> Result<Vec<PsycheSample>> {
        self.call(move |db| {
            let conn = db.conn();
            let mut stmt = conn.prepare_cached(
                "SELECT at, body FROM psyche_samples WHERE at >= ?1 ORDER BY at, id LIMIT ?2",
            )?;
            let rows = stmt
                .query_map(params![since, limit as i64], |r| {
                    Ok(PsycheSample {
                        at: r.get(0)?,
                        body: r.get(1)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
        .await
    }
}
