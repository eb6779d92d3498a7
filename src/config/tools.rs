//! `[[tools.servers]]`: the MCP tool servers the soul may call, as written and as checked.
//!
//! Owns the keys of one server table, their defaults, and the rules across them (a name
//! process files can spell, exactly one transport, the bearer token's variable only for HTTP).
//! Secrets never pass through here: a server's environment and its bearer token are named by
//! variable and read by `tools` when it starts the server.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use super::schema::{Key, Kind};

/// `[tools]` as written.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawTools {
    pub servers: Vec<RawToolServer>,
}

/// One `[[tools.servers]]` table as written.
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawToolServer {
    pub name: String,
    pub command: Vec<String>,
    pub env: Vec<String>,
    pub url: String,
    pub bearer_env: String,
    pub allow: Vec<String>,
    pub timeout_secs: u64,
    pub max_result_chars: u64,
}

impl Default for RawToolServer {
    fn default() -> Self {
        Self {
            name: String::new(),
            command: Vec::new(),
            env: Vec::new(),
            url: String::new(),
            bearer_env: String::new(),
            allow: Vec::new(),
            timeout_secs: 30,
            max_result_chars: 16_000,
        }
    }
}

/// The keys of one server table, for the schema's walk.
pub(super) const SERVER_KEYS: &[Key] = &[
    Key {
        section: "tools.servers",
        name: "name",
        kind: Kind::NonEmpty("a name in quotes: letters, digits, `_`, `-`"),
    },
    Key {
        section: "tools.servers",
        name: "command",
        kind: Kind::TextList,
    },
    Key {
        section: "tools.servers",
        name: "env",
        kind: Kind::TextList,
    },
    Key {
        section: "tools.servers",
        name: "url",
        kind: Kind::Text("an http:// or https:// URL in quotes"),
    },
    Key {
        section: "tools.servers",
        name: "bearer_env",
        kind: Kind::Text("the name of an environment variable, in quotes"),
    },
    Key {
        section: "tools.servers",
        name: "allow",
        kind: Kind::TextList,
    },
    Key {
        section: "tools.servers",
        name: "timeout_secs",
        kind: Kind::Whole {
            min: 1,
            max: 3600,
            unit: "seconds",
        },
    },
    Key {
        section: "tools.servers",
        name: "max_result_chars",
        kind: Kind::Whole {
            min: 100,
            max: 10_000_000,
            unit: "characters",
        },
    },
];

/// One MCP server, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolServer {
    /// Letters, digits, `_`, `-`: process files name its tools `name.tool`.
    pub name: String,
    pub transport: ToolTransport,
    /// Tools that may run although the server does not mark them read-only.
    pub allow: Vec<String>,
    /// Per call (and for starting: the handshake and the tool list).
    pub timeout: Duration,
    pub max_result_chars: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ToolTransport {
    /// A child process speaking JSON-RPC on stdin and stdout.
    Stdio {
        /// Program and arguments.
        command: Vec<String>,
        /// The only environment variables it gets, by name (values from anima's environment).
        env: Vec<String>,
        /// Where it runs: the config file's folder (relative paths are relative to it).
        dir: PathBuf,
    },
    /// Streamable HTTP.
    Http {
        url: String,
        /// The variable holding the bearer token; empty: none.
        bearer_env: String,
    },
}

/// Whether `name` can be a server's name.
pub fn is_server_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The servers, checked; each problem as (server index, key, message).
pub(super) fn check(
    raw: &RawTools,
    base: &Path,
) -> (Vec<ToolServer>, Vec<(usize, &'static str, String)>) {
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for (i, s) in raw.servers.iter().enumerate() {
        let mut bad = |key: &'static str, message: String| problems.push((i, key, message));
        let name = s.name.trim().to_string();
        if !is_server_name(&name) {
            bad(
                "name",
                format!("found \"{name}\", expected a name of letters, digits, `_` and `-` (process files call its tools `name.tool`)"),
            );
        } else if raw.servers[..i].iter().any(|o| o.name.trim() == name) {
            bad("name", format!("server `{name}` is defined twice"));
        }
        let url = s.url.trim().to_string();
        let command: Vec<String> = s.command.iter().map(|c| c.trim().to_string()).collect();
        let transport = match (
            command.first().is_some_and(|c| !c.is_empty()),
            url.is_empty(),
        ) {
            (true, true) => {
                if !s.bearer_env.trim().is_empty() {
                    bad(
                        "bearer_env",
                        "`bearer_env` is for a server reached by `url`, not by `command`".into(),
                    );
                }
                Some(ToolTransport::Stdio {
                    command,
                    env: s.env.iter().map(|e| e.trim().to_string()).collect(),
                    dir: base.to_path_buf(),
                })
            }
            (false, false) => {
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    bad(
                        "url",
                        format!("found \"{url}\", expected an http:// or https:// URL"),
                    );
                }
                if !s.env.is_empty() {
                    bad(
                        "env",
                        "`env` is for a server started by `command`; give an HTTP server's token with `bearer_env`".into(),
                    );
                }
                Some(ToolTransport::Http {
                    url,
                    bearer_env: s.bearer_env.trim().to_string(),
                })
            }
            (true, false) => {
                bad(
                    "url",
                    "give a server either `command` (a program anima starts) or `url` (streamable HTTP), not both".into(),
                );
                None
            }
            (false, true) => {
                bad(
                    "command",
                    "a server needs `command` (a program and its arguments, such as [\"python3\", \"kb_server.py\"]) or `url`".into(),
                );
                None
            }
        };
        if let Some(e) = s
            .env
            .iter()
            .find(|e| e.trim().is_empty() || e.contains('='))
        {
            bad(
                "env",
                format!("found \"{e}\", expected the names of environment variables (their values come from anima's environment)"),
            );
        }
        if let Some(transport) = transport {
            out.push(ToolServer {
                name,
                transport,
                allow: s.allow.iter().map(|a| a.trim().to_string()).collect(),
                timeout: Duration::from_secs(s.timeout_secs.max(1)),
                max_result_chars: s.max_result_chars.max(1) as usize,
            });
        }
    }
    (out, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn servers(text: &str) -> (Vec<ToolServer>, Vec<(usize, &'static str, String)>) {
        let raw: super::super::RawConfig = toml::from_str(text).unwrap();
        check(&raw.tools, Path::new("/etc/anima"))
    }

    #[test]
    fn a_stdio_and_an_http_server_are_read_with_their_defaults() {
        let (s, p) = servers(
            "[[tools.servers]]\nname = \"kb\"\ncommand = [\"python3\", \"kb.py\"]\nenv = [\"KB_TOKEN\"]\n\n[[tools.servers]]\nname = \"web\"\nurl = \"https://h/mcp\"\nbearer_env = \"WEB_TOKEN\"\nallow = [\"post\"]\ntimeout_secs = 5\n",
        );
        assert_eq!(p, []);
        assert_eq!(s.len(), 2);
        assert_eq!(
            s[0].transport,
            ToolTransport::Stdio {
                command: vec!["python3".into(), "kb.py".into()],
                env: vec!["KB_TOKEN".into()],
                dir: PathBuf::from("/etc/anima")
            }
        );
        assert_eq!(s[0].timeout, Duration::from_secs(30));
        assert_eq!(s[0].max_result_chars, 16_000);
        assert_eq!(s[1].allow, ["post"]);
        assert_eq!(s[1].timeout, Duration::from_secs(5));
    }

    #[test]
    fn each_wrong_server_says_which_key_and_why() {
        let (_, p) = servers(
            "[[tools.servers]]\nname = \"k b\"\ncommand = [\"x\"]\n[[tools.servers]]\nname = \"a\"\n[[tools.servers]]\nname = \"b\"\ncommand = [\"x\"]\nurl = \"https://h\"\n[[tools.servers]]\nname = \"c\"\nurl = \"ftp://h\"\nenv = [\"A\"]\n[[tools.servers]]\nname = \"c\"\ncommand = [\"x\"]\nbearer_env = \"T\"\n",
        );
        let keys: Vec<(usize, &str)> = p.iter().map(|(i, k, _)| (*i, *k)).collect();
        assert_eq!(
            keys,
            [
                (0, "name"),
                (1, "command"),
                (2, "url"),
                (3, "url"),
                (3, "env"),
                (4, "name"),
                (4, "bearer_env")
            ]
        );
    }
}
