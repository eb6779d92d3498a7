//! WAL checkpoints off the hot path: a thread with its own connection runs a PASSIVE
//! checkpoint every second (passive: it never blocks a writer), so no turn's commit pays for
//! copying the WAL back and syncing the database file.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::Connection;

const INTERVAL: Duration = Duration::from_secs(1);

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
                while !flag.load(Ordering::SeqCst) {
                    std::thread::park_timeout(INTERVAL);
                    if let Err(e) = conn.execute_batch("PRAGMA wal_checkpoint(PASSIVE);") {
                        tracing::debug!(error = %e, "checkpoint skipped");
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
    #[test]
    fn the_wal_reaches_the_database_file_without_a_commit_paying_for_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("anima.db");
        let store = crate::memory::Store::open(&path).unwrap();
        let before = std::fs::metadata(&path).unwrap().len();
        let text = "x".repeat(1024);
        for i in 0..300 {
            store
                .record_user_message("t", "U1", "Tom", &format!("{i} {text}"), None)
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
