//! The soul's state as an operator reads it (`anima state`, the admin endpoint): counts,
//! conversations and their processes, the inbox, whispers. Read-only, so it works beside a
//! running daemon.

use rusqlite::{Connection, OpenFlags};

use super::states;
use super::{soul_state, SqliteStore, StoreError};

pub use super::records::snapshot::{ConversationState, Snapshot};

/// How many moves the snapshot shows.
const RECENT_MOVES: usize = 5;

impl SqliteStore {
    /// Opens an existing database read-only: no migration, no writes.
    pub fn open_read_only(path: &std::path::Path) -> Result<SqliteStore, StoreError> {
        let conn = Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|source| StoreError::Open {
            path: path.to_path_buf(),
            source,
        })?;
        conn.busy_timeout(super::BUSY_TIMEOUT)?;
        // Reading a database in WAL mode writes its -shm file beside it: on a read-only disk
        // the first read fails, and the system's reason says why.
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|source| super::open_failure(path, source))?;
        if version < super::SCHEMA_VERSION {
            return Err(StoreError::Outdated {
                path: path.to_path_buf(),
                found: version,
                supported: super::SCHEMA_VERSION,
            });
        }
        if version > super::SCHEMA_VERSION {
            return Err(StoreError::TooNew {
                path: path.to_path_buf(),
                found: version,
                supported: super::SCHEMA_VERSION,
            });
        }
        Ok(SqliteStore::from_connection(conn, path))
    }

    /// The state an operator reads, in one read transaction.
    pub fn snapshot(&self) -> Result<Snapshot, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Deferred)?;
        let count = |sql: &str| -> Result<u64, StoreError> {
            Ok(tx.query_row(sql, [], |r| r.get::<_, i64>(0))? as u64)
        };
        let interactions = count("SELECT value FROM counters WHERE name = 'interactions'")?;
        let inbox_depth =
            count("SELECT count(*) FROM inbox WHERE status IN ('pending', 'replying')")?;
        let inbox_failed = count("SELECT count(*) FROM inbox WHERE status = 'failed'")?;
        let whispers_pending = count("SELECT count(*) FROM whispers WHERE consumed_at IS NULL")?;
        let last_turn_ms: Option<i64> = tx.query_row(
            "SELECT max(updated_at) FROM threads WHERE turns > 0",
            [],
            |r| r.get(0),
        )?;
        let mut stmt = tx.prepare(
            "SELECT t.thread, p.current, t.turns, t.updated_at,
                    (SELECT count(*) FROM inbox i WHERE i.conversation = t.thread AND i.status IN ('pending', 'replying'))
             FROM threads t LEFT JOIN thread_process p ON p.thread = t.thread
             ORDER BY t.updated_at DESC",
        )?;
        let conversations = stmt
            .query_map([], |r| {
                Ok(ConversationState {
                    thread: r.get(0)?,
                    process: r.get(1)?,
                    turns: r.get(2)?,
                    updated_ms: r.get(3)?,
                    open: r.get::<_, i64>(4)? as u64,
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        drop(stmt);
        let soul_state = soul_state::load(&tx)?
            .all()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let cognitive = states::current(&tx)?;
        let recent_moves = states::moves(&tx, RECENT_MOVES)?;
        let journal_entries = count("SELECT count(*) FROM journal")?;
        let last_dream =
            super::dream::last(&tx)?.map(|d| serde_json::to_value(d).unwrap_or_default());
        tx.commit()?;
        Ok(Snapshot {
            cognitive,
            recent_moves,
            journal_entries,
            last_dream,
            soul_state,
            interactions,
            conversations,
            inbox_depth,
            inbox_failed,
            whispers_pending,
            last_turn_ms,
        })
    }
}
