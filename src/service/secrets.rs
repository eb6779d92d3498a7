//! The secrets file a service reads (`anima.env`, one `NAME=value` a line): which variables a
//! configuration cannot start without, which others it reads, and what a file holds, read
//! the way both systemd's `EnvironmentFile=` and launchd's shell read it.
//!
//! Pure: text in, names and problems out. Never shows a value: a problem names the line and
//! the variable.

use crate::config::{
    Config, ProviderKind, SlackMode, StoreBackend, ToolTransport, DATABASE_URL_VAR,
};

/// A variable the service cannot start without, and what to put in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Needed {
    pub name: &'static str,
    pub what: &'static str,
}

/// What `config` cannot start without: the bot token, the app token or the signing secret
/// as `[slack] mode` says, the provider's key when its provider needs one (`anthropic`;
/// `openai` without a `base_url`, which is OpenAI's own API), and PostgreSQL's connection
/// string. `auto` needs no key: it may find a local Ollama or the claude CLI.
pub fn needed(config: &Config) -> Vec<Needed> {
    let mut out = vec![Needed {
        name: "SLACK_BOT_TOKEN",
        what: "the bot token, xoxb-…",
    }];
    out.push(match config.slack.mode {
        SlackMode::Socket => Needed {
            name: "SLACK_APP_TOKEN",
            what: "the app-level token, xapp-…, for Socket Mode",
        },
        SlackMode::Events => Needed {
            name: "SLACK_SIGNING_SECRET",
            what: "the signing secret, for the Events API",
        },
    });
    match config.llm.provider {
        ProviderKind::Anthropic => out.push(Needed {
            name: "ANTHROPIC_API_KEY",
            what: "the Anthropic API key, for [llm] provider = \"anthropic\"",
        }),
        ProviderKind::Openai if config.llm.base_url.is_empty() => out.push(Needed {
            name: "OPENAI_API_KEY",
            what: "the OpenAI API key, for [llm] provider = \"openai\" without a base_url",
        }),
        _ => {}
    }
    if config.store.backend == StoreBackend::Postgres {
        out.push(Needed {
            name: DATABASE_URL_VAR,
            what: "PostgreSQL's connection string, for [store] backend = \"postgres\"",
        });
    }
    out
}

/// Every other variable the service reads when it is set: the model keys `auto` looks for,
/// the operator tokens, each tool server's variables and each daimon's bearer token.
pub fn optional(config: &Config) -> Vec<String> {
    let mut out: Vec<String> = [
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "ANIMA_ADMIN_TOKEN",
        "ANIMA_WHISPER_TOKEN",
        "ANIMA_INSPECT_TOKEN",
        "ANIMA_COUNSEL_TOKEN",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    for server in &config.tools {
        match &server.transport {
            ToolTransport::Stdio { env, .. } => out.extend(env.iter().cloned()),
            ToolTransport::Http { bearer_env, .. } if !bearer_env.is_empty() => {
                out.push(bearer_env.clone())
            }
            ToolTransport::Http { .. } => {}
        }
    }
    for daimon in &config.daimons {
        if let crate::config::DaimonKind::Http { bearer_env, .. } = &daimon.kind {
            if !bearer_env.is_empty() {
                out.push(bearer_env.clone());
            }
        }
    }
    let needed = needed(config);
    out.retain(|n| !needed.iter().any(|x| x.name == n));
    out.sort();
    out.dedup();
    out
}

/// What a secrets file holds.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Held {
    /// The variables it sets to a well-formed value, in file order.
    pub set: Vec<String>,
    /// What is wrong, each `line N: …`, naming the variable and never its value.
    pub problems: Vec<String>,
}

impl Held {
    pub fn has(&self, name: &str) -> bool {
        self.set.iter().any(|n| n == name)
    }
}

/// Reads a secrets file. Blank lines and `#` comments are skipped. A value is taken as
/// written, so it must be bare: quotes, or spaces around the value or the `=`, would reach
/// the daemon differently under systemd and launchd's shell (and a Slack token has neither).
pub fn read(text: &str) -> Held {
    let mut held = Held::default();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let n = i + 1;
        let Some((key, value)) = line.split_once('=') else {
            held.problems
                .push(format!("line {n}: not NAME=value (the line has no `=`)"));
            continue;
        };
        let name = key.trim();
        if let Some(rest) = name.strip_prefix("export ") {
            held.problems.push(format!(
                "line {n}: {}: write NAME=value without `export` (systemd does not read it)",
                rest.trim()
            ));
            continue;
        }
        if !is_name(name) {
            held.problems.push(format!(
                "line {n}: {name:?} is not a variable name (letters, digits and `_`)"
            ));
            continue;
        }
        if key != name {
            held.problems.push(format!(
                "line {n}: {name}: spaces around the `=`; write {name}=value with nothing around the value"
            ));
            continue;
        }
        if value.trim().is_empty() {
            held.problems.push(format!("line {n}: {name} is empty"));
            continue;
        }
        if value.trim() != value {
            held.problems.push(format!(
                "line {n}: {name}: spaces around the value; write {name}=value with nothing around the value"
            ));
            continue;
        }
        if value.starts_with(['"', '\'']) || value.ends_with(['"', '\'']) {
            held.problems.push(format!(
                "line {n}: {name}: the value is in quotes; write it bare, {name}=value"
            ));
            continue;
        }
        if value.chars().any(char::is_whitespace) {
            held.problems.push(format!(
                "line {n}: {name}: the value has a space in it; a token has none (was it pasted with another word?)"
            ));
            continue;
        }
        held.set.retain(|s| s != name);
        held.set.push(name.to_string());
    }
    held
}

/// Whether `value`, taken from the environment, can go into a secrets file as it is; else
/// what is wrong with it (never the value).
pub fn check_value(name: &str, value: &str) -> Result<(), String> {
    let problem = if value.trim() != value {
        "has spaces around it"
    } else if value.starts_with(['"', '\'']) || value.ends_with(['"', '\'']) {
        "is in quotes"
    } else if value.chars().any(char::is_whitespace) {
        "has a space in it"
    } else {
        return Ok(());
    };
    Err(format!(
        "{name} in this shell {problem}; export it again as the bare value ({name}=value)"
    ))
}

/// `text` with each of `values` set: the first line that sets a name is replaced, any other
/// line setting it dropped, and names it did not set added at the end.
pub fn merge(text: &str, values: &[(&str, &str)]) -> String {
    let mut out = String::new();
    let mut written: Vec<&str> = Vec::new();
    for line in text.lines() {
        let name = line
            .split_once('=')
            .map(|(k, _)| k.trim().trim_start_matches("export ").trim());
        match name.and_then(|n| values.iter().find(|(v, _)| *v == n)) {
            Some((n, _)) if written.contains(n) => {}
            Some((n, value)) => {
                out += &format!("{n}={value}\n");
                written.push(n);
            }
            None => {
                out += line;
                out.push('\n');
            }
        }
    }
    for (n, value) in values {
        if !written.contains(n) {
            out += &format!("{n}={value}\n");
        }
    }
    out
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_values_are_set_and_comments_skipped() {
        let held = read("# secrets\n\nSLACK_BOT_TOKEN=xoxb-1\r\nSLACK_APP_TOKEN=xapp-1\n");
        assert_eq!(held.set, ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"]);
        assert!(held.problems.is_empty(), "{:?}", held.problems);
        assert_eq!(read(""), Held::default());
    }

    #[test]
    fn every_malformed_line_is_named_by_line_and_variable_never_by_value() {
        let text = concat!(
            "SLACK_BOT_TOKEN=\"xoxb-secret\"\n",
            "SLACK_APP_TOKEN = xapp-secret\n",
            "ANTHROPIC_API_KEY= sk-secret\n",
            "OPENAI_API_KEY=sk-secret \n",
            "export ANIMA_ADMIN_TOKEN=secret\n",
            "just-a-token-secret\n",
            "EMPTY=\n",
            "TWO=secret words\n",
            "1BAD=secret\n",
            "QUOTED='secret'\n",
        );
        let held = read(text);
        assert!(held.set.is_empty(), "{:?}", held.set);
        let lines: Vec<&str> = held
            .problems
            .iter()
            .map(|p| p.split(':').next().unwrap())
            .collect();
        assert_eq!(
            lines,
            [
                "line 1", "line 2", "line 3", "line 4", "line 5", "line 6", "line 7", "line 8",
                "line 9", "line 10"
            ]
        );
        assert!(
            held.problems[0].contains("SLACK_BOT_TOKEN") && held.problems[0].contains("in quotes")
        );
        assert!(
            held.problems[1].contains("SLACK_APP_TOKEN")
                && held.problems[1].contains("around the `=`")
        );
        assert!(held.problems[2].contains("spaces around the value"));
        assert!(held.problems[3].contains("spaces around the value"));
        assert!(held.problems[4].contains("without `export`"));
        assert!(held.problems[6].contains("EMPTY is empty"));
        for p in &held.problems {
            assert!(!p.contains("secret"), "a value shown: {p}");
        }
    }

    #[test]
    fn a_value_from_the_shell_must_be_bare() {
        assert!(check_value("T", "xoxb-1").is_ok());
        for bad in [" xoxb-1", "xoxb-1\n", "\"xoxb-1\"", "'xoxb-1'", "xoxb 1"] {
            let e = check_value("T", bad).unwrap_err();
            assert!(
                e.starts_with("T in this shell") && !e.contains("xoxb"),
                "{e}"
            );
        }
    }

    #[test]
    fn merging_replaces_a_name_once_and_keeps_everything_else() {
        let text = "# mine\nSLACK_BOT_TOKEN=old\nOTHER=kept\nSLACK_BOT_TOKEN=older\n";
        let merged = merge(
            text,
            &[("SLACK_BOT_TOKEN", "new"), ("SLACK_APP_TOKEN", "app")],
        );
        assert_eq!(
            merged,
            "# mine\nSLACK_BOT_TOKEN=new\nOTHER=kept\nSLACK_APP_TOKEN=app\n"
        );
        assert_eq!(merge("", &[("A", "1")]), "A=1\n");
    }

    #[test]
    fn what_a_config_needs_follows_its_mode_provider_and_store() {
        let toml = |t: &str| {
            crate::config::parse(
                t,
                std::path::Path::new("/x/anima.toml"),
                std::path::Path::new("/x"),
            )
            .unwrap()
        };
        let names = |c: &Config| needed(c).iter().map(|n| n.name).collect::<Vec<_>>();
        assert_eq!(names(&toml("")), ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"]);
        assert_eq!(
            names(&toml(
                "[slack]\nmode = \"events\"\n[llm]\nprovider = \"anthropic\"\n"
            )),
            [
                "SLACK_BOT_TOKEN",
                "SLACK_SIGNING_SECRET",
                "ANTHROPIC_API_KEY"
            ]
        );
        assert_eq!(
            names(&toml("[llm]\nprovider = \"openai\"\n")),
            ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "OPENAI_API_KEY"]
        );
        assert_eq!(
            names(&toml("[llm]\nprovider = \"openai\"\nbase_url = \"http://127.0.0.1:8080/v1\"\n[store]\nbackend = \"postgres\"\n")),
            ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN", "ANIMA_DATABASE_URL"]
        );
        let c = toml("[llm]\nprovider = \"anthropic\"\n");
        let opt = optional(&c);
        assert!(opt.contains(&"OPENAI_API_KEY".to_string()));
        assert!(opt.contains(&"ANIMA_INSPECT_TOKEN".to_string()));
        assert!(
            !opt.contains(&"ANTHROPIC_API_KEY".to_string()),
            "needed, not optional"
        );
    }
}
