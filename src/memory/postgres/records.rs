//! What turns leave, read and written on their own, on PostgreSQL: users and their model
//! versions, the soul's state and counters, whispers, each thread's process.

use async_trait::async_trait;

use super::turns::{get_user, soul_state, thread_process, user, USER};
use super::{Postgres, Prepared};
use crate::memory::faces::{Processes, SoulRecord, Users, Whispers};
use crate::memory::process_state::TransitionRow;
use crate::memory::{now_ms, SoulState, StoreError, UserRecord};
use crate::process::{ThreadProcess, TransitionRecord};

type Result<T> = std::result::Result<T, StoreError>;

#[async_trait]
impl Users for Postgres {
    async fn user(&self, user_id: &str) -> Result<Option<UserRecord>> {
        get_user(&self.client().await?, user_id).await
    }

    async fn users(&self) -> Result<Vec<UserRecord>> {
        let client = self.client().await?;
        Ok(client
            .rows(&format!("SELECT {USER} FROM users ORDER BY slug"), &[])
            .await?
            .iter()
            .map(user)
            .collect())
    }

    async fn unexported_models(&self) -> Result<Vec<UserRecord>> {
        let client = self.client().await?;
        Ok(client
            .rows(
                &format!(
                    "SELECT {USER} FROM users WHERE model_version > exported_version ORDER BY user_id"
                ),
                &[],
            )
            .await?
            .iter()
            .map(user)
            .collect())
    }

    async fn mark_exported(&self, user_id: &str, version: i64) -> Result<()> {
        let result = async {
            let client = self.client().await?;
            client
                .run(
                    "UPDATE users SET exported_version = greatest(exported_version, $2)
                     WHERE user_id = $1",
                    &[&user_id, &version],
                )
                .await?;
            Ok(())
        }
        .await;
        self.noted(result)
    }

    async fn pending_model_versions(&self, user_id: &str) -> Result<Vec<(i64, String, String)>> {
        let client = self.client().await?;
        Ok(client
            .rows(
                "SELECT h.version, h.model, h.change_note
                 FROM user_model_history h JOIN users u USING (user_id)
                 WHERE h.user_id = $1 AND h.version > u.exported_version ORDER BY h.version",
                &[&user_id],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect())
    }

    async fn model_history(&self, user_id: &str) -> Result<Vec<(i64, String, i64)>> {
        let client = self.client().await?;
        Ok(client
            .rows(
                "SELECT version, change_note, anima_ms(created_at) FROM user_model_history
                 WHERE user_id = $1 ORDER BY version",
                &[&user_id],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect())
    }

    async fn model_version(&self, user_id: &str, version: i64) -> Result<Option<String>> {
        let client = self.client().await?;
        Ok(client
            .maybe_row(
                "SELECT model FROM user_model_history WHERE user_id = $1 AND version = $2",
                &[&user_id, &version],
            )
            .await?
            .map(|r| r.get(0)))
    }
}

#[async_trait]
impl SoulRecord for Postgres {
    async fn soul_state(&self) -> Result<SoulState> {
        soul_state(&self.client().await?).await
    }

    async fn interactions(&self) -> Result<u64> {
        let client = self.client().await?;
        let n: i64 = client
            .row(
                "SELECT value FROM counters WHERE name = 'interactions'",
                &[],
            )
            .await?
            .get(0);
        Ok(n as u64)
    }
}

#[async_trait]
impl Whispers for Postgres {
    async fn add_whisper(&self, whisper: &str, source: &str) -> Result<i64> {
        let result = async {
            let client = self.client().await?;
            Ok(client
                .row(
                    "INSERT INTO whispers (whisper, source, created_at) VALUES ($1, $2, anima_at($3))
                     RETURNING id",
                    &[&whisper, &source, &now_ms()],
                )
                .await?
                .get(0))
        }
        .await;
        self.noted(result)
    }
}

#[async_trait]
impl Processes for Postgres {
    async fn thread_process(&self, thread: &str) -> Result<Option<ThreadProcess>> {
        thread_process(&self.client().await?, thread).await
    }

    async fn standing(&self, threads: &[String]) -> Result<Vec<(String, String)>> {
        let client = self.client().await?;
        Ok(client
            .rows(
                "SELECT thread, current FROM thread_process WHERE thread = ANY($1)",
                &[&threads],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
    }

    async fn transitions(&self, thread: &str) -> Result<Vec<TransitionRow>> {
        let client = self.client().await?;
        Ok(client
            .rows(
                "SELECT interaction, from_process, to_process, rule, execute_now, params,
                        anima_ms(at), action
                 FROM process_transitions WHERE thread = $1 ORDER BY id",
                &[&thread],
            )
            .await?
            .iter()
            .map(|r| TransitionRow {
                interaction: r.get(0),
                record: TransitionRecord {
                    from: r.get(1),
                    to: r.get(2),
                    rule: r.get::<_, Option<i32>>(3).map(|v| v as usize),
                    execute_now: r.get(4),
                    params: serde_json::from_value(r.get(5)).unwrap_or_default(),
                    action: r.get(7),
                },
                at: r.get(6),
            })
            .collect())
    }

    async fn quiet_threads(&self, quiet_since: i64) -> Result<Vec<(String, i64)>> {
        let client = self.client().await?;
        Ok(client
            .rows(
                "SELECT w.thread, anima_ms(w.created_at) FROM working_memory w
                 JOIN (SELECT thread, max(id) AS id FROM working_memory GROUP BY thread) last
                   ON last.id = w.id
                 JOIN threads t ON t.thread = w.thread AND t.turns > 0
                 WHERE w.created_at <= anima_at($1)
                   AND coalesce((w.metadata->>'proactive')::boolean, false) = false",
                &[&quiet_since],
            )
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect())
    }
}
