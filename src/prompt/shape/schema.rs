//! A shape as a JSON Schema, for servers that take only JSON Schema (Ollama, OpenAI-compatible
//! hosted APIs; vLLM and llama.cpp take it too).
//!
//! One object whose keys are the steps' tag names, in the order asked, all required (the form
//! strict servers demand): a spoken or thought step is `{"verb", "text"}` with the verbs as an
//! enum; the mental queries are one object keyed by the exact questions, each a boolean; a
//! check is a boolean; an update is its object or `null` (read only when its check said
//! true, as with tags). `parse::json` reads the answer into the same values the tag parser
//! gives. Key order is the schema's order: servers that generate from the schema write the
//! monologue before the dialogue.

use serde_json::{json, Map, Value};

use super::budget::Bounds;
use super::{limits, Shape};
use crate::steps::{
    field, Step, DIALOGUE_VERBS, EMOTIONAL_STATES, MODEL_CHANGE_NOTE, MONOLOGUE_VERBS, REASONING,
    SOUL_STATE_KEYS,
};

/// The schema of `shape`, its texts held to `b`.
pub fn schema(shape: &Shape, b: &Bounds) -> Value {
    match shape {
        Shape::Turn {
            steps, questions, ..
        } => turn(steps, questions, b),
        Shape::Selection { actions } => object(vec![
            (REASONING, text(b.reasoning)),
            (
                field::ACTIONS,
                json!({
                    "type": "array",
                    "items": { "type": "string", "enum": actions },
                    "minItems": 1,
                    "maxItems": actions.len().clamp(1, limits::ACTIONS),
                }),
            ),
        ]),
        Shape::Wakeup => object(vec![("affirmation", text(b.affirmation))]),
        Shape::Journal => object(vec![("journal", text(b.journal))]),
        Shape::Consent => object(vec![
            (
                "consent",
                json!({ "type": "string", "enum": ["yes", "no"] }),
            ),
            ("reason", any_text(b.consent_note)),
            ("closing_note", any_text(b.consent_note)),
        ]),
        Shape::Dream { people } => {
            let mut keys = vec![
                ("summary", text(b.summary)),
                (
                    "memory",
                    list(
                        object(vec![
                            (
                                "importance",
                                json!({ "type": "integer", "minimum": 1, "maximum": 10 }),
                            ),
                            (field::TEXT, text(b.memory)),
                        ]),
                        limits::MEMORIES,
                    ),
                ),
            ];
            if !people.is_empty() {
                keys.push((
                    "person",
                    list(
                        object(vec![
                            ("id", json!({ "type": "string", "enum": people })),
                            (field::TEXT, text(b.memory)),
                        ]),
                        people.len(),
                    ),
                ));
            }
            object(keys)
        }
    }
}

fn turn(steps: &[Step], questions: &[String], b: &Bounds) -> Value {
    let dialogue_only = [Step::ExternalDialogue];
    let steps = if steps.is_empty() {
        &dialogue_only[..]
    } else {
        steps
    };
    let mut keys = Vec::new();
    for step in steps {
        let value = match step {
            Step::InternalMonologue => said(&MONOLOGUE_VERBS, b.monologue),
            Step::ExternalDialogue => said(&DIALOGUE_VERBS, b.dialogue),
            Step::MentalQuery if questions.is_empty() => continue,
            Step::MentalQuery => {
                let mut props = Map::new();
                for q in questions {
                    props.insert(q.clone(), json!({ "type": "boolean" }));
                }
                json!({
                    "type": "object",
                    "properties": props,
                    "required": questions,
                    "additionalProperties": false,
                })
            }
            Step::UserModelCheck | Step::SoulStateCheck => json!({ "type": "boolean" }),
            Step::UserModelUpdate => nullable(object(vec![
                (field::MODEL, text(b.user_model)),
                (MODEL_CHANGE_NOTE, text(b.note)),
            ])),
            Step::SoulStateUpdate => nullable(non_empty(list(
                json!({
                    "anyOf": [
                        object(vec![
                            (field::KEY, json!({ "type": "string", "enum": [SOUL_STATE_KEYS[0]] })),
                            (field::VALUE, json!({ "type": "string", "enum": EMOTIONAL_STATES })),
                        ]),
                        object(vec![
                            (field::KEY, json!({ "type": "string", "enum": SOUL_STATE_KEYS[1..] })),
                            (field::VALUE, json!({ "type": "string", "maxLength": b.state_value })),
                        ]),
                    ]
                }),
                SOUL_STATE_KEYS.len(),
            ))),
        };
        keys.push((step.name(), value));
    }
    object(keys)
}

/// An object with exactly these keys, in this order, all required.
fn object(keys: Vec<(&str, Value)>) -> Value {
    let required: Vec<&str> = keys.iter().map(|(k, _)| *k).collect();
    let mut props = Map::new();
    for (k, v) in keys {
        props.insert(k.to_string(), v);
    }
    json!({
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": false,
    })
}

/// A spoken or thought step.
fn said(verbs: &[&str], max: usize) -> Value {
    object(vec![
        (field::VERB, json!({ "type": "string", "enum": verbs })),
        (field::TEXT, text(max)),
    ])
}

/// Text that is not empty, at most `max` characters.
fn text(max: usize) -> Value {
    json!({ "type": "string", "minLength": 1, "maxLength": max })
}

/// Text that may be empty.
fn any_text(max: usize) -> Value {
    json!({ "type": "string", "maxLength": max })
}

fn list(items: Value, most: usize) -> Value {
    json!({ "type": "array", "items": items, "maxItems": most })
}

/// A list of at least one.
fn non_empty(mut list: Value) -> Value {
    list["minItems"] = json!(1);
    list
}

fn nullable(v: Value) -> Value {
    json!({ "anyOf": [v, { "type": "null" }] })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turns_keys_are_its_steps_in_order() {
        let shape = Shape::Turn {
            steps: vec![
                Step::InternalMonologue,
                Step::ExternalDialogue,
                Step::MentalQuery,
                Step::UserModelCheck,
            ],
            questions: vec!["Is it <late>?".into(), "Done?".into()],
            reply_chars: 100,
        };
        let s = schema(&shape, &Bounds::largest(100));
        let keys: Vec<&String> = s["properties"].as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "internal_monologue",
                "external_dialogue",
                "mental_query",
                "user_model_check"
            ]
        );
        assert_eq!(s["required"].as_array().unwrap().len(), 4);
        let q: Vec<&String> = s["properties"]["mental_query"]["properties"]
            .as_object()
            .unwrap()
            .keys()
            .collect();
        assert_eq!(q, ["Is it <late>?", "Done?"], "the questions as asked");
        assert_eq!(
            s["properties"]["external_dialogue"]["properties"]["text"]["maxLength"],
            100
        );
    }
}
