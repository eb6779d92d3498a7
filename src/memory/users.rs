//! People and their user models: the rows and the slug that names their file. What a model
//! looks like before the soul writes one is the prompt's business, not the store's.

use rusqlite::{Connection, OptionalExtension, Row};

use super::StoreError;

pub use super::records::users::{slug, UserRecord};

const COLUMNS: &str =
    "user_id, display_name, slug, turns, injected_at_turn, model, model_version, exported_version";

fn from_row(r: &Row) -> rusqlite::Result<UserRecord> {
    Ok(UserRecord {
        user_id: r.get(0)?,
        display_name: r.get(1)?,
        slug: r.get(2)?,
        turns: r.get(3)?,
        injected_at_turn: r.get(4)?,
        model: r.get(5)?,
        model_version: r.get(6)?,
        exported_version: r.get(7)?,
    })
}

pub(super) fn get(conn: &Connection, user_id: &str) -> Result<Option<UserRecord>, StoreError> {
    Ok(conn
        .prepare_cached(&format!("SELECT {COLUMNS} FROM users WHERE user_id = ?1"))?
        .query_row([user_id], from_row)
        .optional()?)
}

pub(super) fn list(conn: &Connection) -> Result<Vec<UserRecord>, StoreError> {
    let mut stmt = conn.prepare(&format!("SELECT {COLUMNS} FROM users ORDER BY slug"))?;
    let rows = stmt.query_map([], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn unexported(conn: &Connection) -> Result<Vec<UserRecord>, StoreError> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {COLUMNS} FROM users WHERE model_version > exported_version ORDER BY user_id"
    ))?;
    let rows = stmt.query_map([], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn mark_exported(
    conn: &Connection,
    user_id: &str,
    version: i64,
) -> Result<(), StoreError> {
    conn.execute(
        "UPDATE users SET exported_version = max(exported_version, ?2) WHERE user_id = ?1",
        (user_id, version),
    )?;
    Ok(())
}

/// Versions of a user's model not yet in git: (version, model, change note), oldest first.
pub(super) fn pending_versions(
    conn: &Connection,
    user_id: &str,
) -> Result<Vec<(i64, String, String)>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT h.version, h.model, h.change_note FROM user_model_history h JOIN users u USING (user_id)
         WHERE h.user_id = ?1 AND h.version > u.exported_version ORDER BY h.version",
    )?;
    let rows = stmt.query_map([user_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn history(
    conn: &Connection,
    user_id: &str,
) -> Result<Vec<(i64, String, i64)>, StoreError> {
    let mut stmt = conn.prepare(
        "SELECT version, change_note, created_at FROM user_model_history WHERE user_id = ?1 ORDER BY version",
    )?;
    let rows = stmt.query_map([user_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The text of a user's model at `version`, from its history.
pub(super) fn version_text(
    conn: &Connection,
    user_id: &str,
    version: i64,
) -> Result<Option<String>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT model FROM user_model_history WHERE user_id = ?1 AND version = ?2")?
        .query_row((user_id, version), |r| r.get(0))
        .optional()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_follow_the_interface_rule() {
        assert_eq!(slug("Tom Hanks", "U1"), "tom-hanks");
        assert_eq!(slug("  Ada   L. Lovelace!! ", "U1"), "ada-l-lovelace");
        assert_eq!(slug("José", "U1"), "jos");
        assert_eq!(slug("../../etc/passwd", "U1"), "etc-passwd");
        assert_eq!(slug("東京", "U02ABC"), "u02abc");
        assert_eq!(slug("", ""), "user");
    }
}
