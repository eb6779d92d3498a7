//! Mental processes: behavioural modes defined by files in `processes/`, and the pure state
//! machine that moves a thread between them.
//!
//! `def` reads and checks the files, `when` is the condition language, `library` keeps the
//! soul and process files in force (hot reload), `graph` draws them. `machine` is the machine
//! itself: entering a thread's process and stepping after a parsed answer, with no I/O; the
//! engine carries out what it says.

pub mod def;
pub mod graph;
pub mod library;
pub mod machine;
pub mod when;

use std::collections::BTreeMap;

pub use def::{ProcessDef, Transition, MAIN, PROACTIVE};
pub use library::{Library, Loaded};
pub use machine::TransitionRecord;

/// A thread's place in the machine.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ThreadProcess {
    pub current: String,
    pub previous: Option<String>,
    /// How many times `current` has run in this thread since it was entered.
    pub invocations: u64,
    pub params: BTreeMap<String, serde_json::Value>,
}

/// The first rule of `def` whose condition holds, with its index.
pub fn next<'a>(def: &'a ProcessDef, facts: &when::Facts) -> Option<(usize, &'a Transition)> {
    def.transitions
        .iter()
        .enumerate()
        .find(|(_, t)| t.when.holds(facts))
}

#[cfg(test)]
mod tests;
