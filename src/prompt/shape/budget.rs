//! How long each free-text section of a call's answer may be, from the call's token budget
//! (`[llm] max_tokens`): the longest answer a shape admits, tags and every required section
//! included, fits the budget at [`CHARS_PER_TOKEN`]. A model held to a grammar tends to fill
//! a section to its bound; were the bounds the [`limits`] alone, a long monologue could use up
//! the budget and the answer be cut before its later sections (its checks).
//!
//! The room left after the fixed text (tags, verbs, questions, separators; in the JSON form
//! the keys and punctuation) is shared among the free texts in proportion to their usual
//! bounds, which are never exceeded: a big budget gives the [`limits`] themselves. A budget too
//! small for the fixed text gives every text one character, and the answer does not fit.

use serde_json::Value;

use super::{limits, Form, Shape};
use crate::prompt::fence;
use crate::steps::{
    Step, ACTION, ACTION_SELECTION, DIALOGUE_VERBS, EMOTIONAL_STATES, MODEL_CHANGE_NOTE,
    MONOLOGUE_VERBS, REASONING, SOUL_STATE_KEYS,
};

/// Characters per token the bounds count on: a little under what small models' tokenizers
/// give for English prose (about 4), near what they give for tags and accented text.
pub const CHARS_PER_TOKEN: usize = 3;

/// The longest text of each free section of one call's answer, in characters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    pub monologue: usize,
    pub dialogue: usize,
    pub user_model: usize,
    pub note: usize,
    /// Each soul-state line's value.
    pub state_value: usize,
    pub reasoning: usize,
    pub affirmation: usize,
    pub journal: usize,
    /// A refusal's reason, and the closing note.
    pub consent_note: usize,
    pub summary: usize,
    /// Each memory, and each person note.
    pub memory: usize,
}

impl Bounds {
    /// The usual bounds: the [`limits`], the dialogue at `reply_chars`.
    pub fn largest(reply_chars: usize) -> Bounds {
        Bounds {
            monologue: limits::MONOLOGUE,
            dialogue: reply_chars,
            user_model: limits::USER_MODEL,
            note: limits::NOTE,
            state_value: limits::STATE_VALUE,
            reasoning: limits::REASONING,
            affirmation: limits::AFFIRMATION,
            journal: limits::JOURNAL,
            consent_note: limits::CONSENT_NOTE,
            summary: limits::SUMMARY,
            memory: limits::MEMORY,
        }
    }

    /// The bounds for `shape` in `form` within `max_tokens`.
    pub fn fit(shape: &Shape, form: Form, max_tokens: u32) -> Bounds {
        let reply_chars = match shape {
            Shape::Turn { reply_chars, .. } => *reply_chars,
            _ => 0,
        };
        let most = Bounds::largest(reply_chars);
        let budget = (max_tokens as usize).saturating_mul(CHARS_PER_TOKEN);
        let fixed = match form {
            Form::Gbnf => tag_text(shape),
            Form::JsonSchema => json_text(&super::schema::schema(shape, &most.each(|_| 0))),
        };
        let room = budget.saturating_sub(fixed);
        let free = free_text(shape, &most);
        if free <= room {
            return most;
        }
        // Each bound its share, rounded down, so that the shares add up to no more than the
        // room (u128: a bound times the room cannot overflow).
        most.each(|b| ((b as u128 * room as u128 / free as u128) as usize).max(1))
    }

    fn each(self, f: impl Fn(usize) -> usize) -> Bounds {
        Bounds {
            monologue: f(self.monologue),
            dialogue: f(self.dialogue),
            user_model: f(self.user_model),
            note: f(self.note),
            state_value: f(self.state_value),
            reasoning: f(self.reasoning),
            affirmation: f(self.affirmation),
            journal: f(self.journal),
            consent_note: f(self.consent_note),
            summary: f(self.summary),
            memory: f(self.memory),
        }
    }
}

/// The free text of the longest answer `shape` admits under `b`, in characters: each section
/// it may hold at its bound, as many times as it may come.
pub fn free_text(shape: &Shape, b: &Bounds) -> usize {
    match shape {
        Shape::Turn { steps, .. } if steps.is_empty() => b.dialogue,
        Shape::Turn { steps, .. } => steps
            .iter()
            .map(|step| match step {
                Step::InternalMonologue => b.monologue,
                Step::ExternalDialogue => b.dialogue,
                Step::UserModelUpdate => b.user_model + b.note,
                Step::SoulStateUpdate => SOUL_STATE_KEYS.len() * b.state_value,
                Step::MentalQuery | Step::UserModelCheck | Step::SoulStateCheck => 0,
            })
            .sum(),
        Shape::Selection { .. } => b.reasoning,
        Shape::Wakeup => b.affirmation,
        Shape::Journal => b.journal,
        Shape::Consent => 2 * b.consent_note,
        Shape::Dream { people } => b.summary + (limits::MEMORIES + people.len()) * b.memory,
    }
}

fn chars(s: &str) -> usize {
    s.chars().count()
}

fn longest(words: impl IntoIterator<Item = impl AsRef<str>>) -> usize {
    words
        .into_iter()
        .map(|w| chars(w.as_ref()))
        .max()
        .unwrap_or(0)
}

/// A tag's opening and closing.
fn tags(name: &str) -> usize {
    chars(&format!("<{name}></{name}>"))
}

/// A line break: between sections, or at the start of a text (the grammar allows one).
const BREAK: usize = 1;

/// What the longest answer of `shape` in its tag form (the grammar's) holds besides its free
/// text: tags, verbs, questions, answers, line breaks (one more than there are, between the
/// sections). Mirrors `gbnf`; `tests/it/constrained.rs` reads the grammars themselves and holds
/// this to them.
pub fn tag_text(shape: &Shape) -> usize {
    let said = |step: Step, verbs: &[&str]| {
        BREAK + tags(step.name()) + chars(" verb=\"\"") + longest(verbs) + BREAK
    };
    let check = |step: Step| BREAK + tags(step.name()) + chars("false");
    match shape {
        Shape::Turn { steps, .. } if steps.is_empty() => {
            said(Step::ExternalDialogue, &DIALOGUE_VERBS)
        }
        Shape::Turn {
            steps, questions, ..
        } => steps
            .iter()
            .map(|&step| match step {
                Step::InternalMonologue => said(step, &MONOLOGUE_VERBS),
                Step::ExternalDialogue => said(step, &DIALOGUE_VERBS),
                Step::MentalQuery => questions
                    .iter()
                    .map(|q| check(step) + chars(" question=\"\"") + chars(&fence::attribute(q)))
                    .sum(),
                Step::UserModelCheck | Step::SoulStateCheck => check(step),
                Step::UserModelUpdate => {
                    BREAK + tags(step.name()) + BREAK + BREAK + tags(MODEL_CHANGE_NOTE) + BREAK
                }
                Step::SoulStateUpdate => {
                    let emotional = chars(SOUL_STATE_KEYS[0]) + longest(EMOTIONAL_STATES);
                    let line = emotional.max(longest(&SOUL_STATE_KEYS[1..])) + chars(": ") + BREAK;
                    BREAK + tags(step.name()) + BREAK + SOUL_STATE_KEYS.len() * line
                }
            })
            .sum(),
        Shape::Selection { actions } => {
            let most = actions.len().clamp(1, limits::ACTIONS);
            let name = longest(actions.iter().map(|a| fence::neutralise(a)));
            let action = BREAK + tags(ACTION) + name;
            tags(ACTION_SELECTION) + tags(REASONING) + 3 * BREAK + most * action
        }
        Shape::Wakeup => tags("affirmation") + BREAK,
        Shape::Journal => tags("journal") + BREAK,
        Shape::Consent => {
            tags("consent")
                + chars("no")
                + 2 * (BREAK + BREAK)
                + tags("reason")
                + tags("closing_note")
        }
        Shape::Dream { people } => {
            let memory = BREAK + tags("memory") + chars(" importance=\"10\"") + BREAK;
            let id = longest(people.iter().map(|p| fence::attribute(p)));
            let person = BREAK + tags("person") + chars(" id=\"\"") + id + BREAK;
            tags("summary") + BREAK + limits::MEMORIES * memory + people.len() * person
        }
    }
}

/// The length of the longest JSON text `schema` admits, written compactly but for one blank
/// after each token (llama.cpp's schema-to-grammar lets one follow each): texts at their
/// `maxLength` (a character an escape writes counts as one), lists at their `maxItems`.
pub fn json_text(schema: &Value) -> usize {
    if let Some(options) = schema.get("anyOf").and_then(Value::as_array) {
        return options.iter().map(json_text).max().unwrap_or(0);
    }
    if let Some(words) = schema.get("enum").and_then(Value::as_array) {
        return 1 + words
            .iter()
            .map(|w| chars(&w.to_string()))
            .max()
            .unwrap_or(0);
    }
    let at = |k: &str| schema.get(k).and_then(Value::as_u64).unwrap_or(0) as usize;
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => {
            let props = schema.get("properties").and_then(Value::as_object);
            let pairs = props.map(|p| p.len()).unwrap_or(0);
            let each: usize = props
                .into_iter()
                .flatten()
                .map(|(k, v)| chars(&Value::from(k.as_str()).to_string()) + 1 + 2 + json_text(v))
                .sum();
            // `{ `, `} `, `, ` between the pairs; each pair `"key" : ` and its value.
            4 + 2 * pairs.saturating_sub(1) + each
        }
        Some("array") => {
            let most = at("maxItems");
            let item = schema.get("items").map(json_text).unwrap_or(0);
            4 + 2 * most.saturating_sub(1) + most * item
        }
        Some("string") => 3 + at("maxLength"),
        Some("boolean") => chars("false") + 1,
        Some("null") => chars("null") + 1,
        Some("integer") => {
            1 + [at("minimum"), at("maximum")]
                .iter()
                .map(|n| n.to_string().len())
                .max()
                .unwrap_or(1)
        }
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::library::MAIN_STEPS;

    fn shapes() -> Vec<Shape> {
        vec![
            Shape::Turn {
                steps: MAIN_STEPS.to_vec(),
                questions: vec![],
                reply_chars: 3000,
            },
            Shape::Turn {
                steps: vec![
                    Step::InternalMonologue,
                    Step::ExternalDialogue,
                    Step::MentalQuery,
                    Step::UserModelCheck,
                ],
                questions: vec!["Did they say \"bye\" & <leave>?".into(), "Done?".into()],
                reply_chars: 500,
            },
            Shape::Turn {
                steps: vec![],
                questions: vec![],
                reply_chars: 3000,
            },
            Shape::Selection {
                actions: vec!["think".into(), "ask_for_help".into(), "answer".into()],
            },
            Shape::Wakeup,
            Shape::Consent,
            Shape::Journal,
            Shape::Dream {
                people: vec!["U1".into(), "U0123456789".into()],
            },
        ]
    }

    #[test]
    fn a_big_budget_gives_the_usual_bounds() {
        for shape in shapes() {
            for form in [Form::Gbnf, Form::JsonSchema] {
                let reply = match &shape {
                    Shape::Turn { reply_chars, .. } => *reply_chars,
                    _ => 0,
                };
                assert_eq!(
                    Bounds::fit(&shape, form, 100_000),
                    Bounds::largest(reply),
                    "{shape:?}"
                );
            }
        }
    }

    #[test]
    fn the_longest_answer_fits_each_budget_and_uses_most_of_it() {
        for shape in shapes() {
            for form in [Form::Gbnf, Form::JsonSchema] {
                let fixed = match form {
                    Form::Gbnf => tag_text(&shape),
                    Form::JsonSchema => json_text(&super::super::schema::schema(
                        &shape,
                        &Bounds::fit(&shape, form, 100_000).each(|_| 0),
                    )),
                };
                let usual = free_text(&shape, &Bounds::fit(&shape, form, 100_000)) + fixed;
                let mut last = 0;
                for tokens in [512, 768, 1024, 1536, 2048, 3000, 4096, 8192] {
                    let b = Bounds::fit(&shape, form, tokens);
                    let longest = free_text(&shape, &b) + fixed;
                    let budget = tokens as usize * CHARS_PER_TOKEN;
                    assert!(
                        longest <= budget,
                        "{shape:?} {form:?} {tokens}: {longest} > {budget}"
                    );
                    assert!(longest <= usual, "never above the usual bounds");
                    if usual > budget {
                        // Only rounding down is lost: less than a character per text.
                        assert!(
                            longest + 20 >= budget,
                            "{shape:?} {form:?} {tokens}: {longest} of {budget}"
                        );
                    } else {
                        assert_eq!(longest, usual, "{shape:?} {form:?} {tokens}");
                    }
                    assert!(longest >= last, "more budget, never shorter");
                    last = longest;
                }
            }
        }
    }

    #[test]
    fn the_main_turn_at_1024_tokens_has_room_for_every_section() {
        let shape = &shapes()[0];
        let b = Bounds::fit(shape, Form::Gbnf, 1024);
        let fixed = tag_text(shape);
        assert!(fixed < 800, "{fixed}");
        assert!(free_text(shape, &b) + fixed <= 3072);
        // Shares in proportion to the usual bounds.
        assert!(
            b.monologue < limits::MONOLOGUE && b.dialogue < 3000,
            "{b:?}"
        );
        assert!(b.monologue.abs_diff(b.dialogue * 2 / 3) <= 1, "{b:?}");
        assert!(b.dialogue > 300, "{b:?}");
    }

    #[test]
    fn json_text_counts_a_blank_after_each_token() {
        let s = serde_json::json!({"type": "object", "properties": {
            "a": {"type": "string", "maxLength": 3},
            "b": {"type": "boolean"},
            "c": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 10}, "maxItems": 2},
            "d": {"anyOf": [{"type": "null"}, {"type": "string", "enum": ["yes", "no"]}]},
        }});
        let longest =
            "{ \"a\" : \"xxx\" , \"b\" : false , \"c\" : [ 10 , 10 ] , \"d\" : \"yes\" } ";
        assert_eq!(json_text(&s), longest.chars().count());
    }
}
