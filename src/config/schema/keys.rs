//! The keys `anima.toml` may hold, section by section, and what each value must be: the
//! table, and each kind's expectation and judgement in words a person reads. The walk over a
//! document is `schema`'s; the defaults are `raw`'s. Knows nothing but the TOML value types.

use toml::de::DeValue;

use crate::toml_file::nearest;

/// What a value must be.
#[derive(Debug, Clone, Copy)]
pub(in crate::config) enum Kind {
    /// Any text; the words say what it is for.
    Text(&'static str),
    /// Text that is not blank.
    NonEmpty(&'static str),
    /// A whole number in `min..=max`; `unit` is "" or e.g. "seconds".
    Whole {
        min: u64,
        max: u64,
        unit: &'static str,
    },
    Bool,
    OneOf(&'static [&'static str]),
    TextList,
    /// A number (whole or not) in `min..=max`.
    Number {
        min: f64,
        max: f64,
    },
    /// Exactly `n` numbers, each 0 or more.
    Weights(usize),
    /// `[[tools.servers]]`: tables, each of the keys in `tools::SERVER_KEYS`.
    Servers,
}

pub(in crate::config) struct Key {
    pub section: &'static str,
    pub name: &'static str,
    pub kind: Kind,
}

const U32: u64 = u32::MAX as u64;
/// TOML integers are signed 64-bit: a `u64` key can hold no more.
const I64: u64 = i64::MAX as u64;

/// A century: `keep_days` in milliseconds fits the store's clock many times over.
pub(in crate::config) const MAX_KEEP_DAYS: u64 = 36_500;

const fn key(section: &'static str, name: &'static str, kind: Kind) -> Key {
    Key {
        section,
        name,
        kind,
    }
}

const fn whole(min: u64, max: u64) -> Kind {
    Kind::Whole { min, max, unit: "" }
}

/// Every key anima reads, section by section, in the order of `config.example.toml`.
pub(super) const KEYS: &[Key] = &[
    key("paths", "home", Kind::NonEmpty("a folder path in quotes")),
    key(
        "paths",
        "soul_dir",
        Kind::NonEmpty("a folder path in quotes"),
    ),
    key(
        "paths",
        "processes_dir",
        Kind::NonEmpty("a folder path in quotes"),
    ),
    key(
        "paths",
        "evals_dir",
        Kind::NonEmpty("a folder path in quotes"),
    ),
    key(
        "llm",
        "provider",
        Kind::OneOf(&["auto", "anthropic", "openai", "claude-cli"]),
    ),
    key(
        "llm",
        "model",
        Kind::Text("a model name in quotes (\"\" for the provider's default)"),
    ),
    key(
        "llm",
        "base_url",
        Kind::Text("an http:// or https:// URL in quotes (\"\" for the provider's default)"),
    ),
    key("llm", "max_tokens", whole(1, U32)),
    key(
        "llm",
        "timeout_secs",
        Kind::Whole {
            min: 1,
            max: I64,
            unit: "seconds",
        },
    ),
    key("llm", "max_retries", whole(0, 10)),
    key(
        "llm",
        "claude_cli_path",
        Kind::NonEmpty("the `claude` executable's name or path, in quotes"),
    ),
    key("llm", "stream", Kind::Bool),
    key(
        "llm",
        "structured_output",
        Kind::OneOf(&["auto", "off", "grammar", "json_schema"]),
    ),
    key("pipeline", "soul_state_interval", whole(1, I64)),
    key("pipeline", "user_model_interval", whole(1, I64)),
    key("pipeline", "memory_window", whole(1, U32)),
    key(
        "pipeline",
        "max_response_chars",
        Kind::Whole {
            min: 16,
            max: I64,
            unit: "characters",
        },
    ),
    key("slack", "mode", Kind::OneOf(&["socket", "events"])),
    key(
        "slack",
        "api_base_url",
        Kind::Text("an http:// or https:// URL in quotes, without a trailing `/`"),
    ),
    key("slack", "allowed_channels", Kind::TextList),
    key("slack", "allowed_users", Kind::TextList),
    key("slack", "reply_to_bots", Kind::Bool),
    key("slack", "allow_broadcast", Kind::Bool),
    key("slack", "stream_replies", Kind::Bool),
    key("slack", "max_concurrent_turns", whole(1, I64)),
    key("slack", "app_token_check_secs", whole(1, I64)),
    key(
        "daemon",
        "shutdown_grace_secs",
        Kind::Whole {
            min: 0,
            max: I64,
            unit: "seconds",
        },
    ),
    key(
        "daemon",
        "ops_channel",
        Kind::Text("a Slack channel id in quotes, such as \"C0123ABCD\" (\"\" for none)"),
    ),
    key(
        "states",
        "solitude_after_idle_minutes",
        Kind::Whole {
            min: 1,
            max: I64,
            unit: "minutes",
        },
    ),
    key("dream", "keep_recent", whole(1, U32)),
    key(
        "memory",
        "keep_days",
        Kind::Whole {
            min: 0,
            max: MAX_KEEP_DAYS,
            unit: "days",
        },
    ),
    key("guardrails", "crisis_keywords", Kind::TextList),
    key(
        "processes",
        "initial",
        Kind::NonEmpty("a process name in quotes, such as \"greeting\" or \"main\""),
    ),
    key("processes", "max_chain", whole(1, U32)),
    key(
        "processes",
        "proactive_idle_minutes",
        Kind::Whole {
            min: 1,
            max: I64,
            unit: "minutes",
        },
    ),
    key(
        "processes",
        "proactive_scan_secs",
        Kind::Whole {
            min: 1,
            max: I64,
            unit: "seconds",
        },
    ),
    key("ism", "enabled", Kind::Bool),
    key("ism", "max_loops", whole(1, 50)),
    key(
        "ism",
        "selection_model",
        Kind::Text("a model name in quotes, or \"\" for the provider's own"),
    ),
    key("autonomy", "enabled", Kind::Bool),
    key("autonomy", "channels", Kind::TextList),
    key(
        "autonomy",
        "cooldown_secs",
        Kind::Whole {
            min: 0,
            max: I64,
            unit: "seconds",
        },
    ),
    key("autonomy", "threshold", Kind::Number { min: 0.0, max: 1.0 }),
    key("autonomy", "weights", Kind::Weights(5)),
    key("admin", "users", Kind::TextList),
    key("inspect", "keep_turns", whole(0, 1_000_000)),
    key("inspect", "why_users", Kind::TextList),
    key("files", "max_bytes", whole(1, 1024 * 1024 * 1024)),
    key("files", "max_files", whole(0, 100)),
    key("files", "images", Kind::Bool),
    key("files", "text_chars", whole(0, 1_000_000)),
    key("tools", "servers", Kind::Servers),
    key("store", "backend", Kind::OneOf(&["sqlite", "postgres"])),
    key("store", "pool_size", whole(1, 1000)),
    key(
        "store",
        "claim_lease_secs",
        Kind::Whole {
            min: 5,
            max: 86_400,
            unit: "seconds",
        },
    ),
    key(
        "http",
        "listen",
        Kind::Text("an address:port in quotes, such as \"127.0.0.1:3000\""),
    ),
];

pub(super) fn sections() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for k in KEYS {
        if !out.contains(&k.section) {
            out.push(k.section);
        }
    }
    out
}

pub(super) fn find(section: &str, name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.section == section && k.name == name)
}

/// What `section.name` must be, in plain words (for rules checked elsewhere).
pub(in crate::config) fn expect(section: &str, name: &str) -> String {
    find(section, name).map_or_else(String::new, |k| k.kind.expectation())
}

impl Kind {
    pub(in crate::config) fn expectation(&self) -> String {
        match *self {
            Kind::Text(words) | Kind::NonEmpty(words) => words.to_string(),
            Kind::Whole { min, max, unit } => {
                let of = if unit.is_empty() {
                    String::new()
                } else {
                    format!(" of {unit}")
                };
                if max < U32 {
                    format!("a whole number{of} from {min} to {max}")
                } else if min == 0 {
                    format!("a whole number{of}, 0 or more")
                } else {
                    format!("a whole number{of} ≥ {min}")
                }
            }
            Kind::Bool => "true or false, without quotes".into(),
            Kind::OneOf(choices) => {
                let quoted: Vec<String> = choices.iter().map(|c| format!("\"{c}\"")).collect();
                format!("one of {}", quoted.join(", "))
            }
            Kind::TextList => "a list of texts in quotes, such as [\"C0123ABCD\"]".into(),
            Kind::Number { min, max } => format!("a number from {min} to {max}"),
            Kind::Weights(n) => format!(
                "a list of exactly {n} numbers, each 0 or more, such as [0.25, 0.25, 0.25, 0.15, 0.10]"
            ),
            Kind::Servers => "[[tools.servers]] tables, one per server".into(),
        }
    }

    /// Why `value` is not of this kind, or `None` when it is.
    pub(super) fn refuse(&self, value: &DeValue<'_>) -> Option<String> {
        match (*self, value) {
            (Kind::Text(_), DeValue::String(_)) | (Kind::Bool, DeValue::Boolean(_)) => None,
            (Kind::NonEmpty(_), DeValue::String(s)) if !s.trim().is_empty() => None,
            (Kind::Whole { min, max, .. }, DeValue::Integer(i)) => {
                let n = i128::from_str_radix(i.as_str(), i.radix()).ok()?;
                if n < min as i128 {
                    Some(String::new())
                } else if n > max as i128 && max >= U32 {
                    // The expectation names no maximum for such large ones.
                    Some(format!(" and at most {max}"))
                } else if n > max as i128 {
                    Some(String::new())
                } else {
                    None
                }
            }
            (Kind::OneOf(choices), DeValue::String(s)) => {
                if choices.contains(&s.as_ref()) {
                    None
                } else {
                    Some(
                        nearest(s, choices.iter().copied())
                            .map(|c| format!("; did you mean \"{c}\"?"))
                            .unwrap_or_default(),
                    )
                }
            }
            (Kind::Number { min, max }, v) => match number(v) {
                Some(n) if (min..=max).contains(&n) => None,
                _ => Some(String::new()),
            },
            (Kind::Weights(n), DeValue::Array(items))
                if items.len() == n
                    && items.iter().all(|i| {
                        number(i.get_ref()).is_some_and(|x| x >= 0.0 && x.is_finite())
                    }) =>
            {
                None
            }
            (Kind::Servers, DeValue::Array(items))
                if items
                    .iter()
                    .all(|i| matches!(i.get_ref(), DeValue::Table(_))) =>
            {
                None
            }
            (Kind::TextList, DeValue::Array(items))
                if items
                    .iter()
                    .all(|i| matches!(i.get_ref(), DeValue::String(_))) =>
            {
                None
            }
            _ => Some(String::new()),
        }
    }
}

/// A TOML number, whole or not.
fn number(v: &DeValue<'_>) -> Option<f64> {
    match v {
        DeValue::Integer(i) => i64::from_str_radix(i.as_str(), i.radix())
            .ok()
            .map(|n| n as f64),
        DeValue::Float(f) => f.as_str().replace('_', "").parse().ok(),
        _ => None,
    }
}
