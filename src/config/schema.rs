//! What `anima.toml` may hold, key by key, in words a person reads.
//!
//! Owns the list of sections and keys, the kind and range of each value, and the second pass
//! over a parsed document that finds every unknown key and every value of the wrong kind or
//! out of range at once (serde stops at the first), each with where it is, the value found
//! and what is expected. `raw` owns the defaults; a test keeps the two in step. Rules that
//! need a value parsed (URLs, addresses) stay in `config::validate`, in these same words.

use std::ops::Range;

use toml::de::{DeTable, DeValue};

use crate::toml_file::nearest;

/// What a value must be.
#[derive(Debug, Clone, Copy)]
pub(super) enum Kind {
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

pub(super) struct Key {
    pub section: &'static str,
    pub name: &'static str,
    pub kind: Kind,
}

const U32: u64 = u32::MAX as u64;
/// TOML integers are signed 64-bit: a `u64` key can hold no more.
const I64: u64 = i64::MAX as u64;

/// A century: `keep_days` in milliseconds fits the store's clock many times over.
pub(super) const MAX_KEEP_DAYS: u64 = 36_500;

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

fn sections() -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::new();
    for k in KEYS {
        if !out.contains(&k.section) {
            out.push(k.section);
        }
    }
    out
}

fn find(section: &str, name: &str) -> Option<&'static Key> {
    KEYS.iter().find(|k| k.section == section && k.name == name)
}

/// What `section.name` must be, in plain words (for rules checked elsewhere).
pub(super) fn expect(section: &str, name: &str) -> String {
    find(section, name).map_or_else(String::new, |k| k.kind.expectation())
}

impl Kind {
    pub(super) fn expectation(&self) -> String {
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
    fn refuse(&self, value: &DeValue<'_>) -> Option<String> {
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

/// One problem the walk found: where (a byte offset), the key as `section.key` or `[section]`
/// (empty outside any section), and the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Found {
    pub offset: usize,
    pub key: String,
    pub message: String,
}

/// What the walk learned.
#[derive(Debug, Default)]
pub(super) struct Walk {
    pub problems: Vec<Found>,
    /// Entries to leave out before deserializing: `(section, Some(key))`, or a whole
    /// section or top-level key with `None`.
    pub drop: Vec<(String, Option<String>)>,
}

/// The value as written, shortened to one line.
fn written(text: &str, span: Range<usize>) -> String {
    let s = text.get(span).unwrap_or("").trim();
    let first = s.lines().next().unwrap_or("");
    let mut out: String = first.chars().take(60).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// Checks every section and key of a parsed document.
pub(super) fn walk(doc: &DeTable<'_>, text: &str) -> Walk {
    let mut w = Walk::default();
    let known = sections();
    for (name, value) in doc.iter() {
        let section = name.get_ref().as_ref();
        let offset = name.span().start;
        if known.contains(&section) {
            let DeValue::Table(table) = value.get_ref() else {
                w.problems.push(Found {
                    offset,
                    key: format!("[{section}]"),
                    message: format!(
                        "found `{section} = {}`, expected a [{section}] section",
                        written(text, value.span())
                    ),
                });
                w.drop.push((section.to_string(), None));
                continue;
            };
            for (k, v) in table.iter() {
                let key = k.get_ref().as_ref();
                let Some(spec) = find(section, key) else {
                    w.problems.push(Found {
                        offset: k.span().start,
                        key: format!("[{section}]"),
                        message: unknown_key(section, key),
                    });
                    w.drop.push((section.to_string(), Some(key.to_string())));
                    continue;
                };
                if let (Kind::Servers, DeValue::Array(items)) = (spec.kind, v.get_ref()) {
                    let before = w.problems.len();
                    walk_servers(items, text, &mut w.problems);
                    if w.problems.len() > before {
                        w.drop.push((section.to_string(), Some(key.to_string())));
                    }
                }
                if let Some(more) = spec.kind.refuse(v.get_ref()) {
                    let expectation = spec.kind.expectation();
                    w.problems.push(Found {
                        offset: v.span().start,
                        key: format!("{section}.{key}"),
                        message: format!(
                            "found {}, expected {expectation}{more}",
                            written(text, v.span())
                        ),
                    });
                    w.drop.push((section.to_string(), Some(key.to_string())));
                }
            }
        } else {
            let message = if matches!(value.get_ref(), DeValue::Table(_)) {
                match nearest(section, known.iter().copied()) {
                    Some(s) => format!("unknown section; did you mean [{s}]?"),
                    None => format!(
                        "unknown section; the sections are {}",
                        known
                            .iter()
                            .map(|s| format!("[{s}]"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                }
            } else {
                let home = KEYS
                    .iter()
                    .find(|k| k.name == section)
                    .or_else(|| {
                        nearest(section, KEYS.iter().map(|k| k.name))
                            .and_then(|n| KEYS.iter().find(|k| k.name == n))
                    })
                    .map(|k| format!("; did you mean `{}` under [{}]?", k.name, k.section))
                    .unwrap_or_default();
                format!("unknown key `{section}` outside any section{home}")
            };
            let key = if matches!(value.get_ref(), DeValue::Table(_)) {
                format!("[{section}]")
            } else {
                String::new()
            };
            w.problems.push(Found {
                offset,
                key,
                message,
            });
            w.drop.push((section.to_string(), None));
        }
    }
    w.problems.sort_by_key(|p| p.offset);
    w
}

/// Every unknown key and every value of the wrong kind in the `[[tools.servers]]` tables.
fn walk_servers(items: &[toml::Spanned<DeValue<'_>>], text: &str, problems: &mut Vec<Found>) {
    let keys = super::tools::SERVER_KEYS;
    for item in items {
        let DeValue::Table(table) = item.get_ref() else {
            continue;
        };
        for (k, v) in table.iter() {
            let key = k.get_ref().as_ref();
            let Some(spec) = keys.iter().find(|s| s.name == key) else {
                let names = keys.iter().map(|s| s.name);
                problems.push(Found {
                    offset: k.span().start,
                    key: "[[tools.servers]]".into(),
                    message: match nearest(key, names.clone()) {
                        Some(n) => format!("unknown key `{key}`; did you mean `{n}`?"),
                        None => format!(
                            "unknown key `{key}`; the keys of a server are {}",
                            names.collect::<Vec<_>>().join(", ")
                        ),
                    },
                });
                continue;
            };
            if let Some(more) = spec.kind.refuse(v.get_ref()) {
                problems.push(Found {
                    offset: v.span().start,
                    key: format!("tools.servers.{key}"),
                    message: format!(
                        "found {}, expected {}{more}",
                        written(text, v.span()),
                        spec.kind.expectation()
                    ),
                });
            }
        }
    }
}

/// "unknown key `modle`; did you mean `model`?", or where the key belongs, or the valid keys.
fn unknown_key(section: &str, key: &str) -> String {
    let here = KEYS.iter().filter(|k| k.section == section).map(|k| k.name);
    if let Some(n) = nearest(key, here.clone()) {
        return format!("unknown key `{key}`; did you mean `{n}`?");
    }
    if let Some(elsewhere) = KEYS.iter().find(|k| k.name == key) {
        return format!(
            "unknown key `{key}`; `{key}` belongs under [{}]",
            elsewhere.section
        );
    }
    format!(
        "unknown key `{key}`; the keys of [{section}] are {}",
        here.collect::<Vec<_>>().join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk_str(text: &str) -> Walk {
        let doc = DeTable::parse(text).unwrap();
        walk(doc.get_ref(), text)
    }

    #[test]
    fn misspellings_find_their_nearest_name() {
        let keys = ["model", "max_tokens", "max_retries", "provider"];
        assert_eq!(nearest("modle", keys.iter().copied()), Some("model"));
        assert_eq!(
            nearest("max-tokens", keys.iter().copied()),
            Some("max_tokens")
        );
        assert_eq!(nearest("Provider", keys.iter().copied()), Some("provider"));
        assert_eq!(nearest("colour", keys.iter().copied()), None);
    }

    /// The defaults in `raw`, written out as TOML, are exactly the keys listed here, each of
    /// the kind listed: a key added to one and not the other fails this test.
    #[test]
    fn the_schema_and_the_raw_config_list_the_same_keys() {
        let text = toml::to_string(&super::super::RawConfig::default()).unwrap();
        let w = walk_str(&text);
        assert_eq!(w.problems, Vec::<Found>::new(), "{text}");
        let doc = DeTable::parse(&text).unwrap();
        for k in KEYS {
            let section = doc.get_ref().get(k.section).map(|v| v.get_ref());
            let Some(DeValue::Table(t)) = section else {
                panic!("[{}] is not in RawConfig", k.section)
            };
            assert!(
                t.get(k.name).is_some(),
                "{}.{} is not in RawConfig",
                k.section,
                k.name
            );
        }
    }

    #[test]
    fn every_key_of_the_wrong_kind_is_one_problem_in_plain_words() {
        for k in KEYS {
            let bad = match k.kind {
                Kind::Bool | Kind::TextList => "3",
                _ => "true",
            };
            let w = walk_str(&format!("[{}]\n{} = {bad}\n", k.section, k.name));
            assert_eq!(w.problems.len(), 1, "{}.{}", k.section, k.name);
            let m = &w.problems[0].message;
            assert!(m.starts_with(&format!("found {bad}, expected ")), "{m}");
            assert!(!m.contains("u32") && !m.contains("integer"), "{m}");
        }
    }

    #[test]
    fn ranges_and_choices_are_explained() {
        let w = walk_str("[llm]\nmax_tokens = 0\nmax_retries = 11\nprovider = \"antropic\"\n");
        let msgs: Vec<&str> = w.problems.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(
            msgs,
            [
                "found 0, expected a whole number ≥ 1",
                "found 11, expected a whole number from 0 to 10",
                "found \"antropic\", expected one of \"auto\", \"anthropic\", \"openai\", \"claude-cli\"; did you mean \"anthropic\"?",
            ]
        );
        let w = walk_str("[llm]\nmax_tokens = 5_000_000_000\n");
        assert_eq!(
            w.problems[0].message,
            "found 5_000_000_000, expected a whole number ≥ 1 and at most 4294967295"
        );
    }

    #[test]
    fn structured_output_names_its_choices() {
        let w = walk_str("[llm]\nstructured_output = \"gbnf\"\n");
        assert_eq!(w.problems.len(), 1);
        assert_eq!(w.problems[0].key, "llm.structured_output");
        let m = &w.problems[0].message;
        assert!(
            m.starts_with(
                "found \"gbnf\", expected one of \"auto\", \"off\", \"grammar\", \"json_schema\""
            ),
            "{m}"
        );
        assert!(walk_str("[llm]\nstructured_output = \"json_schema\"\n")
            .problems
            .is_empty());
    }

    #[test]
    fn a_servers_keys_are_checked_in_each_table() {
        let w = walk_str(
            "[[tools.servers]]\nname = \"kb\"\ncomand = [\"x\"]\ntimeout_secs = 0\n[[tools.servers]]\nname = \"b\"\nallow = \"x\"\n",
        );
        let msgs: Vec<(&str, &str)> = w
            .problems
            .iter()
            .map(|p| (p.key.as_str(), p.message.as_str()))
            .collect();
        assert_eq!(
            msgs,
            [
                (
                    "[[tools.servers]]",
                    "unknown key `comand`; did you mean `command`?"
                ),
                (
                    "tools.servers.timeout_secs",
                    "found 0, expected a whole number of seconds from 1 to 3600"
                ),
                (
                    "tools.servers.allow",
                    "found \"x\", expected a list of texts in quotes, such as [\"C0123ABCD\"]"
                ),
            ]
        );
        assert_eq!(w.drop, [("tools".to_string(), Some("servers".to_string()))]);
    }

    #[test]
    fn autonomy_numbers_are_explained() {
        let w = walk_str("[autonomy]\nthreshold = 1.5\nweights = [0.2, 0.2]\n");
        let msgs: Vec<&str> = w.problems.iter().map(|p| p.message.as_str()).collect();
        assert_eq!(
            msgs,
            [
                "found 1.5, expected a number from 0 to 1",
                "found [0.2, 0.2], expected a list of exactly 5 numbers, each 0 or more, such as [0.25, 0.25, 0.25, 0.15, 0.10]",
            ]
        );
        let w = walk_str("[autonomy]\nweights = [0.2, 0.2, -0.1, 0, 1]\n");
        assert_eq!(w.problems.len(), 1);
        let w = walk_str("[autonomy]\nthreshold = 0\nweights = [1, 0, 0, 0, 0.5]\n");
        assert_eq!(w.problems, Vec::<Found>::new());
    }

    #[test]
    fn unknown_names_suggest_where_they_belong() {
        let w = walk_str(
            "provider = \"openai\"\n[slak]\nmode = \"x\"\n[llm]\nhome = \"x\"\ncolour = 1\n",
        );
        let got: Vec<(&str, &str)> = w
            .problems
            .iter()
            .map(|p| (p.key.as_str(), p.message.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "",
                    "unknown key `provider` outside any section; did you mean `provider` under [llm]?"
                ),
                ("[slak]", "unknown section; did you mean [slack]?"),
                ("[llm]", "unknown key `home`; `home` belongs under [paths]"),
                (
                    "[llm]",
                    "unknown key `colour`; the keys of [llm] are provider, model, base_url, max_tokens, timeout_secs, max_retries, claude_cli_path, stream, structured_output"
                ),
            ]
        );
    }
}
