//! The psychology substrate: drives, mood, arcs, relationships, energy and memories as
//! numbers that evolve deterministically with every event, a meaningfulness gate that decides
//! when an unaddressed event deserves cognition, a context packet that describes the state in
//! words only, and the fixed table that turns the model's stances and intentions into numbers.
//!
//! Owns the file format of `soul/psyche.toml` (`def`), the readable lexicon (`classify`), the
//! pure update (`update`), the gate (`gate`), retrieval scoring (`retrieve`), the packet
//! (`packet`), the words process rules read (`words`) and the post-cognition mapping (`mapping`). Pure: no I/O, no clock (the caller
//! passes `now`), no model. The store (`memory::psyche`) persists what these functions return;
//! the engine carries it into prompts. No number ever leaves this module as prompt text.

pub mod answer;
pub mod classify;
pub mod def;
pub mod gate;
pub mod mapping;
pub mod packet;
mod raw;
mod sections;
pub mod retrieve;
pub mod state;
pub mod text;
pub mod update;
mod value;
pub mod words;

#[cfg(test)]
mod tests;

pub use classify::{Classification, Dims, Fact, FactKind};
pub use def::{Drive, Psyche, FILE, SHIPPED_PSYCHE};
pub use gate::{Decision, GateInputs, GateRules, Verdict};
pub use mapping::{IntentionUpdate, StanceShift};
pub use packet::Packet;
pub use state::{Event, EventKind, Intention, Memory, Relationship, Substrate};
pub use update::{apply, Effects};
pub use value::{Signed, Unit};
pub use words::Words;

/// Milliseconds in an hour, for rates given per hour.
pub(crate) const HOUR_MS: f64 = 3_600_000.0;

/// Hours from `then` to `now`, never negative (a clock that went back counts as no time).
pub(crate) fn hours_between(then: i64, now: i64) -> f64 {
    (now.saturating_sub(then)).max(0) as f64 / HOUR_MS
}
