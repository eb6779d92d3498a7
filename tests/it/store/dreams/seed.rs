//! Seeds a dream's conversations through the faces that write them (`Turns`, `Users`,
//! `Admin`), the same on every backend; only a trigger that refuses deletions is each
//! backend's own SQL.

use anima::memory::faces::{Admin, Turns, Users};
use anima::memory::postgres::Postgres;
use anima::memory::sqlite::Sqlite;
use anima::memory::{EntryType, NewEntry, TurnRecord};
use async_trait::async_trait;

/// What a dream test writes and reads besides the `Dreams` face.
#[async_trait]
pub trait Seed: Turns + Users + Admin + Send + Sync {
    /// A message of `user` ("Tom" to everyone) in `thread`.
    async fn say(&self, thread: &str, user: &str, text: &str) {
        self.record_user_message(thread, user, "Tom", text, None)
            .await
            .unwrap();
    }
    /// A reply of the soul in `thread`.
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
    /// A turn changed `user`'s model.
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
    /// The thread's working memory: (id, content), oldest first.
    async fn entries(&self, thread: &str) -> Vec<(i64, String)> {
        let all = self.thread_entries(thread).await.unwrap();
        all.into_iter().map(|e| (e.id, e.content)).collect()
    }
    /// `user`'s model history: (version, change note), oldest first.
    async fn history(&self, user: &str) -> Vec<(i64, String)> {
        let all = self.model_history(user).await.unwrap();
        all.into_iter().map(|(v, note, _)| (v, note)).collect()
    }
    /// An operator closes the thread's conversation.
    async fn reset(&self, thread: &str) {
        assert!(self.reset_thread(thread).await.unwrap());
    }
    /// From now on every deletion of working memory fails (a crash at the consolidation's
    /// last step), or, with `false`, works again.
    async fn refuse_deletions(&self, refuse: bool);
}

#[async_trait]
impl Seed for Sqlite {
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
    let url = std::env::var(crate::store::backends::POSTGRES_URL).unwrap();
    let mut config = tokio_postgres::Config::from_str(&url).unwrap();
    // "PostgreSQL user@host:port/db"
    config.dbname(s.place().rsplit_once('/').unwrap().1);
    let (client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client
}

#[async_trait]
impl Seed for Postgres {
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
