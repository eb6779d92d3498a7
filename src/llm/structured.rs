//! Constrained output on the wire: which form a server takes, found out from what it says
//! about itself (llama.cpp's `/props`, vLLM's `/version`, Ollama's `/api/version`, the model
//! list's `owned_by`), from the provider, or from `[llm] structured_output`; how each form
//! goes into a request; and a server's refusal of the field, remembered.
//!
//! A constraint is an opaque value here (a grammar's text, a schema): `llm` knows nothing of
//! what it says, only where each server wants it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use serde_json::{json, Value};
use tracing::{info, warn};

use super::{http, LlmError};
use crate::config::secret::Secret;
use crate::config::StructuredOutput;

/// What a call's answer is held to.
#[derive(Debug, Clone, PartialEq)]
pub enum Constraint {
    /// A GBNF grammar.
    Gbnf(Arc<str>),
    /// A JSON Schema.
    JsonSchema(Arc<Value>),
}

impl Constraint {
    pub fn form(&self) -> Form {
        match self {
            Constraint::Gbnf(_) => Form::Gbnf,
            Constraint::JsonSchema(_) => Form::JsonSchema,
        }
    }
}

/// The form a server takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    Gbnf,
    JsonSchema,
}

/// Where a server wants the constraint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// `grammar`: llama.cpp's server, llama-cpp-python.
    Grammar,
    /// vLLM from 0.10.2: `structured_outputs: {"grammar": …}`.
    VllmStructured,
    /// vLLM before 0.10.2: `guided_grammar`.
    VllmGuided,
    /// `response_format: {"type": "json_schema", …}`: OpenAI and the servers that copy it
    /// (Ollama, vLLM, llama.cpp).
    ResponseFormat,
    /// `response_format: {"type": "json_object", "schema": …}`: llama-cpp-python, which takes
    /// no other type but `text`.
    JsonObject,
    /// Anthropic: `output_config: {"format": {"type": "json_schema", "schema": …}}`.
    AnthropicSchema,
}

impl Dialect {
    pub fn form(self) -> Form {
        match self {
            Dialect::Grammar | Dialect::VllmStructured | Dialect::VllmGuided => Form::Gbnf,
            Dialect::ResponseFormat | Dialect::JsonObject | Dialect::AnthropicSchema => {
                Form::JsonSchema
            }
        }
    }

    /// The request's field, as a refusal names it.
    fn field(self) -> &'static str {
        match self {
            Dialect::Grammar => "grammar",
            Dialect::VllmStructured => "structured_outputs",
            Dialect::VllmGuided => "guided_grammar",
            Dialect::ResponseFormat | Dialect::JsonObject => "response_format",
            Dialect::AnthropicSchema => "output_config",
        }
    }
}

/// What a server said it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Server {
    LlamaCpp,
    LlamaCppPython,
    /// vLLM, and its version when it gave one.
    Vllm(Option<String>),
    Ollama,
    Unknown,
}

/// A provider's constrained output: the dialect chosen, and whether the server refused it.
#[derive(Debug, Default)]
pub struct Structured {
    dialect: OnceLock<Option<Dialect>>,
    refused: AtomicBool,
}

impl Structured {
    /// Sets the dialect (the first setting stays).
    pub fn set(&self, dialect: Option<Dialect>) {
        let _ = self.dialect.set(dialect);
    }

    /// The dialect in use: none before it is set, when there is none, or once refused.
    pub fn dialect(&self) -> Option<Dialect> {
        if self.refused.load(Ordering::Relaxed) {
            return None;
        }
        self.dialect.get().copied().flatten()
    }

    pub fn form(&self) -> Option<Form> {
        self.dialect().map(Dialect::form)
    }

    /// Puts `c` into `body` where the server wants it; false when the dialect takes another
    /// form (then the request goes plain).
    pub fn apply(&self, body: &mut Value, c: &Constraint) -> bool {
        let Some(dialect) = self.dialect().filter(|d| d.form() == c.form()) else {
            return false;
        };
        match (dialect, c) {
            (Dialect::Grammar, Constraint::Gbnf(g)) => body["grammar"] = json!(&**g),
            (Dialect::VllmStructured, Constraint::Gbnf(g)) => {
                body["structured_outputs"] = json!({ "grammar": &**g })
            }
            (Dialect::VllmGuided, Constraint::Gbnf(g)) => body["guided_grammar"] = json!(&**g),
            (Dialect::ResponseFormat, Constraint::JsonSchema(s)) => {
                body["response_format"] = json!({
                    "type": "json_schema",
                    "json_schema": { "name": "answer", "schema": &**s, "strict": true },
                })
            }
            (Dialect::JsonObject, Constraint::JsonSchema(s)) => {
                body["response_format"] =
                    json!({ "type": "json_object", "schema": json_object_schema(s) })
            }
            (Dialect::AnthropicSchema, Constraint::JsonSchema(s)) => {
                body["output_config"] =
                    json!({ "format": { "type": "json_schema", "schema": anthropic_schema(s) } })
            }
            _ => return false,
        }
        true
    }

    /// One call with `constraint` when the server takes its form, asked again plain at once
    /// when the server refuses it (`send` makes the request, with or without a constraint).
    pub async fn call<'c, T, F, Fut>(
        &self,
        provider: &str,
        constraint: Option<&'c Constraint>,
        send: F,
    ) -> Result<T, LlmError>
    where
        F: Fn(Option<&'c Constraint>) -> Fut,
        Fut: std::future::Future<Output = Result<T, LlmError>>,
    {
        let constraint = constraint.filter(|c| Some(c.form()) == self.form());
        match send(constraint).await {
            Err(e) if constraint.is_some() && self.refused_by(provider, &e) => send(None).await,
            other => other,
        }
    }

    /// Whether `e` is the server refusing the constraint: HTTP 400 or 422 naming its field
    /// (or grammars or schemas), or a 500 naming its field (llama-cpp-python answers a field
    /// it does not take with a 500 that quotes its validation error). Then it is remembered,
    /// warned about once, and the caller asks again without it.
    pub fn refused_by(&self, provider: &str, e: &LlmError) -> bool {
        let Some(dialect) = self.dialect() else {
            return false;
        };
        let (words, message): (&[&str], &str) = match e {
            LlmError::Refused {
                status: 400 | 422,
                message,
                ..
            } => (&["grammar", "guided", "json_schema", "schema"], message),
            LlmError::Transient {
                status: 500,
                message,
                ..
            } => (&[], message),
            _ => return false,
        };
        let m = message.to_ascii_lowercase();
        let named = std::iter::once(&dialect.field())
            .chain(words)
            .any(|f| m.contains(f));
        if named && !self.refused.swap(true, Ordering::Relaxed) {
            warn!(
                provider,
                field = dialect.field(),
                error = %message,
                "the model server refused the constrained-output field; plain requests from now on (set [llm] structured_output = \"off\" to skip it)"
            );
        }
        named
    }
}

/// A schema as Anthropic's structured outputs take it: without the length, range and
/// item-count bounds they do not support (the text is bounded by max_tokens there).
fn anthropic_schema(schema: &Value) -> Value {
    edit_keywords(schema, &|k, v| {
        let bound = matches!(
            k,
            "minLength" | "maxLength" | "minimum" | "maximum" | "maxItems"
        ) || (k == "minItems" && v.as_u64().is_some_and(|n| n > 1));
        (!bound).then(|| v.clone())
    })
}

/// The longest text llama-cpp-python's schema-to-grammar takes: it writes a text of at most
/// n characters as n nested optional groups, and its grammar parser refuses more than 1,000
/// of them ("number of rules that are going to be repeated … exceeds sane defaults"; the
/// server then failed outright, found against the real server).
pub const JSON_OBJECT_MAX_LENGTH: u64 = 1_000;

/// A schema as llama-cpp-python takes it: no `maxLength` above [`JSON_OBJECT_MAX_LENGTH`].
fn json_object_schema(schema: &Value) -> Value {
    edit_keywords(schema, &|k, v| match (k, v.as_u64()) {
        ("maxLength", Some(n)) => Some(json!(n.min(JSON_OBJECT_MAX_LENGTH))),
        _ => Some(v.clone()),
    })
}

/// `schema` with each keyword whose value is neither an object nor a list as `edit` gives it
/// (`None`: dropped), at every depth; property names are names, whatever they say.
fn edit_keywords(schema: &Value, edit: &dyn Fn(&str, &Value) -> Option<Value>) -> Value {
    match schema {
        Value::Object(o) => Value::Object(
            o.iter()
                .filter_map(|(k, v)| {
                    let v = match (k.as_str(), v) {
                        ("properties", Value::Object(props)) => Value::Object(
                            props
                                .iter()
                                .map(|(name, p)| (name.clone(), edit_keywords(p, edit)))
                                .collect(),
                        ),
                        (_, Value::Object(_) | Value::Array(_)) => edit_keywords(v, edit),
                        _ => edit(k, v)?,
                    };
                    Some((k.clone(), v))
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(|i| edit_keywords(i, edit)).collect()),
        other => other.clone(),
    }
}

/// The dialect for an OpenAI-compatible server: from the setting, and what the server says
/// it is. `hosted`: OpenAI's own API (no `base_url`), which is not asked and gets nothing
/// unless the config asks for a schema.
pub async fn choose(
    setting: StructuredOutput,
    hosted: bool,
    base: &str,
    key: Option<&Secret>,
) -> Option<Dialect> {
    match setting {
        StructuredOutput::Off => None,
        StructuredOutput::JsonSchema if hosted => Some(Dialect::ResponseFormat),
        StructuredOutput::Auto if hosted => None,
        StructuredOutput::Grammar | StructuredOutput::Auto | StructuredOutput::JsonSchema => {
            let server = identify(base, key).await;
            let dialect = match (&server, setting) {
                (Server::LlamaCppPython, StructuredOutput::JsonSchema) => Some(Dialect::JsonObject),
                (_, StructuredOutput::JsonSchema) => Some(Dialect::ResponseFormat),
                (Server::Vllm(version), _) => Some(vllm(version.as_deref())),
                (_, StructuredOutput::Grammar) => Some(Dialect::Grammar),
                (Server::LlamaCpp | Server::LlamaCppPython, _) => Some(Dialect::Grammar),
                (Server::Ollama, _) => Some(Dialect::ResponseFormat),
                (Server::Unknown, _) => None,
            };
            info!(server = ?server, dialect = ?dialect, "model server identified for constrained output");
            dialect
        }
    }
}

/// vLLM's dialect by its version: `structured_outputs` from 0.10.2 (the `guided_*` fields
/// were removed in 0.12), `guided_grammar` before.
fn vllm(version: Option<&str>) -> Dialect {
    let Some(v) = version else {
        return Dialect::VllmStructured;
    };
    let parts: Vec<u64> = v
        .split(['.', '+', '-'])
        .take(3)
        .map(|p| p.parse().unwrap_or(0))
        .collect();
    let at = |i: usize| parts.get(i).copied().unwrap_or(0);
    if (at(0), at(1), at(2)) >= (0, 10, 2) {
        Dialect::VllmStructured
    } else {
        Dialect::VllmGuided
    }
}

/// Asks the server at `base` (e.g. `http://127.0.0.1:8080/v1`) what it is: llama.cpp answers
/// `/props`, vLLM `/version`, Ollama `/api/version`; llama-cpp-python's model list says
/// `owned_by: "me"`, llama.cpp's `"llamacpp"`, vLLM's `"vllm"`.
pub async fn identify(base: &str, key: Option<&Secret>) -> Server {
    let Ok(client) = http::client(Duration::from_secs(3)) else {
        return Server::Unknown;
    };
    let root = base.trim_end_matches('/');
    let root = root.strip_suffix("/v1").unwrap_or(root);
    let get = |url: String| {
        let client = client.clone();
        async move {
            let mut req = client.get(url);
            if let Some(k) = key {
                req = req.bearer_auth(k.expose());
            }
            let resp = req.send().await.ok()?;
            if !resp.status().is_success() {
                return None;
            }
            resp.json::<Value>().await.ok()
        }
    };
    if let Some(v) = get(format!("{root}/props")).await {
        if v.get("default_generation_settings").is_some() || v.get("build_info").is_some() {
            return Server::LlamaCpp;
        }
    }
    if let Some(v) = get(format!("{root}/version")).await {
        if let Some(version) = v.get("version").and_then(Value::as_str) {
            return Server::Vllm(Some(version.to_string()));
        }
    }
    if let Some(v) = get(format!("{root}/api/version")).await {
        if v.get("version").is_some() {
            return Server::Ollama;
        }
    }
    if let Some(v) = get(format!("{}/models", base.trim_end_matches('/'))).await {
        let owner = v
            .pointer("/data/0/owned_by")
            .and_then(Value::as_str)
            .unwrap_or("");
        match owner {
            "me" => return Server::LlamaCppPython,
            "llamacpp" => return Server::LlamaCpp,
            "vllm" => return Server::Vllm(None),
            _ => {}
        }
    }
    Server::Unknown
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(status: u16, message: &str) -> LlmError {
        LlmError::Refused {
            provider: "openai",
            status,
            message: message.into(),
        }
    }

    #[test]
    fn each_dialect_puts_the_constraint_where_its_server_reads_it() {
        let g = Constraint::Gbnf("root ::= \"x\"".into());
        let s = Constraint::JsonSchema(Arc::new(json!({"type": "object"})));
        for (dialect, c, pointer) in [
            (Dialect::Grammar, &g, "/grammar"),
            (Dialect::VllmStructured, &g, "/structured_outputs/grammar"),
            (Dialect::VllmGuided, &g, "/guided_grammar"),
            (
                Dialect::ResponseFormat,
                &s,
                "/response_format/json_schema/schema/type",
            ),
            (Dialect::JsonObject, &s, "/response_format/schema/type"),
            (
                Dialect::AnthropicSchema,
                &s,
                "/output_config/format/schema/type",
            ),
        ] {
            let st = Structured::default();
            st.set(Some(dialect));
            let mut body = json!({});
            assert!(st.apply(&mut body, c), "{dialect:?}");
            assert!(body.pointer(pointer).is_some(), "{dialect:?}: {body}");
            let other = if c.form() == Form::Gbnf { &s } else { &g };
            let mut body = json!({});
            assert!(!st.apply(&mut body, other), "another form goes plain");
            assert_eq!(body, json!({}));
        }
    }

    #[test]
    fn a_refusal_naming_the_field_is_remembered() {
        let st = Structured::default();
        st.set(Some(Dialect::Grammar));
        assert!(!st.refused_by("openai", &refusal(400, "model not found")));
        assert!(!st.refused_by("openai", &refusal(401, "bad grammar key")));
        assert_eq!(st.form(), Some(Form::Gbnf));
        assert!(st.refused_by("openai", &refusal(400, "Unknown field: grammar")));
        assert_eq!(st.form(), None, "plain from now on");
        assert!(
            !st.refused_by("openai", &refusal(400, "grammar")),
            "once refused, nothing left to refuse"
        );
    }

    #[test]
    fn anthropic_gets_the_schema_without_the_bounds_it_does_not_take() {
        let st = Structured::default();
        st.set(Some(Dialect::AnthropicSchema));
        let schema = json!({"type": "object", "properties": {
            "text": {"type": "string", "minLength": 1, "maxLength": 9},
            "n": {"type": "integer", "minimum": 1, "maximum": 10},
            "maxLength": {"type": "boolean"},
            "list": {"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 1, "maxItems": 5},
        }, "required": ["text", "n", "list"], "additionalProperties": false});
        let mut body = json!({});
        assert!(st.apply(&mut body, &Constraint::JsonSchema(Arc::new(schema))));
        assert_eq!(
            body["output_config"]["format"]["schema"],
            json!({"type": "object", "properties": {
                "text": {"type": "string"},
                "n": {"type": "integer"},
                "maxLength": {"type": "boolean"},
                "list": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            }, "required": ["text", "n", "list"], "additionalProperties": false})
        );
    }

    #[test]
    fn llama_cpp_python_gets_no_text_longer_than_it_takes() {
        let st = Structured::default();
        st.set(Some(Dialect::JsonObject));
        let schema = json!({"type": "object", "properties": {
            "long": {"type": "string", "minLength": 1, "maxLength": 1270},
            "short": {"type": "string", "maxLength": 300},
            "maxLength": {"type": "integer", "maximum": 5000},
            "list": {"type": "array", "items": {"anyOf": [{"type": "string", "maxLength": 4000}, {"type": "null"}]}, "maxItems": 12},
        }, "required": ["long"]});
        let mut body = json!({});
        assert!(st.apply(&mut body, &Constraint::JsonSchema(Arc::new(schema))));
        assert_eq!(body["response_format"]["type"], "json_object");
        assert_eq!(
            body["response_format"]["schema"],
            json!({"type": "object", "properties": {
                "long": {"type": "string", "minLength": 1, "maxLength": 1000},
                "short": {"type": "string", "maxLength": 300},
                "maxLength": {"type": "integer", "maximum": 5000},
                "list": {"type": "array", "items": {"anyOf": [{"type": "string", "maxLength": 1000}, {"type": "null"}]}, "maxItems": 12},
            }, "required": ["long"]})
        );
    }

    #[test]
    fn vllm_versions_choose_their_field() {
        assert_eq!(vllm(Some("0.9.1")), Dialect::VllmGuided);
        assert_eq!(vllm(Some("0.10.2")), Dialect::VllmStructured);
        assert_eq!(vllm(Some("0.11.0+cu128")), Dialect::VllmStructured);
        assert_eq!(vllm(None), Dialect::VllmStructured);
    }
}
