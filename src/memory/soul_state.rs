//! The soul's own state: a small set of known keys with defaults.

use std::collections::BTreeMap;

use rusqlite::Connection;

use super::StoreError;

pub use super::records::soul::{model_may_set, SoulState, DEFAULTS};
pub(super) fn load(conn: &Connection) -> Result<SoulState, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT key, value FROM soul_memory")?;
    let values = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
        .collect::<Result<BTreeMap<_, _>, _>>()?;
    Ok(SoulState::from_values(values))
}

pub(super) fn set(conn: &Connection, key: &str, value: &str, now: i64) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO soul_memory (key, value, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
    )?
    .execute((key, value, now))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_a_model_may_set_are_the_catalogues() {
        let may: Vec<&str> = DEFAULTS
            .iter()
            .map(|(k, _)| *k)
            .filter(|k| model_may_set(k))
            .collect();
        let mut catalogue = crate::steps::SOUL_STATE_KEYS.to_vec();
        let mut may = may;
        catalogue.sort();
        may.sort();
        assert_eq!(may, catalogue);
    }

    #[test]
    fn non_default_leaves_out_keys_set_to_their_default() {
        let mut state = SoulState::default();
        assert!(state.non_default().is_empty());
        state.set("emotionalState", "neutral");
        state.set("currentTopic", "BG3 port");
        state.set("currentProject", "anima");
        assert_eq!(
            state.non_default(),
            [("currentProject", "anima"), ("currentTopic", "BG3 port")],
            "in the defaults' order"
        );
    }
}
