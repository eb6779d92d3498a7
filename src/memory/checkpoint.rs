//! WAL checkpoints off the hot path: a thread with its own connection copies the WAL back into
//! the database (a PASSIVE checkpoint, which never takes a writer's lock), so no turn's commit
//! pays for it.
//!
//! A checkpoint syncs the WAL and the database file, and appends to the WAL stall while it
//! does; so it runs once the store has been quiet for a second, and under unbroken writing at
//! least every 10 seconds, which bounds the WAL.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;

/// How often the thread looks at the store.
const TICK: Duration = Duration::from_millis(250);
/// Quiet ticks before a checkpoint (one second).
const QUIET_TICKS: u32 = 4;
/// Busy ticks after which a checkpoint runs anyway (ten seconds).
const BUSY_TICKS: u32 = 40;

pub struct Checkpointer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Checkpointer {
    /// Starts the thread; `None` (and SQLite's own checkpoints are then off) only if the
    /// thread or its connection cannot be had, which the log reports.
    pub fn start(path: &Path) -> Option<Checkpointer> {
        let conn = match Connection::open(path) {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!(error = %e, "no checkpoint connection; checkpoints fall back to commits");
                return None;
            }
        };
        let _ = conn.busy_timeout(Duration::from_secs(1));
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("anima-checkpoint".into())
            .spawn(move || {
                // `data_version` changes whenever another connection commits.
                let version = |c: &Connection| {
                    c.query_row("PRAGMA data_version", [], |r| r.get::<_, i64>(0))
                        .ok()
                };
                let mut last = version(&conn);
                let (mut busy, mut quiet) = (0u32, 0u32);
                while !flag.load(Ordering::SeqCst) {
                    std::thread::park_timeout(TICK);
                    let now = version(&conn);
                    if now != last {
                        last = now;
                        busy += 1;
                        quiet = 0;
                    } else {
                        quiet += 1;
                    }
                    if busy > 0 && (quiet >= QUIET_TICKS || busy >= BUSY_TICKS) {
                        match conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE);") {
                            Ok(()) => busy = 0,
                            Err(e) => tracing::debug!(error = %e, "checkpoint skipped"),
                        }
                    }
                }
            })
            .ok()?;
        Some(Checkpointer {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for Checkpointer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::memory::faces::Turns;
    use crate::memory::sqlite::{Block, Sqlite};

    #[test]
    fn the_wal_reaches_the_database_file_without_a_commit_paying_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("anima.db");
        let store = Sqlite::open(&path).unwrap();
        let before = std::fs::metadata(&path).unwrap().len();
        let text = "x".repeat(1024);
        for i in 0..300 {
            store
                .record_user_message("t", "U1", "Tom", &format!("{i} {text}"), None)
                .block()
                .unwrap();
        }
        assert_eq!(
            std::fs::metadata(&path).unwrap().len(),
            before,
            "commits do not checkpoint"
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while std::fs::metadata(&path).unwrap().len() == before
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert!(
            std::fs::metadata(&path).unwrap().len() > before + 200 * 1024,
            "the checkpointer copied the WAL back"
        );
    }
}
