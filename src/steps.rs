//! The catalogue of tag names, each spelled here once: each cognitive step's tag (and the
//! change note that goes with a user-model update), its default instruction and the example
//! the instruction shows, the questions the two checks are recorded under, and the names of
//! the prompt's own sections.
//!
//! Shared by the prompt (which writes the instructions and sections) and the parser (which
//! must not take an echoed example for an answer, nor show an echoed section). Owns no I/O
//! and no policy about when a step runs.

use std::fmt;

/// One cognitive step a process can ask of the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Step {
    InternalMonologue,
    ExternalDialogue,
    MentalQuery,
    UserModelCheck,
    UserModelUpdate,
    SoulStateCheck,
    SoulStateUpdate,
}

impl Step {
    pub const ALL: [Step; 7] = [
        Step::InternalMonologue,
        Step::ExternalDialogue,
        Step::MentalQuery,
        Step::UserModelCheck,
        Step::UserModelUpdate,
        Step::SoulStateCheck,
        Step::SoulStateUpdate,
    ];

    /// The name used in process files and in the tag.
    pub fn name(self) -> &'static str {
        match self {
            Step::InternalMonologue => "internal_monologue",
            Step::ExternalDialogue => "external_dialogue",
            Step::MentalQuery => "mental_query",
            Step::UserModelCheck => "user_model_check",
            Step::UserModelUpdate => "user_model_update",
            Step::SoulStateCheck => "soul_state_check",
            Step::SoulStateUpdate => "soul_state_update",
        }
    }

    pub fn from_name(name: &str) -> Option<Step> {
        Step::ALL.into_iter().find(|s| s.name() == name)
    }

    /// The default instruction for this step: what it is for and how to write it.
    pub fn default_instruction(self) -> &'static str {
        match self {
            Step::InternalMonologue => {
                "Think privately before you answer: what the person needs, what you know, what you feel. Nobody but you will ever read this."
            }
            Step::ExternalDialogue => {
                "What you say to the person, in your own voice as soul.md describes it. Only this is shown to them."
            }
            Step::MentalQuery => {
                "Answer each question this turn's instructions list, about the conversation so far, with true or false, honestly."
            }
            Step::UserModelCheck => {
                "true if this message taught you something new and lasting about the person (who they are, how they work, what matters to them); otherwise false."
            }
            Step::UserModelUpdate => {
                "Only when your user model check is true: rewrite the whole user model this turn shows you, keeping its sections and adding to them, then say in one sentence what shifted."
            }
            Step::SoulStateCheck => {
                "true if your own state has changed during this exchange (mood, topic, project or task); otherwise false."
            }
            Step::SoulStateUpdate => {
                "Only when your soul state check is true: one `key: value` line for each key that changed. Keys: emotionalState (neutral, engaged, focused, frustrated or sardonic), currentProject, currentTask, currentTopic, conversationSummary."
            }
        }
    }

    /// The tag skeleton shown after the instruction, built from the step's name and the
    /// placeholders of [`EXAMPLE_TEXTS`], so the parser can recognise an echo.
    pub fn example(self) -> String {
        let name = self.name();
        let spoken = |text: &str| format!("<{name} verb=\"{EXAMPLE_VERB}\">\n{text}\n</{name}>");
        let block = |text: &str| format!("<{name}>\n{text}\n</{name}>");
        let answer = || format!("<{name}>{TRUE_OR_FALSE}</{name}>");
        match self {
            Step::InternalMonologue => spoken(PRIVATE_REASONING),
            Step::ExternalDialogue => spoken(WHAT_YOU_SAY),
            Step::MentalQuery => mental_query(EXAMPLE_QUESTION),
            Step::UserModelCheck | Step::SoulStateCheck => answer(),
            Step::UserModelUpdate => format!(
                "{}\n<{MODEL_CHANGE_NOTE}>{SHIFTED}</{MODEL_CHANGE_NOTE}>",
                block(REWRITTEN_MODEL)
            ),
            Step::SoulStateUpdate => block(KEY_VALUE),
        }
    }
}

/// A `mental_query` line asking `question`, to be answered true or false. The question is
/// written as given: the caller escapes it for an attribute.
pub fn mental_query(question: &str) -> String {
    let name = Step::MentalQuery.name();
    format!("<{name} question=\"{question}\">{TRUE_OR_FALSE}</{name}>")
}

/// The tag of the one-sentence note written with a user-model update: part of that step,
/// not a step of its own.
pub const MODEL_CHANGE_NOTE: &str = "model_change_note";

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

const PRIVATE_REASONING: &str = "your private reasoning";
const WHAT_YOU_SAY: &str = "what you say";
const TRUE_OR_FALSE: &str = "true or false";
const REWRITTEN_MODEL: &str = "the whole rewritten user model in markdown";
const SHIFTED: &str = "one sentence on what shifted";
const KEY_VALUE: &str = "key: value";

/// Placeholder contents used by [`Step::example`]; an element whose whole content is one of
/// these is an echo of the instructions, not an answer.
pub const EXAMPLE_TEXTS: [&str; 7] = [
    PRIVATE_REASONING,
    WHAT_YOU_SAY,
    TRUE_OR_FALSE,
    REWRITTEN_MODEL,
    SHIFTED,
    KEY_VALUE,
    EXAMPLE_QUESTION,
];

/// The placeholder question of the `mental_query` example.
pub const EXAMPLE_QUESTION: &str = "QUESTION";

/// The dossier steps' tags: asked after the others only on a turn whose message names someone
/// or something besides the speaker (see `dossier`), so they are not `Step`s a process lists.
pub const DOSSIER_CHECK: &str = "dossier_check";
/// A dossier written whole, with `name`, `kind` and `aliases` attributes.
pub const DOSSIER_UPDATE: &str = "dossier_update";
/// The one-sentence note after a dossier update.
pub const DOSSIER_CHANGE_NOTE: &str = "dossier_change_note";
/// The three, for the parser and the fence.
pub const DOSSIER_TAGS: [&str; 3] = [DOSSIER_CHECK, DOSSIER_UPDATE, DOSSIER_CHANGE_NOTE];

/// The question a user-model check is recorded under in working memory (a `mentalQuery`
/// entry holding the answer); the user-model gate reads the last one.
pub const USER_MODEL_CHECK: &str = "Did I learn something new about the user model?";
/// The question a soul-state check is recorded under in working memory.
pub const SOUL_STATE_CHECK: &str = "Has my soul state changed?";

/// An ISM's selection answer: the actions the soul chooses, in order, and why.
pub const ACTION_SELECTION: &str = "action_selection";
/// One chosen action inside [`ACTION_SELECTION`].
pub const ACTION: &str = "action";
/// The reasoning inside [`ACTION_SELECTION`].
pub const REASONING: &str = "reasoning";
/// A tool action's arguments, a JSON object right after its `<action>`.
pub const ARGUMENTS: &str = "arguments";
/// The placeholders of the selection example.
pub const EXAMPLE_ACTION: &str = "ACTION NAME";
const EXAMPLE_REASONING: &str = "why, in a sentence or two";

/// The selection answer's skeleton, shown with the instructions.
pub fn selection_example() -> String {
    format!(
        "<{ACTION_SELECTION}>\n<{REASONING}>{EXAMPLE_REASONING}</{REASONING}>\n<{ACTION}>{EXAMPLE_ACTION}</{ACTION}>\n</{ACTION_SELECTION}>"
    )
}

/// The placeholder verb of the examples.
pub const EXAMPLE_VERB: &str = "VERB";

/// The section tags the prompt is built from (`<soul>`, `<user_model name="…">` …). They are
/// structure: a model that echoes the prompt writes them back, and the parser drops them and
/// their content from the text it would otherwise show. A prompt test holds this list to
/// what `build_prompt` emits.
pub const PROMPT_SECTIONS: [&str; 16] = [
    "thread_summary",
    "soul",
    "skills",
    "cognitive_steps",
    "soul_state",
    "inner_life",
    // The inner life's answer lines: read by the engine (psyche::answer), never shown.
    "stance_shift",
    "intention_update",
    "intuition",
    "user_model",
    "dossier",
    "process",
    "implicit_machine",
    "instructions",
    "quiet",
    "current_message",
];

/// The soul-state keys a model may set with a soul-state update, as its instruction names them.
pub const SOUL_STATE_KEYS: [&str; 5] = [
    "emotionalState",
    "currentProject",
    "currentTask",
    "currentTopic",
    "conversationSummary",
];

/// The values the instruction offers for `emotionalState`.
pub const EMOTIONAL_STATES: [&str; 5] = ["neutral", "engaged", "focused", "frustrated", "sardonic"];

/// The field names of an answer's JSON form (see `prompt::shape`): the steps are keyed by
/// their tag names; these are the names inside them.
pub mod field {
    /// A spoken or thought step's verb.
    pub const VERB: &str = "verb";
    /// A spoken or thought step's text, a memory's or a person note's text.
    pub const TEXT: &str = "text";
    /// The rewritten user model inside a user-model update (its note is
    /// [`super::MODEL_CHANGE_NOTE`]).
    pub const MODEL: &str = "model";
    /// A soul-state line's key and value.
    pub const KEY: &str = "key";
    pub const VALUE: &str = "value";
    /// An ISM selection's chosen actions (the parser reads `reasoning` beside them).
    pub const ACTIONS: &str = "actions";
}

/// Verbs for the internal monologue (from the seed's verb system).
pub const MONOLOGUE_VERBS: [&str; 10] = [
    "thought",
    "mused",
    "pondered",
    "wondered",
    "considered",
    "reflected",
    "entertained",
    "recalled",
    "noticed",
    "weighed",
];

/// Verbs for the external dialogue, including those the emotional-state table adds.
pub const DIALOGUE_VERBS: [&str; 22] = [
    "said",
    "explained",
    "offered",
    "suggested",
    "noted",
    "observed",
    "replied",
    "interjected",
    "declared",
    "quipped",
    "remarked",
    "detailed",
    "pointed out",
    "corrected",
    "analyzed",
    "traced",
    "insisted",
    "observed dryly",
    "answered",
    "asked",
    "added",
    "acknowledged",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for step in Step::ALL {
            assert_eq!(Step::from_name(step.name()), Some(step));
        }
        assert_eq!(Step::from_name("dream"), None);
    }

    #[test]
    fn the_soul_state_instruction_names_every_key_and_state() {
        let text = Step::SoulStateUpdate.default_instruction();
        for word in SOUL_STATE_KEYS.iter().chain(&EMOTIONAL_STATES) {
            assert!(text.contains(word), "{word}");
        }
    }

    #[test]
    fn every_example_placeholder_appears_in_an_example() {
        let all: String = Step::ALL.iter().map(|s| s.example()).collect();
        for text in EXAMPLE_TEXTS {
            assert!(all.contains(text), "{text} is not in any example");
        }
    }
}
