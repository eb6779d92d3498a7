//! The soul's own state: a small set of known keys with defaults.

use std::collections::BTreeMap;

use rusqlite::Connection;

use super::StoreError;

/// The known keys and their defaults (the seed's `SOUL_MEMORY_DEFAULTS`).
pub const DEFAULTS: [(&str, &str); 6] = [
    ("currentProject", ""),
    ("currentTask", ""),
    ("currentTopic", ""),
    ("emotionalState", "neutral"),
    ("conversationSummary", ""),
    ("currentProcess", "main"),
];

/// The keys a model may set through `<soul_state_update>`. `currentProcess` belongs to the
/// process machine, not to the model.
pub fn model_may_set(key: &str) -> bool {
    key != "currentProcess" && DEFAULTS.iter().any(|(k, _)| *k == key)
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SoulState {
    values: BTreeMap<String, String>,
}

impl SoulState {
    pub fn get(&self, key: &str) -> &str {
        self.values
            .get(key)
            .map(String::as_str)
            .or_else(|| DEFAULTS.iter().find(|(k, _)| *k == key).map(|(_, v)| *v))
            .unwrap_or("")
    }

    pub fn set(&mut self, key: &str, value: &str) {
        self.values.insert(key.to_string(), value.to_string());
    }

    /// Keys whose value differs from the default, in the defaults' order.
    pub fn non_default(&self) -> Vec<(&'static str, &str)> {
        DEFAULTS
            .iter()
            .filter(|(k, default)| self.get(k) != *default)
            .map(|(k, _)| (*k, self.get(k)))
            .collect()
    }

    pub fn all(&self) -> Vec<(&'static str, &str)> {
        DEFAULTS.iter().map(|(k, _)| (*k, self.get(k))).collect()
    }
}

pub(super) fn load(conn: &Connection) -> Result<SoulState, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT key, value FROM soul_memory")?;
    let values = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
        .collect::<Result<BTreeMap<_, _>, _>>()?;
    Ok(SoulState { values })
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
