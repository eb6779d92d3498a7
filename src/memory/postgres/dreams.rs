//! Dreams on PostgreSQL (see `memory::dream` for what each operation promises): the backlogs,
//! the consolidation of one batch, the dream's record, and the upkeep after.
//!
//! A consolidation is one transaction. Two dreams (two processes) never consolidate one
//! conversation at once: each takes a transaction-level advisory lock on the thread, so the
//! second finds the first's summary and skips the batch. It reads the conversation's
//! `since_id` `FOR SHARE`, so an operator's reset (an UPDATE of that row) waits for it, and
//! one that came first makes it write nothing. A user model is refreshed only if its version is
//! still the one the dream read (one conditional UPDATE), with a history row, as a turn saves
//! one. Reads of several statements run in one read-only REPEATABLE READ transaction: one
//! snapshot, as SQLite's reads under its lock.

use async_trait::async_trait;
use deadpool_postgres::{GenericClient, Transaction};
use serde_json::Value;

use super::working::{entry, ENTRY};
use super::{snapshot, Postgres, Prepared};
use crate::memory::dream::DreamHold;
use crate::memory::dream::{
    batch_len, Backlog, Consolidated, Consolidation, DreamRow, Episode, Keep, Person, Upkeep,
};
use crate::memory::faces::Dreams;
use crate::memory::psyche::SEEN_KEEP_MS;
use crate::memory::{now_ms, StoreError};

type Result<T> = std::result::Result<T, StoreError>;

/// Times past any entry's, either way, that `timestamptz` still holds (about 4,460 years from
/// 1970): a `Keep::since_ms` of `i64::MAX` means "none kept for being recent".
const FAR_MS: i64 = 1 << 47;

/// The first key of the advisory lock a consolidation takes on its thread ("dream").
const DREAM_LOCK: i32 = 0x6472_6561;

/// The conversation a thread is in: entries up to this id belong to one an operator closed.
async fn since_id(c: &impl GenericClient, thread: &str) -> Result<i64> {
    Ok(
        c.maybe_row("SELECT since_id FROM threads WHERE thread = $1", &[&thread])
            .await?
            .map_or(0, |r| r.get(0)),
    )
}

/// The oldest entry of a conversation that a dream keeps (of its newest `keep.entries`, and of
/// those written since `keep.since_ms`): entries before it are the backlog. `None` when there
/// is none before it. (`memory::dream::oldest_kept`, in one statement.)
async fn oldest_kept(
    c: &impl GenericClient,
    thread: &str,
    since: i64,
    keep: Keep,
) -> Result<Option<i64>> {
    let skip = i64::from(keep.entries.max(1)) - 1;
    let recent = keep.since_ms.clamp(-FAR_MS, FAR_MS);
    Ok(c.maybe_row(
        "WITH newest AS (
                 SELECT id FROM working_memory WHERE thread = $1 AND id > $2
                 ORDER BY id DESC LIMIT 1 OFFSET $3),
             recent AS (
                 SELECT min(id) AS id FROM working_memory
                 WHERE thread = $1 AND id > $2 AND created_at >= anima_at($4)),
             oldest AS (
                 SELECT least(n.id, coalesce(r.id, n.id)) AS id FROM newest n, recent r)
             SELECT o.id FROM oldest o WHERE EXISTS (
                 SELECT 1 FROM working_memory WHERE thread = $1 AND id > $2 AND id < o.id)",
        &[&thread, &since, &skip, &recent],
    )
    .await?
    .map(|r| r.get(0)))
}

async fn summary(c: &impl GenericClient, thread: &str, since: i64) -> Result<Option<String>> {
    Ok(c.maybe_row(
        "SELECT summary FROM thread_summaries WHERE thread = $1 AND since_id = $2",
        &[&thread, &since],
    )
    .await?
    .map(|r| r.get(0)))
}

/// Saves a new version of a user's model with its change note, as a turn does (`model_version`
/// bumped, a history row), if the version is still `version`; whether it was saved.
pub(super) async fn save_model_if(
    tx: &Transaction<'_>,
    user_id: &str,
    version: i64,
    model: &str,
    note: &str,
    now: i64,
) -> Result<bool> {
    Ok(tx
        .row(
            "SELECT anima_save_model($1, $2, $3, $4, $5)",
            &[&user_id, &model, &note, &now, &version],
        )
        .await?
        .get(0))
}

impl Postgres {
    /// The consolidation's writes, in `tx` (see the module's docs); nothing written when the
    /// batch is no longer the conversation's to consolidate.
    async fn consolidate_in(
        tx: &Transaction<'_>,
        c: &Consolidation,
        keep: Keep,
    ) -> Result<Consolidated> {
        tx.run(
            "SELECT pg_advisory_xact_lock($1, hashtext($2))",
            &[&DREAM_LOCK, &c.thread],
        )
        .await?;
        let since: i64 = tx
            .maybe_row(
                "SELECT since_id FROM threads WHERE thread = $1 FOR SHARE",
                &[&c.thread],
            )
            .await?
            .map_or(0, |r| r.get(0));
        if since != c.since_id {
            // An operator closed the conversation since the batch was read.
            return Ok(Consolidated::default());
        }
        let covered: Option<i64> = tx
            .maybe_row(
                "SELECT covers_through FROM thread_summaries WHERE thread = $1 AND since_id = $2",
                &[&c.thread, &c.since_id],
            )
            .await?
            .map(|r| r.get(0));
        if covered.is_some_and(|through| through >= c.first_id) {
            // Another dream consolidated this batch meanwhile.
            return Ok(Consolidated::default());
        }
        // Only entries still before what the conversation keeps are covered.
        let Some(limit) = oldest_kept(tx, &c.thread, c.since_id, keep).await? else {
            return Ok(Consolidated::default());
        };
        let through = c.through_id.min(limit - 1);
        if through < c.first_id {
            return Ok(Consolidated::default());
        }
        let now = now_ms();
        tx.run(
            "INSERT INTO thread_summaries (thread, since_id, summary, covers_through, entries, updated_at)
             SELECT $1, $2, $3, $5, count(*), anima_at($6) FROM working_memory
             WHERE thread = $1 AND id BETWEEN $4 AND $5
             ON CONFLICT (thread, since_id) DO UPDATE SET summary = excluded.summary,
                 covers_through = excluded.covers_through,
                 entries = thread_summaries.entries + excluded.entries,
                 updated_at = excluded.updated_at",
            &[&c.thread, &c.since_id, &c.summary, &c.first_id, &through, &now],
        )
        .await?;
        let (memories, importance): (Vec<&str>, Vec<i16>) = c
            .episodes
            .iter()
            .map(|(m, i)| (m.as_str(), i16::from((*i).clamp(1, 10))))
            .unzip();
        tx.run(
            "INSERT INTO episodic_memories (thread, memory, importance, created_at)
             SELECT $1, m, i, anima_at($4) FROM unnest($2::text[], $3::smallint[]) AS e (m, i)",
            &[&c.thread, &memories, &importance, &now],
        )
        .await?;
        let mut models = Vec::new();
        for m in &c.models {
            // A turn changed the model since the dream read it: its version stands.
            if save_model_if(tx, &m.user_id, m.version, &m.model, &m.note, now).await? {
                models.push(m.user_id.clone());
            }
        }
        // What was said among the pruned is no longer counted (the thread's row is held).
        let pruned: i64 = tx
            .row(
                "WITH gone AS (DELETE FROM working_memory
                                WHERE thread = $1 AND id BETWEEN $2 AND $3
                                RETURNING id, entry_type),
                      counted AS (UPDATE threads SET said = said - (
                                      SELECT count(*) FROM gone WHERE id > $4
                                         AND entry_type IN ('userMessage', 'externalDialog'))
                                   WHERE thread = $1)
                 SELECT count(*) FROM gone",
                &[&c.thread, &c.first_id, &through, &c.since_id],
            )
            .await?
            .get(0);
        let pruned = pruned as u64;
        Ok(Consolidated {
            pruned,
            models,
            written: true,
        })
    }
}

/// The advisory lock of the soul's one dream at a time ("oned" in ASCII; a single key, so
/// apart from the consolidations' two-key locks).
const ONE_DREAM: i64 = 0x6f6e_6564;

#[async_trait]
impl Dreams for Postgres {
    async fn hold_dream(&self) -> Result<Option<DreamHold>> {
        // A session's advisory lock on a connection of its own, taken out of the pool: the
        // server lets it go when the connection closes (the hold dropped, or its process gone
        // however it went).
        let client = self.client().await?;
        let held: bool = client
            .row("SELECT pg_try_advisory_lock($1)", &[&ONE_DREAM])
            .await?
            .get(0);
        Ok(held.then(|| {
            DreamHold::checked(deadpool_postgres::Object::take(client), |c| !c.is_closed())
        }))
    }

    async fn begin_dream(&self, cause: &str) -> Result<i64> {
        let result = async {
            let client = self.client().await?;
            let row = client
                .row(
                    "INSERT INTO dreams (started_at, cause) VALUES (anima_at($1), $2) RETURNING id",
                    &[&now_ms(), &cause],
                )
                .await?;
            Ok(row.get(0))
        }
        .await;
        self.noted(result)
    }

    async fn finish_dream(&self, id: i64, complete: bool, report: &Value) -> Result<()> {
        let result = async {
            let client = self.client().await?;
            client
                .run(
                    "UPDATE dreams SET finished_at = anima_at($2), complete = $3, report = $4
                     WHERE id = $1",
                    &[&id, &now_ms(), &complete, report],
                )
                .await?;
            Ok(())
        }
        .await;
        self.noted(result)
    }

    async fn last_dream(&self) -> Result<Option<DreamRow>> {
        let client = self.client().await?;
        Ok(client
            .maybe_row(
                "SELECT id, anima_ms(started_at), anima_ms(finished_at), complete, cause, report
                 FROM dreams ORDER BY id DESC LIMIT 1",
                &[],
            )
            .await?
            .map(|r| DreamRow {
                id: r.get(0),
                started_ms: r.get(1),
                finished_ms: r.get(2),
                complete: r.get(3),
                cause: r.get(4),
                report: r.get(5),
            }))
    }

    /// Threads whose current conversation has a backlog, the least recently active first.
    async fn dream_threads(&self, keep: Keep) -> Result<Vec<String>> {
        let mut client = self.client().await?;
        let tx = snapshot(&mut client).await?;
        let rows = tx
            .rows(
                "SELECT w.thread, coalesce(t.since_id, 0) FROM working_memory w
                 LEFT JOIN threads t ON t.thread = w.thread
                 WHERE w.id > coalesce(t.since_id, 0)
                 GROUP BY w.thread, t.since_id HAVING count(*) > $1 ORDER BY max(w.id)",
                &[&i64::from(keep.entries.max(1))],
            )
            .await?;
        let mut threads = Vec::with_capacity(rows.len());
        // Those whose entries beyond the count are all of the last hour have no backlog.
        for r in rows {
            let (thread, since): (String, i64) = (r.get(0), r.get(1));
            if oldest_kept(&tx, &thread, since, keep).await?.is_some() {
                threads.push(thread);
            }
        }
        tx.commit().await?;
        Ok(threads)
    }

    async fn backlog(
        &self,
        thread: &str,
        keep: Keep,
        max_entries: usize,
        max_chars: usize,
    ) -> Result<Option<Backlog>> {
        let mut client = self.client().await?;
        let tx = snapshot(&mut client).await?;
        let since = since_id(&tx, thread).await?;
        let Some(oldest) = oldest_kept(&tx, thread, since, keep).await? else {
            return Ok(None);
        };
        let mut entries = tx
            .rows(
                &format!(
                    "SELECT {ENTRY} FROM working_memory
                     WHERE thread = $1 AND id > $2 AND id < $3 ORDER BY id"
                ),
                &[&thread, &since, &oldest],
            )
            .await?
            .iter()
            .map(entry)
            .collect::<Result<Vec<_>>>()?;
        let total = entries.len();
        let take = batch_len(&entries, max_entries, max_chars);
        entries.truncate(take);
        let mut ids: Vec<&str> = Vec::new();
        for e in &entries {
            if let Some(uid) = e.user_id.as_deref().filter(|u| !ids.contains(u)) {
                ids.push(uid);
            }
        }
        let found = tx
            .rows(
                "SELECT user_id, display_name, model, model_version FROM users
                 WHERE user_id = ANY($1)",
                &[&ids],
            )
            .await?;
        // In the order they first wrote in the batch.
        let people = ids
            .iter()
            .filter_map(|id| found.iter().find(|r| r.get::<_, &str>(0) == *id))
            .map(|r| Person {
                user_id: r.get(0),
                display_name: r.get(1),
                model: r.get(2),
                model_version: r.get(3),
            })
            .collect();
        let summary = summary(&tx, thread, since).await?;
        tx.commit().await?;
        Ok(Some(Backlog {
            thread: thread.to_string(),
            since_id: since,
            summary,
            left: (total - take) as u64,
            entries,
            people,
        }))
    }

    async fn consolidate(&self, c: Consolidation, keep: Keep) -> Result<Consolidated> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let done = Postgres::consolidate_in(&tx, &c, keep).await?;
            if done.written {
                tx.commit().await?;
            } else {
                tx.rollback().await?;
            }
            Ok(done)
        }
        .await;
        self.noted(result)
    }

    async fn thread_summary(&self, thread: &str) -> Result<Option<String>> {
        let client = self.client().await?;
        Ok(client
            .maybe_row(
                "SELECT s.summary FROM thread_summaries s
                 WHERE s.thread = $1 AND s.since_id =
                     coalesce((SELECT since_id FROM threads WHERE thread = $1), 0)",
                &[&thread],
            )
            .await?
            .map(|r| r.get(0)))
    }

    async fn episodes(&self, thread: &str) -> Result<Vec<Episode>> {
        let client = self.client().await?;
        Ok(client
            .rows(
                "SELECT thread, memory, importance, anima_ms(created_at) FROM episodic_memories
                 WHERE thread = $1 ORDER BY importance DESC, id",
                &[&thread],
            )
            .await?
            .iter()
            .map(|r| Episode {
                thread: r.get(0),
                memory: r.get(1),
                importance: r.get::<_, i16>(2).clamp(1, 10) as u8,
                at_ms: r.get(3),
            })
            .collect())
    }

    /// What a dream's upkeep means on PostgreSQL: the keys of psyche events applied before
    /// `SEEN_KEEP_MS` are forgotten (as on SQLite; boosts of salience never wait
    /// and there is no full-text index to merge here); then, outside any transaction (VACUUM
    /// cannot run in one), `VACUUM` of the tables a dream deletes from and `ANALYZE`.
    /// `auto_vacuum` reports the server's autovacuum (`autovacuum` or `none`); PostgreSQL has
    /// no free-page list, so both page counts are 0.
    async fn upkeep(&self) -> Result<Upkeep> {
        let result = async {
            let client = self.client().await?;
            let forgotten = client
                .run(
                    "DELETE FROM psyche_seen WHERE at < anima_at($1)",
                    &[&now_ms().saturating_sub(SEEN_KEEP_MS)],
                )
                .await?;
            // Outside any transaction, one statement each (several in one string would run as
            // one transaction, which VACUUM refuses).
            client
                .batch_execute("VACUUM working_memory, psyche_seen, psyche_gate_log")
                .await?;
            client.batch_execute("ANALYZE").await?;
            let autovacuum: String = client
                .row("SELECT current_setting('autovacuum')", &[])
                .await?
                .get(0);
            Ok(Upkeep {
                analyzed: true,
                auto_vacuum: if autovacuum == "on" {
                    "autovacuum"
                } else {
                    "none"
                }
                .into(),
                vacuumed: true,
                free_pages_before: 0,
                free_pages_after: 0,
                forgotten_event_keys: forgotten as i64,
            })
        }
        .await;
        self.noted(result)
    }
}
