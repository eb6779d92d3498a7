//! SQLite's traces in a file of their own, beside the database (`anima.db` keeps them in
//! `anima.traces.db`), on a connection of their own: the trace writer's batches take that
//! file's lock, never the one a turn's commit waits for, and the two run on different cores.
//!
//! Owns the file: where it is, its schema (`traces`, `trace_pieces`, versioned by its own
//! `user_version`), its connection and its write transaction, its checkpoints (a thread of
//! their own, as the database's: when the writing pauses for a second, at least every ten
//! seconds under unbroken writing, never inside the writer's commits), and moving the traces a
//! database kept itself before this file (schema versions 20 and 21) into it. What a trace
//! holds and how it is read is `sqlite::traces`'s; `SqliteStore` holds one of these.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use rusqlite::types::Value;
use rusqlite::{Connection, OpenFlags};

use super::StoreError;

/// The tables this file holds (a copy to PostgreSQL reads them here).
pub const TABLES: [&str; 2] = ["traces", "trace_pieces"];

/// The file's schema; its `user_version` is 1. A later change adds a step, never edits this.
const SCHEMA: &str = "
CREATE TABLE traces (
    trace   TEXT PRIMARY KEY,
    kind    TEXT NOT NULL,
    thread  TEXT NOT NULL,
    person  TEXT,
    inbox   INTEGER,
    process TEXT NOT NULL,
    at      INTEGER NOT NULL,
    reply   TEXT,
    body    TEXT NOT NULL,
    -- The keys of the trace's pieces, in order, separated by spaces.
    pieces  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX traces_at ON traces (at, trace);
CREATE INDEX traces_thread ON traces (thread, at);
CREATE INDEX traces_inbox ON traces (inbox) WHERE inbox IS NOT NULL;
CREATE INDEX traces_person ON traces (person) WHERE person IS NOT NULL;

-- Texts traces share (a call's cached prompt prefix: soul.md, the skills, the steps), each
-- kept once under its content's key (records::trace::piece_key).
CREATE TABLE trace_pieces (
    key  TEXT PRIMARY KEY,
    text TEXT NOT NULL
);
";

const VERSION: i64 = 1;

/// Traces moved from the database to this file in one transaction, at most.
const MOVE_CHUNK: i64 = 200;

pub struct TraceFile {
    conn: Mutex<Connection>,
    path: PathBuf,
    /// Copies the WAL back into the file from a thread of its own (as the database's), so
    /// the writer's commits never do; held for its Drop, which stops the thread.
    _checkpointer: Option<super::checkpoint::Checkpointer>,
}

impl TraceFile {
    /// The traces' file of the database at `db`.
    pub fn path_of(db: &Path) -> PathBuf {
        db.with_extension("traces.db")
    }

    /// Opens (creating if needed) the traces' file of the database at `db`.
    pub fn open(db: &Path) -> Result<TraceFile, StoreError> {
        let path = TraceFile::path_of(db);
        let failed = |source| super::open_failure(&path, source);
        let conn = Connection::open(&path).map_err(failed)?;
        conn.busy_timeout(super::BUSY_TIMEOUT).map_err(failed)?;
        super::enter_wal(&conn).map_err(failed)?;
        // As the database, a commit survives a crash of anima. Deleted content is zeroed only
        // where a page is written anyway (FAST): zeroing every pruned trace's pages would double
        // the writer's cost, and what forgetting deletes is scrubbed from the whole file
        // (`scrub`).
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(failed)?;
        conn.pragma_update(None, "secure_delete", "FAST")
            .map_err(failed)?;
        conn.pragma_update(None, "journal_size_limit", 64 * 1024 * 1024)
            .map_err(failed)?;
        let mut file = TraceFile::ready(conn, path.clone());
        file.migrate()?;
        file._checkpointer = super::checkpoint::Checkpointer::start(&path);
        if file._checkpointer.is_some() {
            file.conn()
                .pragma_update(None, "wal_autocheckpoint", 0)
                .map_err(failed)?;
        }
        Ok(file)
    }

    /// Opens the traces' file of `db` read-only; one that is not there reads as empty.
    pub fn open_read_only(db: &Path) -> Result<TraceFile, StoreError> {
        let path = TraceFile::path_of(db);
        let failed = |source| StoreError::Open {
            path: path.clone(),
            source,
        };
        if !path.exists() {
            let conn = Connection::open_in_memory().map_err(failed)?;
            conn.execute_batch(SCHEMA).map_err(failed)?;
            return Ok(TraceFile::ready(conn, path));
        }
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&path, flags).map_err(failed)?;
        conn.busy_timeout(super::BUSY_TIMEOUT).map_err(failed)?;
        Ok(TraceFile::ready(conn, path))
    }

    fn ready(conn: Connection, path: PathBuf) -> TraceFile {
        conn.set_prepared_statement_cache_capacity(32);
        TraceFile {
            conn: Mutex::new(conn),
            path,
            _checkpointer: None,
        }
    }

    /// Creates the schema in a new file; refuses a file from a newer anima. Processes opening
    /// a new home at once create it once: the version is read again under the lock.
    fn migrate(&self) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let version = |c: &Connection| -> Result<i64, StoreError> {
            let found: i64 = c.query_row("PRAGMA user_version", [], |r| r.get(0))?;
            if found > VERSION {
                return Err(StoreError::TooNew {
                    path: self.path.clone(),
                    found,
                    supported: VERSION,
                });
            }
            Ok(found)
        };
        if version(&conn)? == VERSION {
            return Ok(());
        }
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Exclusive)?;
        if version(&tx)? < VERSION {
            tx.execute_batch(SCHEMA)?;
            tx.pragma_update(None, "user_version", VERSION)?;
        }
        tx.commit()?;
        Ok(())
    }

    pub fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite half-written (transactions roll
        // back on drop), so a poisoned lock is safe to reuse.
        self.conn.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` in one write transaction on this file (IMMEDIATE) and commits; an error rolls
    /// it back.
    pub fn write<T>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
        let value = f(&tx)?;
        tx.commit()?;
        Ok(value)
    }

    /// Rewrites the file without its free pages and empties its WAL, so that nothing deleted
    /// (a forgotten person's traces, and any pruned before) is left in either: after
    /// forgetting. The checkpoint is tried again for a while when another one (the file's
    /// checkpoint thread's) is under way; a reader in the way for longer leaves the WAL for
    /// the next checkpoint, and the log says so.
    pub fn scrub(&self) {
        let conn = self.conn();
        if let Err(e) = conn.execute_batch("VACUUM") {
            tracing::warn!(file = %self.path.display(), error = %e, "the traces' file could not be rewritten now");
        }
        let truncate = || {
            conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
                r.get::<_, i64>(0)
            })
        };
        let mut done = truncate();
        for _ in 0..20 {
            if matches!(done, Ok(0)) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
            done = truncate();
        }
        if !matches!(done, Ok(0)) {
            tracing::warn!(file = %self.path.display(), "the traces' file could not be checkpointed now");
        }
    }

    /// Moves the traces `db` kept itself (a database at schema version 20 or 21, before this
    /// file) here, a chunk at a time, each chunk written here before it is deleted there: a
    /// move cut short by a crash goes on at the next opening, and writes nothing twice.
    pub fn adopt(&self, db: &Connection) -> Result<u64, StoreError> {
        let version: i64 = db.query_row("PRAGMA user_version", [], |r| r.get(0))?;
        if !(20..22).contains(&version) {
            return Ok(0);
        }
        let mut moved = 0;
        loop {
            let rows: Vec<(i64, Vec<Value>)> = db
                .prepare(
                    "SELECT rowid, trace, kind, thread, person, inbox, process, at, reply, body
                     FROM traces ORDER BY rowid LIMIT ?1",
                )?
                .query_map([MOVE_CHUNK], |r| {
                    let values = (1..10).map(|i| r.get(i)).collect::<rusqlite::Result<_>>()?;
                    Ok((r.get(0)?, values))
                })?
                .collect::<rusqlite::Result<_>>()?;
            let Some(&(last, _)) = rows.last() else {
                return Ok(moved);
            };
            self.write(|t| {
                let mut insert = t.prepare_cached(
                    "INSERT OR REPLACE INTO traces
                         (trace, kind, thread, person, inbox, process, at, reply, body)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )?;
                for (_, r) in &rows {
                    insert.execute(rusqlite::params_from_iter(r))?;
                }
                Ok(())
            })?;
            db.execute("DELETE FROM traces WHERE rowid <= ?1", [last])?;
            moved += rows.len() as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::SqliteStore;

    #[test]
    fn a_database_that_kept_its_traces_gives_them_to_their_file_when_opened() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("anima.db");
        {
            // A database as schema version 21 left it, its traces in it.
            let conn = Connection::open(&db).unwrap();
            for (i, sql) in crate::memory::migrate::MIGRATIONS[..21].iter().enumerate() {
                conn.execute_batch(sql).unwrap();
                conn.pragma_update(None, "user_version", i as i64 + 1)
                    .unwrap();
            }
            for n in 0..450 {
                conn.execute(
                    "INSERT INTO traces (trace, kind, thread, person, inbox, process, at, reply, body)
                     VALUES (?1, 'message', 'C1:1.0', 'U1', NULL, 'main', ?2, 'ça ✨', '{}')",
                    rusqlite::params![format!("{n:032x}"), n],
                )
                .unwrap();
            }
        }
        let store = SqliteStore::open(&db).unwrap();
        let moved: i64 = store
            .traces()
            .conn()
            .query_row(
                "SELECT count(*) FROM traces WHERE reply = 'ça ✨'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(moved, 450, "every trace, in chunks of {MOVE_CHUNK}");
        let left: i64 = store
            .conn()
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE name = 'traces'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(left, 0, "the database's table is gone");
        assert!(TraceFile::path_of(&db).ends_with("anima.traces.db"));
        drop(store);
        // Opened again: nothing to move, nothing lost.
        let again = SqliteStore::open(&db).unwrap();
        let kept: i64 = again
            .traces()
            .conn()
            .query_row("SELECT count(*) FROM traces", [], |r| r.get(0))
            .unwrap();
        assert_eq!(kept, 450);
    }

    #[test]
    fn a_forgotten_persons_words_leave_the_traces_file_and_its_wal_even_from_pruned_traces() {
        use crate::memory::faces::{Forgetting, Traces};
        use crate::memory::sqlite::{Block, Sqlite};
        use crate::memory::TraceRow;
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("anima.db");
        let store = Sqlite::open(&db).unwrap();
        let words = "Quokka-Zephyr-9173 said their secret";
        let trace = |n: usize, person: &str, pad: usize| TraceRow {
            trace: format!("{n:032x}"),
            kind: "message".into(),
            thread: format!("C{n}:1.0"),
            person: Some(person.to_string()),
            inbox: None,
            process: "main".into(),
            at: n as i64,
            reply: None,
            body: format!(
                "{{\"stimulus\": \"{person}: {words}\", \"raw\": \"{}\"}}",
                "·".repeat(pad)
            ),
            pieces: Vec::new(),
        };
        // The oldest, U1's, long enough to spill onto pages of its own, is pruned first: its
        // pages go free, as the writer leaves them.
        for row in [trace(0, "U1", 6000), trace(1, "U1", 0), trace(2, "U2", 0)] {
            store.record_trace(row).block().unwrap();
        }
        assert_eq!(store.prune_traces(2).block().unwrap(), 1);
        let found = |who: &str| {
            let needle = format!("{who}: {words}");
            ["", "-wal"].iter().any(|end| {
                let file = format!("{}{end}", TraceFile::path_of(&db).display());
                std::fs::read(&file)
                    .unwrap_or_default()
                    .windows(needle.len())
                    .any(|w| w == needle.as_bytes())
            })
        };
        assert!(found("U1") && found("U2"), "written where it can be found");
        let gone = store.forget_person("U1").block().unwrap();
        assert_eq!(gone.traces, 1);
        assert!(
            !found("U1"),
            "the forgotten person's words are in neither file, not even a pruned trace's"
        );
        assert!(found("U2"));
        assert_eq!(store.traces(None, None, 10).block().unwrap().len(), 1);
    }

    #[test]
    fn a_quiet_conversations_forgotten_traces_leave_the_traces_file() {
        use crate::memory::faces::{Forgetting, Traces};
        use crate::memory::sqlite::{Block, Sqlite};
        use crate::memory::TraceRow;
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("anima.db");
        let store = Sqlite::open(&db).unwrap();
        let words = "Wombat-Nebula-4411 told the quiet room";
        // A conversation last spoken in long ago, and its trace, long enough to spill.
        store
            .blocking()
            .write(|c| {
                c.execute(
                    "INSERT INTO working_memory (thread, entry_type, content, created_at)
                     VALUES ('C-quiet', 'userMessage', 'hello', 1000)",
                    [],
                )?;
                Ok(())
            })
            .unwrap();
        let body = format!(
            "{{\"stimulus\": \"{words}\", \"raw\": \"{}\"}}",
            "·".repeat(6000)
        );
        store
            .record_trace(TraceRow {
                trace: "q".repeat(32),
                kind: "message".into(),
                thread: "C-quiet".into(),
                person: Some("U1".into()),
                inbox: None,
                process: "main".into(),
                at: 1000,
                reply: None,
                body,
                pieces: Vec::new(),
            })
            .block()
            .unwrap();
        let found = || {
            ["", "-wal"].iter().any(|end| {
                let file = format!("{}{end}", TraceFile::path_of(&db).display());
                std::fs::read(&file)
                    .unwrap_or_default()
                    .windows(words.len())
                    .any(|w| w == words.as_bytes())
            })
        };
        assert!(found(), "written where it can be found");
        let p = store.forget_quiet(2000).block().unwrap();
        assert_eq!((p.conversations, p.traces), (1, 1));
        assert!(
            !found(),
            "a forgotten conversation's words are in neither file"
        );
        assert!(store.traces(None, None, 10).block().unwrap().is_empty());
    }

    #[test]
    fn the_traces_wal_reaches_their_file_without_the_writers_commits_paying_for_it() {
        use crate::memory::faces::Traces;
        use crate::memory::sqlite::{Block, Sqlite};
        use crate::memory::TraceRow;
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("anima.db");
        let store = Sqlite::open(&db).unwrap();
        let file = TraceFile::path_of(&db);
        let before = std::fs::metadata(&file).unwrap().len();
        let rows: Vec<TraceRow> = (0..300)
            .map(|n| TraceRow {
                trace: format!("{n:032x}"),
                kind: "message".into(),
                thread: "C1:1.0".into(),
                person: Some("U1".into()),
                inbox: None,
                process: "main".into(),
                at: n,
                reply: None,
                body: format!("{{\"raw\": \"{n} {}\"}}", "x".repeat(1024)),
                pieces: Vec::new(),
            })
            .collect();
        for batch in rows.chunks(30) {
            store.record_traces(batch.into()).block().unwrap();
        }
        assert_eq!(
            std::fs::metadata(&file).unwrap().len(),
            before,
            "the writer's commits do not checkpoint"
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::fs::metadata(&file).unwrap().len() == before
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(
            std::fs::metadata(&file).unwrap().len() > before + 200 * 1024,
            "the checkpointer copied the WAL back"
        );
    }

    #[test]
    fn a_traces_file_from_a_newer_anima_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("anima.db");
        drop(SqliteStore::open(&db).unwrap());
        let conn = Connection::open(TraceFile::path_of(&db)).unwrap();
        conn.pragma_update(None, "user_version", 7).unwrap();
        drop(conn);
        let e = SqliteStore::open(&db).err().expect("refused").to_string();
        assert!(e.contains("anima.traces.db"), "{e}");
    }
}
