//! The raw shapes of a process file, as serde reads them: every field as written, with its
//! span, before any check. Owns no rule; `fixed`, `ism` and `set` check what these hold.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProcess {
    pub(super) name: Spanned<String>,
    #[serde(default)]
    pub(super) kind: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) description: String,
    #[serde(default)]
    pub(super) steps: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    pub(super) goal: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) playbook: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) max_loops: Option<Spanned<i64>>,
    #[serde(default)]
    pub(super) actions: Vec<RawAction>,
    #[serde(default)]
    pub(super) instructions: Option<String>,
    #[serde(default)]
    pub(super) overrides: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    pub(super) transitions: Vec<RawTransition>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTransition {
    pub(super) to: Spanned<String>,
    #[serde(default)]
    pub(super) when: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) execute_now: bool,
    #[serde(default)]
    pub(super) params: toml::Table,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAction {
    pub(super) name: Spanned<String>,
    #[serde(default)]
    pub(super) description: String,
    pub(super) effect: Spanned<String>,
    #[serde(default)]
    pub(super) question: Option<Spanned<String>>,
    #[serde(default, rename = "continue")]
    pub(super) keep_going: Option<Spanned<bool>>,
    #[serde(default)]
    pub(super) to: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) params: Option<Spanned<toml::Table>>,
    #[serde(default)]
    pub(super) execute_now: Option<Spanned<bool>>,
    /// `effect = "tool"`: `server.tool`.
    #[serde(default)]
    pub(super) tool: Option<Spanned<String>>,
}
