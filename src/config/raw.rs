//! The configuration file exactly as written: every key optional, unknown keys refused.
//!
//! Owns the serde shape of `anima.toml` and its defaults. Knows nothing about the
//! environment, relative paths or cross-key rules: `config::Config` does that. What each key
//! may hold, in words a person reads, is `schema`'s (a test keeps the two in step).

use serde::Deserialize;

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawConfig {
    pub paths: RawPaths,
    pub llm: RawLlm,
    pub pipeline: RawPipeline,
    pub slack: RawSlack,
    pub daemon: RawDaemon,
    pub states: RawStates,
    pub dream: RawDream,
    pub memory: RawMemory,
    pub guardrails: RawGuardrails,
    pub processes: RawProcesses,
    pub ism: RawIsm,
    pub autonomy: RawAutonomy,
    pub http: RawHttp,
    pub admin: RawAdmin,
    pub inspect: RawInspect,
    pub files: RawFiles,
    pub tools: super::tools::RawTools,
    pub store: RawStore,
    /// `[[daimons]]`, one table each.
    pub daimons: Vec<super::daimons::RawDaimon>,
}

/// Where the soul's store lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "lowercase")]
pub enum StoreBackend {
    /// `<home>/anima.db`, embedded.
    Sqlite,
    /// The database at `ANIMA_DATABASE_URL`.
    Postgres,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawStore {
    pub backend: StoreBackend,
    pub pool_size: u32,
    pub claim_lease_secs: u64,
}

impl Default for RawStore {
    fn default() -> Self {
        Self {
            backend: StoreBackend::Sqlite,
            pool_size: 8,
            claim_lease_secs: 30,
        }
    }
}

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawPaths {
    pub home: String,
    pub soul_dir: String,
    pub processes_dir: String,
    pub evals_dir: String,
}

impl Default for RawPaths {
    fn default() -> Self {
        Self {
            home: "~/.anima".into(),
            soul_dir: "soul".into(),
            processes_dir: "processes".into(),
            evals_dir: "evals".into(),
        }
    }
}

/// Which model provider answers; `auto` is resolved at start (see `llm::select`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "kebab-case")]
pub enum ProviderKind {
    Auto,
    Anthropic,
    Openai,
    ClaudeCli,
}

impl ProviderKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Anthropic => "anthropic",
            Self::Openai => "openai",
            Self::ClaudeCli => "claude-cli",
        }
    }
}

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawLlm {
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

/// Whether a model is held to its answer's shape while it writes (see `prompt::shape`, and
/// `llm::structured` for which server takes what).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "snake_case")]
pub enum StructuredOutput {
    /// As the server says about itself: a grammar for llama.cpp, llama-cpp-python and vLLM,
    /// a JSON Schema for Ollama; nothing for Anthropic, OpenAI's hosted API, or a server that
    /// does not say.
    Auto,
    Off,
    /// A GBNF grammar (llama.cpp, llama-cpp-python, vLLM).
    Grammar,
    /// A JSON Schema (OpenAI-compatible `response_format`, Anthropic's `output_config`).
    JsonSchema,
}

impl StructuredOutput {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Off => "off",
            Self::Grammar => "grammar",
            Self::JsonSchema => "json_schema",
        }
    }
}

impl Default for RawLlm {
    fn default() -> Self {
        Self {
            provider: ProviderKind::Auto,
            model: String::new(),
            base_url: String::new(),
            max_tokens: 2048,
            timeout_secs: 120,
            max_retries: 3,
            claude_cli_path: "claude".into(),
            stream: false,
            structured_output: StructuredOutput::Auto,
        }
    }
}

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawPipeline {
    pub soul_state_interval: u64,
    pub user_model_interval: u64,
    pub memory_window: u32,
    pub max_response_chars: usize,
}

impl Default for RawPipeline {
    fn default() -> Self {
        Self {
            soul_state_interval: 3,
            user_model_interval: 5,
            memory_window: 20,
            max_response_chars: 3000,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(rename_all = "lowercase")]
pub enum SlackMode {
    Socket,
    Events,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawSlack {
    pub mode: SlackMode,
    pub api_base_url: String,
    pub allowed_channels: Vec<String>,
    pub allowed_users: Vec<String>,
    pub reply_to_bots: bool,
    pub allow_broadcast: bool,
    pub stream_replies: bool,
    pub max_concurrent_turns: usize,
    pub app_token_check_secs: u64,
}

impl Default for RawSlack {
    fn default() -> Self {
        Self {
            mode: SlackMode::Socket,
            api_base_url: "https://slack.com/api".into(),
            allowed_channels: Vec::new(),
            allowed_users: Vec::new(),
            reply_to_bots: false,
            allow_broadcast: false,
            stream_replies: true,
            max_concurrent_turns: 8,
            app_token_check_secs: 300,
        }
    }
}

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawDaemon {
    pub shutdown_grace_secs: u64,
    pub ops_channel: String,
}

impl Default for RawDaemon {
    fn default() -> Self {
        Self {
            shutdown_grace_secs: 20,
            ops_channel: String::new(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawStates {
    pub solitude_after_idle_minutes: u64,
}

impl Default for RawStates {
    fn default() -> Self {
        Self {
            solitude_after_idle_minutes: 720,
        }
    }
}

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawDream {
    pub keep_recent: u32,
}

impl Default for RawDream {
    fn default() -> Self {
        Self { keep_recent: 40 }
    }
}

/// `keep_days = 0`: working memory is kept until a dream consolidates it.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawMemory {
    pub keep_days: u64,
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawGuardrails {
    pub crisis_keywords: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawProcesses {
    pub initial: String,
    pub max_chain: u32,
    pub proactive_idle_minutes: u64,
    pub proactive_scan_secs: u64,
}

impl Default for RawProcesses {
    fn default() -> Self {
        Self {
            initial: "greeting".into(),
            max_chain: 3,
            proactive_idle_minutes: 240,
            proactive_scan_secs: 60,
        }
    }
}

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawIsm {
    pub enabled: bool,
    pub max_loops: u32,
    pub selection_model: String,
}

impl Default for RawIsm {
    fn default() -> Self {
        Self {
            enabled: true,
            max_loops: 5,
            selection_model: String::new(),
        }
    }
}

/// `[autonomy]`: when the soul may speak unasked (the meaningfulness gate).
#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawAutonomy {
    pub enabled: bool,
    pub channels: Vec<String>,
    pub cooldown_secs: u64,
    pub threshold: f64,
    pub weights: Vec<f64>,
}

impl Default for RawAutonomy {
    fn default() -> Self {
        Self {
            enabled: true,
            channels: Vec::new(),
            cooldown_secs: 300,
            threshold: 0.4,
            weights: vec![0.25, 0.25, 0.25, 0.15, 0.10],
        }
    }
}

#[derive(Debug, Default, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawAdmin {
    pub users: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawInspect {
    pub keep_turns: u64,
    pub why_users: Vec<String>,
}

impl Default for RawInspect {
    fn default() -> Self {
        RawInspect {
            keep_turns: 500,
            why_users: Vec::new(),
        }
    }
}

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawFiles {
    pub max_bytes: u64,
    pub max_files: u32,
    pub images: bool,
    pub text_chars: u64,
}

impl Default for RawFiles {
    fn default() -> Self {
        RawFiles {
            max_bytes: 10 * 1024 * 1024,
            max_files: 5,
            images: true,
            text_chars: 20_000,
        }
    }
}

#[derive(Debug, Deserialize)]
#[cfg_attr(test, derive(serde::Serialize))]
#[serde(deny_unknown_fields, default)]
pub struct RawHttp {
    pub listen: String,
}

impl Default for RawHttp {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:3000".into(),
        }
    }
}
