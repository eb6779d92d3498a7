//! One daemon per SQLite home: `daemon.lock` beside the database, locked by the operating
//! system for as long as the daemon runs. The lock goes with its process, whatever ends it
//! (SIGKILL included), so a crashed daemon never blocks its successor. The file holds the
//! holder's pid, so a second `anima run` can say which process uses the home.
//!
//! Only `anima run` takes it: `chat`, `state`, `dream` and `mind` beside the daemon share the
//! file as SQLite allows. On PostgreSQL any number of daemons share one soul, so there is
//! nothing to hold.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use super::StoreError;
use crate::config::{StoreBackend, StoreConfig};

/// The lock's file name, beside the database.
const FILE: &str = "daemon.lock";

/// This process's hold on its SQLite home; let go when dropped (or when the process ends).
#[derive(Debug)]
pub struct HomeHold {
    _file: File,
}

/// Takes the home of the store `config` names for this daemon: `None` on a store several
/// daemons may share. [`StoreError::HomeInUse`] when another process holds it.
pub fn hold_home(config: &StoreConfig, sqlite_path: &Path) -> Result<Option<HomeHold>, StoreError> {
    match config.backend {
        StoreBackend::Postgres => Ok(None),
        StoreBackend::Sqlite => hold(sqlite_path).map(Some),
    }
}

fn hold(sqlite_path: &Path) -> Result<HomeHold, StoreError> {
    let path = sqlite_path.with_file_name(FILE);
    let failed = |source| StoreError::File {
        path: path.clone(),
        source,
    };
    if let Some(home) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(home).map_err(|source| StoreError::CreateDir {
            path: home.to_path_buf(),
            source,
        })?;
    }
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&path)
        .map_err(failed)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            return Err(StoreError::HomeInUse {
                database: sqlite_path.to_path_buf(),
                pid: holder(&mut file),
            })
        }
        Err(TryLockError::Error(e)) => return Err(failed(e)),
    }
    // Ours now: the pid the next one will name.
    file.set_len(0).map_err(failed)?;
    file.seek(SeekFrom::Start(0)).map_err(failed)?;
    writeln!(file, "{}", std::process::id()).map_err(failed)?;
    file.flush().map_err(failed)?;
    Ok(HomeHold { _file: file })
}

/// The pid the holder wrote, if it has yet.
fn holder(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.take(32).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

/// The message a second daemon on a held home gives (`StoreError::HomeInUse`).
pub(super) fn in_use(database: &Path, pid: Option<u32>) -> String {
    let who = match pid {
        Some(pid) => format!("another `anima run` (pid {pid})"),
        None => "another `anima run`".to_string(),
    };
    format!(
        "{who} is using the SQLite store {}: one daemon runs per SQLite home. Stop it first, or \
         point [paths] home elsewhere; several daemons share one soul on PostgreSQL \
         ([store] backend = \"postgres\", see docs/operations.md)",
        database.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_hold_on_one_home_names_the_first_holder() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("anima.db");
        let first = hold(&db).unwrap();
        match hold(&db) {
            Err(StoreError::HomeInUse { database, pid }) => {
                assert_eq!(database, db);
                assert_eq!(pid, Some(std::process::id()));
            }
            other => panic!("a second hold: {other:?}"),
        }
        drop(first);
        // Let go: the next daemon takes it.
        hold(&db).unwrap();
    }

    #[test]
    fn a_home_that_cannot_be_written_is_named() {
        let dir = tempfile::tempdir().unwrap();
        // A file where the home's folder should be: the lock cannot be made there.
        let blocker = dir.path().join("home");
        std::fs::write(&blocker, "").unwrap();
        let err = hold(&blocker.join("anima.db")).unwrap_err();
        assert!(err.to_string().contains("home"), "{err}");
    }
}
