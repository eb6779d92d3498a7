//! The soul's state as an operator reads it (`anima state`, the admin endpoint): counts,
//! conversations and their processes, the inbox, whispers. Read-only, so it works beside a
//! running daemon. What it reads is `sqlite::admin`'s; here, the read-only opening.

use rusqlite::{Connection, OpenFlags};

use super::{SqliteStore, StoreError};

pub use super::records::snapshot::{ConversationState, Snapshot};

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
        let traces = super::trace_file::TraceFile::open_read_only(path)?;
        Ok(SqliteStore::from_connection(conn, path, traces))
    }
}
