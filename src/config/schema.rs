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

mod keys;

pub(super) use keys::{expect, Key, Kind};
use keys::{find, sections, KEYS};

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
        if section == "daimons" {
            walk_daimons(value, text, &mut w);
            continue;
        }
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
                    walk_tables(items, text, &SERVERS, &mut w.problems);
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

/// Tables of one kind (`[[tools.servers]]`, `[[daimons]]`): their keys, and how problems
/// name them.
struct Tables {
    keys: &'static [Key],
    /// `[[tools.servers]]`.
    header: &'static str,
    /// `tools.servers`.
    path: &'static str,
    /// `a server`.
    one: &'static str,
}

const SERVERS: Tables = Tables {
    keys: super::tools::SERVER_KEYS,
    header: "[[tools.servers]]",
    path: "tools.servers",
    one: "a server",
};

const DAIMONS: Tables = Tables {
    keys: super::daimons::DAIMON_KEYS,
    header: "[[daimons]]",
    path: "daimons",
    one: "a daimon",
};

/// `daimons`, which must be `[[daimons]]` tables: each one's keys checked; with any problem
/// the whole list is left out before deserializing.
fn walk_daimons(value: &toml::Spanned<DeValue<'_>>, text: &str, w: &mut Walk) {
    let before = w.problems.len();
    match value.get_ref() {
        DeValue::Array(items)
            if items
                .iter()
                .all(|i| matches!(i.get_ref(), DeValue::Table(_))) =>
        {
            walk_tables(items, text, &DAIMONS, &mut w.problems)
        }
        _ => w.problems.push(Found {
            offset: value.span().start,
            key: "daimons".into(),
            message: format!(
                "found {}, expected [[daimons]] tables, one per daimon",
                written(text, value.span())
            ),
        }),
    }
    if w.problems.len() > before {
        w.drop.push(("daimons".to_string(), None));
    }
}

/// Every unknown key and every value of the wrong kind in tables of one kind.
fn walk_tables(
    items: &[toml::Spanned<DeValue<'_>>],
    text: &str,
    tables: &Tables,
    problems: &mut Vec<Found>,
) {
    let keys = tables.keys;
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
                    key: tables.header.into(),
                    message: match nearest(key, names.clone()) {
                        Some(n) => format!("unknown key `{key}`; did you mean `{n}`?"),
                        None => format!(
                            "unknown key `{key}`; the keys of {} are {}",
                            tables.one,
                            names.collect::<Vec<_>>().join(", ")
                        ),
                    },
                });
                continue;
            };
            if let Some(more) = spec.kind.refuse(v.get_ref()) {
                problems.push(Found {
                    offset: v.span().start,
                    key: format!("{}.{key}", tables.path),
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
    fn a_daimons_keys_are_checked_in_each_table() {
        let w = walk_str(
            "[[daimons]]\nname = \"kothar\"\nurl = \"http://h\"\ntimout_ms = 5\nper_hour = 0\n",
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
                    "[[daimons]]",
                    "unknown key `timout_ms`; did you mean `timeout_ms`?"
                ),
                (
                    "daimons.per_hour",
                    "found 0, expected a whole number of asks from 1 to 100000"
                ),
            ]
        );
        assert_eq!(w.drop, [("daimons".to_string(), None)]);
        let w = walk_str("daimons = \"kothar\"\n");
        assert_eq!(w.problems.len(), 1);
        assert_eq!(
            w.problems[0].message,
            "found \"kothar\", expected [[daimons]] tables, one per daimon"
        );
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
