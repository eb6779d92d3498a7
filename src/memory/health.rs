//! Whether the store takes writes: the outcome of the last write, kept for `/healthz` and
//! `/metrics`. An episode of failing writes is logged at error once, and its end at info.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;

use rusqlite::ErrorCode;
use tracing::{error, info};

use super::{now_ms, StoreError};

#[derive(Debug, Default)]
pub struct WriteHealth {
    /// Why the last write failed; `None` while writes succeed.
    failing: Mutex<Option<String>>,
    last_ok_ms: AtomicI64,
    errors: AtomicU64,
}

impl WriteHealth {
    pub(super) fn note<T>(&self, result: &Result<T, StoreError>, place: &dyn std::fmt::Display) {
        let mut failing = self.failing.lock().unwrap_or_else(|e| e.into_inner());
        match result {
            Ok(_) => {
                self.last_ok_ms.store(now_ms(), Ordering::Relaxed);
                if failing.take().is_some() {
                    info!(db = %place, "the store takes writes again");
                }
            }
            Err(e) if cannot_write(e) => {
                self.errors.fetch_add(1, Ordering::Relaxed);
                if failing.is_none() {
                    error!(db = %place, error = %e, "the store cannot take writes: new messages cannot be recorded");
                }
                *failing = Some(e.to_string());
            }
            // A constraint or a bug in one statement says nothing about the store.
            Err(_) => {}
        }
    }

    /// Why writes fail, while they do.
    pub fn failing(&self) -> Option<String> {
        self.failing
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Unix ms of the last successful write (0: none yet).
    pub fn last_ok_ms(&self) -> i64 {
        self.last_ok_ms.load(Ordering::Relaxed)
    }

    /// Writes that failed because the store could not write.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
}

/// Errors that mean the store cannot write (as opposed to one statement being wrong).
fn cannot_write(e: &StoreError) -> bool {
    match e {
        StoreError::Sql(rusqlite::Error::SqliteFailure(f, _)) => matches!(
            f.code,
            ErrorCode::DatabaseBusy
                | ErrorCode::DatabaseLocked
                | ErrorCode::ReadOnly
                | ErrorCode::DiskFull
                | ErrorCode::SystemIoFailure
                | ErrorCode::CannotOpen
                | ErrorCode::PermissionDenied
                | ErrorCode::DatabaseCorrupt
                | ErrorCode::NotADatabase
                | ErrorCode::OutOfMemory
        ),
        StoreError::CreateDir { .. }
        | StoreError::Open { .. }
        | StoreError::Connect { .. }
        | StoreError::Unreachable { .. } => true,
        // The connection went away, or the server is shutting down or out of room.
        StoreError::Postgres(e) => {
            e.is_closed()
                || e.as_db_error().is_some_and(|d| {
                    let class = &d.code().code()[..2];
                    // 08: connection, 53: insufficient resources, 57: operator intervention,
                    // 58: system error, 25006: a read-only transaction.
                    matches!(class, "08" | "53" | "57" | "58") || d.code().code() == "25006"
                })
                || std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
        }
        _ => false,
    }
}
