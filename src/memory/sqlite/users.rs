//! People and their user models on SQLite, the soul's record (its state and its count of
//! turns), and whispers queued for the next turn.

use async_trait::async_trait;

use super::{Result, Sqlite};
use crate::memory::faces::{SoulRecord, Users, Whispers};
use crate::memory::{now_ms, soul_state, users, SoulState, UserRecord};

#[async_trait]
impl Users for Sqlite {
    async fn user(&self, user_id: &str) -> Result<Option<UserRecord>> {
        let user_id = user_id.to_owned();
        self.call(move |db| users::get(&db.conn(), &user_id)).await
    }

    async fn users(&self) -> Result<Vec<UserRecord>> {
        self.call(|db| users::list(&db.conn())).await
    }

    async fn unexported_models(&self) -> Result<Vec<UserRecord>> {
        self.call(|db| users::unexported(&db.conn())).await
    }

    async fn mark_exported(&self, user_id: &str, version: i64) -> Result<()> {
        let user_id = user_id.to_owned();
        self.call(move |db| db.write(|tx| users::mark_exported(tx, &user_id, version)))
            .await
    }

    async fn pending_model_versions(&self, user_id: &str) -> Result<Vec<(i64, String, String)>> {
        let user_id = user_id.to_owned();
        self.call(move |db| users::pending_versions(&db.conn(), &user_id))
            .await
    }

    async fn model_history(&self, user_id: &str) -> Result<Vec<(i64, String, i64)>> {
        let user_id = user_id.to_owned();
        self.call(move |db| users::history(&db.conn(), &user_id))
            .await
    }

    async fn model_version(&self, user_id: &str, version: i64) -> Result<Option<String>> {
        let user_id = user_id.to_owned();
        self.call(move |db| users::version_text(&db.conn(), &user_id, version))
            .await
    }
}

#[async_trait]
impl SoulRecord for Sqlite {
    async fn soul_state(&self) -> Result<SoulState> {
        self.call(|db| soul_state::load(&db.conn())).await
    }

    async fn interactions(&self) -> Result<u64> {
        self.call(|db| {
            let conn = db.conn();
            Ok(conn.query_row(
                "SELECT value FROM counters WHERE name = 'interactions'",
                [],
                |r| r.get::<_, i64>(0),
            )? as u64)
        })
        .await
    }
}

#[async_trait]
impl Whispers for Sqlite {
    async fn add_whisper(&self, whisper: &str, source: &str) -> Result<i64> {
        let (whisper, source) = (whisper.to_owned(), source.to_owned());
        self.call(move |db| {
            db.write(|tx| {
                tx.execute(
                    "INSERT INTO whispers (whisper, source, created_at) VALUES (?1, ?2, ?3)",
                    (&whisper, &source, now_ms()),
                )?;
                Ok(tx.last_insert_rowid())
            })
        })
        .await
    }
}
