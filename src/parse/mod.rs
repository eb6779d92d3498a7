//! Turns model text into a `Cognition`: monologue, dialogue, checks and updates; from the
//! tagged answer the instructions describe, or (`json`) from the JSON form a server held the
//! model to, into the same values.
//!
//! Tolerant of every malformation in docs/llm.md (each has a named test in `tests.rs`):
//! only known tag names are structure, open tags auto-close, echoes of the instructions are
//! skipped, echoed prompt sections never reach the fallback reply, and the reply is never
//! empty and never a raw tag. Knows nothing about which
//! steps were requested (the engine decides what to act on) and does no I/O.

pub mod attachment;
pub mod json;
mod json_stream;
pub mod dossier;
mod scan;
mod selection;
mod stream;
#[cfg(test)]
mod tests;
pub mod text;

pub use json::{json_as_tags, parse_json_response, render_json};
pub use selection::{parse_selection, Selection};
pub use stream::{DialogueStream, Passed};

use scan::{Element, Tag};
use serde::Serialize;

use crate::steps::{EXAMPLE_QUESTION, EXAMPLE_TEXTS, EXAMPLE_VERB};

/// The reply sent when the model said nothing usable.
pub const EMPTY_REPLY_APOLOGY: &str =
    "Sorry, I lost my train of thought there. Could you say that again?";

/// A spoken or thought line with the verb the model chose.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Said {
    pub text: String,
    pub verb: Option<String>,
}

/// Where the reply came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ReplySource {
    /// An `<external_dialogue>` element.
    Dialogue,
    /// No dialogue: the text outside the recognised tags.
    Fallback,
    /// Nothing usable: a short apology.
    Apology,
}

/// A yes/no question the process asked within the same call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MentalQuery {
    pub question: String,
    pub answer: Option<bool>,
}

/// Everything recognised in one model answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cognition {
    pub monologue: Option<Said>,
    pub dialogue: Option<Said>,
    /// What the user is shown: the dialogue, the fallback or the apology, cut to length.
    pub reply: String,
    pub reply_source: ReplySource,
    pub user_model_check: Option<bool>,
    pub user_model_update: Option<String>,
    pub model_change_note: Option<String>,
    pub soul_state_check: Option<bool>,
    pub soul_state_update: Vec<(String, String)>,
    pub mental_queries: Vec<MentalQuery>,
}

/// Parses one model answer. `max_reply_chars` bounds the reply; from 1 up, the reply is
/// never empty (the config keeps it at 16 or more).
pub fn parse_response(raw: &str, max_reply_chars: usize) -> Cognition {
    let reasoned = text::strip_reasoning(raw);
    let body = text::unwrap_fence(&reasoned);
    let scanned = scan::scan(body);
    let elements: Vec<&Element> = scanned.elements.iter().filter(|e| !is_echo(e)).collect();

    let first_said = |tag: Tag| {
        elements
            .iter()
            .filter(|e| e.tag == tag)
            .map(|e| said(e))
            .find(|s| !s.text.is_empty())
    };
    let last_bool = |tag: Tag| {
        elements
            .iter()
            .rev()
            .filter(|e| e.tag == tag)
            .find_map(|e| text::parse_bool(&text::decode_content(e.content)))
    };
    let last_text = |tag: Tag| {
        elements
            .iter()
            .rev()
            .filter(|e| e.tag == tag)
            .map(|e| text::tidy(&text::decode_content(e.content)))
            .find(|t| !t.is_empty())
    };

    let monologue = first_said(Tag::Monologue);
    let dialogue = first_said(Tag::Dialogue).map(|mut d| {
        d.text = clean_dialogue(&d.text);
        d
    });
    let (reply, reply_source) = match &dialogue {
        Some(d) if !d.text.is_empty() => (d.text.clone(), ReplySource::Dialogue),
        _ => {
            let fallback = clean_dialogue(&text::decode_entities(&text::drop_fence_lines(
                &without_structure(&attachment::without_notes(&dossier::without_dossiers(
                    &scanned.outside,
                ))),
            )));
            if fallback.is_empty() {
                (EMPTY_REPLY_APOLOGY.to_string(), ReplySource::Apology)
            } else {
                (fallback, ReplySource::Fallback)
            }
        }
    };
    let soul_state_update = elements
        .iter()
        .rev()
        .find(|e| e.tag == Tag::SoulStateUpdate)
        .map(|e| text::parse_key_values(&text::decode_content(e.content)))
        .unwrap_or_default();
    let mental_queries = elements
        .iter()
        .filter(|e| e.tag == Tag::MentalQuery)
        .filter_map(|e| {
            let question = text::decode_entities(e.attr("question")?.trim());
            let answer = text::parse_bool(&text::decode_content(e.content));
            Some(MentalQuery { question, answer })
        })
        .collect();

    Cognition {
        monologue,
        dialogue: dialogue.filter(|d| !d.text.is_empty()),
        reply: text::truncate_chars(&reply, max_reply_chars),
        reply_source,
        user_model_check: last_bool(Tag::UserModelCheck),
        user_model_update: last_text(Tag::UserModelUpdate),
        model_change_note: last_text(Tag::ModelChangeNote),
        soul_state_check: last_bool(Tag::SoulStateCheck),
        soul_state_update,
        mental_queries,
    }
}

/// The text outside the cognitive tags without echoed prompt sections, dropped again until
/// nothing changes: removing one tag can join the halves of another (`<inter` + `nal_monologue>`).
fn without_structure(outside: &str) -> String {
    let mut text = text::drop_prompt_sections(outside);
    loop {
        let next = text::drop_prompt_sections(&scan::scan(&text).outside);
        if next == text {
            return next;
        }
        text = next;
    }
}

fn said(e: &Element) -> Said {
    let verb = e
        .attr("verb")
        .map(|v| text::decode_entities(v.trim()))
        .filter(|v| !v.is_empty());
    Said {
        text: text::tidy(&text::decode_content(e.content)),
        verb,
    }
}

fn clean_dialogue(s: &str) -> String {
    let s = text::tidy(s);
    let s = text::strip_speaker_prefix(&s);
    text::strip_wrapping_quotes(s).to_string()
}

/// An element that repeats the instructions' example instead of answering.
fn is_echo(e: &Element) -> bool {
    if e.attr("verb").is_some_and(|v| v.trim() == EXAMPLE_VERB) {
        return true;
    }
    if e.attr("question")
        .is_some_and(|q| q.trim() == EXAMPLE_QUESTION)
    {
        return true;
    }
    let content = e.content.trim();
    !content.is_empty()
        && EXAMPLE_TEXTS
            .iter()
            .any(|x| content.eq_ignore_ascii_case(x))
}

/// Writes a cognition back as tagged text, in the instructions' shape. Parsing the result
/// gives the same cognition (a property test holds it to that).
pub fn render(c: &Cognition) -> String {
    let mut out = String::new();
    let esc = |s: &str| quick_xml::escape::escape(s).into_owned();
    let verb = |v: &Option<String>| {
        v.as_ref()
            .map(|v| format!(" verb=\"{}\"", esc(v)))
            .unwrap_or_default()
    };
    let spoken = |tag: Tag, s: &Said| {
        let name = tag.name();
        format!("<{name}{}>\n{}\n</{name}>\n", verb(&s.verb), esc(&s.text))
    };
    let block = |tag: Tag, text: &str| {
        let name = tag.name();
        format!("<{name}>{text}</{name}>\n")
    };
    if let Some(m) = &c.monologue {
        out += &spoken(Tag::Monologue, m);
    }
    if let Some(d) = &c.dialogue {
        out += &spoken(Tag::Dialogue, d);
    }
    for q in &c.mental_queries {
        let answer = q.answer.map_or("unknown".to_string(), |a| a.to_string());
        let name = Tag::MentalQuery.name();
        out += &format!(
            "<{name} question=\"{}\">{answer}</{name}>\n",
            esc(&q.question)
        );
    }
    if let Some(b) = c.user_model_check {
        out += &block(Tag::UserModelCheck, &b.to_string());
    }
    if let Some(m) = &c.user_model_update {
        out += &block(Tag::UserModelUpdate, &format!("\n{}\n", esc(m)));
    }
    if let Some(n) = &c.model_change_note {
        out += &block(Tag::ModelChangeNote, &esc(n));
    }
    if let Some(b) = c.soul_state_check {
        out += &block(Tag::SoulStateCheck, &b.to_string());
    }
    if !c.soul_state_update.is_empty() {
        let mut lines = String::from("\n");
        for (k, v) in &c.soul_state_update {
            lines += &format!("{}: {}\n", esc(k), esc(v));
        }
        out += &block(Tag::SoulStateUpdate, &lines);
    }
    out
}
