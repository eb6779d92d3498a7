//! From the raw serde configuration to the checked `Config`: the rules that need a value
//! parsed (URLs, the listen address, tool servers), path expansion, and each section's
//! assembly. Kinds, ranges and unknown keys are `schema`'s; finding and reading the file is
//! `config`'s. Reads no file and names no other part.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use super::raw::{RawAutonomy, RawConfig, RawLlm, RawSlack};
use super::{
    daimons, schema, tools, AutonomyConfig, Config, ConfigError, FilesConfig, InspectConfig,
    IsmConfig, LlmConfig, MemoryConfig, PipelineConfig, Problem, SlackConfig, StatesConfig,
    StoreConfig, ToolServer,
};

/// The line on which `key` is set inside `[section]`, for messages about valid TOML with bad values.
pub(super) fn key_line(text: &str, section: &str, key: &str) -> Option<usize> {
    let mut current = String::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix('[').and_then(|r| r.strip_suffix(']')) {
            current = name.trim().to_string();
        } else if current == section {
            let lhs = t.split('=').next().unwrap_or("").trim();
            if t.contains('=') && lhs == key {
                return Some(i + 1);
            }
        }
    }
    None
}

pub(super) fn expand(path: &str, base: &Path) -> PathBuf {
    let home = || {
        std::env::var_os("HOME")
            .map(PathBuf::from)
            .unwrap_or_default()
    };
    let p = if path == "~" {
        home()
    } else if let Some(rest) = path.strip_prefix("~/") {
        home().join(rest)
    } else {
        PathBuf::from(path)
    };
    if p.is_absolute() {
        p
    } else {
        base.join(p)
    }
}

/// The checked `Config` from the raw one: the rules that need a value parsed (URLs, the
/// listen address, the tool servers), every problem at once, then each section assembled.
pub(super) fn validate(
    raw: RawConfig,
    text: &str,
    file: Option<&Path>,
    base: &Path,
) -> Result<Config, ConfigError> {
    let file_name = file
        .map(|f| f.display().to_string())
        .unwrap_or_else(|| "(built-in defaults)".into());
    let (parsed, problems) = parsed_values(&raw, text, &file_name, base);
    if !problems.is_empty() {
        return Err(ConfigError { problems });
    }
    Ok(assemble(raw, parsed, file, base))
}

/// The values that must parse before they are used, each falling back to a stand-in when
/// it does not (its problem said).
struct Parsed {
    base_url: String,
    api_base_url: String,
    listen: SocketAddr,
    tool_servers: Vec<ToolServer>,
    daimons: Vec<daimons::DaimonConfig>,
}

/// Parses the values `schema` cannot judge by kind and range, with a problem for each that
/// fails.
fn parsed_values(
    raw: &RawConfig,
    text: &str,
    file_name: &str,
    base: &Path,
) -> (Parsed, Vec<Problem>) {
    let mut problems = Vec::new();
    let mut bad = |section: &str, key: &str, message: String| {
        problems.push(Problem {
            file: file_name.to_string(),
            key: format!("{section}.{key}"),
            line: key_line(text, section, key),
            message,
        });
    };

    // Kinds and ranges are `schema`'s; these rules need the value parsed.
    let base_url = raw.llm.base_url.trim().trim_end_matches('/').to_string();
    if !base_url.is_empty() && !is_http_url(&base_url) {
        bad(
            "llm",
            "base_url",
            format!(
                "found \"{base_url}\", expected {}",
                schema::expect("llm", "base_url")
            ),
        );
    }
    let api_base_url = raw.slack.api_base_url.trim().to_string();
    if !is_http_url(&api_base_url) || api_base_url.ends_with('/') {
        bad(
            "slack",
            "api_base_url",
            format!(
                "found \"{api_base_url}\", expected {} (method URLs are {{api_base_url}}/{{method}})",
                schema::expect("slack", "api_base_url")
            ),
        );
    }
    let listen = match raw.http.listen.parse::<SocketAddr>() {
        Ok(addr) => addr,
        Err(_) => {
            bad(
                "http",
                "listen",
                format!(
                    "found \"{}\", expected {}",
                    raw.http.listen,
                    schema::expect("http", "listen")
                ),
            );
            SocketAddr::from(([127, 0, 0, 1], 3000))
        }
    };
    let (tool_servers, tool_problems) = tools::check(&raw.tools, base);
    let (daimons, daimon_problems) = daimons::check(&raw.daimons, base);
    for (table, found) in [
        ("tools.servers", tool_problems),
        ("daimons", daimon_problems),
    ] {
        for (i, key, message) in found {
            problems.push(Problem {
                file: file_name.to_string(),
                key: format!("{table}[{i}].{key}"),
                line: entry_line(text, table, i, key),
                message,
            });
        }
    }
    let parsed = Parsed {
        base_url,
        api_base_url,
        listen,
        tool_servers,
        daimons,
    };
    (parsed, problems)
}

/// The checked `Config`, section by section, from values already judged.
fn assemble(raw: RawConfig, parsed: Parsed, file: Option<&Path>, base: &Path) -> Config {
    Config {
        tools: parsed.tool_servers,
        source: file.map(Path::to_path_buf),
        home: expand(&raw.paths.home, base),
        soul_dir: expand(&raw.paths.soul_dir, base),
        processes_dir: expand(&raw.paths.processes_dir, base),
        evals_dir: expand(&raw.paths.evals_dir, base),
        llm: llm(&raw.llm, parsed.base_url),
        pipeline: PipelineConfig {
            soul_state_interval: raw.pipeline.soul_state_interval,
            user_model_interval: raw.pipeline.user_model_interval,
            memory_window: raw.pipeline.memory_window,
            max_response_chars: raw.pipeline.max_response_chars,
        },
        slack: slack(&raw.slack, &raw.autonomy, parsed.api_base_url),
        shutdown_grace_secs: raw.daemon.shutdown_grace_secs,
        ops_channel: raw.daemon.ops_channel.trim().to_string(),
        states: states(&raw),
        memory: MemoryConfig {
            keep: (raw.memory.keep_days > 0)
                .then(|| std::time::Duration::from_secs(raw.memory.keep_days * 86_400)),
        },
        initial_process: raw.processes.initial.trim().to_string(),
        max_chain: raw.processes.max_chain,
        ism: IsmConfig {
            enabled: raw.ism.enabled,
            max_loops: raw.ism.max_loops,
            selection_model: raw.ism.selection_model.trim().to_string(),
        },
        proactive_idle_minutes: raw.processes.proactive_idle_minutes,
        proactive_scan_secs: raw.processes.proactive_scan_secs,
        admin_users: raw.admin.users.clone(),
        inspect: InspectConfig {
            keep_turns: raw.inspect.keep_turns,
            why_users: raw.inspect.why_users.clone(),
        },
        files: FilesConfig {
            max_bytes: raw.files.max_bytes,
            max_files: raw.files.max_files,
            images: raw.files.images,
            text_chars: raw.files.text_chars,
        },
        autonomy: autonomy(&raw.autonomy),
        listen: parsed.listen,
        store: StoreConfig {
            backend: raw.store.backend,
            pool_size: raw.store.pool_size,
            claim_lease_secs: raw.store.claim_lease_secs,
        },
        daimons: parsed.daimons,
    }
}

fn llm(raw: &RawLlm, base_url: String) -> LlmConfig {
    LlmConfig {
        provider: raw.provider,
        model: raw.model.trim().to_string(),
        base_url,
        max_tokens: raw.max_tokens,
        timeout_secs: raw.timeout_secs,
        max_retries: raw.max_retries,
        claude_cli_path: raw.claude_cli_path.clone(),
        stream: raw.stream,
        structured_output: raw.structured_output,
    }
}

/// `[slack]`, with the channels autonomy overhears when it is on.
fn slack(raw: &RawSlack, autonomy: &RawAutonomy, api_base_url: String) -> SlackConfig {
    SlackConfig {
        mode: raw.mode,
        api_base_url,
        allowed_channels: raw.allowed_channels.clone(),
        allowed_users: raw.allowed_users.clone(),
        reply_to_bots: raw.reply_to_bots,
        allow_broadcast: raw.allow_broadcast,
        stream_replies: raw.stream_replies,
        max_concurrent_turns: raw.max_concurrent_turns,
        app_token_check_secs: raw.app_token_check_secs,
        overheard_channels: if autonomy.enabled {
            autonomy.channels.clone()
        } else {
            Vec::new()
        },
    }
}

/// The cognitive states' settings, from `[states]`, `[dream]` and `[guardrails]`.
fn states(raw: &RawConfig) -> StatesConfig {
    StatesConfig {
        solitude_after_idle_minutes: raw.states.solitude_after_idle_minutes,
        dream_keep_recent: raw.dream.keep_recent,
        crisis_keywords: raw
            .guardrails
            .crisis_keywords
            .iter()
            .map(|k| k.trim().to_lowercase())
            .filter(|k| !k.is_empty())
            .collect(),
    }
}

fn autonomy(raw: &RawAutonomy) -> AutonomyConfig {
    AutonomyConfig {
        enabled: raw.enabled,
        channels: raw
            .channels
            .iter()
            .map(|c| c.trim().to_string())
            .filter(|c| !c.is_empty())
            .collect(),
        cooldown_secs: raw.cooldown_secs,
        threshold: raw.threshold,
        weights: weights(&raw.weights),
    }
}

/// The five gate weights; the schema has already refused any other shape.
fn weights(w: &[f64]) -> [f64; 5] {
    let mut out = [0.25, 0.25, 0.25, 0.15, 0.10];
    if w.len() == 5 {
        out.copy_from_slice(w);
    }
    out
}

fn is_http_url(s: &str) -> bool {
    (s.starts_with("http://") || s.starts_with("https://")) && s.len() > "https://".len()
}

/// The line of `key` in the `index`th `[[table]]` entry (or of that entry's header), from 1.
fn entry_line(text: &str, table: &str, index: usize, key: &str) -> Option<usize> {
    let mut seen = None;
    let mut header = None;
    for (n, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            let inner = t.trim_start_matches('[').trim_end_matches(']').trim();
            if t.starts_with("[[") && inner == table {
                seen = Some(seen.map_or(0, |s: usize| s + 1));
                if seen == Some(index) {
                    header = Some(n + 1);
                }
            } else if seen == Some(index) {
                break;
            }
        } else if seen == Some(index) && t.split('=').next().map(str::trim) == Some(key) {
            return Some(n + 1);
        }
    }
    header
}

#[cfg(test)]
mod tests {
    use super::entry_line;

    #[test]
    fn an_entrys_key_is_found_on_its_line() {
        for table in ["tools.servers", "daimons"] {
            let text = format!("[llm]\nmodel = \"m\"\n[[{table}]]\nname = \"a\"\n[[{table}]]\nname = \"b\"\nurl = \"x\"\n[http]\nurl = 1\n");
            assert_eq!(entry_line(&text, table, 1, "url"), Some(7));
            assert_eq!(
                entry_line(&text, table, 1, "command"),
                Some(5),
                "the header"
            );
            assert_eq!(entry_line(&text, table, 0, "name"), Some(4));
            assert_eq!(entry_line(&text, "other", 0, "name"), None);
        }
    }
}
