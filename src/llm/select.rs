//! Chooses the provider: `[llm] provider`, and for `auto` the first usable of Anthropic (key
//! set), OpenAI-compatible (key or base_url set), a local Ollama that answers, the `claude`
//! CLI on PATH. The choice and the reason are logged at start.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::anthropic::Anthropic;
use super::claude_cli::ClaudeCli;
use super::openai::{self, OpenAi};
use super::structured::{self, Dialect};
use super::{LlmError, Provider};
use crate::config::secret::Secret;
use crate::config::{LlmConfig, ProviderKind, StructuredOutput};

/// Where a local Ollama's OpenAI-compatible API answers.
pub const OLLAMA_URL: &str = "http://127.0.0.1:11434/v1";

#[derive(Debug, thiserror::Error)]
pub enum SelectError {
    #[error(
        "no model provider is usable. Set one of: ANTHROPIC_API_KEY (the Anthropic API); \
OPENAI_API_KEY, or [llm] base_url{file} for any OpenAI-compatible server such as Ollama, vLLM or \
llama.cpp (e.g. base_url = \"http://127.0.0.1:11434/v1\"); start Ollama on 127.0.0.1:11434 with a \
model pulled; or install the Claude Code CLI so that `claude` is on PATH (or set [llm] \
claude_cli_path). Then run anima again, or choose explicitly with [llm] provider."
    )]
    NothingUsable { file: ConfigFile },
    #[error("[llm] provider is \"anthropic\"{file} but ANTHROPIC_API_KEY is not set; export it, or choose another provider")]
    MissingAnthropicKey { file: ConfigFile },
    #[error("[llm] provider is \"claude-cli\"{file} but `{exe}` is not an executable on PATH; install Claude Code or set [llm] claude_cli_path")]
    CliMissing { exe: String, file: ConfigFile },
    #[error("{error}; set [llm] model{file} to the model to use")]
    NoModel { error: LlmError, file: ConfigFile },
    #[error("{0}")]
    Build(LlmError),
}

/// The configuration file a selection error sends the reader to: ` in FILE`, or where a
/// setting would go when no file was read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigFile(pub Option<PathBuf>);

impl std::fmt::Display for ConfigFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(path) => write!(f, " in {}", path.display()),
            None => {
                let local = std::path::absolute("anima.toml")
                    .unwrap_or_else(|_| PathBuf::from("anima.toml"));
                write!(
                    f,
                    " in a config file (no configuration file was read: no --config, \
                     $ANIMA_CONFIG not set, no {})",
                    local.display()
                )
            }
        }
    }
}

/// What selection looks at, gathered from the environment (tests supply their own).
#[derive(Debug, Clone)]
pub struct Environment {
    pub anthropic_key: Option<Secret>,
    pub openai_key: Option<Secret>,
    pub ollama_url: String,
    pub path: Option<std::ffi::OsString>,
}

impl Environment {
    pub fn from_process() -> Self {
        Environment {
            anthropic_key: Secret::from_env("ANTHROPIC_API_KEY"),
            openai_key: Secret::from_env("OPENAI_API_KEY"),
            ollama_url: OLLAMA_URL.to_string(),
            path: std::env::var_os("PATH"),
        }
    }
}

/// The chosen provider and why.
pub struct Selected {
    pub provider: Arc<dyn Provider>,
    pub reason: &'static str,
}

/// The provider `cfg` (read from `config_file`, which errors name) asks for.
pub async fn select(
    cfg: &LlmConfig,
    config_file: Option<&Path>,
    home: &Path,
    env: &Environment,
) -> Result<Selected, SelectError> {
    let file = || ConfigFile(config_file.map(Path::to_path_buf));
    let timeout = Duration::from_secs(cfg.timeout_secs);
    let anthropic = |key: Secret| -> Result<Arc<dyn Provider>, SelectError> {
        let p = Anthropic::new(&cfg.base_url, key, &cfg.model, cfg.stream, timeout)
            .map_err(SelectError::Build)?;
        p.structured_state().set(match cfg.structured_output {
            StructuredOutput::JsonSchema => Some(Dialect::AnthropicSchema),
            StructuredOutput::Grammar => {
                tracing::warn!("[llm] structured_output = \"grammar\": Anthropic takes no grammar; plain requests (json_schema works there)");
                None
            }
            StructuredOutput::Auto | StructuredOutput::Off => None,
        });
        Ok(Arc::new(p))
    };
    let claude = |exe: PathBuf| -> Arc<dyn Provider> {
        Arc::new(ClaudeCli::new(
            &exe.to_string_lossy(),
            &cfg.model,
            home.to_path_buf(),
            timeout,
        ))
    };
    match cfg.provider {
        ProviderKind::Anthropic => {
            let key = env
                .anthropic_key
                .clone()
                .ok_or_else(|| SelectError::MissingAnthropicKey { file: file() })?;
            Ok(Selected {
                provider: anthropic(key)?,
                reason: "[llm] provider = \"anthropic\"",
            })
        }
        ProviderKind::Openai => Ok(Selected {
            provider: openai_provider(cfg, env.openai_key.clone(), timeout, file()).await?,
            reason: "[llm] provider = \"openai\"",
        }),
        ProviderKind::ClaudeCli => {
            let exe =
                find_executable(&cfg.claude_cli_path, env.path.as_deref()).ok_or_else(|| {
                    SelectError::CliMissing {
                        exe: cfg.claude_cli_path.clone(),
                        file: file(),
                    }
                })?;
            Ok(Selected {
                provider: claude(exe),
                reason: "[llm] provider = \"claude-cli\"",
            })
        }
        ProviderKind::Auto => {
            if let Some(key) = env.anthropic_key.clone() {
                return Ok(Selected {
                    provider: anthropic(key)?,
                    reason: "auto: ANTHROPIC_API_KEY is set",
                });
            }
            if env.openai_key.is_some() || !cfg.base_url.is_empty() {
                return Ok(Selected {
                    provider: openai_provider(cfg, env.openai_key.clone(), timeout, file()).await?,
                    reason: "auto: OPENAI_API_KEY or [llm] base_url is set",
                });
            }
            let probe = Duration::from_millis(500);
            if let Ok(model) = OpenAi::first_model(&env.ollama_url, None, probe).await {
                let model = if cfg.model.is_empty() {
                    model
                } else {
                    cfg.model.clone()
                };
                let p = OpenAi::new(&env.ollama_url, None, &model, cfg.stream, timeout)
                    .map_err(SelectError::Build)?;
                let dialect =
                    structured::choose(cfg.structured_output, false, p.base(), None).await;
                p.structured_state().set(dialect);
                return Ok(Selected {
                    provider: Arc::new(p),
                    reason: "auto: a local Ollama answered",
                });
            }
            if let Some(exe) = find_executable(&cfg.claude_cli_path, env.path.as_deref()) {
                return Ok(Selected {
                    provider: claude(exe),
                    reason: "auto: the claude CLI is on PATH",
                });
            }
            Err(SelectError::NothingUsable { file: file() })
        }
    }
}

async fn openai_provider(
    cfg: &LlmConfig,
    key: Option<Secret>,
    timeout: Duration,
    file: ConfigFile,
) -> Result<Arc<dyn Provider>, SelectError> {
    let base_url = cfg.base_url.as_str();
    let model = if !cfg.model.is_empty() {
        cfg.model.clone()
    } else if base_url.is_empty() {
        openai::DEFAULT_MODEL.to_string()
    } else {
        OpenAi::first_model(base_url, key.as_ref(), timeout.min(Duration::from_secs(10)))
            .await
            .map_err(|error| SelectError::NoModel { error, file })?
    };
    let p = OpenAi::new(base_url, key, &model, cfg.stream, timeout).map_err(SelectError::Build)?;
    // OpenAI's own API (no base_url) is the provider's default: it says nothing about itself.
    let dialect = structured::choose(
        cfg.structured_output,
        base_url.is_empty(),
        p.base(),
        p.key(),
    )
    .await;
    p.structured_state().set(dialect);
    Ok(Arc::new(p))
}

/// Whether an HTTP server answers at `base_url` (any status counts), for `anima check`.
pub async fn answers(base_url: &str) -> Result<(), String> {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()
        .map_err(|e| e.to_string())?;
    match client.get(base_url).send().await {
        Ok(_) => Ok(()),
        Err(e) if e.is_timeout() => Err("no answer within 3 s".into()),
        Err(e) if e.is_connect() => Err("connection refused or host unknown".into()),
        Err(e) => Err(e.to_string()),
    }
}

/// `name` itself when it contains a `/`, else the first executable of that name on PATH.
pub fn find_executable(name: &str, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    let is_exe = |p: &Path| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if name.contains('/') {
        let p = PathBuf::from(name);
        return is_exe(&p).then_some(p);
    }
    std::env::split_paths(path?)
        .map(|dir| dir.join(name))
        .find(|p| is_exe(p))
}
