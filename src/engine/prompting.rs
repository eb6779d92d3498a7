//! The stage between the process machine and the model: one process run's prompt, and the
//! facts its rules read afterwards.

use crate::memory::{Entry, SoulState, TurnContext, Whisper};
use crate::parse::Cognition;
use crate::process::when::Facts;
use crate::process::{Loaded, ProcessDef, ThreadProcess};
use crate::prompt::{self, ProcessInstructions, PromptInput, TurnPlan};

/// What one process run's prompt is made from.
pub(super) struct RunInput<'a> {
    pub lib: &'a Loaded,
    pub def: &'a ProcessDef,
    pub state: &'a ThreadProcess,
    pub ctx: &'a TurnContext,
    pub soul: &'a SoulState,
    pub plan: &'a TurnPlan,
    pub history: &'a [Entry],
    /// Questions the engine adds to the process's own.
    pub extra_queries: &'a [&'a str],
    pub whisper: Option<&'a Whisper>,
    /// (speaker, text); `None` for a perception without a message.
    pub message: Option<(&'a str, &'a str)>,
    pub quiet_minutes: Option<u64>,
}

/// Builds one process run's prompt: its process section, its instructions, the gated user
/// model, and the message (or the quiet).
pub(super) fn run_prompt(i: &RunInput) -> prompt::Prompt {
    let note = prompt::process_note(
        &i.def.name,
        &i.def.description,
        i.state.invocations,
        i.state.previous.as_deref(),
        &i.state.params,
    );
    let instructions = instructions_of(i.def, i.extra_queries);
    let (speaker, message) = i.message.unwrap_or(("", ""));
    prompt::build_prompt(&PromptInput {
        soul: &i.lib.soul,
        soul_state: i.soul,
        whisper: i.whisper.map(|w| prompt::Intuition {
            text: &w.text,
            source: &w.source,
        }),
        user_model: i.plan.inject_user_model.then_some(prompt::UserModel {
            name: &i.ctx.user.display_name,
            model: i.ctx.user.model.as_deref(),
        }),
        steps: &i.plan.steps,
        process: &instructions,
        history: i.history,
        speaker,
        message,
        process_note: Some(&note),
        quiet_minutes: i.quiet_minutes,
    })
}

/// The instructions a process contributes: its overrides, its note, and the questions its
/// rules (and `extra`) ask.
fn instructions_of(def: &ProcessDef, extra: &[&str]) -> ProcessInstructions {
    let mut mental_queries = def.queries.clone();
    for q in extra {
        if !mental_queries.iter().any(|m| m == q) {
            mental_queries.push(q.to_string());
        }
    }
    ProcessInstructions {
        overrides: def.overrides.clone(),
        note: def.instructions.clone(),
        mental_queries,
    }
}

/// What a process's rules read after a run.
pub(super) fn facts_for(
    soul: &SoulState,
    state: &ThreadProcess,
    c: &Cognition,
    turns: u64,
    idle_minutes: f64,
    process: &str,
) -> Facts {
    Facts {
        state: soul
            .all()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        params: state.params.clone(),
        queries: c
            .mental_queries
            .iter()
            .map(|q| (q.question.clone(), q.answer))
            .collect(),
        user_model_check: c.user_model_check,
        invocations: state.invocations,
        turns,
        idle_minutes,
        previous: state.previous.clone(),
        process: process.to_string(),
    }
}
