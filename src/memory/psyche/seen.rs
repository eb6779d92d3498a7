//! Which events were applied already, by the caller's key (a message's inbox row, a tick's
//! period): a retried turn does not move the substrate twice.
//!
//! The newest keys live in the soul's state row, as `at<TAB>key<LF>` lines: every event
//! writes that row anyway (`state::save_row`), so marking one applied costs no page of its
//! own (an event is a few one-row pages, and each is most of its cost; benches/psyche.rs).
//! They move into `psyche_seen`, which holds all older keys, with the decisions' lines
//! (`super::settle`), or once they reach `RECENT_BYTES`, so that the row always fits its page;
//! a dream's upkeep moves them too before it
//! forgets the keys older than `SEEN_KEEP_MS`. A key is seen when it is in either. A key holding a tab or a line feed could
//! not be told apart in the lines, and one longer than `LONGEST_INLINE` would crowd them out:
//! those go to the table at once.

use rusqlite::{params, Connection, OptionalExtension};

use super::state::row_lines;
use crate::memory::StoreError;

/// How long the state row's lines grow before they move to the table on their own: about 20
/// keys of a message, more than the decisions' lines leave time for (they move together). With
/// the state and the decisions' lines (`gate_log::RECENT_BYTES`), the row stays inside one 4 KB
/// page.
pub(super) const RECENT_BYTES: usize = 768;
/// The longest key kept in the lines.
pub(super) const LONGEST_INLINE: usize = 256;

/// Whether `key` was applied: in `keys` (the lines of the soul's row, as loaded with it,
/// `state::load_row`) or in the table.
pub(super) fn holds(
    conn: &Connection,
    soul: &str,
    keys: &str,
    key: &str,
) -> Result<bool, StoreError> {
    if inline(key) && keys.contains(&format!("\t{key}\n")) {
        return Ok(true);
    }
    Ok(conn
        .prepare_cached("SELECT 1 FROM psyche_seen WHERE soul = ?1 AND key = ?2")?
        .query_row(params![soul, key], |_| Ok(()))
        .optional()?
        .is_some())
}

/// Marks `key` applied at `at`, in the transaction that applied it: a line of `keys`, which
/// the caller writes back with the row (moving the lines to the table when they reach
/// `RECENT_BYTES`), or a row of the table.
pub(super) fn add(
    conn: &Connection,
    soul: &str,
    keys: &mut String,
    key: &str,
    at: i64,
) -> Result<(), StoreError> {
    if !inline(key) {
        return insert(conn, soul, key, at);
    }
    keys.push_str(&format!("{at}\t{key}\n"));
    Ok(())
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

/// Every `at<TAB>key` line of `lines` into the table, and `lines` emptied. A line this build
/// did not write (the row edited by hand) is dropped: the worst it costs is one event applied
/// twice.
pub(super) fn move_to_table(
    conn: &Connection,
    soul: &str,
    lines: &mut String,
) -> Result<(), StoreError> {
    for line in row_lines(lines) {
        if let Some((at, key)) = line.split_once('\t') {
            if let Ok(at) = at.parse::<i64>() {
                insert(conn, soul, key, at)?;
            }
        }
    }
    lines.clear();
    Ok(())
}

/// The upkeep's share: every soul's recent keys into the table, so that the old ones among
/// them can be forgotten like any other; then the keys applied before `before` are forgotten.
/// How many were.
pub(super) fn forget_before(conn: &Connection, before: i64) -> Result<i64, StoreError> {
    let mut rows: Vec<(String, String)> = conn
        .prepare_cached("SELECT soul, recent_keys FROM psyche_substrate WHERE recent_keys <> ''")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    for (soul, lines) in &mut rows {
        move_to_table(conn, soul, lines)?;
        conn.prepare_cached("UPDATE psyche_substrate SET recent_keys = '' WHERE soul = ?1")?
            .execute([&*soul])?;
    }
    let forgotten = conn
        .prepare_cached("DELETE FROM psyche_seen WHERE at < ?1")?
        .execute([before])?;
    Ok(forgotten as i64)
}
