//! The stage between the process machine and the model: what the gates read, one process
//! run's prompt, and the facts its rules read afterwards. The store's records become the
//! prompt's own input types here, and nowhere else.

use crate::memory::{Entry, EntryType, SoulState, TurnContext};
use crate::parse::Cognition;
use crate::process::when::Facts;
use crate::process::{Loaded, ProcessDef, ThreadProcess};
use crate::prompt::{self, GateInput, ProcessInstructions, PromptInput, Speaker, Spoken, TurnPlan};
use crate::steps::USER_MODEL_CHECK;

/// What one process run's prompt is made from.
#[derive(Clone, Copy)]
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
    /// The turn's one intuition: its claimed whisper, or a daimon's.
    pub whisper: Option<prompt::Intuition<'a>>,
    /// Someone new is to be asked who they are (onboarding's words in the note).
    pub onboard: bool,
    /// (speaker, text); `None` for a perception without a message.
    pub message: Option<(&'a str, &'a str)>,
    pub quiet_minutes: Option<u64>,
    /// An ISM call: its `<implicit_machine>` section.
    pub machine: Option<prompt::ism::MachineInput<'a>>,
    /// The only mental queries of this call (an ISM query action's question), instead of
    /// the process's own.
    pub queries: Option<&'a [String]>,
    /// The soul's inner life in words, for a message turn.
    pub psyche: Option<&'a crate::psyche::Packet>,
    /// The files shared with the message, as the prompt shows them.
    pub attachments: &'a [prompt::Attachment<'a>],
    /// A message's dossiers (recalled, and the names to ask about).
    pub dossiers: Option<&'a super::dossiers::DossierTurn>,
}

/// Builds one process run's prompt: its process section, its instructions, the gated user
/// model, and the message (or the quiet); with `shape` (the reply's length limit), the
/// shape of its answer too.
pub(super) fn run_prompt(
    i: &RunInput,
    shape: Option<usize>,
) -> (prompt::Prompt, Option<prompt::shape::Shape>) {
    let note = prompt::process_note(
        &i.def.name,
        &i.def.description,
        i.state.invocations,
        i.state.previous.as_deref(),
        &i.state.params,
    );
    let mut instructions = instructions_of(i.def, i.extra_queries);
    if let Some(only) = i.queries {
        instructions.mental_queries = only.to_vec();
    }
    let onboarding = i
        .onboard
        .then(|| crate::states::onboarding::WORDS.to_string());
    for words in [state_words(&i.ctx.cognitive_state, i.lib), onboarding]
        .into_iter()
        .flatten()
    {
        instructions.note = Some(match instructions.note.take() {
            Some(note) => format!("{}\n\n{words}", note.trim_end()),
            None => words,
        });
    }
    let (speaker, message) = i.message.unwrap_or(("", ""));
    let soul_state = i.soul.non_default();
    let history = spoken(i.history);
    // The dossier and attachment-note steps only in a call whose answer is free text (a
    // constrained answer has no place for them) and not in an ISM's calls.
    let ask = shape.is_none() && i.machine.is_none();
    instructions.attachment_notes = ask && !i.attachments.is_empty();
    let (recalled, names) = i.dossiers.map(|d| d.input(ask)).unwrap_or_default();
    let input = PromptInput {
        soul: soul_text(&i.lib.soul),
        soul_state: &soul_state,
        whisper: i.whisper,
        user_model: i.plan.inject_user_model.then_some(prompt::UserModel {
            name: &i.ctx.user.display_name,
            model: i.ctx.user.model.as_deref(),
        }),
        steps: &i.plan.steps,
        process: &instructions,
        history: &history,
        speaker,
        message,
        process_note: Some(&note),
        quiet_minutes: i.quiet_minutes,
        machine: i.machine,
        summary: i.ctx.summary.as_deref(),
        psyche: i.psyche,
        attachments: i.attachments,
        dossiers: prompt::DossierInput {
            recalled: &recalled,
            ask: names,
        },
    };
    let shape = shape.map(|reply_chars| prompt::answer_shape(&input, reply_chars));
    (prompt::build_prompt(&input), shape)
}

/// How the soul's cognitive state shapes a turn's instructions, in words: PLAY adds the
/// soul's play wording (`play.md`); in WORK the instructions are the process's own.
fn state_words(state: &str, lib: &Loaded) -> Option<String> {
    match crate::states::State::from_name(state)? {
        crate::states::State::Play => Some(format!(
            "Your cognitive state is PLAY.\n{}",
            lib.soul.play_words()
        )),
        _ => None,
    }
}

/// What the gates read about this turn.
pub fn gate_input(ctx: &TurnContext) -> GateInput {
    GateInput {
        interaction: ctx.interaction,
        thread_turns: ctx.thread_turns,
        last_user_model_check: last_user_model_check(&ctx.recent),
        user_turns: ctx.user.turns,
        injected_at_turn: ctx.user.injected_at_turn,
    }
}

/// The answer the thread's previous turn gave to its user-model check: the latest check
/// after the last message a person sent before this turn's (this turn's own message, and one
/// left unanswered by a failed turn, are passed over). `None` when that turn gave none (its
/// process does not ask it, or the model did not answer): an older answer is not carried
/// on, or one true would keep the model in every prompt until it left the window.
fn last_user_model_check(recent: &[Entry]) -> Option<bool> {
    let said_by_person = |e: &&Entry| e.entry_type == EntryType::UserMessage;
    recent
        .iter()
        .rev()
        .skip_while(said_by_person)
        .take_while(|e| !said_by_person(e))
        .find(|e| e.entry_type == EntryType::MentalQuery && e.content == USER_MODEL_CHECK)
        .and_then(Entry::result)
}

/// What was said in the thread, as the prompt takes it: people's messages (by the name they
/// were recorded with, `user` without one) and the soul's replies. Thoughts and checks are
/// not history.
pub fn spoken(entries: &[Entry]) -> Vec<Spoken<'_>> {
    entries
        .iter()
        .filter_map(|e| {
            let by = match e.entry_type {
                EntryType::UserMessage => Speaker::Person(
                    e.metadata
                        .get("name")
                        .and_then(|n| n.as_str())
                        .unwrap_or("user"),
                ),
                EntryType::ExternalDialog => Speaker::Soul,
                _ => return None,
            };
            Some(Spoken {
                by,
                text: &e.content,
            })
        })
        .collect()
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
        attachment_notes: false,
    }
}

/// Whether a run's dialogue will stand, judged from its answer so far (`raw`) when the
/// dialogue opens: no execute_now rule can hand the message to another process, whose
/// dialogue would replace it. Rules that read what comes after the dialogue (the soul state
/// after its update, the user-model check) or a question not answered yet cannot be judged:
/// then it is not known to stand.
pub(super) fn will_stand(
    def: &ProcessDef,
    raw: &str,
    max_chars: usize,
    facts: impl Fn(&Cognition) -> Facts,
) -> bool {
    let rules: Vec<_> = def.transitions.iter().filter(|t| t.execute_now).collect();
    if rules.is_empty() {
        return true;
    }
    if rules.iter().any(|t| t.when.reads_late()) {
        return false;
    }
    let so_far = crate::parse::parse_response(raw, max_chars);
    let mut asked = Vec::new();
    for t in &rules {
        t.when.queries(&mut asked);
    }
    let answered = |q: &String| {
        so_far
            .mental_queries
            .iter()
            .any(|m| m.question.trim().eq_ignore_ascii_case(q.trim()) && m.answer.is_some())
    };
    if !asked.iter().all(answered) {
        return false;
    }
    let facts = facts(&so_far);
    // These rules read nothing the rest of the answer can change: none holds now, none
    // will be taken.
    !rules.iter().any(|t| t.when.holds(&facts))
}

/// What a process's rules read of the perception, the same for every run of it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Moment<'a> {
    pub turns: u64,
    pub idle_minutes: f64,
    pub cognitive_state: &'a str,
    /// The inner life in words, as the message was taken in.
    pub inner: Option<crate::psyche::Words>,
}

/// What a process's rules read after a run.
pub(super) fn facts_for(
    soul: &SoulState,
    state: &ThreadProcess,
    c: &Cognition,
    process: &str,
    moment: &Moment,
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
        turns: moment.turns,
        idle_minutes: moment.idle_minutes,
        previous: state.previous.clone(),
        process: process.to_string(),
        cognitive_state: moment.cognitive_state.to_string(),
        inner: moment.inner,
    }
}

/// The soul's files as its prompt shows them.
pub(super) fn soul_text(files: &crate::soul::SoulFiles) -> prompt::SoulText<'_> {
    prompt::SoulText {
        soul: &files.soul_md,
        skills: files.skills_md.as_deref(),
        name: files.name(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::NewEntry;

    fn entry(t: EntryType, content: &str, metadata: serde_json::Value) -> Entry {
        let e = NewEntry::new(t, content).metadata(metadata);
        Entry {
            id: 1,
            thread: "C1:1.0".into(),
            entry_type: e.entry_type,
            content: e.content,
            verb: None,
            user_id: Some("U1".into()),
            metadata: e.metadata,
            created_at: 0,
        }
    }

    fn check(result: bool) -> Entry {
        entry(
            EntryType::MentalQuery,
            USER_MODEL_CHECK,
            serde_json::json!({ "result": result }),
        )
    }

    fn said(t: EntryType) -> Entry {
        entry(t, "text", serde_json::json!({}))
    }

    #[test]
    fn the_previous_turns_user_model_check_decides() {
        let (message, reply) = (
            || said(EntryType::UserMessage),
            || said(EntryType::ExternalDialog),
        );
        let other = entry(
            EntryType::MentalQuery,
            "Is the user angry?",
            serde_json::json!({ "result": true }),
        );
        assert_eq!(last_user_model_check(&[]), None);
        assert_eq!(last_user_model_check(&[message()]), None, "a first turn");
        assert_eq!(
            last_user_model_check(&[
                message(),
                check(false),
                reply(),
                message(),
                check(true),
                reply(),
                message()
            ]),
            Some(true)
        );
        assert_eq!(
            last_user_model_check(&[message(), check(true), check(false), other, message()]),
            Some(false),
            "the latest check of that turn; another question is not the check"
        );
        assert_eq!(
            last_user_model_check(&[
                message(),
                check(true),
                reply(),
                message(),
                reply(),
                message()
            ]),
            None,
            "a turn that gave no answer: the true before it was for the turn after it"
        );
        assert_eq!(
            last_user_model_check(&[message(), check(true), reply(), message(), message()]),
            Some(true),
            "a message left unanswered (its turn failed) is passed over"
        );
        assert_eq!(
            last_user_model_check(&[message(), check(true), reply()]),
            Some(true),
            "a turn without a message (a quiet spell) reads the last turn's"
        );
    }

    #[test]
    fn history_is_what_was_said_not_what_was_thought() {
        let named = serde_json::json!({ "name": "Tom" });
        let entries = [
            entry(EntryType::UserMessage, "hi", named.clone()),
            entry(EntryType::InternalMonologue, "secret", named.clone()),
            check(true),
            entry(EntryType::ExternalDialog, "Hello, Tom.", named),
            entry(EntryType::UserMessage, "no name", serde_json::json!({})),
        ];
        assert_eq!(
            spoken(&entries),
            [
                Spoken {
                    by: Speaker::Person("Tom"),
                    text: "hi"
                },
                Spoken {
                    by: Speaker::Soul,
                    text: "Hello, Tom."
                },
                Spoken {
                    by: Speaker::Person("user"),
                    text: "no name"
                },
            ]
        );
    }
}
