//! The inbox on PostgreSQL (`faces::Inbox` says what each operation promises). A
//! message's retries and twins meet at the unique origin (`ON CONFLICT DO NOTHING`); a row's
//! counters move under its row lock, so two processes never count one attempt twice.

use async_trait::async_trait;
use tokio_postgres::Row;

use super::{fenced, Postgres, Prepared};
use crate::memory::faces::Inbox;
use crate::memory::records::inbox::{stop_closes, Pickup};
use crate::memory::{now_ms, now_us, StoreError};
use crate::memory::{Inbound, InboxItem, InboxStatus, Intake, Overheard};

type Result<T> = std::result::Result<T, StoreError>;

const COLUMNS: &str = "id, origin, conversation, address, note, user_id, text, status, reply,
    parts_posted, reply_ref, anima_us(received_at), attempts, seq, stream_ref,
    failures, interruptions";
/// The column after `COLUMNS`.
const NEXT: usize = 17;

fn item(r: &Row) -> Result<InboxItem> {
    Ok(InboxItem {
        id: r.get(0),
        origin: r.get(1),
        conversation: r.get(2),
        address: r.get(3),
        note: r.get(4),
        user_id: r.get(5),
        text: r.get(6),
        status: r.get::<_, &str>(7).parse()?,
        reply: r.get(8),
        parts_posted: r.get(9),
        reply_ref: r.get(10),
        received_us: r.get(11),
        attempts: r.get(12),
        seq: r.get(13),
        others_waiting: false,
        stream_ref: r.get(14),
        failures: r.get(15),
        interruptions: r.get(16),
    })
}

/// Marks a row's conversation as one the soul has spoken in.
/// How a fenced write names its conversation when the server does not say.
fn row_of(id: i64) -> String {
    format!("of inbox row {id}")
}

impl Postgres {
    /// Records `m` once (its retries and twins meet at the unique origin), as overheard in
    /// `overheard` if given. One statement, so one transaction with no wait between its parts:
    /// a daemon stalled mid-accept holds no lock another daemon's accept of the same message
    /// would wait on.
    async fn accept(&self, m: &Inbound, overheard: Option<&str>) -> Result<Intake> {
        let client = self.client().await?;
        let row = client
            .row(
                "WITH known AS (SELECT spoken, note FROM conversations WHERE key = $2),
                      added AS (
                        INSERT INTO inbox (origin, conversation, seq, address, note, user_id,
                                           text, received_at, status, heard_in, done_at)
                        SELECT $1, $2, $3, $4, (SELECT note FROM known), $5, $6, anima_at_us($7),
                               CASE WHEN $9::text IS NULL THEN 'pending' ELSE 'overheard' END,
                               $9::text,
                               CASE WHEN $9::text IS NULL THEN NULL ELSE anima_at($10) END
                         WHERE NOT $8 OR coalesce((SELECT spoken FROM known), false)
                        ON CONFLICT (origin) DO NOTHING
                        RETURNING id)
                 SELECT (SELECT id FROM added), coalesce((SELECT spoken FROM known), false)",
                &[
                    &m.origin,
                    &m.conversation,
                    &m.seq,
                    &m.address,
                    &m.user_id,
                    &m.text,
                    &now_us(),
                    &m.requires_spoken,
                    &overheard,
                    &now_ms(),
                ],
            )
            .await?;
        let (id, spoken): (Option<i64>, bool) = (row.get(0), row.get(1));
        Ok(match id {
            Some(id) => Intake::Accepted(id),
            None if m.requires_spoken && !spoken => Intake::NotParticipating,
            None => Intake::Duplicate,
        })
    }

    /// A write to inbox row `id` (one call of a function of migrations/postgres/0005), fenced:
    /// `StoreError::Fenced` while another daemon holds the row's conversation.
    async fn fenced_row(
        &self,
        id: i64,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<()> {
        let result = async {
            let client = self.client().await?;
            client
                .run(sql, params)
                .await
                .map_err(|e| fenced(e, &row_of(id)))?;
            Ok(())
        }
        .await;
        self.noted(result)
    }

    /// One statement that writes, in its own transaction.
    async fn exec(
        &self,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<u64> {
        let result = async {
            let client = self.client().await?;
            Ok(client.run(sql, params).await?)
        }
        .await;
        self.noted(result)
    }
}

#[async_trait]
impl Inbox for Postgres {
    async fn accept_inbound(&self, m: &Inbound) -> Result<Intake> {
        let result = self.accept(m, None).await;
        self.noted(result)
    }

    async fn claim_next(&self, conversation: &str) -> Result<Option<InboxItem>> {
        let client = self.client().await?;
        let next = client
            .maybe_row(
                &format!(
                    "SELECT {COLUMNS},
                        (SELECT count(*) FROM inbox o
                         WHERE o.conversation = $1 AND o.status IN ('pending', 'replying')),
                        in_flight
                     FROM inbox WHERE conversation = $1 AND status IN ('pending', 'replying')
                     ORDER BY seq, id LIMIT 1"
                ),
                &[&conversation],
            )
            .await?;
        let Some(row) = next else {
            return Ok(None);
        };
        let mut found = item(&row)?;
        found.others_waiting = row.get::<_, i64>(NEXT) > 1;
        let in_flight: Option<String> = row.get(NEXT + 1);
        let pickup = Pickup::of(&found, in_flight.as_deref(), self.instance());
        if pickup.reads_only() {
            return Ok(Some(found));
        }
        drop(client);
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let interrupted = tx
                .maybe_row(
                    "UPDATE inbox SET interruptions = interruptions + 1, in_flight = NULL
                     WHERE id = $1 AND in_flight IS NOT NULL AND in_flight <> $2
                     RETURNING interruptions",
                    &[&found.id, &self.instance()],
                )
                .await?
                .map(|r| r.get::<_, i64>(0));
            let mut counts = (found.attempts, interrupted.unwrap_or(found.interruptions));
            if pickup.attempt_begins(&found, counts.1) {
                counts.0 = tx
                    .row(
                        "UPDATE inbox SET attempts = attempts + 1, in_flight = $2 WHERE id = $1
                         RETURNING attempts",
                        &[&found.id, &self.instance()],
                    )
                    .await?
                    .get(0);
            }
            tx.commit().await?;
            Ok(counts)
        }
        .await;
        let (attempts, interruptions) = self.noted(result)?;
        found.attempts = attempts;
        found.interruptions = interruptions;
        Ok(Some(found))
    }

    async fn note_failure(&self, id: i64) -> Result<i64> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            tx.run(
                "UPDATE inbox SET failures = failures + 1, in_flight = NULL
                 WHERE id = $1 AND in_flight = $2",
                &[&id, &self.instance()],
            )
            .await?;
            let failures = tx
                .maybe_row("SELECT failures FROM inbox WHERE id = $1", &[&id])
                .await?
                .map_or(0, |r| r.get(0));
            tx.commit().await?;
            Ok(failures)
        }
        .await;
        self.noted(result)
    }

    async fn open_conversations(&self) -> Result<Vec<String>> {
        let client = self.client().await?;
        Ok(client
            .rows(
                "SELECT DISTINCT conversation FROM inbox WHERE status IN ('pending', 'replying')",
                &[],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect())
    }

    async fn inbox_depth(&self) -> Result<u64> {
        let client = self.client().await?;
        let n: i64 = client
            .row(
                "SELECT count(*) FROM inbox WHERE status IN ('pending', 'replying')",
                &[],
            )
            .await?
            .get(0);
        Ok(n as u64)
    }

    async fn inbox_item(&self, id: i64) -> Result<Option<InboxItem>> {
        let client = self.client().await?;
        Ok(client
            .maybe_row(
                &format!("SELECT {COLUMNS} FROM inbox WHERE id = $1"),
                &[&id],
            )
            .await?
            .map(|r| item(&r))
            .transpose()?)
    }

    async fn set_inbox_reply(&self, id: i64, reply: &str) -> Result<()> {
        self.fenced_row(
            id,
            "SELECT anima_set_reply($1, $2, $3)",
            &[&id, &reply, &self.instance()],
        )
        .await
    }

    async fn mark_part_posted(
        &self,
        id: i64,
        parts_posted: i64,
        reference: &str,
        last: bool,
    ) -> Result<()> {
        self.fenced_row(
            id,
            "SELECT anima_part_posted($1, $2, $3, $4, $5, $6)",
            &[
                &id,
                &parts_posted,
                &reference,
                &last,
                &now_ms(),
                &self.instance(),
            ],
        )
        .await
    }

    async fn references_held(&self, id: i64) -> Result<Vec<String>> {
        let client = self.client().await?;
        Ok(client
            .rows(
                "WITH others AS (
                     SELECT reply_ref, stream_ref, part_refs FROM inbox
                     WHERE conversation = (SELECT conversation FROM inbox WHERE id = $1))
                 SELECT reply_ref FROM others WHERE reply_ref IS NOT NULL
                 UNION SELECT stream_ref FROM others WHERE stream_ref IS NOT NULL
                 UNION SELECT p FROM others, jsonb_array_elements_text(others.part_refs) AS p",
                &[&id],
            )
            .await?
            .iter()
            .map(|r| r.get(0))
            .collect())
    }

    async fn set_stream_ref(&self, id: i64, reference: &str) -> Result<()> {
        self.fenced_row(
            id,
            "SELECT anima_stream_ref($1, $2, $3)",
            &[&id, &reference, &self.instance()],
        )
        .await
    }

    async fn mark_stopped(&self, id: i64, said: &str) -> Result<bool> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            tx.run("SELECT anima_fence_row($1, $2)", &[&id, &self.instance()])
                .await
                .map_err(|e| fenced(e, &row_of(id)))?;
            let fixed = tx
                .maybe_row(
                    "SELECT status, reply, parts_posted FROM inbox WHERE id = $1 FOR UPDATE",
                    &[&id],
                )
                .await?;
            let open = match fixed {
                Some(r) => stop_closes(r.get::<_, &str>(0).parse()?, r.get(1), r.get(2), said),
                None => false,
            };
            if open {
                tx.run(
                    "UPDATE inbox SET status = 'stopped', reply = $2, done_at = anima_at($3)
                     WHERE id = $1",
                    &[&id, &said, &now_ms()],
                )
                .await?;
            }
            tx.commit().await?;
            Ok(open)
        }
        .await;
        self.noted(result)
    }

    async fn mark_done(&self, id: i64) -> Result<()> {
        self.fenced_row(
            id,
            "SELECT anima_mark_done($1, $2, $3)",
            &[&id, &now_ms(), &self.instance()],
        )
        .await
    }

    async fn mark_failed(&self, id: i64, failure: &str, apology: Option<&str>) -> Result<()> {
        self.fenced_row(
            id,
            "SELECT anima_mark_failed($1, $2, $3, $4, $5)",
            &[&id, &failure, &now_ms(), &apology, &self.instance()],
        )
        .await
    }

    async fn conversation_address(
        &self,
        conversation: &str,
    ) -> Result<Option<(String, Option<String>)>> {
        let client = self.client().await?;
        Ok(client
            .maybe_row(
                "SELECT address, note FROM inbox WHERE conversation = $1 ORDER BY id DESC LIMIT 1",
                &[&conversation],
            )
            .await?
            .map(|r| (r.get(0), r.get(1))))
    }

    async fn note_conversation(&self, key: &str, note: &str) -> Result<()> {
        self.exec(
            "INSERT INTO conversations (key, spoken, note) VALUES ($1, true, $2)
             ON CONFLICT (key) DO UPDATE SET spoken = true, note = excluded.note",
            &[&key, &note],
        )
        .await?;
        Ok(())
    }

    async fn conversation_note(&self, key: &str) -> Result<Option<String>> {
        let client = self.client().await?;
        Ok(client
            .maybe_row("SELECT note FROM conversations WHERE key = $1", &[&key])
            .await?
            .and_then(|r| r.get(0)))
    }

    async fn record_overheard(&self, m: &Inbound, place: &str) -> Result<Intake> {
        let result = self.accept(m, Some(place)).await;
        self.noted(result)
    }

    async fn reopen_overheard(&self, id: i64) -> Result<bool> {
        let n = self
            .exec(
                "UPDATE inbox SET status = 'pending', done_at = NULL
                 WHERE id = $1 AND status = 'overheard'",
                &[&id],
            )
            .await?;
        Ok(n == 1)
    }

    async fn last_overheard(&self, since_us: i64) -> Result<Option<Overheard>> {
        let client = self.client().await?;
        let last = client
            .maybe_row(
                &format!(
                    "SELECT {COLUMNS}, heard_in FROM inbox WHERE heard_in IS NOT NULL
                     ORDER BY id DESC LIMIT 1"
                ),
                &[],
            )
            .await?;
        let last = match last {
            Some(r) => Some((item(&r)?, r.get::<_, String>(NEXT))),
            None => None,
        };
        Ok(last
            .filter(|(item, _)| {
                item.status == InboxStatus::Overheard && item.received_us >= since_us
            })
            .map(|(item, place)| Overheard { item, place }))
    }
}
