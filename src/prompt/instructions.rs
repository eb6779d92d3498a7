//! The cognitive instructions: which tagged sections to write, how, and with which verbs.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::fence;
use crate::steps::{self, Step, DIALOGUE_VERBS, MONOLOGUE_VERBS};

/// What the process contributes to the instructions.
#[derive(Debug, Clone, Default)]
pub struct ProcessInstructions {
    /// Replacement texts for steps' default instructions.
    pub overrides: BTreeMap<Step, String>,
    /// Extra text for this process, added after the steps.
    pub note: Option<String>,
    /// Yes/no questions for the `mental_query` step.
    pub mental_queries: Vec<String>,
}

fn title(step: Step) -> &'static str {
    match step {
        Step::InternalMonologue => "Internal monologue",
        Step::ExternalDialogue => "External dialogue",
        Step::MentalQuery => "Mental queries",
        Step::UserModelCheck => "User model check",
        Step::UserModelUpdate => "User model update",
        Step::SoulStateCheck => "Soul state check",
        Step::SoulStateUpdate => "Soul state update",
    }
}

/// Writes the instructions for `steps` into `out`.
pub fn write(out: &mut String, steps: &[Step], process: &ProcessInstructions) {
    out.push_str(
        "Respond with the XML-tagged sections below, in this order, and write nothing outside them. \
         Use each tag once. Do not copy the placeholder text.\n",
    );
    for (i, step) in steps.iter().enumerate() {
        let _ = write!(out, "\n### {}. {}\n", i + 1, title(*step));
        let text = process
            .overrides
            .get(step)
            .map(String::as_str)
            .unwrap_or_else(|| step.default_instruction());
        out.push_str(text.trim());
        out.push('\n');
        match step {
            Step::MentalQuery => {
                for q in &process.mental_queries {
                    out.push_str(&steps::mental_query(&fence::attribute(q)));
                    out.push('\n');
                }
            }
            _ => {
                out.push_str(&step.example());
                out.push('\n');
            }
        }
        match step {
            Step::InternalMonologue => {
                let _ = writeln!(out, "VERB is one of: {}.", MONOLOGUE_VERBS.join(", "));
            }
            Step::ExternalDialogue => {
                let _ = writeln!(
                    out,
                    "VERB is one of: {}; let your emotional state choose it.",
                    DIALOGUE_VERBS.join(", ")
                );
            }
            _ => {}
        }
    }
    if let Some(note) = process.note.as_deref().filter(|n| !n.trim().is_empty()) {
        out.push('\n');
        out.push_str(note.trim());
        out.push('\n');
    }
}
