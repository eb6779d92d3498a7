//! Reads an ISM selection: the actions the model chose, in order, and its reasoning.
//!
//! Tolerant as the rest of parse: the `<action_selection>` form the prompt asks for (tags in
//! any case, the wrapper optional or left open, several names in one `<action>` separated by
//! commas or lines, entities decoded), or the seed's JSON (`{"actions": [...], "reasoning":
//! "..."}`, also inside a code fence or prose, `"action"` for one), after any `<think>` block
//! a reasoning model wrote. Prose with neither is no selection. A tool action's arguments
//! follow it: `<arguments>{…}</arguments>` after its `<action>`, or `"arguments"` beside its
//! `"name"` in the JSON form; they are kept as written (the engine reads and checks them).
//! Knows nothing of which actions exist.

use serde_json::Value;

use super::text::{decode_entities, strip_reasoning};
use crate::steps::{ACTION, ACTION_SELECTION, ARGUMENTS, EXAMPLE_ACTION, REASONING};

/// What a selection said.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Selection {
    /// The names chosen, in order, as written (trimmed).
    pub actions: Vec<String>,
    pub reasoning: String,
    /// Arguments as written, each with the action name it followed.
    pub arguments: Vec<(String, String)>,
}

/// The selection in `raw`, or `None` when it names no action in either form.
pub fn parse_selection(raw: &str) -> Option<Selection> {
    let text = strip_reasoning(raw);
    from_tags(&text)
        .or_else(|| from_json(&text))
        .filter(|s| !s.actions.is_empty())
}

fn from_tags(text: &str) -> Option<Selection> {
    // ASCII lowering keeps every byte where it was, so offsets found in `lower` cut `text`
    // at the same (character) boundaries.
    let lower = text.to_ascii_lowercase();
    let open = format!("<{ACTION_SELECTION}");
    let (start, end) = match lower.find(&open) {
        Some(at) => {
            let body = at + lower[at..].find('>').map_or(open.len(), |i| i + 1);
            let close = format!("</{ACTION_SELECTION}>");
            let end = lower[body..].find(&close).map_or(text.len(), |i| body + i);
            (body, end)
        }
        None => (0, text.len()),
    };
    let (region, lower) = (&text[start..end], &lower[start..end]);
    let mut actions = Vec::new();
    // Where each action element began, with the last name it gave.
    let mut last_named: Vec<(usize, String)> = Vec::new();
    for (at, content) in elements_at(region, lower, ACTION) {
        for name in content.split([',', '\n']) {
            let name = decode_entities(name.trim());
            if !name.is_empty() && name != EXAMPLE_ACTION {
                last_named.push((at, name.clone()));
                actions.push(name);
            }
        }
    }
    if actions.is_empty() {
        return None;
    }
    let arguments = elements_at(region, lower, ARGUMENTS)
        .into_iter()
        .filter_map(|(at, content)| {
            let (_, name) = last_named.iter().rev().find(|(from, _)| *from < at)?;
            Some((name.clone(), decode_entities(content.trim())))
        })
        .collect();
    let reasoning = elements(region, lower, REASONING)
        .into_iter()
        .map(|r| decode_entities(r.trim()))
        .collect::<Vec<_>>()
        .join(" ");
    Some(Selection {
        actions,
        reasoning,
        arguments,
    })
}

/// The contents of every `<tag …>…</tag>` in `text` (`lower` is its ASCII-lowered twin). An
/// element left open runs to the next tag of the same name or the end.
fn elements<'t>(text: &'t str, lower: &str, tag: &str) -> Vec<&'t str> {
    elements_at(text, lower, tag)
        .into_iter()
        .map(|(_, c)| c)
        .collect()
}

/// As [`elements`], each with the offset where its element opens.
fn elements_at<'t>(text: &'t str, lower: &str, tag: &str) -> Vec<(usize, &'t str)> {
    let open = format!("<{tag}");
    let close = format!("</{tag}>");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = lower[from..].find(&open) {
        let at = from + i;
        let after = at + open.len();
        // `<action>` or `<action name=…>`, not `<action_selection>` or `<actions>`.
        if !matches!(
            lower.as_bytes().get(after),
            Some(b'>' | b' ' | b'\t' | b'\n')
        ) {
            from = after;
            continue;
        }
        let Some(gt) = lower[after..].find('>') else {
            break;
        };
        let body = after + gt + 1;
        let end = [lower[body..].find(&close), lower[body..].find(&open)]
            .into_iter()
            .flatten()
            .min()
            .map_or(text.len(), |i| body + i);
        out.push((at, &text[body..end]));
        from = end;
    }
    out
}

fn from_json(text: &str) -> Option<Selection> {
    // The first JSON object anywhere in the text that has "actions" or "action".
    text.match_indices('{').find_map(|(at, _)| {
        let mut values = serde_json::Deserializer::from_str(&text[at..]).into_iter::<Value>();
        let value = values.next()?.ok()?;
        let obj = value.as_object()?;
        let names = obj.get("actions").or_else(|| obj.get("action"))?;
        let mut arguments = Vec::new();
        let actions: Vec<String> = match names {
            Value::String(s) => vec![s.trim().to_string()],
            Value::Array(items) => items
                .iter()
                .filter_map(|v| match v {
                    Value::String(s) => Some(s.trim().to_string()),
                    Value::Object(o) => {
                        let name = o.get("name")?.as_str()?.trim().to_string();
                        if let Some(args) = o.get("arguments") {
                            let text = match args {
                                Value::String(s) => s.trim().to_string(),
                                other => other.to_string(),
                            };
                            arguments.push((name.clone(), text));
                        }
                        Some(name)
                    }
                    _ => None,
                })
                .collect(),
            _ => return None,
        };
        let reasoning = obj
            .get("reasoning")
            .and_then(|r| r.as_str())
            .unwrap_or("")
            .trim()
            .to_string();
        Some(Selection {
            actions: actions.into_iter().filter(|a| !a.is_empty()).collect(),
            reasoning,
            arguments,
        })
    })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::steps::selection_example;

    fn names(raw: &str) -> Vec<String> {
        parse_selection(raw).map(|s| s.actions).unwrap_or_default()
    }

    #[test]
    fn the_asked_form() {
        let s = parse_selection(
            "<action_selection>\n<reasoning>I should look first.</reasoning>\n<action>Think</action>\n<action>Respond</action>\n</action_selection>",
        )
        .unwrap();
        assert_eq!(s.actions, ["Think", "Respond"]);
        assert_eq!(s.reasoning, "I should look first.");
    }

    #[test]
    fn tolerant_of_case_an_open_wrapper_lists_and_entities() {
        assert_eq!(
            names("Sure.\n<ACTION_SELECTION><Action>Think, Respond</Action>"),
            ["Think", "Respond"]
        );
        assert_eq!(
            names("<action>Q&amp;A</action><action>Respond"),
            ["Q&A", "Respond"]
        );
        assert_eq!(names("<action>a\nb\n\n</action>"), ["a", "b"]);
        assert_eq!(
            names("<think>maybe <action>Nope</action></think><action>Yes</action>"),
            ["Yes"],
            "a reasoning block is not the answer"
        );
    }

    #[test]
    fn the_seeds_json_form_anywhere() {
        let s = parse_selection(
            "Here you go:\n```json\n{\"actions\": [\"Think\", \"Respond\"], \"reasoning\": \"first look\"}\n```",
        )
        .unwrap();
        assert_eq!(s.actions, ["Think", "Respond"]);
        assert_eq!(s.reasoning, "first look");
        assert_eq!(names("{\"action\": \"DONE\"}"), ["DONE"]);
        assert_eq!(
            names("{\"x\": 1} then {\"actions\": [{\"name\": \"Think\"}]}"),
            ["Think"]
        );
    }

    #[test]
    fn arguments_follow_their_action_in_either_form() {
        let s = parse_selection(
            "<action_selection><reasoning>look it up</reasoning><action>Lookup</action><arguments>{\"term\": \"a &amp; b\"}</arguments><action>Respond</action></action_selection>",
        )
        .unwrap();
        assert_eq!(s.actions, ["Lookup", "Respond"]);
        assert_eq!(
            s.arguments,
            [("Lookup".to_string(), "{\"term\": \"a & b\"}".to_string())]
        );
        let s = parse_selection(
            "{\"actions\": [{\"name\": \"Lookup\", \"arguments\": {\"term\": \"x\"}}, \"Respond\"], \"reasoning\": \"r\"}",
        )
        .unwrap();
        assert_eq!(s.actions, ["Lookup", "Respond"]);
        assert_eq!(
            s.arguments,
            [("Lookup".to_string(), "{\"term\":\"x\"}".to_string())]
        );
        // Arguments before any action belong to none; several names: the last one's.
        let s = parse_selection(
            "<arguments>{}</arguments><action>Think, Lookup</action><arguments>{\"n\": 1}",
        )
        .unwrap();
        assert_eq!(
            s.arguments,
            [("Lookup".to_string(), "{\"n\": 1}".to_string())]
        );
    }

    #[test]
    fn prose_an_echo_or_an_empty_choice_is_no_selection() {
        assert_eq!(parse_selection("I think I will respond now."), None);
        assert_eq!(parse_selection(&selection_example()), None);
        assert_eq!(parse_selection("<action></action>"), None);
        assert_eq!(parse_selection("{\"actions\": []}"), None);
        assert_eq!(parse_selection("<actions>Think</actions>"), None);
        assert_eq!(parse_selection(""), None);
    }

    proptest! {
        #[test]
        fn any_text_is_read_without_panicking(raw in crate::arbitrary::tagged()) {
            let _ = parse_selection(&raw);
        }

        #[test]
        fn names_in_any_script_survive_either_form(
            names in proptest::collection::vec("[^<>&,\\n\\r\"\\\\{}\\p{C}]{1,12}", 1..4),
            prose in crate::arbitrary::text(),
            why in "[^<>&\"\\\\\\p{C}]{0,30}",
        ) {
            let names: Vec<String> = names
                .into_iter()
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty() && n != EXAMPLE_ACTION)
                .collect();
            prop_assume!(!names.is_empty());
            let prose = prose.replace(['<', '{'], " ");
            let tags: String = names.iter().map(|n| format!("<action>{n}</action>")).collect();
            let s = parse_selection(&format!(
                "{prose}<action_selection><reasoning>{why}</reasoning>{tags}</action_selection>"
            ))
            .unwrap();
            prop_assert_eq!(&s.actions, &names);
            prop_assert_eq!(s.reasoning, why.trim());
            let json = serde_json::json!({ "actions": names, "reasoning": why }).to_string();
            let s = parse_selection(&format!("{prose}\n{json}")).unwrap();
            prop_assert_eq!(&s.actions, &names);
        }
    }
}
