//! Which events were applied already, by the caller's key (a message's inbox row, a tick's
//! period): a retried turn does not move the substrate twice.
//!
//! The newest keys live in the soul's state row, as `at<TAB>key<LF>` lines: every event
//! writes that row anyway, so marking one applied costs no page of its own (an event is a few
//! one-row pages, and each is most of its cost; benches/psyche.rs). Once the lines reach
//! `RECENT_BYTES` they move into `psyche_seen`, which holds all older keys, so that the row
//! always fits its page; a dream's upkeep moves them too before it forgets the keys older than
//! `SEEN_KEEP_MS`. A key is seen when it is in either. A key holding a tab or a line feed could
//! not be told apart in the lines, and one longer than `LONGEST_INLINE` would crowd them out:
//! those go to the table at once.

use rusqlite::{params, Connection, OptionalExtension};

use crate::memory::StoreError;

/// How long the state row's lines grow before they move to the table: about 40 keys of a
/// message, with the state, well inside one 4 KB page.
pub(super) const RECENT_BYTES: usize = 1_536;
/// The longest key kept in the lines.
pub(super) const LONGEST_INLINE: usize = 256;

/// The keys in the state row of one soul, as loaded with it (`state::load_substrate_and_keys`).
pub(super) struct Recent(pub(super) String);

impl Recent {
    /// Whether `key` was applied: in these lines or in the table.
    pub(super) fn holds(
        &self,
        conn: &Connection,
        soul: &str,
        key: &str,
    ) -> Result<bool, StoreError> {
        if inline(key) && self.0.contains(&format!("\t{key}\n")) {
            return Ok(true);
        }
        Ok(conn
            .prepare_cached("SELECT 1 FROM psyche_seen WHERE soul = ?1 AND key = ?2")?
            .query_row(params![soul, key], |_| Ok(()))
            .optional()?
            .is_some())
    }

    /// Marks `key` applied at `at`, in the transaction that applied it, after the state row
    /// was written (so that it exists).
    pub(super) fn add(
        mut self,
        conn: &Connection,
        soul: &str,
        key: &str,
        at: i64,
    ) -> Result<(), StoreError> {
        if !inline(key) {
            return insert(conn, soul, key, at);
        }
        self.0.push_str(&format!("{at}\t{key}\n"));
        if self.0.len() >= RECENT_BYTES {
            move_to_table(conn, soul, &self.0)?;
            self.0.clear();
        }
        conn.prepare_cached("UPDATE psyche_substrate SET recent_keys = ?2 WHERE soul = ?1")?
            .execute(params![soul, self.0])?;
        Ok(())
    }
}

/// Whether `key` can be a line of the state row's list.
fn inline(key: &str) -> bool {
    key.len() <= LONGEST_INLINE && !key.contains(['\t', '\n'])
}

fn insert(conn: &Connection, soul: &str, key: &str, at: i64) -> Result<(), StoreError> {
    conn.prepare_cached("INSERT OR IGNORE INTO psyche_seen (soul, key, at) VALUES (?1, ?2, ?3)")?
        .execute(params![soul, key, at])?;
    Ok(())
}

/// Every `at<TAB>key` line of `lines` into the table. A line this build did not write (the row
/// edited by hand) is dropped: the worst it costs is one event applied twice.
fn move_to_table(conn: &Connection, soul: &str, lines: &str) -> Result<(), StoreError> {
    for line in lines.lines() {
        if let Some((at, key)) = line.split_once('\t') {
            if let Ok(at) = at.parse::<i64>() {
                insert(conn, soul, key, at)?;
            }
        }
    }
    Ok(())
}

/// The upkeep's share: every soul's recent keys into the table, so that the old ones among
/// them can be forgotten like any other; then the keys applied before `before` are forgotten.
/// How many were.
pub(super) fn forget_before(conn: &Connection, before: i64) -> Result<i64, StoreError> {
    let rows: Vec<(String, String)> = conn
        .prepare_cached("SELECT soul, recent_keys FROM psyche_substrate WHERE recent_keys <> ''")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    for (soul, lines) in &rows {
        move_to_table(conn, soul, lines)?;
        conn.prepare_cached("UPDATE psyche_substrate SET recent_keys = '' WHERE soul = ?1")?
            .execute([soul])?;
    }
    let forgotten = conn
        .prepare_cached("DELETE FROM psyche_seen WHERE at < ?1")?
        .execute([before])?;
    Ok(forgotten as i64)
}
