//! The cognitive state, its moves and the journal, on PostgreSQL (see `memory::states`). A
//! move locks the state's one row (`FOR UPDATE`) before it is read and decided, so two
//! processes deciding at once decide one after the other, each on the row as the other left it.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use serde_json::Value;

use super::{Postgres, Prepared};
use crate::memory::faces::{Decide, Moved, Quiet, States};
use crate::memory::{now_ms, CognitiveRow, JournalEntry, StateMove, StoreError};

type Result<T> = std::result::Result<T, StoreError>;

pub(super) async fn current(c: &impl GenericClient, lock: bool) -> Result<CognitiveRow> {
    let sql = if lock {
        "SELECT state, anima_ms(since), cause, degraded FROM cognitive_state WHERE id = 1 FOR UPDATE"
    } else {
        "SELECT state, anima_ms(since), cause, degraded FROM cognitive_state WHERE id = 1"
    };
    let r = c.row(sql, &[]).await?;
    Ok(CognitiveRow {
        state: r.get(0),
        since_ms: r.get(1),
        cause: r.get(2),
        degraded: r.get(3),
    })
}

pub(super) async fn moves(c: &impl GenericClient, limit: usize) -> Result<Vec<StateMove>> {
    Ok(c.rows(
        "SELECT from_state, to_state, cause, detail, anima_ms(at) FROM state_moves
         ORDER BY id DESC LIMIT $1",
        &[&(limit as i64)],
    )
    .await?
    .iter()
    .map(|r| StateMove {
        from: r.get(0),
        to: r.get(1),
        cause: r.get(2),
        detail: r.get::<_, Value>(3),
        at_ms: r.get(4),
    })
    .collect())
}

async fn newest_message_id(c: &impl GenericClient) -> Result<Option<i64>> {
    Ok(c.row(
        "SELECT max(id) FROM working_memory WHERE entry_type = 'userMessage'",
        &[],
    )
    .await?
    .get(0))
}

#[async_trait]
impl States for Postgres {
    async fn cognitive_state(&self) -> Result<CognitiveRow> {
        current(&self.client().await?, false).await
    }

    async fn move_state(&self, quiet: Option<Quiet>, decide: Decide) -> Result<Moved> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let row = current(&tx, true).await?;
            if let Some(Quiet(newest)) = quiet {
                // A message recorded before the lock was taken is seen here: its turn read the
                // state before the move, and the move is refused.
                if newest_message_id(&tx).await? != newest {
                    return Ok(Moved::NotQuiet);
                }
            }
            let Some(m) = decide(&row) else {
                return Ok(Moved::Refused);
            };
            let at = now_ms();
            tx.run(
                "UPDATE cognitive_state SET state = $1, since = anima_at($2), cause = $3,
                     degraded = $4 WHERE id = 1",
                &[&m.to, &at, &m.cause, &m.degraded],
            )
            .await?;
            tx.run(
                "INSERT INTO state_moves (from_state, to_state, cause, detail, at)
                 VALUES ($1, $2, $3, $4, anima_at($5))",
                &[&row.state, &m.to, &m.cause, &m.detail, &at],
            )
            .await?;
            tx.commit().await?;
            Ok(Moved::Moved(StateMove {
                from: row.state,
                to: m.to,
                cause: m.cause,
                detail: m.detail,
                at_ms: at,
            }))
        }
        .await;
        self.noted(result)
    }

    async fn newest_message_id(&self) -> Result<Option<i64>> {
        newest_message_id(&self.client().await?).await
    }

    async fn last_message_ms(&self) -> Result<Option<i64>> {
        let client = self.client().await?;
        Ok(client
            .row(
                "SELECT anima_ms(max(created_at)) FROM working_memory
                 WHERE entry_type = 'userMessage'",
                &[],
            )
            .await?
            .get(0))
    }

    async fn state_moves(&self, limit: usize) -> Result<Vec<StateMove>> {
        moves(&self.client().await?, limit).await
    }

    async fn add_journal(&self, entry: &str) -> Result<i64> {
        let result = async {
            let client = self.client().await?;
            Ok(client
                .row(
                    "INSERT INTO journal (entry, at) VALUES ($1, anima_at($2)) RETURNING id",
                    &[&entry, &now_ms()],
                )
                .await?
                .get(0))
        }
        .await;
        self.noted(result)
    }

    async fn journal(&self, limit: usize) -> Result<Vec<JournalEntry>> {
        let client = self.client().await?;
        Ok(client
            .rows(
                "SELECT id, entry, anima_ms(at) FROM journal ORDER BY id DESC LIMIT $1",
                &[&(limit as i64)],
            )
            .await?
            .iter()
            .map(|r| JournalEntry {
                id: r.get(0),
                entry: r.get(1),
                at_ms: r.get(2),
            })
            .collect())
    }

    async fn messages_since(&self, since_ms: i64) -> Result<Vec<(String, String)>> {
        let client = self.client().await?;
        Ok(client
            .rows(
                "SELECT thread, content FROM working_memory
                 WHERE entry_type = 'userMessage' AND created_at >= anima_at($1) ORDER BY id",
                &[&since_ms],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
    }

    async fn answered_yes_since(&self, question: &str, since_ms: i64) -> Result<bool> {
        let client = self.client().await?;
        Ok(client
            .maybe_row(
                "SELECT 1 FROM working_memory w
                 WHERE w.entry_type = 'mentalQuery' AND w.content = $1
                   AND w.created_at >= anima_at($2)
                   AND w.metadata->'result' = 'true'::jsonb
                   AND NOT EXISTS (SELECT 1 FROM working_memory l
                                   WHERE l.thread = w.thread AND l.entry_type = 'mentalQuery'
                                     AND l.content = $1 AND l.id > w.id)
                 LIMIT 1",
                &[&question, &since_ms],
            )
            .await?
            .is_some())
    }
}
