//! Durable memory: the store's faces (one async trait per concern, `faces`), the two stores
//! behind them, SQLite (`sqlite`) and PostgreSQL (`postgres`), holding working memory, soul
//! state, users and their models, counters, whispers, usage, the cognitive state and its
//! moves, the journal, what dreams consolidated and the psychology substrate, and the git
//! repository that versions user models.
//!
//! Owns the schema and every SQL statement. The rest of anima holds an `Arc<dyn Store>` and
//! calls its faces, which `sqlite` and `postgres` implement directly. `SqliteStore` is
//! SQLite's connection and its write transaction, used only inside memory: `sqlite` runs each
//! face's operation on it off the runtime, over the SQL of each concern's module here (free
//! functions taking a `Connection`). Knows nothing about prompts, providers or Slack.
//!
//! Every write goes through `SqliteStore::write`: a transaction that takes SQLite's write lock when
//! it begins (IMMEDIATE, so a second process waits for the lock instead of failing on an
//! upgrade), and whose outcome is remembered for the health check.

pub mod inbox;
pub mod budgets;
pub mod records;
pub mod faces;
pub mod home_lock;
pub mod open;
pub mod postgres;
pub mod sqlite;
mod checkpoint;
pub mod trace_file;
pub mod dream;
pub mod feedback;
pub mod forget;
mod migrate;
pub mod psyche;
pub mod process_state;
pub mod model_repo;
pub mod snapshot;
pub mod soul_state;
pub mod states;
mod turn;
pub mod users;
pub mod working;

mod health;

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OpenFlags, TransactionBehavior};

pub use faces::{move_state, Quiet, Store};
pub use feedback::{Judged, Verdict};
pub use forget::{Forgotten, Pruned};
pub use health::WriteHealth;
pub use records::{
    DaemonRow, PsycheSample, TraceRow, TraceSummary, TracedBody, TracedConversation,
};

pub use inbox::{Inbound, InboxItem, InboxStatus, Intake, Overheard};
pub use migrate::SCHEMA_VERSION;
pub use snapshot::{ConversationState, Snapshot};
pub use soul_state::SoulState;
pub use states::{CognitiveRow, JournalEntry, NewMove, StateMove};
pub use turn::{TurnContext, TurnRecord, TurnStart, UsageRecord, Whisper};
pub use users::{slug, UserRecord};
pub use working::{Entry, EntryType, NewEntry};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("cannot create the data folder {path}: {source}")]
    CreateDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot open the database {path}: {source}")]
    Open {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error(
        "the database {path} has schema version {found}, newer than this anima understands ({supported}); upgrade anima or point [paths] home elsewhere"
    )]
    TooNew {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error(
        "the database {path} has schema version {found}, older than this anima's ({supported}); run `anima chat` or `anima run` once to upgrade it"
    )]
    Outdated {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    #[error("database error: {0}")]
    Sql(rusqlite::Error),
    /// A file beside the database (a lock) could not be used.
    #[error("{path}: {source}")]
    File {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{place}: {why}")]
    Connect { place: String, why: String },
    /// Another daemon runs on this SQLite home (`home_lock`).
    #[error("{}", home_lock::in_use(database, *pid))]
    HomeInUse { database: PathBuf, pid: Option<u32> },
    /// The server could not be reached (it may come back: a daemon waits for it).
    #[error("{place}: cannot reach the server: {why}")]
    Unreachable { place: String, why: String },
    #[error(
        "{place} has schema version {found}, newer than this anima understands ({supported}); upgrade anima or point ANIMA_DATABASE_URL elsewhere"
    )]
    TooNewDatabase {
        place: String,
        found: i64,
        supported: i64,
    },
    #[error("{place}: migration {version} failed: {why}")]
    Migration {
        place: String,
        version: i64,
        why: String,
    },
    #[error("{place} is not empty ({what}): copy into a new, empty database")]
    NotEmpty { place: String, what: String },
    /// The server's message, SQLSTATE, detail and hint (`postgres::describe`): tokio-postgres's
    /// own text is only the error's kind.
    #[error("PostgreSQL: {}", postgres::describe(.0))]
    Postgres(#[from] tokio_postgres::Error),
    /// A stored value this anima does not know (a row a newer anima wrote, or a damaged one).
    #[error("{table}.{column} holds {value:?}, which this anima does not know")]
    Unknown {
        table: &'static str,
        column: &'static str,
        value: String,
    },
    #[error("a store task stopped: {0}")]
    Task(String),
    /// Another daemon holds the conversation now (this one's claim lapsed or was taken): what
    /// was to be written for it is not, and this daemon leaves it.
    #[error("conversation {conversation} is another daemon's now")]
    Fenced { conversation: String },
}

/// A SQLite error; a stored value a row reader could not read (`records`' `FromStr`, carried
/// through rusqlite as a conversion failure) is that value's own error.
impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> StoreError {
        match e {
            rusqlite::Error::FromSqlConversionFailure(_, _, inner) if inner.is::<StoreError>() => {
                *inner.downcast::<StoreError>().expect("checked")
            }
            other => StoreError::Sql(other),
        }
    }
}

/// The blocking SQLite store. One connection behind a mutex: SQLite serialises writers anyway, and a
/// turn's work is well under a millisecond.
pub struct SqliteStore {
    conn: Mutex<Connection>,
    path: PathBuf,
    health: WriteHealth,
    /// Write transactions begun on this store (for tests and benchmarks of what a turn costs).
    writes: std::sync::atomic::AtomicU64,
    /// Held for its Drop, which stops the thread.
    _checkpointer: Option<checkpoint::Checkpointer>,
    /// The traces, in a file and on a connection of their own (`trace_file`).
    traces: trace_file::TraceFile,
    /// Names this opening of the store (one per process in practice): an inbox row's attempt
    /// begun under another name was interrupted when that process stopped (`inbox`).
    instance: String,
    /// The budgets and refusals of outside services (`faces::Budgets`): one process uses the
    /// file, so they are kept in its memory.
    budgets: Mutex<budgets::Local>,
}

/// A name no other opening of a store has had: the process id, the time, and a count within
/// the process.
/// A database that SQLite could not use as it opened it. SQLite says only "unable to open
/// database file" when it cannot write beside the database (a read-only disk): then the
/// file and the system's reason are the error.
fn open_failure(path: &Path, source: rusqlite::Error) -> StoreError {
    match std::fs::OpenOptions::new().append(true).open(path) {
        Err(io) => StoreError::File {
            path: path.to_path_buf(),
            source: io,
        },
        Ok(_) => StoreError::Open {
            path: path.to_path_buf(),
            source,
        },
    }
}

fn instance_name() -> String {
    static OPENED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = OPENED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{}:{}:{n}", std::process::id(), now_us())
}

impl SqliteStore {
    /// Opens (creating if needed) and migrates the database at `path`.
    pub fn open(path: &Path) -> Result<SqliteStore, StoreError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::CreateDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let conn = Connection::open(path).map_err(|source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        Self::ready(conn, path).map_err(|e| match e {
            StoreError::Sql(source) => open_failure(path, source),
            other => other,
        })
    }

    /// Configures and migrates a freshly opened database, and proves it takes writes.
    fn ready(mut conn: Connection, path: &Path) -> Result<SqliteStore, StoreError> {
        configure(&mut conn)?;
        // Refused as it is (newer), or unwritable, the database is named before its traces'
        // file is opened beside it.
        migrate::refuse_newer(&conn, path)?;
        conn.execute_batch("BEGIN IMMEDIATE; ROLLBACK;")?;
        let traces = trace_file::TraceFile::open(path)?;
        // Traces kept in the database before their file moved there before the schema's
        // step that drops their table.
        let moved = traces.adopt(&conn)?;
        if moved > 0 {
            tracing::info!(traces = moved, "traces moved to their own file");
        }
        migrate::migrate(&mut conn, path)?;
        // Checkpoints (the WAL copied back into the database, with an fsync) run on their
        // own thread and connection, not inside a turn's commit.
        let checkpointer = checkpoint::Checkpointer::start(path);
        if checkpointer.is_some() {
            conn.pragma_update(None, "wal_autocheckpoint", 0)?;
        }
        let mut store = SqliteStore::from_connection(conn, path, traces);
        store._checkpointer = checkpointer;
        // A database SQLite opened read-only (its file is not writable) fails here, at start,
        // not at the first message.
        store.write(probe)?;
        Ok(store)
    }

    fn from_connection(
        conn: Connection,
        path: &Path,
        traces: trace_file::TraceFile,
    ) -> SqliteStore {
        // Room for every statement the store prepares (rusqlite keeps 16 by default): past
        // that, statements are prepared again on every use, and those touching the psyche's
        // full-text index and triggers are costly to prepare.
        conn.set_prepared_statement_cache_capacity(128);
        SqliteStore {
            conn: Mutex::new(conn),
            path: path.to_path_buf(),
            health: WriteHealth::default(),
            writes: Default::default(),
            _checkpointer: None,
            traces,
            instance: instance_name(),
            budgets: Mutex::default(),
        }
    }

    /// Runs blocking store work off the async runtime: the one place where SQLite calls leave
    /// it (`sqlite::Sqlite::call`). `store.call(move |db| db.write(|tx| …)).await`.
    pub async fn call<T: Send + 'static>(
        self: &std::sync::Arc<Self>,
        f: impl FnOnce(&SqliteStore) -> Result<T, StoreError> + Send + 'static,
    ) -> Result<T, StoreError> {
        let store = self.clone();
        tokio::task::spawn_blocking(move || f(&store))
            .await
            .map_err(|e| StoreError::Task(e.to_string()))?
    }

    /// Runs `f` in one write transaction (IMMEDIATE: the write lock is taken when it begins,
    /// waiting up to the busy timeout for another process to let go of it) and commits; an
    /// error or a panic in `f`, or a commit that fails, rolls it back. The outcome is
    /// remembered: a store that cannot write shows in `write_health`.
    pub fn write<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let conn = self.conn();
        self.writes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // BEGIN and COMMIT as cached statements: rusqlite's `Transaction` parses both anew
        // each time, a tenth of a small transaction's cost (benches/psyche.rs).
        let result = (|| {
            // Left open only when even its ROLLBACK failed (below): ended before this begins.
            if !conn.is_autocommit() {
                conn.execute_batch("ROLLBACK")?;
            }
            conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
            let open = RollbackUnlessDone(&conn);
            let value = f(&conn)?;
            conn.prepare_cached("COMMIT")?.execute([])?;
            drop(open);
            Ok(value)
        })();
        drop(conn);
        self.health.note(&result, &self.path.display());
        result
    }

    /// The traces' file (`trace_file`).
    pub fn traces(&self) -> &trace_file::TraceFile {
        &self.traces
    }

    /// Runs `f` in one write transaction on the traces' file (counted with the store's).
    pub fn write_traces<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.writes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.traces.write(f)
    }

    /// Write transactions begun on this store so far.
    pub fn write_transactions(&self) -> u64 {
        self.writes.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Whether the last write succeeded, and when the last good one was.
    pub fn write_health(&self) -> &WriteHealth {
        &self.health
    }

    /// Opens an existing database read-only and reports its schema version (for `anima check`).
    pub fn inspect(path: &Path) -> Result<i64, StoreError> {
        let conn = Connection::open_with_flags(path, OpenFlags::SQLITE_OPEN_READ_ONLY).map_err(
            |source| StoreError::Open {
                path: path.to_path_buf(),
                source,
            },
        )?;
        let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if version > SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: path.to_path_buf(),
                found: version,
                supported: SCHEMA_VERSION,
            });
        }
        let ok: String = conn.query_row("PRAGMA quick_check", [], |r| r.get(0))?;
        if ok != "ok" {
            return Err(StoreError::Sql(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_CORRUPT),
                Some(ok),
            )));
        }
        Ok(version)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// This process's budgets and refusals (`faces::Budgets`).
    pub(crate) fn budgets(&self) -> MutexGuard<'_, budgets::Local> {
        self.budgets.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite half-written (transactions roll
        // back on drop), so a poisoned lock is safe to reuse.
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Writes one row in `tx`: proves that the store takes writes right now (at open, and
/// `faces::Health::probe`).
fn probe(tx: &Connection) -> Result<(), StoreError> {
    tx.prepare_cached("INSERT OR REPLACE INTO store_probe (id, at) VALUES (1, ?1)")?
        .execute([now_ms()])?;
    Ok(())
}

/// Column `i` of a SQLite row, read as a stored enum (`records`): a value this anima does not
/// know is `StoreError::Unknown`, carried through rusqlite (see `From<rusqlite::Error>`).
pub(crate) fn stored_column<T: std::str::FromStr<Err = StoreError>>(
    r: &rusqlite::Row,
    i: usize,
) -> rusqlite::Result<T> {
    let text = r.get_ref(i)?.as_str()?;
    text.parse().map_err(|e: StoreError| {
        rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// Rolls back the transaction `SqliteStore::write` began when it is dropped still open: `f` failed
/// or panicked, or COMMIT failed and left it open.
struct RollbackUnlessDone<'a>(&'a Connection);

impl Drop for RollbackUnlessDone<'_> {
    fn drop(&mut self) {
        if !self.0.is_autocommit() {
            // If even this fails, the next write rolls back first; the error that led here is
            // what the caller sees.
            let _ = self.0.execute_batch("ROLLBACK");
        }
    }
}

/// How long a write waits for another process (or the checkpointer) to release the lock.
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

fn configure(conn: &mut Connection) -> Result<(), rusqlite::Error> {
    conn.busy_timeout(BUSY_TIMEOUT)?;
    // A dream gives freed pages back with `PRAGMA incremental_vacuum`, which needs this mode.
    // It takes effect only on a database that has no table yet (a new home); an older one
    // stays as it was, and a dream's report says its vacuum was skipped.
    conn.pragma_update(None, "auto_vacuum", "INCREMENTAL")?;
    // Every transaction takes the write lock when it begins: a deferred one that reads and
    // then writes fails at once (SQLITE_BUSY) when another process wrote in between, and no
    // busy timeout can help it.
    conn.set_transaction_behavior(TransactionBehavior::Immediate);
    enter_wal(conn)?;
    // WAL + NORMAL: a commit survives a crash of anima; only a power loss can drop the
    // last commits. One fsync per checkpoint instead of per turn.
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    // Plans never depend on bound values. Otherwise SQLite plans some statements (a bound
    // LIMIT, an `x = ?` filter no index serves) with the value bound at the time and marks them
    // to be prepared again when it changes, and rusqlite clears the bindings of each statement
    // it puts back in its cache: such a statement was compiled anew on every use, which cost
    // the psyche's event and packet more than running them.
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    // After a checkpoint, a WAL larger than this is truncated back to it.
    conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)?;
    Ok(())
}

/// Switches the database to WAL. On a fresh home this takes an exclusive lock without asking
/// the busy handler, so a second process opening the same fresh home at that moment gets
/// SQLITE_BUSY at once; it waits and tries again, within the busy timeout, like any other write.
fn enter_wal(conn: &Connection) -> Result<(), rusqlite::Error> {
    let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
    loop {
        match conn.pragma_update(None, "journal_mode", "WAL") {
            Err(rusqlite::Error::SqliteFailure(e, _))
                if e.code == rusqlite::ErrorCode::DatabaseBusy
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            other => return other,
        }
    }
}

/// How far the soul's clock is ahead of this machine's, in microseconds: 0 unless the store
/// is shared (PostgreSQL), where every process keeps the database server's time
/// (`set_clock_offset`), so that a time one daemon writes and another compares (a quiet
/// spell, a whisper's claim, a tick) means the same however far apart their machines' clocks
/// are.
static CLOCK_OFFSET_US: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

/// This machine's Unix time in microseconds.
pub(crate) fn machine_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// How far the soul's clock runs ahead of this machine's, in microseconds.
pub(crate) fn clock_offset_us() -> i64 {
    CLOCK_OFFSET_US.load(std::sync::atomic::Ordering::Relaxed)
}

/// Sets the soul's clock to run `offset_us` ahead of this machine's.
pub(crate) fn set_clock_offset(offset_us: i64) {
    CLOCK_OFFSET_US.store(offset_us, std::sync::atomic::Ordering::Relaxed);
}

/// Unix time in microseconds, on the soul's clock.
pub fn now_us() -> i64 {
    machine_us() + clock_offset_us()
}

/// Unix time in milliseconds, on the soul's clock.
pub fn now_ms() -> i64 {
    now_us().div_euclid(1000)
}

#[cfg(test)]
mod tests {
    use rusqlite::{params, StatementStatus};

    #[test]
    fn a_cached_statement_is_not_compiled_again_for_new_values() {
        let dir = tempfile::tempdir().unwrap();
        let store = super::SqliteStore::open(&dir.path().join("anima.db")).unwrap();
        let conn = store.conn();
        // A filter no index serves and a bound LIMIT: both used to be planned with the value.
        let sql = "SELECT count(*) FROM (SELECT 1 FROM counters WHERE +name = ?1 LIMIT ?2)";
        for i in 0..3 {
            conn.prepare_cached(sql)
                .unwrap()
                .query_row(params![format!("n{i}"), i + 1], |r| r.get::<_, i64>(0))
                .unwrap();
        }
        let stmt = conn.prepare_cached(sql).unwrap();
        assert_eq!(stmt.get_status(StatementStatus::RePrepare), 0);
    }

    #[test]
    fn a_write_that_fails_or_panics_leaves_nothing_and_the_next_one_commits() {
        let dir = tempfile::tempdir().unwrap();
        let store = super::SqliteStore::open(&dir.path().join("anima.db")).unwrap();
        let add = |tx: &rusqlite::Connection, name: &str| {
            tx.execute(
                "INSERT INTO counters (name, value) VALUES (?1, 1)",
                params![name],
            )
        };
        let has = |name: &str| -> bool {
            store
                .conn()
                .query_row(
                    "SELECT count(*) FROM counters WHERE name = ?1",
                    params![name],
                    |r| r.get::<_, i64>(0),
                )
                .unwrap()
                == 1
        };
        let failed = store.write(|tx| {
            add(tx, "failed")?;
            Err::<(), _>(super::StoreError::Task("no".into()))
        });
        assert!(failed.is_err());
        assert!(!has("failed"));
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            store.write(|tx| -> Result<(), super::StoreError> {
                add(tx, "panicked")?;
                panic!("mid-transaction")
            })
        }));
        assert!(panicked.is_err());
        assert!(!has("panicked"));
        // A COMMIT that fails (a deferred foreign key left broken) rolls back too.
        let broken = store.write(|tx| {
            tx.execute_batch("PRAGMA defer_foreign_keys = ON")?;
            add(tx, "broken")?;
            tx.execute(
                "INSERT INTO psyche_memory_people (person, memory) VALUES ('U1', 999999)",
                [],
            )?;
            Ok(())
        });
        assert!(broken.is_err(), "{broken:?}");
        assert!(!has("broken"));
        store.write(|tx| Ok(add(tx, "kept")?)).unwrap();
        assert!(has("kept"));
        assert!(store.conn().is_autocommit());
        // A transaction left open on the connection (its rollback failed) is ended before the
        // next write begins, not committed with it.
        store
            .conn()
            .execute_batch("BEGIN; INSERT INTO counters (name, value) VALUES ('stray', 1);")
            .unwrap();
        store.write(|tx| Ok(add(tx, "after")?)).unwrap();
        assert!(has("after"));
        assert!(!has("stray"));
    }
}
