//! The shape of a call's answer, for servers that can hold a model to it while it writes:
//! a GBNF grammar (llama.cpp's server, llama-cpp-python, vLLM) or a JSON Schema (Ollama,
//! vLLM, hosted APIs). Built from what the call asks, the same plan that writes its
//! instructions: a turn's steps in order with their verbs, its mental queries with the exact
//! question attributes the instructions show, the user-model and soul-state updates only
//! after their check said true; an ISM selection's action names; a cognitive state's tags.
//!
//! Each free text is bounded so that the longest answer admitted fits the call's token
//! budget (`budget`): held to a grammar, a model that fills every section still reaches the
//! last one before `max_tokens`.
//!
//! Owns the shapes and a cache of what was built for each. Pure: text in, text out. Knows
//! nothing of which server takes which form (that is `llm`'s) nor of reading the answer
//! (`parse` reads both forms into the same values).

pub mod budget;
pub mod gbnf;
pub mod schema;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use crate::steps::Step;

/// What a call's answer must hold.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Shape {
    /// A conversation call: these steps, in this order; `questions` are the mental queries
    /// as the process wrote them; the dialogue holds at most `reply_chars` characters (fewer
    /// when the token budget is short).
    Turn {
        steps: Vec<Step>,
        questions: Vec<String>,
        reply_chars: usize,
    },
    /// An ISM's selection: one or more of these actions, by name.
    Selection { actions: Vec<String> },
    /// The wakeup's affirmation.
    Wakeup,
    /// The shutdown's consent.
    Consent,
    /// The solitude's journal entry.
    Journal,
    /// A dream's consolidation; `people` are the ids a note may name.
    Dream { people: Vec<String> },
}

/// The form a server takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Form {
    Gbnf,
    JsonSchema,
}

/// What was built for a shape, shared by every call of that shape.
#[derive(Debug, Clone, PartialEq)]
pub enum Built {
    Gbnf(Arc<str>),
    JsonSchema(Arc<Value>),
}

impl Shape {
    /// Builds the shape in `form` for an answer of at most `max_tokens`, without the cache.
    pub fn build(&self, form: Form, max_tokens: u32) -> Built {
        let bounds = budget::Bounds::fit(self, form, max_tokens);
        match form {
            Form::Gbnf => Built::Gbnf(gbnf::grammar(self, &bounds).into()),
            Form::JsonSchema => Built::JsonSchema(Arc::new(schema::schema(self, &bounds))),
        }
    }
}

/// The most shapes kept: a soul has a handful of processes and plans, so this is never
/// reached in practice; past it the cache starts again.
const CAPACITY: usize = 256;

/// What was built, by form, shape and token budget.
#[derive(Debug, Default)]
pub struct Cache {
    gbnf: Mutex<HashMap<(Shape, u32), Built>>,
    schema: Mutex<HashMap<(Shape, u32), Built>>,
}

impl Cache {
    /// `shape` in `form` for an answer of at most `max_tokens`, built once.
    pub fn get(&self, shape: Shape, form: Form, max_tokens: u32) -> Built {
        let map = match form {
            Form::Gbnf => &self.gbnf,
            Form::JsonSchema => &self.schema,
        };
        let mut built = map.lock().unwrap_or_else(|e| e.into_inner());
        let key = (shape, max_tokens);
        if let Some(b) = built.get(&key) {
            return b.clone();
        }
        if built.len() >= CAPACITY {
            built.clear();
        }
        let b = key.0.build(form, max_tokens);
        built.insert(key, b.clone());
        b
    }
}

/// The longest text of each section, in characters (the dialogue's is the reply's limit),
/// when the token budget leaves room for them all (`budget` shortens them when not); the
/// readers cut at the same lengths.
pub mod limits {
    pub const MONOLOGUE: usize = 2_000;
    pub const USER_MODEL: usize = 6_000;
    pub const NOTE: usize = 300;
    pub const STATE_VALUE: usize = 200;
    pub const REASONING: usize = 500;
    pub const AFFIRMATION: usize = 1_500;
    pub const JOURNAL: usize = 3_000;
    pub const CONSENT_NOTE: usize = 500;
    pub const SUMMARY: usize = 4_000;
    pub const MEMORY: usize = 500;
    /// Episodic memories one dream batch may keep.
    pub const MEMORIES: usize = 12;
    /// Actions one selection may name.
    pub const ACTIONS: usize = 3;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_gives_what_a_build_gives_and_shares_it() {
        let shape = Shape::Turn {
            steps: vec![Step::InternalMonologue, Step::ExternalDialogue],
            questions: vec![],
            reply_chars: 300,
        };
        let cache = Cache::default();
        for form in [Form::Gbnf, Form::JsonSchema] {
            let a = cache.get(shape.clone(), form, 1024);
            let b = cache.get(shape.clone(), form, 1024);
            assert_eq!(a, shape.build(form, 1024));
            match (&a, b) {
                (Built::Gbnf(a), Built::Gbnf(b)) => assert!(Arc::ptr_eq(a, &b)),
                (Built::JsonSchema(a), Built::JsonSchema(b)) => assert!(Arc::ptr_eq(a, &b)),
                _ => panic!("the form changed"),
            }
            let short = cache.get(shape.clone(), form, 200);
            assert_eq!(
                short,
                shape.build(form, 200),
                "the budget is part of the key"
            );
            assert_ne!(short, a, "a shorter budget, shorter bounds");
        }
    }
}
