//! A tool's input schema: checked against the arguments before a call is sent, and shown to
//! the model compactly. The schema comes from the server: it is untrusted text, compiled
//! without fetching anything (no remote references), and a schema that does not compile
//! makes its tool refuse every call, saying why.

use std::fmt::Write;

use serde_json::Value;

/// A compiled schema, or why it does not compile.
pub type Compiled = Result<jsonschema::Validator, String>;

/// Compiles `schema` (an object, as a server lists it).
pub fn compile(schema: &Value) -> Compiled {
    jsonschema::validator_for(schema).map_err(|e| format!("its input schema does not compile: {e}"))
}

/// Reads `text` (what the selection gave) as the call's arguments and checks them against
/// the compiled schema: the arguments, or every reason they cannot be sent.
pub fn arguments(
    compiled: &Compiled,
    text: Option<&str>,
) -> Result<serde_json::Map<String, Value>, String> {
    let validator = compiled.as_ref().map_err(Clone::clone)?;
    let value: Value = match text.map(str::trim) {
        None | Some("") => Value::Object(Default::default()),
        Some(t) => serde_json::from_str(t)
            .map_err(|e| format!("the arguments are not JSON ({e}); give one JSON object"))?,
    };
    let Value::Object(map) = value else {
        return Err("the arguments must be one JSON object".into());
    };
    let value = Value::Object(map);
    let errors: Vec<String> = validator
        .iter_errors(&value)
        .take(5)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if !errors.is_empty() {
        return Err(format!(
            "the arguments do not fit the tool's schema: {}",
            errors.join("; ")
        ));
    }
    match value {
        Value::Object(map) => Ok(map),
        _ => unreachable!("checked above"),
    }
}

/// The most characters a compact schema takes in the prompt.
pub const COMPACT_CHARS: usize = 600;

/// The schema in a line: `{term: string (required), limit?: integer}`, each property (in the
/// order the schema lists it) with its type (its `enum` values when it has them), optional
/// ones marked `?`; at most [`COMPACT_CHARS`].
pub fn compact(schema: &Value) -> String {
    let mut out = String::from("{");
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (i, (name, p)) in props.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let optional = if required.contains(&name.as_str()) {
                ""
            } else {
                "?"
            };
            let _ = write!(out, "{name}{optional}: {}", kind(p));
            if let Some(d) = p.get("description").and_then(Value::as_str) {
                let d: String = d.split_whitespace().collect::<Vec<_>>().join(" ");
                let _ = write!(out, " ({})", d.chars().take(80).collect::<String>());
            }
            if out.chars().count() > COMPACT_CHARS {
                break;
            }
        }
    }
    out.push('}');
    if out.chars().count() > COMPACT_CHARS {
        let cut: String = out.chars().take(COMPACT_CHARS - 2).collect();
        out = format!("{cut}…}}");
    }
    out
}

fn kind(p: &Value) -> String {
    if let Some(values) = p.get("enum").and_then(Value::as_array) {
        return values
            .iter()
            .take(8)
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join(" | ");
    }
    match p.get("type") {
        Some(Value::String(t)) if t == "array" => {
            let of = p.get("items").map(kind).unwrap_or_else(|| "any".into());
            format!("array of {of}")
        }
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(ts)) => ts
            .iter()
            .filter_map(Value::as_str)
            .collect::<Vec<_>>()
            .join(" | "),
        _ => "any".into(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "term": {"type": "string", "description": "what to look up"},
                "limit": {"type": "integer", "minimum": 1},
                "kind": {"enum": ["a", "b"]},
                "tags": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["term"],
            "additionalProperties": false
        })
    }

    #[test]
    fn a_schema_is_shown_in_one_line() {
        assert_eq!(
            compact(&schema()),
            "{term: string (what to look up), limit?: integer, kind?: \"a\" | \"b\", tags?: array of string}"
        );
        assert_eq!(compact(&json!({"type": "object"})), "{}");
        let many: serde_json::Map<String, Value> = (0..500)
            .map(|i| (format!("p{i}"), json!({"type": "string"})))
            .collect();
        let long = compact(&json!({"properties": many}));
        assert!(long.chars().count() <= COMPACT_CHARS, "{long}");
        assert!(long.ends_with("…}"), "{long}");
    }

    #[test]
    fn arguments_are_read_and_checked_before_anything_is_sent() {
        let c = compile(&schema());
        assert_eq!(
            arguments(&c, Some("{\"term\": \"x\", \"limit\": 2}")).unwrap()["limit"],
            2
        );
        let e = arguments(&c, Some("{\"limit\": 0}")).unwrap_err();
        assert!(e.contains("\"term\" is a required property"), "{e}");
        assert!(e.contains("/limit"), "{e}");
        let e = arguments(&c, Some("{term: x}")).unwrap_err();
        assert!(e.starts_with("the arguments are not JSON"), "{e}");
        let e = arguments(&c, Some("[1]")).unwrap_err();
        assert_eq!(e, "the arguments must be one JSON object");
        let e = arguments(&c, None).unwrap_err();
        assert!(
            e.contains("required"),
            "no arguments are an empty object: {e}"
        );
        let free = compile(&json!({"type": "object"}));
        assert!(arguments(&free, None).unwrap().is_empty());
    }

    #[test]
    fn a_schema_that_does_not_compile_refuses_every_call() {
        let c = compile(&json!({"type": "no such type"}));
        let e = arguments(&c, Some("{}")).unwrap_err();
        assert!(e.starts_with("its input schema does not compile"), "{e}");
    }
}
