//! Configuration: where the file is found, how it is validated, and the checked `Config`
//! every other module reads.
//!
//! Owns the lookup order (`--config`, `$ANIMA_CONFIG`, `./anima.toml`, defaults), path
//! resolution and every cross-key rule. Secrets never pass through here: see `secret`.

mod daimons;
mod diff;
mod raw;
mod schema;
pub mod secret;
mod tools;
mod validate;

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

pub use crate::toml_file::Problem;
use crate::toml_file::TomlFile;
pub use daimons::{DaimonConfig, DaimonKind};
pub use diff::changed_sections;
pub use raw::{ProviderKind, RawConfig, SlackMode, StoreBackend, StructuredOutput};
pub use tools::{is_server_name, ToolServer, ToolTransport};
use validate::validate;

/// A validated configuration. Paths are absolute; numbers are in range.
#[derive(Debug, Clone)]
pub struct Config {
    /// The file it came from, if any.
    pub source: Option<PathBuf>,
    pub home: PathBuf,
    pub soul_dir: PathBuf,
    pub processes_dir: PathBuf,
    /// The eval files `anima eval` runs when it is given no path.
    pub evals_dir: PathBuf,
    pub llm: LlmConfig,
    pub pipeline: PipelineConfig,
    pub slack: SlackConfig,
    pub shutdown_grace_secs: u64,
    /// A Slack channel for wakeup notes and shutdown objections; empty: none.
    pub ops_channel: String,
    pub states: StatesConfig,
    pub memory: MemoryConfig,
    /// The process a new thread starts in (falls back to `main` if there is no such file).
    pub initial_process: String,
    pub max_chain: u32,
    pub ism: IsmConfig,
    pub proactive_idle_minutes: u64,
    /// How often the daemon looks for quiet threads.
    pub proactive_scan_secs: u64,
    pub listen: SocketAddr,
    /// Slack user ids allowed to send admin commands by DM.
    pub admin_users: Vec<String>,
    pub inspect: InspectConfig,
    pub files: FilesConfig,
    pub autonomy: AutonomyConfig,
    /// `[[tools.servers]]`: the MCP servers whose tools ISM actions may call.
    pub tools: Vec<ToolServer>,
    pub store: StoreConfig,
    /// `[[daimons]]`: the souls asked for a whisper before a turn.
    pub daimons: Vec<DaimonConfig>,
}

/// `[inspect]`: the soul's window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InspectConfig {
    /// Traces kept (the newest); 0 keeps none.
    pub keep_turns: u64,
    /// Slack user ids who may use the "why" shortcut; empty: the admin users.
    pub why_users: Vec<String>,
}

impl InspectConfig {
    /// Whether `user` may ask why the soul said something (`admin` when none are named).
    pub fn may_ask_why(&self, user: &str, admin: &[String]) -> bool {
        let allowed = if self.why_users.is_empty() {
            admin
        } else {
            &self.why_users
        };
        allowed.iter().any(|u| u == user)
    }
}

/// `[files]`: what the soul reads of the files people share.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilesConfig {
    /// The most bytes read of one file; a larger one is named to the soul, not read.
    pub max_bytes: u64,
    /// The most files read of one message; the others are named.
    pub max_files: u32,
    /// Images go to the model where the provider reads them.
    pub images: bool,
    /// The most characters of a text file's or a PDF's text the prompt shows.
    pub text_chars: u64,
}

/// `[store]`: which backend holds the soul. The PostgreSQL connection string is not here: it
/// carries a password, so it comes only from `ANIMA_DATABASE_URL`.
#[derive(Debug, Clone, PartialEq)]
pub struct StoreConfig {
    pub backend: StoreBackend,
    /// PostgreSQL: connections per anima process.
    pub pool_size: u32,
    /// Several daemons sharing one database: how long a daemon's claim on a conversation
    /// outlives the daemon if it dies (another takes the conversation over then).
    pub claim_lease_secs: u64,
}

/// The environment variable that holds the PostgreSQL connection string.
pub const DATABASE_URL_VAR: &str = "ANIMA_DATABASE_URL";

/// `[autonomy]`: when the soul may speak unasked.
#[derive(Debug, Clone, PartialEq)]
pub struct AutonomyConfig {
    pub enabled: bool,
    /// Channels where the gate may let the soul speak unasked; empty: never.
    pub channels: Vec<String>,
    pub cooldown_secs: u64,
    pub threshold: f64,
    /// Salience, drive pressure, arc heat, relationship stakes, fatigue.
    pub weights: [f64; 5],
}

impl AutonomyConfig {
    /// Whether the soul may speak unasked in `channel`.
    pub fn listens_in(&self, channel: &str) -> bool {
        self.enabled && self.channels.iter().any(|c| c == channel)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct LlmConfig {
    pub provider: ProviderKind,
    pub model: String,
    pub base_url: String,
    pub max_tokens: u32,
    pub timeout_secs: u64,
    pub max_retries: u32,
    pub claude_cli_path: String,
    pub stream: bool,
    pub structured_output: StructuredOutput,
}

/// `[ism]`: implicit semantic machines.
#[derive(Debug, Clone, PartialEq)]
pub struct IsmConfig {
    /// False: an ism process runs as a fixed one (its answering steps, one call).
    pub enabled: bool,
    /// Iterations for an ism process whose file sets no `max_loops`.
    pub max_loops: u32,
    /// A model for the selection calls (same provider); empty: the provider's own.
    pub selection_model: String,
}

/// `[states]`, `[dream]`, `[guardrails]`: what the cognitive states read at run time (the
/// soul's template says which states there are).
#[derive(Debug, Clone, PartialEq)]
pub struct StatesConfig {
    pub solitude_after_idle_minutes: u64,
    /// Working-memory entries per thread a dream never consolidates away.
    pub dream_keep_recent: u32,
    /// Lower-cased, blank ones left out.
    pub crisis_keywords: Vec<String>,
}

/// `[memory]`: how long working memory is kept.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryConfig {
    /// A conversation quiet this long loses its working memory and its finished inbox rows;
    /// `None`: kept (until a dream consolidates it).
    pub keep: Option<std::time::Duration>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct PipelineConfig {
    pub soul_state_interval: u64,
    pub user_model_interval: u64,
    pub memory_window: u32,
    pub max_response_chars: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SlackConfig {
    pub mode: SlackMode,
    pub api_base_url: String,
    pub allowed_channels: Vec<String>,
    pub allowed_users: Vec<String>,
    pub reply_to_bots: bool,
    pub allow_broadcast: bool,
    /// Stream replies into one message as they are written (needs `[llm] stream`).
    pub stream_replies: bool,
    pub max_concurrent_turns: usize,
    /// Socket Mode: how often the daemon asks Slack whether it still takes the app token
    /// (slack-morphism reconnects by itself and says nothing of a refusal).
    pub app_token_check_secs: u64,
    /// Channels whose unaddressed messages go to the meaningfulness gate (`[autonomy]`
    /// channels, when it is enabled).
    pub overheard_channels: Vec<String>,
}

impl Config {
    pub fn db_path(&self) -> PathBuf {
        self.home.join("anima.db")
    }

    pub fn memory_dir(&self) -> PathBuf {
        self.home.join("memory")
    }

    /// Where this configuration came from, for a message about one of its keys: the file that
    /// was read, or that none was and where anima looked.
    pub fn origin(&self) -> String {
        match &self.source {
            Some(path) => path.display().to_string(),
            None => not_found(),
        }
    }
}

/// That no configuration file was read, and the places [`locate`] tried.
fn not_found() -> String {
    let local = std::path::absolute("anima.toml").unwrap_or_else(|_| PathBuf::from("anima.toml"));
    format!(
        "no configuration file was read (no --config, $ANIMA_CONFIG not set, no {}); the built-in defaults are in force",
        local.display()
    )
}

/// Every problem found in a configuration file.
#[derive(Debug, Clone, thiserror::Error)]
pub struct ConfigError {
    pub problems: Vec<Problem>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid configuration: ")?;
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                write!(f, "; ")?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

/// Finds the configuration file: the explicit path, then `$ANIMA_CONFIG`, then `./anima.toml`.
pub fn locate(explicit: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.to_path_buf());
    }
    if let Some(p) = std::env::var_os("ANIMA_CONFIG").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let local = PathBuf::from("anima.toml");
    local.is_file().then_some(local)
}

/// Loads and validates the configuration found by [`locate`].
pub fn load(explicit: Option<&Path>) -> Result<Config, ConfigError> {
    match locate(explicit) {
        None => {
            let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
            validate(RawConfig::default(), "", None, &cwd)
        }
        Some(path) => {
            let text = std::fs::read_to_string(&path).map_err(|e| ConfigError {
                problems: vec![Problem::unreadable(
                    &path,
                    "file",
                    &e,
                    "; check --config or $ANIMA_CONFIG",
                )],
            })?;
            let abs = std::path::absolute(&path).unwrap_or(path.clone());
            let base = abs.parent().map(Path::to_path_buf).unwrap_or_default();
            parse(&text, &abs, &base)
        }
    }
}

/// Parses configuration text; `file` names it in messages, `base` anchors relative paths.
///
/// Every problem is reported at once, in file order: unknown keys and sections (with the
/// nearest valid name), values of the wrong kind or out of range (see `schema`), and the
/// rules that need a value parsed. A syntax error stops the file at its line.
pub fn parse(text: &str, file: &Path, base: &Path) -> Result<Config, ConfigError> {
    let file_name = file.display().to_string();
    let toml_file = TomlFile::new(&file_name, text);
    let doc = toml::de::DeTable::parse(text).map_err(|e| ConfigError {
        problems: vec![toml_file.refused(&e)],
    })?;
    let walk = schema::walk(doc.get_ref(), text);
    let mut problems: Vec<Problem> = walk
        .problems
        .into_iter()
        .map(|f| toml_file.problem(toml_file.line(f.offset), &f.key, f.message))
        .collect();

    // What is left once the bad entries are out is well-typed; the defaults fill the gaps,
    // so the remaining rules run too and every problem is reported in one go.
    let mut table: toml::Table = text.parse().map_err(|e: toml::de::Error| ConfigError {
        problems: vec![toml_file.refused(&e)],
    })?;
    for (section, key) in &walk.drop {
        match key {
            None => {
                table.remove(section);
            }
            Some(key) => {
                if let Some(toml::Value::Table(t)) = table.get_mut(section) {
                    t.remove(key);
                }
            }
        }
    }
    let raw = match toml::Value::Table(table).try_into::<RawConfig>() {
        Ok(raw) => raw,
        Err(e) => {
            // Only if `schema` and `raw` disagree (a test guards against it).
            problems.push(toml_file.refused(&e));
            RawConfig::default()
        }
    };
    match validate(raw, text, Some(file), base) {
        Ok(config) if problems.is_empty() => Ok(config),
        Ok(_) => Err(ConfigError { problems }),
        Err(more) => {
            problems.extend(more.problems);
            problems.sort_by_key(|p| p.line.unwrap_or(usize::MAX));
            Err(ConfigError { problems })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(text: &str) -> Result<Config, ConfigError> {
        parse(
            text,
            Path::new("/etc/anima/anima.toml"),
            Path::new("/etc/anima"),
        )
    }

    #[test]
    fn autonomy_is_read_and_its_bad_values_named_with_key_and_line() {
        let c = parse_str(
            "[autonomy]\nchannels = [\"C1\", \" \"]\ncooldown_secs = 60\nthreshold = 0.5\nweights = [1, 0, 0, 0, 0]\n",
        )
        .unwrap();
        assert_eq!(c.autonomy.channels, ["C1"]);
        assert!(c.autonomy.listens_in("C1") && !c.autonomy.listens_in("C2"));
        assert_eq!(c.autonomy.cooldown_secs, 60);
        assert_eq!(c.autonomy.weights, [1.0, 0.0, 0.0, 0.0, 0.0]);
        let err = parse_str("[autonomy]\nenabled = true\nweights = [0.5, 0.5]\n")
            .unwrap_err()
            .to_string();
        assert!(err.contains(":3: key `autonomy.weights`"), "{err}");
        assert!(err.contains("exactly 5 numbers"), "{err}");
    }

    #[test]
    fn the_example_config_parses_and_matches_the_defaults() {
        let text = include_str!("../../config.example.toml");
        let from_example = parse_str(text).expect("config.example.toml must parse");
        let defaults = parse_str("").unwrap();
        assert_eq!(
            format!("{:?}", from_example.llm),
            format!("{:?}", defaults.llm)
        );
        assert_eq!(
            format!("{:?}", from_example.pipeline),
            format!("{:?}", defaults.pipeline)
        );
        assert_eq!(
            format!("{:?}", from_example.slack),
            format!("{:?}", defaults.slack)
        );
        assert_eq!(from_example.listen, defaults.listen);
        assert_eq!(from_example.autonomy, defaults.autonomy);
        assert!(!defaults.autonomy.listens_in("C1"), "no channel by default");
        assert_eq!(from_example.max_chain, 3);
        assert_eq!(from_example.shutdown_grace_secs, 20);
        assert_eq!(from_example.proactive_idle_minutes, 240);
        assert_eq!(
            format!("{:?}", from_example.states),
            format!("{:?}", defaults.states)
        );
        assert_eq!(from_example.ops_channel, "");
    }

    #[test]
    fn the_state_keys_have_the_interfaces_defaults_and_are_checked() {
        let c = parse_str("").unwrap();
        assert_eq!(c.states.solitude_after_idle_minutes, 720);
        assert_eq!(c.states.dream_keep_recent, 40);
        assert!(c.states.crisis_keywords.is_empty() && c.ops_channel.is_empty());
        let c = parse_str("[guardrails]\ncrisis_keywords = [\" Suicide \", \"\"]\n[daemon]\nops_channel = \"C0OPS\"\n").unwrap();
        assert_eq!(c.states.crisis_keywords, ["suicide"]);
        assert_eq!(c.ops_channel, "C0OPS");
        let err = parse_str(
            "[dream]\nkeep_recent = 0\n[states]\nsolitude_after_idle_minutes = \"soon\"\n",
        )
        .unwrap_err();
        let keys: Vec<_> = err
            .problems
            .iter()
            .map(|p| (p.key.as_str(), p.line))
            .collect();
        assert_eq!(
            keys,
            [
                ("dream.keep_recent", Some(2)),
                ("states.solitude_after_idle_minutes", Some(4))
            ]
        );
    }

    #[test]
    fn defaults_follow_the_interface() {
        let c = parse_str("").unwrap();
        assert_eq!(c.llm.provider, ProviderKind::Auto);
        assert_eq!(c.llm.max_tokens, 2048);
        assert_eq!(c.llm.timeout_secs, 120);
        assert_eq!(c.llm.max_retries, 3);
        assert_eq!(c.pipeline.soul_state_interval, 3);
        assert_eq!(c.pipeline.user_model_interval, 5);
        assert_eq!(c.pipeline.memory_window, 20);
        assert_eq!(c.pipeline.max_response_chars, 3000);
        assert_eq!(c.slack.mode, SlackMode::Socket);
        assert_eq!(c.slack.api_base_url, "https://slack.com/api");
        assert_eq!(c.slack.max_concurrent_turns, 8);
        assert_eq!(c.soul_dir, PathBuf::from("/etc/anima/soul"));
        assert_eq!(c.processes_dir, PathBuf::from("/etc/anima/processes"));
    }

    #[test]
    fn relative_paths_are_relative_to_the_config_file() {
        let c = parse_str("[paths]\nhome = \"data\"\nsoul_dir = \"/srv/soul\"\n").unwrap();
        assert_eq!(c.home, PathBuf::from("/etc/anima/data"));
        assert_eq!(c.soul_dir, PathBuf::from("/srv/soul"));
    }

    #[test]
    fn an_unknown_key_is_named_with_its_line() {
        let err = parse_str("[llm]\nmodel = \"x\"\nmodle = \"y\"\n").unwrap_err();
        let p = &err.problems[0];
        assert_eq!(p.line, Some(3), "{err}");
        assert!(p.message.contains("modle"), "{err}");
        assert!(
            err.to_string()
                .contains("/etc/anima/anima.toml:3: in [llm]"),
            "{err}"
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_names_its_key() {
        let err = parse_str("[llm]\nmodel = \"x\"\nmax_tokens = \"lots\"\n").unwrap_err();
        let p = &err.problems[0];
        assert_eq!(
            (p.key.as_str(), p.line),
            ("llm.max_tokens", Some(3)),
            "{err}"
        );
        assert!(
            err.to_string()
                .contains("/etc/anima/anima.toml:3: key `llm.max_tokens`"),
            "{err}"
        );
    }

    #[test]
    fn an_unknown_provider_is_refused_with_its_line() {
        let err = parse_str("\n[llm]\nprovider = \"gpt\"\n").unwrap_err();
        assert_eq!(err.problems[0].line, Some(3), "{err}");
        assert!(err.to_string().contains("gpt"), "{err}");
    }

    #[test]
    fn a_syntax_error_is_located() {
        let err = parse_str("[pipeline]\nmemory_window = = 3\n").unwrap_err();
        assert_eq!(err.problems[0].line, Some(2), "{err}");
    }

    #[test]
    fn every_bad_value_is_reported_with_key_and_line_in_file_order() {
        let text = "[pipeline]\nmemory_window = 0\nsoul_state_interval = 0\n\n[http]\nlisten = \"nowhere\"\n\n[slack]\napi_base_url = \"https://x.test/api/\"\n";
        let err = parse_str(text).unwrap_err();
        let keys: Vec<_> = err
            .problems
            .iter()
            .map(|p| (p.key.as_str(), p.line))
            .collect();
        assert_eq!(
            keys,
            vec![
                ("pipeline.memory_window", Some(2)),
                ("pipeline.soul_state_interval", Some(3)),
                ("http.listen", Some(6)),
                ("slack.api_base_url", Some(9)),
            ]
        );
        assert_eq!(
            err.problems[2].message,
            "found \"nowhere\", expected an address:port in quotes, such as \"127.0.0.1:3000\""
        );
    }

    /// The case: five mistakes of different kinds, all reported in one run, in the
    /// order they appear, each with the value found and what is expected.
    #[test]
    fn five_mistakes_are_five_problems_in_file_order() {
        let text = "[llm]\nmodle = \"x\"\nmax_tokens = \"lots\"\nbase_url = \"ftp://x\"\n\n[slak]\nmode = \"socket\"\n\n[pipeline]\nmemory_window = -3\nstream = true\n";
        let err = parse_str(text).unwrap_err();
        let got: Vec<String> = err.problems.iter().map(|p| p.to_string()).collect();
        let f = "/etc/anima/anima.toml";
        assert_eq!(
            got,
            [
                format!("{f}:2: in [llm]: unknown key `modle`; did you mean `model`?"),
                format!("{f}:3: key `llm.max_tokens`: found \"lots\", expected a whole number ≥ 1"),
                format!("{f}:4: key `llm.base_url`: found \"ftp://x\", expected an http:// or https:// URL in quotes (\"\" for the provider's default)"),
                format!("{f}:6: in [slak]: unknown section; did you mean [slack]?"),
                format!("{f}:10: key `pipeline.memory_window`: found -3, expected a whole number ≥ 1"),
                format!("{f}:11: in [pipeline]: unknown key `stream`; `stream` belongs under [llm]"),
            ]
        );
    }

    #[test]
    fn a_syntax_error_stops_the_file_at_its_line() {
        let err = parse_str("[llm]\nmax_tokens = \"lots\"\nmodel = \"x\n").unwrap_err();
        assert_eq!(err.problems.len(), 1, "{err}");
        assert_eq!(err.problems[0].line, Some(3), "{err}");
    }
}
