//! The window's face on PostgreSQL (see `faces::Traces`): traces and the inner life's
//! samples, as on SQLite, with times as `timestamptz`. A trace's pieces are kept once each
//! in `trace_pieces`; keeping one marks it used (`used_at`, under its row's lock), and the
//! pruning deletes only a piece no trace lists and none has used for an hour, so a trace
//! another daemon is writing never loses its piece to a prune that cannot see it yet.

use std::sync::Arc;

use async_trait::async_trait;
use tokio_postgres::Row;

use super::{Postgres, Prepared};
use crate::memory::faces::{SamePlace, Traces};
use crate::memory::records::trace::{piece_keys, SUMMARY_REPLY_CHARS};
use crate::memory::{
    PsycheSample, StoreError, TraceRow, TraceSummary, TracedBody, TracedConversation,
};

type Result<T> = std::result::Result<T, StoreError>;

const WHOLE: &str = "SELECT trace, kind, thread, person, inbox, process, anima_ms(at), reply, body,
                            pieces
                     FROM traces";

fn whole(r: &Row) -> TraceRow {
    TraceRow {
        trace: r.get(0),
        kind: r.get(1),
        thread: r.get(2),
        person: r.get(3),
        inbox: r.get(4),
        process: r.get(5),
        at: r.get(6),
        reply: r.get(7),
        body: r.get(8),
        pieces: Vec::new(),
    }
}

/// `found` whole, with its pieces' texts in the order its row lists them (one gone: empty).
async fn with_pieces(client: &impl Prepared, found: Option<Row>) -> Result<Option<TraceRow>> {
    let Some(r) = found else {
        return Ok(None);
    };
    let mut row = whole(&r);
    let keys: Vec<String> = r
        .get::<_, String>(9)
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    if keys.is_empty() {
        return Ok(Some(row));
    }
    let texts: std::collections::HashMap<String, String> = client
        .rows(
            "SELECT key, text FROM trace_pieces WHERE key = ANY($1)",
            &[&keys],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    row.pieces = keys
        .iter()
        .map(|k| texts.get(k).cloned().unwrap_or_default())
        .collect();
    Ok(Some(row))
}

#[async_trait]
impl Traces for Postgres {
    async fn record_trace(&self, t: TraceRow) -> Result<()> {
        self.record_traces(Arc::from([t])).await
    }

    async fn record_traces(&self, traces: Arc<[TraceRow]>) -> Result<()> {
        if traces.is_empty() {
            return Ok(());
        }
        let keys: Vec<String> = traces.iter().map(|t| piece_keys(&t.pieces)).collect();
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let mut kept = std::collections::HashSet::new();
            for (t, keys) in traces.iter().zip(&keys) {
                for (key, text) in keys.split(' ').zip(&t.pieces) {
                    if kept.insert(key) {
                        tx.run(
                            "INSERT INTO trace_pieces (key, text) VALUES ($1, $2)
                             ON CONFLICT (key) DO UPDATE SET used_at = now()",
                            &[&key, text],
                        )
                        .await?;
                    }
                }
                tx.run(
                    "INSERT INTO traces
                         (trace, kind, thread, person, inbox, process, at, reply, body, pieces)
                     VALUES ($1, $2, $3, $4, $5, $6, anima_at($7), $8, $9, $10)
                     ON CONFLICT (trace) DO UPDATE SET kind = excluded.kind,
                         thread = excluded.thread, person = excluded.person,
                         inbox = excluded.inbox, process = excluded.process, at = excluded.at,
                         reply = excluded.reply, body = excluded.body, pieces = excluded.pieces",
                    &[
                        &t.trace, &t.kind, &t.thread, &t.person, &t.inbox, &t.process, &t.at,
                        &t.reply, &t.body, keys,
                    ],
                )
                .await?;
            }
            tx.commit().await?;
            Ok(())
        }
        .await;
        self.noted(result)
    }

    async fn traces(
        &self,
        thread: Option<&str>,
        before: Option<i64>,
        limit: usize,
    ) -> Result<Vec<TraceSummary>> {
        let client = self.client().await?;
        let rows = client
            .rows(
                // One statement for a conversation and one for all: planned once (a generic
                // plan), `$1 IS NULL OR thread = $1` would not use the thread's index.
                if thread.is_some() {
                    "SELECT trace, kind, thread, person, process, anima_ms(at), left(reply, $4::int)
                     FROM traces
                     WHERE thread = $1::text AND ($2::bigint IS NULL OR at < anima_at($2))
                     ORDER BY at DESC, trace DESC LIMIT $3"
                } else {
                    "SELECT trace, kind, thread, person, process, anima_ms(at), left(reply, $4::int)
                     FROM traces
                     WHERE $1::text IS NULL AND ($2::bigint IS NULL OR at < anima_at($2))
                     ORDER BY at DESC, trace DESC LIMIT $3"
                },
                &[
                    &thread,
                    &before,
                    &(limit as i64),
                    &(SUMMARY_REPLY_CHARS as i32),
                ],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| TraceSummary {
                trace: r.get(0),
                kind: r.get(1),
                thread: r.get(2),
                person: r.get(3),
                process: r.get(4),
                at: r.get(5),
                reply: r.get(6),
            })
            .collect())
    }

    async fn trace_bodies(&self, before: Option<i64>, limit: usize) -> Result<Vec<TracedBody>> {
        let client = self.client().await?;
        let rows = client
            .rows(
                "SELECT trace, kind, anima_ms(at), body FROM traces
                 WHERE $1::bigint IS NULL OR at < anima_at($1)
                 ORDER BY at DESC, trace DESC LIMIT $2",
                &[&before, &(limit as i64)],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| TracedBody {
                trace: r.get(0),
                kind: r.get(1),
                at: r.get(2),
                body: r.get(3),
            })
            .collect())
    }

    async fn trace(&self, id: &str) -> Result<Option<TraceRow>> {
        let client = self.client().await?;
        let row = client
            .maybe_row(&format!("{WHOLE} WHERE trace = $1"), &[&id])
            .await?;
        with_pieces(&client, row).await
    }

    async fn trace_of_reply(
        &self,
        reference: &str,
        same_place: SamePlace,
    ) -> Result<Option<TraceRow>> {
        let client = self.client().await?;
        let rows = client
            .rows(
                "SELECT id, address FROM inbox WHERE reply_ref = $1
                 UNION SELECT id, address FROM inbox WHERE stream_ref = $1
                 UNION SELECT i.id, i.address FROM inbox i
                       WHERE i.part_refs @> jsonb_build_array($1::text)
                 ORDER BY id",
                &[&reference],
            )
            .await?;
        let Some(inbox) = rows
            .iter()
            .find(|r| same_place(r.get(1)))
            .map(|r| r.get::<_, i64>(0))
        else {
            return Ok(None);
        };
        let row = client
            .maybe_row(
                &format!("{WHOLE} WHERE inbox = $1 ORDER BY at DESC, trace DESC LIMIT 1"),
                &[&inbox],
            )
            .await?;
        with_pieces(&client, row).await
    }

    async fn traced_conversations(
        &self,
        after: Option<(i64, String)>,
        limit: usize,
    ) -> Result<Vec<TracedConversation>> {
        let (at, thread) = match after {
            Some((at, thread)) => (Some(at), thread),
            None => (None, String::new()),
        };
        let client = self.client().await?;
        let rows = client
            .rows(
                "SELECT thread, count(*), anima_ms(max(at)) FROM traces WHERE thread <> ''
                 GROUP BY thread
                 HAVING $2::bigint IS NULL OR max(at) < anima_at($2)
                     OR (max(at) = anima_at($2) AND thread > $3::text)
                 ORDER BY max(at) DESC, thread LIMIT $1",
                &[&(limit as i64), &at, &thread],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| TracedConversation {
                thread: r.get(0),
                traces: r.get::<_, i64>(1) as u64,
                last_at: r.get(2),
            })
            .collect())
    }

    async fn prune_traces(&self, keep: u64) -> Result<u64> {
        let result = async {
            let client = self.client().await?;
            let gone = client
                .run(
                    "DELETE FROM traces WHERE trace NOT IN
                       (SELECT trace FROM traces ORDER BY at DESC, trace DESC LIMIT $1)",
                    &[&(keep as i64)],
                )
                .await?;
            client
                .run(
                    "DELETE FROM trace_pieces p WHERE p.used_at < now() - interval '1 hour'
                       AND NOT EXISTS (SELECT 1 FROM traces t WHERE position(p.key in t.pieces) > 0)",
                    &[],
                )
                .await?;
            Ok(gone)
        }
        .await;
        self.noted(result)
    }

    async fn record_psyche_sample(&self, sample: PsycheSample, keep: u64) -> Result<()> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            tx.run(
                "INSERT INTO psyche_samples (at, body) VALUES (anima_at($1), $2)",
                &[&sample.at, &sample.body],
            )
            .await?;
            tx.run(
                "DELETE FROM psyche_samples WHERE id NOT IN
                   (SELECT id FROM psyche_samples ORDER BY at DESC, id DESC LIMIT $1)",
                &[&(keep as i64)],
            )
            .await?;
            tx.commit().await?;
            Ok(())
        }
        .await;
        self.noted(result)
    }

    async fn psyche_samples(&self, since: i64, limit: usize) -> Result<Vec<PsycheSample>> {
        let client = self.client().await?;
        let rows = client
            .rows(
                "SELECT anima_ms(at), body FROM psyche_samples WHERE at >= anima_at($1)
                 ORDER BY at, id LIMIT $2",
                &[&since, &(limit as i64)],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| PsycheSample {
                at: r.get(0),
                body: r.get(1),
            })
            .collect())
    }
}
