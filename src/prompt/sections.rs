//! A built prompt's sections, as the builder wrote them: each section's name and its text,
//! for the soul's window (what filled the context, how large each part was, whether it sat
//! in the cached prefix).
//!
//! The builder marks where each section begins as it writes it (`Layout`), so the sections
//! are known without reading the text back: a person's words that hold a section's tag
//! (`</instructions>`) never make a section. The sections tile the prompt: the system part's
//! sections are the system part, the user part's are the user part, and between them the
//! `history` section (the earlier messages, as roles, with the separators around them), so
//! [`whole`] — every section's text in order — is the prompt as one text, and a section's
//! place in it is the sum of the characters before it. Pure: no I/O.

use std::borrow::Cow;

use super::{Prompt, Role};

/// The name of the section between the system part and the turn's sections.
pub const HISTORY: &str = "history";

/// Where the sections of a prompt's two written parts begin (byte offsets), in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Layout {
    pub system: Vec<(&'static str, usize)>,
    pub user: Vec<(&'static str, usize)>,
}

/// Marks a section beginning at the end of `out`.
pub(super) fn mark(marks: &mut Vec<(&'static str, usize)>, name: &'static str, out: &str) {
    marks.push((name, out.len()));
}

/// One section of a built prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptSection<'a> {
    /// Its tag (`soul`, `skills`, `cognitive_steps`, `history`, `soul_state`, `inner_life`,
    /// `intuition`, `user_model`, `process`, `implicit_machine`, `instructions`, `quiet`,
    /// `attachments`, `message`, `thread_summary`).
    pub name: &'static str,
    /// Its text as written (the history as roles; the others a slice of their part).
    pub text: Cow<'a, str>,
    /// Whether it sits in the system part, the prefix a provider may cache.
    pub cached: bool,
}

/// The prompt's sections in order: the system part's, the history, the user part's.
pub fn sections(p: &Prompt) -> Vec<PromptSection<'_>> {
    let mut out = Vec::with_capacity(p.layout.system.len() + p.layout.user.len() + 1);
    cut(&p.system, &p.layout.system, true, &mut out);
    out.push(PromptSection {
        name: HISTORY,
        text: Cow::Owned(history_text(p)),
        cached: false,
    });
    cut(&p.user, &p.layout.user, false, &mut out);
    out
}

/// The prompt as one text: every section's, in order.
pub fn whole(sections: &[PromptSection]) -> String {
    let mut out = String::with_capacity(sections.iter().map(|s| s.text.len()).sum());
    for s in sections {
        out.push_str(&s.text);
    }
    out
}

/// `part` cut at its marks. A part the builder left unmarked (none is) would be one section
/// named after it, so nothing of it is ever lost.
fn cut<'a>(
    part: &'a str,
    marks: &[(&'static str, usize)],
    cached: bool,
    out: &mut Vec<PromptSection<'a>>,
) {
    if part.is_empty() {
        return;
    }
    let first = marks.first().map_or(part.len(), |(_, at)| *at);
    if first > 0 {
        let name = if cached { "system" } else { "user" };
        out.push(piece(name, &part[..first], cached));
    }
    for (i, (name, start)) in marks.iter().enumerate() {
        let end = marks.get(i + 1).map_or(part.len(), |(_, at)| *at);
        if let Some(text) = part.get(*start..end) {
            out.push(piece(name, text, cached));
        }
    }
}

fn piece<'a>(name: &'static str, text: &'a str, cached: bool) -> PromptSection<'a> {
    PromptSection {
        name,
        text: Cow::Borrowed(text),
        cached,
    }
}

/// The earlier messages as the window shows them, between the separators that set them off
/// from the system part and the turn: `[user]` or `[assistant]`, then the text.
fn history_text(p: &Prompt) -> String {
    let mut out = String::from("\n\n");
    for m in &p.history {
        out.push_str(match m.role {
            Role::User => "[user]\n",
            Role::Assistant => "[assistant]\n",
        });
        out.push_str(&m.text);
        out.push_str("\n\n");
    }
    out
}

#[cfg(test)]
mod tests;
