//! An answer in its JSON form (the schema `prompt::shape` builds for servers that take only
//! JSON Schema) read into the same `Cognition` the tag parser gives, so nothing after the
//! parser can tell which form came back; and a cognitive state's JSON answer written as the
//! tags its reader takes.
//!
//! Text is text: a `</external_dialogue>` inside a JSON string is part of what was said.
//! An answer cut off mid-way (max_tokens) is closed where it stopped and read as far as it
//! goes. An answer that is not such a JSON object (a server that ignored the schema) goes to
//! the tag parser, exactly as without one. Pure.

use std::borrow::Cow;
use std::fmt::Write;

use serde_json::{Map, Value};

use super::EMPTY_REPLY_APOLOGY;
use super::{clean_dialogue, parse_response, text, Cognition, MentalQuery, ReplySource, Said};
use crate::steps::{field, Step, EXAMPLE_TEXTS, MODEL_CHANGE_NOTE};

/// Parses an answer that was asked for in its JSON form.
pub fn parse_json_response(raw: &str, max_reply_chars: usize) -> Cognition {
    match answer_object(raw) {
        Some(obj) if Step::ALL.iter().any(|s| obj.contains_key(s.name())) => {
            from_object(&obj, max_reply_chars)
        }
        _ => parse_response(raw, max_reply_chars),
    }
}

/// The JSON object an answer holds: after any reasoning block, inside any code fence, closed
/// where it was cut off, with control characters its strings hold raw escaped. `None` when
/// the answer does not begin with an object.
pub fn answer_object(raw: &str) -> Option<Map<String, Value>> {
    let reasoned = text::strip_reasoning(raw);
    let body = text::unwrap_fence(&reasoned).trim();
    if !body.starts_with('{') {
        return None;
    }
    let value = first_value(body).or_else(|| match escape_controls(body) {
        Cow::Owned(escaped) => first_value(&escaped),
        Cow::Borrowed(_) => None,
    })?;
    match value {
        Value::Object(m) => Some(m),
        _ => None,
    }
}

/// The JSON value `body` begins with, closed where it was cut off.
fn first_value(body: &str) -> Option<Value> {
    let mut values = serde_json::Deserializer::from_str(body).into_iter::<Value>();
    match values.next()? {
        Ok(v) => Some(v),
        Err(e) if e.is_eof() => serde_json::from_str(&close_cut(body)).ok(),
        Err(_) => None,
    }
}

fn from_object(obj: &Map<String, Value>, max_reply_chars: usize) -> Cognition {
    let said = |step: Step| {
        let v = obj.get(step.name())?;
        let (text, verb) = match v {
            Value::String(s) => (s.as_str(), None),
            Value::Object(o) => (
                o.get(field::TEXT)?.as_str()?,
                o.get(field::VERB)
                    .and_then(Value::as_str)
                    .map(str::trim)
                    .filter(|v| !v.is_empty())
                    .map(str::to_string),
            ),
            _ => return None,
        };
        let text = text::tidy(text);
        (!text.is_empty() && !is_placeholder(&text)).then_some(Said { text, verb })
    };
    let monologue = said(Step::InternalMonologue);
    let dialogue = said(Step::ExternalDialogue)
        .map(|mut d| {
            d.text = clean_dialogue(&d.text);
            d
        })
        .filter(|d| !d.text.is_empty());
    let (reply, reply_source) = match &dialogue {
        Some(d) => (d.text.clone(), ReplySource::Dialogue),
        None => (EMPTY_REPLY_APOLOGY.to_string(), ReplySource::Apology),
    };
    let boolean = |step: Step| match obj.get(step.name())? {
        Value::Bool(b) => Some(*b),
        Value::String(s) => text::parse_bool(s),
        _ => None,
    };
    let update = obj.get(Step::UserModelUpdate.name());
    let update_text = |key: &str| {
        let t = text::tidy(update?.get(key)?.as_str()?);
        (!t.is_empty() && !is_placeholder(&t)).then_some(t)
    };
    let mental_queries = match obj.get(Step::MentalQuery.name()) {
        Some(Value::Object(qs)) => qs
            .iter()
            .map(|(q, a)| MentalQuery {
                question: q.trim().to_string(),
                answer: match a {
                    Value::Bool(b) => Some(*b),
                    Value::String(s) => text::parse_bool(s),
                    _ => None,
                },
            })
            .collect(),
        _ => Vec::new(),
    };
    Cognition {
        monologue,
        dialogue,
        reply: text::truncate_chars(&reply, max_reply_chars),
        reply_source,
        user_model_check: boolean(Step::UserModelCheck),
        user_model_update: update_text(field::MODEL),
        model_change_note: update_text(MODEL_CHANGE_NOTE),
        soul_state_check: boolean(Step::SoulStateCheck),
        soul_state_update: state_lines(obj.get(Step::SoulStateUpdate.name())),
        mental_queries,
    }
}

/// `[{"key", "value"}, …]` (or, tolerated, `{"key": "value", …}`) as pairs.
fn state_lines(v: Option<&Value>) -> Vec<(String, String)> {
    let pair = |k: &str, v: &Value| {
        let k = k.trim();
        let v = v.as_str()?.trim();
        (!k.is_empty() && !k.contains(' ')).then(|| (k.to_string(), v.to_string()))
    };
    match v {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(|i| pair(i.get(field::KEY)?.as_str()?, i.get(field::VALUE)?))
            .collect(),
        Some(Value::Object(o)) => o.iter().filter_map(|(k, v)| pair(k, v)).collect(),
        _ => Vec::new(),
    }
}

fn is_placeholder(text: &str) -> bool {
    EXAMPLE_TEXTS.iter().any(|x| text.eq_ignore_ascii_case(x))
}

/// Writes a cognition in its JSON form, in the order of the steps; parsing it gives the same
/// cognition (a property test holds it to that).
pub fn render_json(c: &Cognition) -> String {
    let mut obj = Map::new();
    let said = |s: &Said| {
        let mut o = Map::new();
        if let Some(v) = &s.verb {
            o.insert(field::VERB.into(), Value::from(v.as_str()));
        }
        o.insert(field::TEXT.into(), Value::from(s.text.as_str()));
        Value::Object(o)
    };
    if let Some(m) = &c.monologue {
        obj.insert(Step::InternalMonologue.name().into(), said(m));
    }
    if let Some(d) = &c.dialogue {
        obj.insert(Step::ExternalDialogue.name().into(), said(d));
    }
    if !c.mental_queries.is_empty() {
        let qs: Map<String, Value> = c
            .mental_queries
            .iter()
            .map(|q| {
                (
                    q.question.clone(),
                    q.answer.map_or(Value::Null, Value::Bool),
                )
            })
            .collect();
        obj.insert(Step::MentalQuery.name().into(), Value::Object(qs));
    }
    if let Some(b) = c.user_model_check {
        obj.insert(Step::UserModelCheck.name().into(), Value::Bool(b));
    }
    if c.user_model_update.is_some() || c.model_change_note.is_some() {
        let text = |t: &Option<String>| Value::from(t.clone().unwrap_or_default());
        obj.insert(
            Step::UserModelUpdate.name().into(),
            serde_json::json!({
                field::MODEL: text(&c.user_model_update),
                MODEL_CHANGE_NOTE: text(&c.model_change_note),
            }),
        );
    }
    if let Some(b) = c.soul_state_check {
        obj.insert(Step::SoulStateCheck.name().into(), Value::Bool(b));
    }
    if !c.soul_state_update.is_empty() {
        let lines: Vec<Value> = c
            .soul_state_update
            .iter()
            .map(|(k, v)| serde_json::json!({ field::KEY: k, field::VALUE: v }))
            .collect();
        obj.insert(Step::SoulStateUpdate.name().into(), Value::Array(lines));
    }
    Value::Object(obj).to_string()
}

/// A cognitive state's answer in its JSON form (`{"affirmation": …}`, `{"consent": "yes",
/// …}`, `{"summary": …, "memory": [{"importance": 7, "text": …}]}`) written as the tags its
/// reader takes: a key's text as `<key>…</key>`, each object of a list as `<key attr="…">
/// text</key>`, text escaped so the reader's decoding gives it back. `None` when the answer is
/// not a JSON object.
pub fn json_as_tags(raw: &str) -> Option<String> {
    let obj = answer_object(raw)?;
    let esc = |s: &str| quick_xml::escape::escape(s).into_owned();
    let scalar = |v: &Value| match v {
        Value::String(s) => Some(s.clone()),
        Value::Bool(_) | Value::Number(_) => Some(v.to_string()),
        _ => None,
    };
    let mut out = String::new();
    for (key, value) in &obj {
        let items: Vec<&Value> = match value {
            Value::Array(items) => items.iter().collect(),
            v => vec![v],
        };
        for item in items {
            let (attrs, text) = match item {
                Value::Object(o) => {
                    let attrs: String = o
                        .iter()
                        .filter(|(k, _)| k.as_str() != field::TEXT)
                        .filter_map(|(k, v)| Some(format!(" {k}=\"{}\"", esc(&scalar(v)?))))
                        .collect();
                    let text = o.get(field::TEXT).and_then(scalar).unwrap_or_default();
                    (attrs, text)
                }
                v => match scalar(v) {
                    Some(t) => (String::new(), t),
                    None => continue,
                },
            };
            out.push_str(&format!("<{key}{attrs}>{}</{key}>\n", esc(&text)));
        }
    }
    Some(out)
}

/// Closes JSON cut off mid-way: an open string, a dangling escape, a key without its value, a
/// half-written literal, a trailing comma, then every open object and list.
/// `text` with the control characters inside its strings escaped. JSON forbids them there,
/// but a server's grammar may let them through: llama-cpp-python's string rule takes any
/// character but `"` and `\`, and a model held to it writes line breaks (an answer lost whole
/// to one, found against the real server).
fn escape_controls(text: &str) -> Cow<'_, str> {
    let mut out: Option<String> = None;
    let (mut in_string, mut escaped) = (false, false);
    for (at, c) in text.char_indices() {
        if in_string && !escaped && c < ' ' {
            let out = out.get_or_insert_with(|| text[..at].to_string());
            match c {
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c => {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                }
            }
            continue;
        }
        if let Some(out) = &mut out {
            out.push(c);
        }
        if !in_string {
            in_string = c == '"';
        } else if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '"' {
            in_string = false;
        }
    }
    out.map_or(Cow::Borrowed(text), Cow::Owned)
}

fn close_cut(text: &str) -> String {
    // (closer, an object whose next string is a key)
    let mut stack: Vec<(char, bool)> = Vec::new();
    let mut in_string = false;
    let mut escaped = false;
    let mut string_is_key = false;
    let mut after_key = false;
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        out.push(c);
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
                after_key = string_is_key;
            }
            continue;
        }
        match c {
            '"' => {
                in_string = true;
                string_is_key = matches!(stack.last(), Some(('}', true)));
            }
            '{' => stack.push(('}', true)),
            '[' => stack.push((']', false)),
            '}' | ']' => {
                stack.pop();
            }
            ',' => {
                if let Some(('}', want)) = stack.last_mut() {
                    *want = true;
                }
            }
            ':' => {
                after_key = false;
                if let Some(('}', want)) = stack.last_mut() {
                    *want = false;
                }
            }
            _ => {}
        }
    }
    if in_string {
        if escaped {
            out.pop();
        } else if let Some(at) = out.rfind("\\u").filter(|&at| out.len() - at < 6) {
            out.truncate(at);
        }
        out.push('"');
        after_key = string_is_key;
    } else {
        // A literal or number cut short: drop it; a value is then owed.
        let keep = out
            .trim_end_matches(|c: char| {
                c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '+'
            })
            .len();
        if !["true", "false", "null"].iter().any(|w| out.ends_with(w))
            && out[keep..].parse::<f64>().is_err()
        {
            out.truncate(keep);
        }
        let trimmed = out.trim_end().len();
        out.truncate(trimmed);
        if out.ends_with(',') {
            out.pop();
        }
    }
    if after_key {
        out.push(':');
    }
    if out.trim_end().ends_with(':') {
        out.push_str("null");
    }
    for (closer, _) in stack.iter().rev() {
        out.push(*closer);
    }
    out
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::steps::{DIALOGUE_VERBS, MONOLOGUE_VERBS, SOUL_STATE_KEYS};

    const ANSWER: &str = r##"{"internal_monologue":{"verb":"pondered","text":"They want </external_dialogue> help."},"external_dialogue":{"verb":"explained","text":"Wren said: a < b & \"c\" 🦀"},"mental_query":{"Is it late?":true},"user_model_check":true,"user_model_update":{"model":"# Tom\n- likes crabs","model_change_note":"Crabs."},"soul_state_check":false,"soul_state_update":null}"##;

    #[test]
    fn line_breaks_and_tabs_written_raw_inside_a_string_are_text() {
        let raw = "{ \"internal_monologue\": { \"verb\": \"mused\", \"text\": \"One\nTwo\" },\n \"external_dialogue\": { \"verb\": \"said\", \"text\": \"Line one.\r\n\tLine \\\"two\\\".\u{1}\" }, \"user_model_check\": false }";
        let c = parse_json_response(raw, 3000);
        assert_eq!(c.reply_source, ReplySource::Dialogue, "{c:#?}");
        assert_eq!(c.monologue.unwrap().text, "One\nTwo");
        assert_eq!(
            c.dialogue.unwrap().text,
            "Line one.\r\n\tLine \"two\".\u{1}"
        );
        assert_eq!(c.user_model_check, Some(false));
        assert_eq!(
            escape_controls(ANSWER),
            ANSWER,
            "nothing to escape: as it was"
        );
        assert!(matches!(escape_controls(ANSWER), Cow::Borrowed(_)));
        // Cut off inside a string that holds a raw line break: closed and read as far as it goes.
        let cut = parse_json_response(
            "{\"external_dialogue\":{\"verb\":\"said\",\"text\":\"Half\nway",
            3000,
        );
        assert_eq!(cut.reply, "Half\nway");
    }

    #[test]
    fn the_json_form_reads_as_the_tags_would() {
        let c = parse_json_response(ANSWER, 3000);
        assert_eq!(
            c.monologue.unwrap().text,
            "They want </external_dialogue> help."
        );
        let d = c.dialogue.unwrap();
        assert_eq!(d.text, "a < b & \"c\" 🦀", "text is text; the prefix goes");
        assert_eq!(d.verb.as_deref(), Some("explained"));
        assert_eq!(c.reply_source, ReplySource::Dialogue);
        assert_eq!(c.mental_queries[0].question, "Is it late?");
        assert_eq!(c.mental_queries[0].answer, Some(true));
        assert_eq!(c.user_model_check, Some(true));
        assert_eq!(c.user_model_update.as_deref(), Some("# Tom\n- likes crabs"));
        assert_eq!(c.model_change_note.as_deref(), Some("Crabs."));
        assert_eq!(c.soul_state_check, Some(false));
        assert!(c.soul_state_update.is_empty());
    }

    #[test]
    fn an_answer_that_ignored_the_schema_goes_to_the_tag_parser() {
        let tags = "<external_dialogue>Hi there.</external_dialogue>";
        assert_eq!(parse_json_response(tags, 3000), parse_response(tags, 3000));
        let other = "{\"answer\": 1} and prose";
        assert_eq!(
            parse_json_response(other, 3000),
            parse_response(other, 3000)
        );
    }

    #[test]
    fn a_cut_off_answer_is_read_as_far_as_it_goes() {
        for (cut, dialogue) in [
            (
                r#"{"internal_monologue":{"verb":"mused","text":"x"},"external_dialogue":{"verb":"said","text":"Half an ans"#,
                Some("Half an ans"),
            ),
            (
                r#"{"external_dialogue":{"verb":"said","text":"Esc \"q\" \u00e9\u00"#,
                Some("Esc \"q\" é"),
            ),
            (
                r#"{"external_dialogue":{"verb":"said","text":"Done."},"user_model_check":tr"#,
                Some("Done."),
            ),
            (
                r#"{"external_dialogue":{"verb":"said","text":"Done."},"user_model"#,
                Some("Done."),
            ),
            (
                r#"{"external_dialogue":{"verb":"said","text":"Done."},"#,
                Some("Done."),
            ),
            (r#"{"external_dialogue":{"verb":"sa"#, None),
        ] {
            let c = parse_json_response(cut, 3000);
            assert_eq!(c.dialogue.map(|d| d.text).as_deref(), dialogue, "{cut}");
            assert!(!c.reply.contains('{'), "{cut}: {}", c.reply);
        }
        let c = parse_json_response(
            r#"{"external_dialogue":{"text":"A."},"user_model_check":false"#,
            3000,
        );
        assert_eq!(c.user_model_check, Some(false));
    }

    #[test]
    fn a_state_answer_becomes_the_tags_its_reader_takes() {
        let tags = json_as_tags(r#"{"summary":"We & <you>","memory":[{"importance":7,"text":"Crabs."}],"person":[{"id":"U1","text":"Likes \"x\"."}]}"#).unwrap();
        assert_eq!(
            tags,
            "<summary>We &amp; &lt;you&gt;</summary>\n<memory importance=\"7\">Crabs.</memory>\n<person id=\"U1\">Likes &quot;x&quot;.</person>\n"
        );
        assert_eq!(json_as_tags("<journal>x</journal>"), None);
    }

    fn clean(s: String) -> Option<String> {
        let t = text::tidy(&s);
        (!t.is_empty() && t == s && !is_placeholder(&t)).then_some(t)
    }

    fn said(verbs: &'static [&'static str]) -> impl Strategy<Value = Option<Said>> {
        proptest::option::of((
            crate::arbitrary::text(),
            proptest::option::of(proptest::sample::select(verbs)),
        ))
        .prop_map(|s| {
            let (text, verb) = s?;
            Some(Said {
                text: clean(text)?,
                verb: verb.map(str::to_string),
            })
        })
    }

    proptest! {
        #[test]
        fn render_json_then_parse_round_trips(
            monologue in said(&MONOLOGUE_VERBS),
            dialogue in said(&DIALOGUE_VERBS),
            queries in proptest::collection::vec((crate::arbitrary::text(), any::<Option<bool>>()), 0..4),
            check in any::<Option<bool>>(),
            update in proptest::option::of((crate::arbitrary::text(), crate::arbitrary::text())),
            state_check in any::<Option<bool>>(),
            state in proptest::collection::vec((proptest::sample::select(&SOUL_STATE_KEYS[..]), "[^\\n]{0,30}"), 0..3),
        ) {
            let dialogue = dialogue.and_then(|mut d| {
                d.text = clean_dialogue(&d.text);
                (!d.text.is_empty()).then_some(d)
            });
            let mut mental_queries: Vec<MentalQuery> = Vec::new();
            for (q, answer) in queries {
                let question = q.trim().to_string();
                if !mental_queries.iter().any(|m| m.question == question) {
                    mental_queries.push(MentalQuery { question, answer });
                }
            }
            let (user_model_update, model_change_note) = match update {
                Some((m, n)) => (clean(m), clean(n)),
                None => (None, None),
            };
            let (reply, reply_source) = match &dialogue {
                Some(d) => (d.text.clone(), ReplySource::Dialogue),
                None => (EMPTY_REPLY_APOLOGY.to_string(), ReplySource::Apology),
            };
            let c = Cognition {
                monologue,
                dialogue,
                reply,
                reply_source,
                user_model_check: check,
                user_model_update,
                model_change_note,
                soul_state_check: state_check,
                soul_state_update: state
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v.trim().to_string()))
                    .collect(),
                mental_queries,
            };
            let json = render_json(&c);
            prop_assume!(Step::ALL.iter().any(|s| json.contains(s.name())));
            prop_assert_eq!(parse_json_response(&json, usize::MAX), c);
        }

        #[test]
        fn any_text_and_any_cut_never_panics(raw in crate::arbitrary::tagged(), cut in 0usize..400) {
            let _ = parse_json_response(&raw, 100);
            let json = format!("{{\"external_dialogue\":{{\"text\":{}}}}}", serde_json::to_string(&raw).unwrap());
            let mut at = cut.min(json.len());
            while !json.is_char_boundary(at) {
                at -= 1;
            }
            let c = parse_json_response(&json[..at], 100);
            prop_assert!(!c.reply.is_empty());
        }
    }
}
