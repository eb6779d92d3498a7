//! `[[daimons]]`: the other souls anima asks for a whisper of counsel before a turn, as
//! written and as checked.
//!
//! Owns the keys of one daimon table, their defaults, and the rules across them (a name, one
//! kind: an HTTP endpoint speaking Claudicle's whisper protocol (`url`) or a model persona
//! (`soul_file`); `bearer_env` only with `url`, `model` only with `soul_file`). Secrets never
//! pass through here: the bearer token is named by its variable and read by `daimon` when
//! the daimons are built. Reads no file: `soul_file` is only resolved.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::schema::{Key, Kind};

/// The default bound on one daimon's answer.
pub const DEFAULT_TIMEOUT_MS: u64 = 1500;
/// The default number of asks a daimon gets an hour.
pub const DEFAULT_PER_HOUR: u32 = 60;

/// One `[[daimons]]` table as written.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawDaimon {
    pub name: String,
    pub url: String,
    pub bearer_env: String,
    pub soul_file: String,
    pub model: String,
    pub timeout_ms: u64,
    pub per_hour: u32,
}

impl Default for RawDaimon {
    fn default() -> Self {
        Self {
            name: String::new(),
            url: String::new(),
            bearer_env: String::new(),
            soul_file: String::new(),
            model: String::new(),
            timeout_ms: DEFAULT_TIMEOUT_MS,
            per_hour: DEFAULT_PER_HOUR,
        }
    }
}

/// The keys of one daimon table, for the schema's walk.
pub(super) const DAIMON_KEYS: &[Key] = &[
    Key {
        section: "daimons",
        name: "name",
        kind: Kind::NonEmpty("a name in quotes: letters, digits, `_`, `-`"),
    },
    Key {
        section: "daimons",
        name: "url",
        kind: Kind::Text("an http:// or https:// URL in quotes"),
    },
    Key {
        section: "daimons",
        name: "bearer_env",
        kind: Kind::Text("the name of an environment variable, in quotes"),
    },
    Key {
        section: "daimons",
        name: "soul_file",
        kind: Kind::Text("the path of the daimon's soul.md, in quotes"),
    },
    Key {
        section: "daimons",
        name: "model",
        kind: Kind::Text("a model name in quotes, or \"\" for the provider's own"),
    },
    Key {
        section: "daimons",
        name: "timeout_ms",
        kind: Kind::Whole {
            min: 50,
            max: 60_000,
            unit: "milliseconds",
        },
    },
    Key {
        section: "daimons",
        name: "per_hour",
        kind: Kind::Whole {
            min: 1,
            max: 100_000,
            unit: "asks",
        },
    },
];

/// One daimon, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct DaimonConfig {
    /// Letters, digits, `_`, `-`: how the prompt names who whispered.
    pub name: String,
    pub kind: DaimonKind,
    /// The most one ask may cost a turn.
    pub timeout: Duration,
    /// Asks an hour, counted by each anima process on its own.
    pub per_hour: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub enum DaimonKind {
    /// An endpoint speaking Claudicle's whisper protocol.
    Http {
        url: String,
        /// The variable holding the bearer token; empty: none is sent.
        bearer_env: String,
    },
    /// A persona: its soul file as the system text of one call to the configured provider.
    Persona {
        soul_file: PathBuf,
        /// A model of the same provider; empty: the provider's own.
        model: String,
    },
}

/// The daimons, checked; each problem as (daimon index, key, message).
pub(super) fn check(
    raw: &[RawDaimon],
    base: &Path,
) -> (Vec<DaimonConfig>, Vec<(usize, &'static str, String)>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for (i, d) in raw.iter().enumerate() {
        let mut bad = |key: &'static str, message: String| problems.push((i, key, message));
        let name = d.name.trim().to_string();
        if !super::is_server_name(&name) {
            bad(
                "name",
                format!("found \"{name}\", expected a name of letters, digits, `_` and `-` (the prompt says who whispered by it)"),
            );
        } else if raw[..i].iter().any(|o| o.name.trim() == name) {
            bad("name", format!("daimon `{name}` is defined twice"));
        }
        let (url, soul_file) = (d.url.trim(), d.soul_file.trim());
        let kind = match (url.is_empty(), soul_file.is_empty()) {
            (false, true) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    bad(
                        "url",
                        format!("found \"{url}\", expected an http:// or https:// URL"),
                    );
                }
                if !d.model.trim().is_empty() {
                    bad(
                        "model",
                        "`model` is for a daimon given by `soul_file`; a daimon at `url` chooses its own".into(),
                    );
                }
                Some(DaimonKind::Http {
                    url: url.to_string(),
                    bearer_env: d.bearer_env.trim().to_string(),
                })
            }
            (true, false) => {
                if !d.bearer_env.trim().is_empty() {
                    bad(
                        "bearer_env",
                        "`bearer_env` is for a daimon reached at `url`, not one given by `soul_file`".into(),
                    );
                }
                Some(DaimonKind::Persona {
                    soul_file: super::validate::expand(soul_file, base),
                    model: d.model.trim().to_string(),
                })
            }
            (false, false) => {
                bad(
                    "url",
                    "give a daimon either `url` (an endpoint speaking the whisper protocol) or `soul_file` (a persona the configured provider plays), not both".into(),
                );
                None
            }
            (true, true) => {
                bad(
                    "url",
                    "a daimon needs `url` (such as \"http://127.0.0.1:3033/api/whisper\") or `soul_file` (the path of its soul.md)".into(),
                );
                None
            }
        };
        if let Some(kind) = kind {
            out.push(DaimonConfig {
                name,
                kind,
                timeout: Duration::from_millis(d.timeout_ms.clamp(50, 60_000)),
                per_hour: d.per_hour.max(1),
            });
        }
    }
    (out, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn daimons(text: &str) -> (Vec<DaimonConfig>, Vec<(usize, &'static str, String)>) {
        let raw: super::super::RawConfig = toml::from_str(text).unwrap();
        check(&raw.daimons, Path::new("/etc/anima"))
    }

    #[test]
    fn an_endpoint_and_a_persona_are_read_with_their_defaults() {
        let (d, p) = daimons(
            "[[daimons]]\nname = \"kothar\"\nurl = \"http://127.0.0.1:3033/api/whisper\"\nbearer_env = \"KOTHAR_TOKEN\"\n\n[[daimons]]\nname = \"artifex\"\nsoul_file = \"souls/artifex.md\"\nmodel = \"small\"\ntimeout_ms = 4000\nper_hour = 10\n",
        );
        assert_eq!(p, []);
        assert_eq!(
            d[0],
            DaimonConfig {
                name: "kothar".into(),
                kind: DaimonKind::Http {
                    url: "http://127.0.0.1:3033/api/whisper".into(),
                    bearer_env: "KOTHAR_TOKEN".into()
                },
                timeout: Duration::from_millis(1500),
                per_hour: 60,
            }
        );
        assert_eq!(
            d[1].kind,
            DaimonKind::Persona {
                soul_file: PathBuf::from("/etc/anima/souls/artifex.md"),
                model: "small".into()
            }
        );
        assert_eq!((d[1].timeout, d[1].per_hour), (Duration::from_secs(4), 10));
    }

    #[test]
    fn each_wrong_daimon_says_which_key_and_why() {
        let (_, p) = daimons(
            "[[daimons]]\nname = \"k b\"\nurl = \"http://h\"\n[[daimons]]\nname = \"a\"\n[[daimons]]\nname = \"b\"\nurl = \"http://h\"\nsoul_file = \"s.md\"\n[[daimons]]\nname = \"c\"\nurl = \"ftp://h\"\nmodel = \"m\"\n[[daimons]]\nname = \"c\"\nsoul_file = \"s.md\"\nbearer_env = \"T\"\n",
        );
        let keys: Vec<(usize, &str)> = p.iter().map(|(i, k, _)| (*i, *k)).collect();
        assert_eq!(
            keys,
            [
                (0, "name"),
                (1, "url"),
                (2, "url"),
                (3, "url"),
                (3, "model"),
                (4, "name"),
                (4, "bearer_env")
            ]
        );
    }
}
