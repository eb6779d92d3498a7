//! What an operator does to the store: close a thread's conversation, and the log of admin
//! commands received by DM (each once).

use super::{now_ms, SqliteStore, StoreError};

impl SqliteStore {
    /// Closes a thread's conversation: its working memory stays, but the next message starts
    /// a new conversation (no history, turns from 0, its process from the start, a new
    /// provider session). False when the soul has no such thread.
    pub fn reset_thread(&self, thread: &str) -> Result<bool, StoreError> {
        self.write(|tx| {
            let changed = tx.execute(
                "UPDATE threads SET turns = 0, claude_session = NULL,
                     since_id = (SELECT coalesce(max(id), 0) FROM working_memory WHERE thread = ?1),
                     updated_at = ?2
                 WHERE thread = ?1",
                (thread, now_ms()),
            )?;
            tx.execute("DELETE FROM thread_process WHERE thread = ?1", [thread])?;
            Ok(changed > 0)
        })
    }

    /// Records an admin command; false when this one (its origin) was carried out before.
    /// One recorded but never finished (a crash, a store error) is to be carried out again.
    pub fn log_admin(
        &self,
        origin: &str,
        user_id: &str,
        command: &str,
        allowed: bool,
    ) -> Result<bool, StoreError> {
        self.write(|tx| {
            tx.execute(
                "INSERT OR IGNORE INTO admin_log (origin, user_id, command, allowed, at) VALUES (?1, ?2, ?3, ?4, ?5)",
                (origin, user_id, command, allowed, now_ms()),
            )?;
            let done: bool =
                tx.query_row("SELECT done FROM admin_log WHERE origin = ?1", [origin], |r| {
                    r.get(0)
                })?;
            Ok(!done)
        })
    }

    /// The admin command was carried out and answered.
    pub fn admin_done(&self, origin: &str) -> Result<(), StoreError> {
        self.write(|tx| {
            tx.execute("UPDATE admin_log SET done = 1 WHERE origin = ?1", [origin])?;
            Ok(())
        })
    }
}
