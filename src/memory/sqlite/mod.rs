//! The SQLite backend behind the store's faces: the `Sqlite` handle, which runs each
//! operation off the async runtime (`Sqlite::call`). Each concern implements its face
//! directly, one file per concern (`inbox`, `turns`, `users`, `states`, `dreams`,
//! `psychology`, `admin`, `feedback`, `processes`, `forget`, `traces`; the claims and the
//! health here), its body run on the blocking store inside `call`: one IMMEDIATE transaction
//! (`SqliteStore::write`) or one read, cached statements, the page economics. The SQL a body
//! runs is written in it or in its concern's module of `memory` (free functions taking a
//! `Connection`). Outside memory, only `anima store copy` holds the blocking store
//! (`blocking`, handed to `postgres::copy_from_sqlite`); everything else calls these faces.

mod admin;
mod dossiers;
mod dreams;
mod feedback;
mod forget;
mod inbox;
mod processes;
mod psychology;
mod states;
mod traces;
mod turns;
mod users;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::faces;
use super::{DaemonRow, SqliteStore, StoreError, WriteHealth};

type Result<T> = std::result::Result<T, StoreError>;

/// The embedded store: one SQLite file under the soul's home.
#[derive(Clone)]
pub struct Sqlite(Arc<SqliteStore>);

impl Sqlite {
    /// Opens (creating and migrating if needed) the database at `path`.
    pub fn open(path: &Path) -> Result<Sqlite> {
        Ok(Sqlite(Arc::new(SqliteStore::open(path)?)))
    }

    /// Opens an existing database read-only: no migration, no writes.
    pub fn open_read_only(path: &Path) -> Result<Sqlite> {
        Ok(Sqlite(Arc::new(SqliteStore::open_read_only(path)?)))
    }

    /// Opens an existing database read-only and reports its schema version (for `anima check`).
    pub fn inspect(path: &Path) -> Result<i64> {
        SqliteStore::inspect(path)
    }

    /// The blocking store: for a copy of this store to PostgreSQL (`anima store copy`) and for
    /// tests that read the file itself.
    pub fn blocking(&self) -> &Arc<SqliteStore> {
        &self.0
    }

    /// Runs `f` with the blocking store off the async runtime: the one place where this
    /// backend's SQLite calls leave it.
    async fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&SqliteStore) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        self.0.call(f).await
    }

    /// This store as the rest of anima holds it.
    pub fn shared(self) -> Arc<dyn faces::Store> {
        Arc::new(self)
    }
}

/// One process uses a SQLite file, so every claim is its own, at one epoch, and it is always
/// the only daemon running.
#[async_trait]
impl faces::Claims for Sqlite {
    async fn claim(&self, _conversation: &str, _lease: Duration) -> Result<Option<i64>> {
        Ok(Some(0))
    }
    async fn holds(&self, _conversation: &str, _epoch: i64, _margin: Duration) -> Result<bool> {
        Ok(true)
    }
    async fn release(&self, _conversation: &str, _epoch: i64) -> Result<bool> {
        // No other process accepts rows here: the router hears of every row it does.
        Ok(false)
    }
    async fn heartbeat(&self, _conversations: &[String], _lease: Duration) -> Result<()> {
        Ok(())
    }
    async fn lead(&self, _lease: Duration) -> Result<bool> {
        Ok(true)
    }
    async fn unheld_conversations(&self) -> Result<Vec<String>> {
        // Its one process resumes its open conversations at start and hears of every row.
        Ok(Vec::new())
    }
    async fn bury(&self, _daemon: &str) -> Result<()> {
        Ok(())
    }
    async fn join(&self, _host: &str, _pid: u32, _listen: &str, _lease: Duration) -> Result<u64> {
        Ok(0)
    }
    async fn woke(&self) -> Result<()> {
        Ok(())
    }
    async fn waking(&self) -> Result<bool> {
        // Its one process wakes the soul itself.
        Ok(false)
    }
    async fn leave(&self) -> Result<u64> {
        Ok(0)
    }
    async fn daemons(&self) -> Result<Vec<DaemonRow>> {
        Ok(Vec::new())
    }
}

#[async_trait]
impl faces::Health for Sqlite {
    async fn probe(&self) -> Result<()> {
        self.call(|db| db.write(super::probe)).await
    }
    fn write_health(&self) -> &WriteHealth {
        self.0.write_health()
    }
    fn write_transactions(&self) -> u64 {
        self.0.write_transactions()
    }
    fn describe(&self) -> String {
        format!("SQLite at {}", self.0.path().display())
    }
}

/// For memory's own tests: the faces, on the blocking store a test holds.
#[cfg(test)]
impl Sqlite {
    pub(crate) fn on(store: &Arc<SqliteStore>) -> Sqlite {
        Sqlite(store.clone())
    }
}

/// For a synchronous test: runs a face's call to its end.
#[cfg(test)]
pub(crate) fn run<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a test runtime")
        .block_on(f)
}

/// For a synchronous test: `.block()` runs a face's call to its end.
#[cfg(test)]
pub(crate) trait Block: std::future::Future + Sized {
    fn block(self) -> Self::Output {
        run(self)
    }
}

#[cfg(test)]
impl<F: std::future::Future> Block for F {}
