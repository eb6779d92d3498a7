//! The SQLite backend behind the store's faces: the `Sqlite` handle, which runs each
//! operation off the async runtime (`Sqlite::call`). Each concern implements its face
//! directly, one file per concern (`inbox`, `turns`, `users`, `states`, `dreams`, `admin`,
//! `feedback`, `processes`), its body run on the blocking store inside `call`: one IMMEDIATE
//! transaction, cached statements, the page economics. What still runs the blocking store's
//! own methods (`off!`, below: the psychology; in `turns`, a turn's begin, commit and load)
//! does so because the benchmarks and memory's tests call those blocking.

mod admin;
mod dreams;
mod feedback;
mod inbox;
mod processes;
mod states;
mod traces;
mod turns;
mod users;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::faces;
use super::psyche::{LoggedDecision, Mind, Place};
use super::{DaemonRow, SqliteStore, StoreError, WriteHealth};
use crate::psyche::gate::{Decision, GateRules};
use crate::psyche::mapping::{IntentionUpdate, StanceShift};
use crate::psyche::packet::Packet;
use crate::psyche::update::Effects;
use crate::psyche::{Event, Psyche};

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

    /// The blocking store, for tests and benchmarks that measure SQLite itself.
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

/// Runs `body` with the blocking store `s` off the runtime, after moving owned copies of the
/// named arguments into it.
macro_rules! off {
    ($self:ident, [$($own:ident = $val:expr),*], |$s:ident| $body:expr) => {{
        $(let $own = $val;)*
        $self.0.call(move |$s| $body).await
    }};
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
impl faces::Psychology for Sqlite {
    async fn psyche_event(
        &self,
        soul: &str,
        psyche: &Psyche,
        rules: &GateRules,
        event: &Event,
        place: &Place,
    ) -> Result<(Effects, Decision)> {
        off!(
            self,
            [
                soul = soul.to_owned(),
                p = psyche.clone(),
                r = rules.clone(),
                e = event.clone(),
                at = place.clone()
            ],
            |s| s.psyche_event(&soul, &p, &r, &e, &at)
        )
    }
    async fn psyche_event_once(
        &self,
        soul: &str,
        psyche: &Psyche,
        rules: &GateRules,
        event: &Event,
        place: &Place,
        key: &str,
    ) -> Result<Option<(Effects, Decision)>> {
        off!(
            self,
            [
                soul = soul.to_owned(),
                p = psyche.clone(),
                r = rules.clone(),
                e = event.clone(),
                at = place.clone(),
                k = key.to_owned()
            ],
            |s| s.psyche_event_once(&soul, &p, &r, &e, &at, &k)
        )
    }
    async fn psyche_packet(
        &self,
        soul: &str,
        psyche: &Psyche,
        people: &[(String, String)],
        query: &str,
        now: i64,
    ) -> Result<Packet> {
        off!(
            self,
            [
                soul = soul.to_owned(),
                p = psyche.clone(),
                who = people.to_vec(),
                q = query.to_owned()
            ],
            |s| s.psyche_packet(&soul, &p, &who, &q, now)
        )
    }
    async fn psyche_post_cognition(
        &self,
        soul: &str,
        psyche: &Psyche,
        shifts: &[StanceShift],
        updates: &[IntentionUpdate],
        now: i64,
    ) -> Result<Vec<String>> {
        off!(
            self,
            [
                soul = soul.to_owned(),
                p = psyche.clone(),
                sh = shifts.to_vec(),
                up = updates.to_vec()
            ],
            |s| s.psyche_post_cognition(&soul, &p, &sh, &up, now)
        )
    }
    async fn psyche_mind(
        &self,
        soul: &str,
        psyche: &Psyche,
        person: Option<&str>,
        now: i64,
    ) -> Result<Mind> {
        off!(
            self,
            [
                soul = soul.to_owned(),
                p = psyche.clone(),
                who = person.map(str::to_owned)
            ],
            |s| s.psyche_mind(&soul, &p, who.as_deref(), now)
        )
    }
    async fn psyche_decisions(&self, soul: &str, limit: usize) -> Result<Vec<LoggedDecision>> {
        off!(self, [soul = soul.to_owned()], |s| s
            .psyche_decisions(&soul, limit))
    }
}

#[async_trait]
impl faces::Health for Sqlite {
    async fn probe(&self) -> Result<()> {
        off!(self, [], |s| s.probe())
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

/// For the blocking store's own tests: its faces, on the store a test holds.
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
