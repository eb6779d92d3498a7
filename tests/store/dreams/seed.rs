//! Seeds a dream's conversations: through the faces that write them on SQLite (`Turns`,
//! `Users`, `Admin`), with plain SQL on PostgreSQL (the rows `Turns` writes) until those faces
//! are ported there.

use anima::memory::faces::{Admin, Turns, Users};
use anima::memory::postgres::Postgres;
use anima::memory::sqlite::Sqlite;
use anima::memory::{EntryType, NewEntry, TurnRecord};
use async_trait::async_trait;

/// What a dream test writes and reads besides the `Dreams` face.
#[async_trait]
pub trait Seed {
    /// A message of `user` ("Tom" to everyone) in `thread`.
    async fn say(&self, thread: &str, user: &str, text: &str);
    /// A reply of the soul in `thread`.
    async fn reply(&self, thread: &str, text: &str);
    /// A turn changed `user`'s model.
    async fn set_model(&self, user: &str, model: &str, note: &str);
    /// The thread's working memory: (id, content), oldest first.
    async fn entries(&self, thread: &str) -> Vec<(i64, String)>;
    /// `user`'s model history: (version, change note), oldest first.
    async fn history(&self, user: &str) -> Vec<(i64, String)>;
    /// An operator closes the thread's conversation.
    async fn reset(&self, thread: &str);
    /// From now on every deletion of working memory fails (a crash at the consolidation's
    /// last step), or, with `false`, works again.
    async fn refuse_deletions(&self, refuse: bool);
}

#[async_trait]
impl Seed for Sqlite {
    async fn say(&self, thread: &str, user: &str, text: &str) {
        self.record_user_message(thread, user, "Tom", text, None)
            .await
            .unwrap();
    }
    async fn reply(&self, thread: &str, text: &str) {
        self.commit_turn(TurnRecord {
            thread: thread.into(),
            user_id: "U1".into(),
            entries: vec![NewEntry::new(EntryType::ExternalDialog, text)],
            proactive: true,
            ..Default::default()
        })
        .await
        .unwrap();
    }
    async fn set_model(&self, user: &str, model: &str, note: &str) {
        self.commit_turn(TurnRecord {
            thread: "elsewhere".into(),
            user_id: user.into(),
            user_model: Some((model.into(), note.into())),
            proactive: true,
            ..Default::default()
        })
        .await
        .unwrap();
    }
    async fn entries(&self, thread: &str) -> Vec<(i64, String)> {
        let all = self.thread_entries(thread).await.unwrap();
        all.into_iter().map(|e| (e.id, e.content)).collect()
    }
    async fn history(&self, user: &str) -> Vec<(i64, String)> {
        let all = self.model_history(user).await.unwrap();
        all.into_iter().map(|(v, note, _)| (v, note)).collect()
    }
    async fn reset(&self, thread: &str) {
        assert!(self.reset_thread(thread).await.unwrap());
    }
    async fn refuse_deletions(&self, refuse: bool) {
        let conn = rusqlite::Connection::open(self.blocking().path()).unwrap();
        conn.execute_batch(if refuse {
            "CREATE TRIGGER refuse BEFORE DELETE ON working_memory
             BEGIN SELECT RAISE(ABORT, 'deletions refused'); END"
        } else {
            "DROP TRIGGER refuse"
        })
        .unwrap();
    }
}

/// A plain client on the test's own database (the store's pool is not the test's to use).
async fn sql(s: &Postgres) -> tokio_postgres::Client {
    use std::str::FromStr;
    let url = std::env::var(crate::backends::POSTGRES_URL).unwrap();
    let mut config = tokio_postgres::Config::from_str(&url).unwrap();
    // "PostgreSQL user@host:port/db"
    config.dbname(s.place().rsplit_once('/').unwrap().1);
    let (client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

#[async_trait]
impl Seed for Postgres {
    async fn say(&self, thread: &str, user: &str, text: &str) {
        let c = sql(self).await;
        c.execute(
            "INSERT INTO users (user_id, display_name, slug, updated_at)
             VALUES ($1, 'Tom', 'tom', now()) ON CONFLICT (user_id) DO NOTHING",
            &[&user],
        )
        .await
        .unwrap();
        c.execute(
            "INSERT INTO working_memory (thread, entry_type, content, user_id, metadata, created_at)
             VALUES ($1, 'userMessage', $2, $3, '{\"name\": \"Tom\"}', now())",
            &[&thread, &text, &user],
        )
        .await
        .unwrap();
    }
    async fn reply(&self, thread: &str, text: &str) {
        let c = sql(self).await;
        c.execute(
            "INSERT INTO working_memory (thread, entry_type, content, created_at)
             VALUES ($1, 'externalDialog', $2, now())",
            &[&thread, &text],
        )
        .await
        .unwrap();
        c.execute(
            "INSERT INTO threads (thread, updated_at) VALUES ($1, now())
             ON CONFLICT (thread) DO UPDATE SET updated_at = excluded.updated_at",
            &[&thread],
        )
        .await
        .unwrap();
    }
    async fn set_model(&self, user: &str, model: &str, note: &str) {
        let c = sql(self).await;
        c.execute(
            "UPDATE users SET model = $2, model_version = model_version + 1 WHERE user_id = $1",
            &[&user, &model],
        )
        .await
        .unwrap();
        c.execute(
            "INSERT INTO user_model_history (user_id, version, model, change_note, created_at)
             SELECT user_id, model_version, model, $2, now() FROM users WHERE user_id = $1",
            &[&user, &note],
        )
        .await
        .unwrap();
    }
    async fn entries(&self, thread: &str) -> Vec<(i64, String)> {
        let rows = sql(self)
            .await
            .query(
                "SELECT id, content FROM working_memory WHERE thread = $1 ORDER BY id",
                &[&thread],
            )
            .await
            .unwrap();
        rows.iter().map(|r| (r.get(0), r.get(1))).collect()
    }
    async fn history(&self, user: &str) -> Vec<(i64, String)> {
        let rows = sql(self)
            .await
            .query(
                "SELECT version, change_note FROM user_model_history WHERE user_id = $1
                 ORDER BY version",
                &[&user],
            )
            .await
            .unwrap();
        rows.iter().map(|r| (r.get(0), r.get(1))).collect()
    }
    async fn reset(&self, thread: &str) {
        let changed = sql(self)
            .await
            .execute(
                "UPDATE threads SET turns = 0, claude_session = NULL,
                     since_id = (SELECT coalesce(max(id), 0) FROM working_memory WHERE thread = $1)
                 WHERE thread = $1",
                &[&thread],
            )
            .await
            .unwrap();
        assert_eq!(changed, 1);
    }
    async fn refuse_deletions(&self, refuse: bool) {
        sql(self)
            .await
            .batch_execute(if refuse {
                "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS
                     $$ BEGIN RAISE EXCEPTION 'deletions refused'; END $$;
                 CREATE TRIGGER refuse BEFORE DELETE ON working_memory
                     FOR EACH ROW EXECUTE FUNCTION refuse()"
            } else {
                "DROP TRIGGER refuse ON working_memory; DROP FUNCTION refuse()"
            })
            .await
            .unwrap();
    }
}

/// The harness holds each store in an `Arc` (tests share it across tasks).
#[async_trait]
impl<T: Seed + Send + Sync> Seed for std::sync::Arc<T> {
    async fn say(&self, thread: &str, user: &str, text: &str) {
        (**self).say(thread, user, text).await
    }
    async fn reply(&self, thread: &str, text: &str) {
        (**self).reply(thread, text).await
    }
    async fn set_model(&self, user: &str, model: &str, note: &str) {
        (**self).set_model(user, model, note).await
    }
    async fn entries(&self, thread: &str) -> Vec<(i64, String)> {
        (**self).entries(thread).await
    }
    async fn history(&self, user: &str) -> Vec<(i64, String)> {
        (**self).history(user).await
    }
    async fn reset(&self, thread: &str) {
        (**self).reset(thread).await
    }
    async fn refuse_deletions(&self, refuse: bool) {
        (**self).refuse_deletions(refuse).await
    }
}
