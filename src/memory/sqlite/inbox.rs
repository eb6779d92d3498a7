//! The inbox on SQLite: each operation's contract is `faces::Inbox`'s; what a row is and the
//! rules over it (`Pickup`, `stop_closes`) are `records::inbox`'s. An attempt under way is
//! marked with this store's instance (`in_flight`); json arrays hold a row's part references.

use async_trait::async_trait;
use rusqlite::OptionalExtension;

use super::{Result, Sqlite};
use crate::memory::faces::Inbox;
use crate::memory::inbox::{accept, from_row, COLUMNS, NEXT};
use crate::memory::records::inbox::{stop_closes, Pickup};
use crate::memory::{now_ms, stored_column, Inbound, InboxItem, InboxStatus, Intake, Overheard};

#[async_trait]
impl Inbox for Sqlite {
    /// `accept` in one IMMEDIATE write.
    async fn accept_inbound(&self, m: &Inbound) -> Result<Intake> {
        let m = m.clone();
        self.call(move |db| {
            let m = &m;
            db.write(|tx| accept(tx, m))
        })
        .await
    }

    /// One cached read; a write only when the pick-up counts something (`Pickup`).
    async fn claim_next(&self, conversation: &str) -> Result<Option<InboxItem>> {
        let conversation = conversation.to_owned();
        self.call(move |db| {
            let conversation = conversation.as_str();
            let next = db
                .conn()
                .prepare_cached(&format!(
                    "SELECT {COLUMNS}, (SELECT COUNT(*) FROM inbox o
                     WHERE o.conversation = ?1 AND o.status IN ('pending', 'replying')), in_flight
                 FROM inbox WHERE conversation = ?1 AND status IN ('pending', 'replying')
                 ORDER BY seq, id LIMIT 1"
                ))?
                .query_row([conversation], |r| {
                    let mut item = from_row(r)?;
                    item.others_waiting = r.get::<_, i64>(NEXT)? > 1;
                    Ok((item, r.get::<_, Option<String>>(NEXT + 1)?))
                })
                .optional()?;
            let Some((mut item, in_flight)) = next else {
                return Ok(None);
            };
            let pickup = Pickup::of(&item, in_flight.as_deref(), &db.instance);
            if pickup.reads_only() {
                return Ok(Some(item));
            }
            let id = item.id;
            let (attempts, interruptions) = db.write(|tx| {
                let interrupted = tx
                    .prepare_cached(
                        "UPDATE inbox SET interruptions = interruptions + 1, in_flight = NULL
                     WHERE id = ?1 AND in_flight IS NOT NULL AND in_flight != ?2
                     RETURNING interruptions",
                    )?
                    .query_row((id, &db.instance), |r| r.get::<_, i64>(0))
                    .optional()?;
                let counts = (item.attempts, interrupted.unwrap_or(item.interruptions));
                if !pickup.attempt_begins(&item, counts.1) {
                    return Ok(counts);
                }
                let attempts = tx
                    .prepare_cached(
                        "UPDATE inbox SET attempts = attempts + 1, in_flight = ?2 WHERE id = ?1
                     RETURNING attempts",
                    )?
                    .query_row((id, &db.instance), |r| r.get(0))?;
                Ok((attempts, counts.1))
            })?;
            item.attempts = attempts;
            item.interruptions = interruptions;
            Ok(Some(item))
        })
        .await
    }

    /// Counts only an attempt marked with this instance.
    async fn note_failure(&self, id: i64) -> Result<i64> {
        self.call(move |db| {
            db.write(|tx| {
                tx.prepare_cached(
                    "UPDATE inbox SET failures = failures + 1, in_flight = NULL
                 WHERE id = ?1 AND in_flight = ?2",
                )?
                .execute((id, &db.instance))?;
                Ok(tx
                    .prepare_cached("SELECT failures FROM inbox WHERE id = ?1")?
                    .query_row([id], |r| r.get(0))
                    .optional()?
                    .unwrap_or(0))
            })
        })
        .await
    }

    async fn open_conversations(&self) -> Result<Vec<String>> {
        self.call(move |db| {
            let conn = db.conn();
            let mut stmt = conn.prepare(
                "SELECT DISTINCT conversation FROM inbox WHERE status IN ('pending', 'replying')",
            )?;
            let rows = stmt.query_map([], |r| r.get(0))?;
            Ok(rows.collect::<std::result::Result<_, _>>()?)
        })
        .await
    }

    async fn inbox_depth(&self) -> Result<u64> {
        self.call(move |db| {
            Ok(db.conn().query_row(
                "SELECT count(*) FROM inbox WHERE status IN ('pending', 'replying')",
                [],
                |r| r.get::<_, i64>(0),
            )? as u64)
        })
        .await
    }

    async fn inbox_item(&self, id: i64) -> Result<Option<InboxItem>> {
        self.call(move |db| {
            Ok(db
                .conn()
                .prepare_cached(&format!("SELECT {COLUMNS} FROM inbox WHERE id = ?1"))?
                .query_row([id], from_row)
                .optional()?)
        })
        .await
    }

    async fn set_inbox_reply(&self, id: i64, reply: &str) -> Result<()> {
        let reply = reply.to_owned();
        self.call(move |db| {
            let reply = reply.as_str();
            db.write(|tx| {
                tx.execute(
                    "UPDATE inbox SET status = 'replying', reply = ?2 WHERE id = ?1 AND status = 'pending'",
                    (id, reply),
                )?;
                Ok(())
            })
        })
        .await
    }

    /// `part_refs` is a json array; `max` and `coalesce` keep it monotonic.
    async fn mark_part_posted(
        &self,
        id: i64,
        parts_posted: i64,
        reference: &str,
        last: bool,
    ) -> Result<()> {
        let reference = reference.to_owned();
        self.call(move |db| {
            let reference = reference.as_str();
            db.write(|tx| {
                tx.prepare_cached(
                    "UPDATE inbox SET parts_posted = max(parts_posted, ?2),
                     reply_ref = coalesce(reply_ref, ?3),
                     part_refs = CASE WHEN EXISTS (SELECT 1 FROM json_each(part_refs)
                                                   WHERE value = ?3) THEN part_refs
                                      ELSE json_insert(part_refs, '$[#]', ?3) END,
                     status = CASE WHEN ?4 THEN 'done' ELSE status END,
                     done_at = CASE WHEN ?4 THEN coalesce(done_at, ?5) ELSE done_at END
                 WHERE id = ?1",
                )?
                .execute((id, parts_posted, reference, last, now_ms()))?;
                tx.prepare_cached(
                    "INSERT INTO conversations (key, spoken) SELECT conversation, 1 FROM inbox WHERE id = ?1
                 ON CONFLICT (key) DO UPDATE SET spoken = 1",
                )?
                .execute([id])?;
                Ok(())
            })
        })
        .await
    }

    /// One read over the conversation's `reply_ref`, `stream_ref` and `part_refs`.
    async fn references_held(&self, id: i64) -> Result<Vec<String>> {
        self.call(move |db| {
            let conn = db.conn();
            let mut stmt = conn.prepare_cached(
                "WITH others AS (
                 SELECT reply_ref, stream_ref, part_refs FROM inbox
                 WHERE conversation = (SELECT conversation FROM inbox WHERE id = ?1))
             SELECT reply_ref FROM others WHERE reply_ref IS NOT NULL
             UNION SELECT stream_ref FROM others WHERE stream_ref IS NOT NULL
             UNION SELECT p.value FROM others, json_each(others.part_refs) AS p",
            )?;
            let rows = stmt.query_map([id], |r| r.get(0))?;
            Ok(rows.collect::<std::result::Result<_, _>>()?)
        })
        .await
    }

    async fn set_stream_ref(&self, id: i64, reference: &str) -> Result<()> {
        let reference = reference.to_owned();
        self.call(move |db| {
            let reference = reference.as_str();
            db.write(|tx| {
                tx.prepare_cached("UPDATE inbox SET stream_ref = ?2 WHERE id = ?1")?
                    .execute((id, reference))?;
                tx.prepare_cached(
                    "INSERT INTO conversations (key, spoken) SELECT conversation, 1 FROM inbox WHERE id = ?1
                 ON CONFLICT (key) DO UPDATE SET spoken = 1",
                )?
                .execute([id])?;
                Ok(())
            })
        })
        .await
    }

    /// Reads the row and asks `stop_closes` inside the write.
    async fn mark_stopped(&self, id: i64, said: &str) -> Result<bool> {
        let said = said.to_owned();
        self.call(move |db| {
            let said = said.as_str();
            db.write(|tx| {
                let open = tx
                    .prepare_cached("SELECT status, reply, parts_posted FROM inbox WHERE id = ?1")?
                    .query_row([id], |r| {
                        let reply = r.get_ref(1)?.as_str_or_null()?;
                        Ok(stop_closes(stored_column(r, 0)?, reply, r.get(2)?, said))
                    })
                    .optional()?
                    .unwrap_or(false);
                if open {
                    tx.execute(
                        "UPDATE inbox SET status = 'stopped', reply = ?2, done_at = ?3 WHERE id = ?1",
                        (id, said, now_ms()),
                    )?;
                }
                Ok(open)
            })
        })
        .await
    }

    /// `accept`, then the row closed as overheard, in one write.
    async fn record_overheard(&self, m: &Inbound, place: &str) -> Result<Intake> {
        let m = m.clone();
        let place = place.to_owned();
        self.call(move |db| {
            let m = &m;
            let place = place.as_str();
            db.write(|tx| {
                let intake = accept(tx, m)?;
                if let Intake::Accepted(id) = intake {
                    tx.prepare_cached(
                        "UPDATE inbox SET status = 'overheard', heard_in = ?2, done_at = ?3 WHERE id = ?1",
                    )?
                    .execute((id, place, now_ms()))?;
                }
                Ok(intake)
            })
        })
        .await
    }

    async fn reopen_overheard(&self, id: i64) -> Result<bool> {
        self.call(move |db| {
            db.write(|tx| {
                let n = tx
                    .prepare_cached(
                        "UPDATE inbox SET status = 'pending', done_at = NULL WHERE id = ?1 AND status = 'overheard'",
                    )?
                    .execute([id])?;
                Ok(n == 1)
            })
        })
        .await
    }

    /// Reads the newest row with `heard_in`, and filters it here.
    async fn last_overheard(&self, since_us: i64) -> Result<Option<Overheard>> {
        self.call(move |db| {
            let last = db
                .conn()
                .prepare_cached(&format!(
                    "SELECT {COLUMNS}, heard_in FROM inbox WHERE heard_in IS NOT NULL ORDER BY id DESC LIMIT 1"
                ))?
                .query_row([], |r| Ok((from_row(r)?, r.get::<_, String>(NEXT)?)))
                .optional()?;
            Ok(last
                .filter(|(item, _)| {
                    item.status == InboxStatus::Overheard && item.received_us >= since_us
                })
                .map(|(item, place)| Overheard { item, place }))
        })
        .await
    }

    async fn mark_done(&self, id: i64) -> Result<()> {
        self.call(move |db| {
            db.write(|tx| {
                tx.execute(
                    "UPDATE inbox SET status = 'done', done_at = ?2 WHERE id = ?1",
                    (id, now_ms()),
                )?;
                Ok(())
            })
        })
        .await
    }

    async fn mark_failed(&self, id: i64, failure: &str, apology: Option<&str>) -> Result<()> {
        let failure = failure.to_owned();
        let apology = apology.map(str::to_owned);
        self.call(move |db| {
            let failure = failure.as_str();
            let apology = apology.as_deref();
            db.write(|tx| {
                tx.execute(
                    "UPDATE inbox SET status = 'failed', failure = ?2, done_at = ?3,
                     part_refs = CASE WHEN ?4 IS NULL THEN part_refs
                                      ELSE json_insert(part_refs, '$[#]', ?4) END
                 WHERE id = ?1 AND status IN ('pending', 'replying')",
                    (id, failure, now_ms(), apology),
                )?;
                Ok(())
            })
        })
        .await
    }

    async fn conversation_address(
        &self,
        conversation: &str,
    ) -> Result<Option<(String, Option<String>)>> {
        let conversation = conversation.to_owned();
        self.call(move |db| {
            let conversation = conversation.as_str();
            Ok(db
                .conn()
                .prepare_cached(
                    "SELECT address, note FROM inbox WHERE conversation = ?1 ORDER BY id DESC LIMIT 1",
                )?
                .query_row([conversation], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?)
        })
        .await
    }

    async fn note_conversation(&self, key: &str, note: &str) -> Result<()> {
        let key = key.to_owned();
        let note = note.to_owned();
        self.call(move |db| {
            let key = key.as_str();
            let note = note.as_str();
            db.write(|tx| {
                tx.execute(
                    "INSERT INTO conversations (key, spoken, note) VALUES (?1, 1, ?2)
                 ON CONFLICT (key) DO UPDATE SET spoken = 1, note = excluded.note",
                    (key, note),
                )?;
                Ok(())
            })
        })
        .await
    }

    /// The surface's note on a conversation, if it made one.
    async fn conversation_note(&self, key: &str) -> Result<Option<String>> {
        let key = key.to_owned();
        self.call(move |db| {
            let key = key.as_str();
            Ok(db
                .conn()
                .prepare_cached("SELECT note FROM conversations WHERE key = ?1")?
                .query_row([key], |r| r.get::<_, Option<String>>(0))
                .optional()?
                .flatten())
        })
        .await
    }
}
