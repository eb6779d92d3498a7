//! What operators do and see, feedback on replies, the first times a surface remembers, and
//! the store's health, on PostgreSQL (see `memory::admin`, `feedback`, `openings`,
//! `snapshot`).

use async_trait::async_trait;

use super::{Postgres, Prepared};
use crate::memory::faces::{Admin, Feedback, Health, SamePlace};
use crate::memory::snapshot::{ConversationState, Snapshot};
use crate::memory::{now_ms, Judged, StoreError, Verdict, WriteHealth};

type Result<T> = std::result::Result<T, StoreError>;

/// How many moves the snapshot shows (as on SQLite).
const RECENT_MOVES: usize = 5;

#[async_trait]
impl Admin for Postgres {
    async fn reset_thread(&self, thread: &str) -> Result<bool> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            // The thread's row first, so that the conversation's end is read after every
            // message that counted itself in it has committed.
            tx.run(
                "SELECT 1 FROM threads WHERE thread = $1 FOR UPDATE",
                &[&thread],
            )
            .await?;
            let changed = tx
                .run(
                    "UPDATE threads SET turns = 0, claude_session = NULL, said = 0,
                         since_id = (SELECT coalesce(max(id), 0) FROM working_memory
                                     WHERE thread = $1),
                         updated_at = anima_at($2)
                     WHERE thread = $1",
                    &[&thread, &now_ms()],
                )
                .await?;
            tx.run("DELETE FROM thread_process WHERE thread = $1", &[&thread])
                .await?;
            tx.commit().await?;
            Ok(changed > 0)
        }
        .await;
        self.noted(result)
    }

    async fn log_admin(
        &self,
        origin: &str,
        user_id: &str,
        command: &str,
        allowed: bool,
    ) -> Result<bool> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            tx.run(
                "INSERT INTO admin_log (origin, user_id, command, allowed, at)
                 VALUES ($1, $2, $3, $4, anima_at($5)) ON CONFLICT (origin) DO NOTHING",
                &[&origin, &user_id, &command, &allowed, &now_ms()],
            )
            .await?;
            let done: bool = tx
                .row(
                    "SELECT done FROM admin_log WHERE origin = $1 FOR UPDATE",
                    &[&origin],
                )
                .await?
                .get(0);
            tx.commit().await?;
            Ok(!done)
        }
        .await;
        self.noted(result)
    }

    async fn admin_done(&self, origin: &str) -> Result<()> {
        let result = async {
            let client = self.client().await?;
            client
                .run(
                    "UPDATE admin_log SET done = true WHERE origin = $1",
                    &[&origin],
                )
                .await?;
            Ok(())
        }
        .await;
        self.noted(result)
    }

    async fn snapshot(&self) -> Result<Snapshot> {
        let mut client = self.client().await?;
        let tx = super::snapshot(&mut client).await?;
        let count = |sql: &'static str| {
            let tx = &tx;
            async move { Ok::<_, StoreError>(tx.row(sql, &[]).await?.get::<_, i64>(0) as u64) }
        };
        let interactions = count("SELECT value FROM counters WHERE name = 'interactions'").await?;
        let inbox_depth =
            count("SELECT count(*) FROM inbox WHERE status IN ('pending', 'replying')").await?;
        let inbox_failed = count("SELECT count(*) FROM inbox WHERE status = 'failed'").await?;
        let whispers_pending =
            count("SELECT count(*) FROM whispers WHERE consumed_at IS NULL").await?;
        let journal_entries = count("SELECT count(*) FROM journal").await?;
        let last_turn_ms: Option<i64> = tx
            .row(
                "SELECT anima_ms(max(updated_at)) FROM threads WHERE turns > 0",
                &[],
            )
            .await?
            .get(0);
        let conversations = tx
            .rows(
                "SELECT t.thread, p.current, t.turns, anima_ms(t.updated_at),
                        (SELECT count(*) FROM inbox i WHERE i.conversation = t.thread
                         AND i.status IN ('pending', 'replying'))
                 FROM threads t LEFT JOIN thread_process p ON p.thread = t.thread
                 ORDER BY t.updated_at DESC",
                &[],
            )
            .await?
            .iter()
            .map(|r| ConversationState {
                thread: r.get(0),
                process: r.get(1),
                turns: r.get(2),
                updated_ms: r.get(3),
                open: r.get::<_, i64>(4) as u64,
            })
            .collect();
        let mut soul = crate::memory::SoulState::default();
        for r in tx.rows("SELECT key, value FROM soul_memory", &[]).await? {
            soul.set(r.get(0), r.get(1));
        }
        let soul_state = soul
            .all()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let cognitive = super::states::current(&tx, false).await?;
        let recent_moves = super::states::moves(&tx, RECENT_MOVES).await?;
        let last_dream = tx
            .maybe_row(
                "SELECT id, anima_ms(started_at), anima_ms(finished_at), complete, cause, report
                 FROM dreams ORDER BY id DESC LIMIT 1",
                &[],
            )
            .await?
            .map(|r| {
                serde_json::to_value(crate::memory::dream::DreamRow {
                    id: r.get(0),
                    started_ms: r.get(1),
                    finished_ms: r.get(2),
                    complete: r.get(3),
                    cause: r.get(4),
                    report: r.get(5),
                })
                .unwrap_or_default()
            });
        tx.commit().await?;
        Ok(Snapshot {
            soul_state,
            interactions,
            conversations,
            inbox_depth,
            inbox_failed,
            whispers_pending,
            last_turn_ms,
            cognitive,
            recent_moves,
            journal_entries,
            last_dream,
        })
    }
}

#[async_trait]
impl Feedback for Postgres {
    async fn record_feedback(
        &self,
        reference: &str,
        same_place: SamePlace,
        person: &str,
        verdict: Verdict,
    ) -> Result<Judged> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let rows = tx
                .rows(
                    "SELECT id, address FROM inbox WHERE reply_ref = $1
                     UNION SELECT id, address FROM inbox WHERE stream_ref = $1
                     ORDER BY id",
                    &[&reference],
                )
                .await?;
            let Some(inbox) = rows
                .iter()
                .find(|r| same_place(r.get(1)))
                .map(|r| r.get::<_, i64>(0))
            else {
                return Ok(Judged::UnknownReply);
            };
            let before: Option<String> = tx
                .maybe_row(
                    "SELECT value FROM feedback WHERE inbox_id = $1 AND person = $2 FOR UPDATE",
                    &[&inbox, &person],
                )
                .await?
                .map(|r| r.get(0));
            tx.run(
                "INSERT INTO feedback (inbox_id, person, value, at) VALUES ($1, $2, $3, anima_at($4))
                 ON CONFLICT (inbox_id, person) DO UPDATE SET value = excluded.value, at = excluded.at",
                &[&inbox, &person, &verdict.as_str(), &now_ms()],
            )
            .await?;
            tx.commit().await?;
            Ok(Judged::Stored {
                inbox,
                changed: before.as_deref() != Some(verdict.as_str()),
            })
        }
        .await;
        self.noted(result)
    }

    async fn feedback_on(&self, reference: &str) -> Result<Vec<(String, Verdict)>> {
        let client = self.client().await?;
        client
            .rows(
                "SELECT f.person, f.value FROM feedback f JOIN inbox i ON i.id = f.inbox_id
                 WHERE i.reply_ref = $1 OR i.stream_ref = $1 ORDER BY f.person",
                &[&reference],
            )
            .await?
            .iter()
            .map(|r| Ok((r.get(0), r.get::<_, &str>(1).parse::<Verdict>()?)))
            .collect()
    }

    async fn first_time(&self, kind: &str, place: &str) -> Result<bool> {
        let result = async {
            let client = self.client().await?;
            Ok(client
                .run(
                    "INSERT INTO openings (kind, place, at) VALUES ($1, $2, anima_at($3))
                     ON CONFLICT (kind, place) DO NOTHING",
                    &[&kind, &place, &now_ms()],
                )
                .await?
                == 1)
        }
        .await;
        self.noted(result)
    }
}

#[async_trait]
impl Health for Postgres {
    async fn probe(&self) -> Result<()> {
        let result = async {
            let client = self.client().await?;
            client
                .run(
                    "INSERT INTO store_probe (id, at) VALUES (1, now())
                     ON CONFLICT (id) DO UPDATE SET at = excluded.at",
                    &[],
                )
                .await?;
            Ok(())
        }
        .await;
        self.noted(result)
    }

    fn write_health(&self) -> &WriteHealth {
        self.health()
    }

    fn write_transactions(&self) -> u64 {
        self.writes()
    }

    fn describe(&self) -> String {
        self.place().to_string()
    }
}
