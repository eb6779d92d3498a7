//! The soul's own state: a small set of known keys with defaults.

use std::collections::BTreeMap;

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
    /// The state whose stored keys hold `values` (the others keep their defaults).
    pub(crate) fn from_values(values: BTreeMap<String, String>) -> SoulState {
        SoulState { values }
    }

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
