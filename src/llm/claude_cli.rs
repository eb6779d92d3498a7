//! The Claude Code CLI: `claude -p --output-format json`, the prompt on stdin, one session per
//! thread (`--session-id` for a new one, `--resume` after).
//!
//! The CLI keeps the conversation, so a resumed turn sends only the turn's sections; the soul
//! and skills go in a session's first message. Always run from the same folder (`<home>`),
//! because the CLI files sessions by working directory.

use std::path::PathBuf;
use std::process::{Output, Stdio};
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncWriteExt;

use super::{BoxFuture, ChatRequest, Completion, Deltas, LlmError, Provider, Usage};

const NAME: &str = "claude-cli";

pub struct ClaudeCli {
    path: String,
    model: String,
    workdir: PathBuf,
    timeout: Duration,
}

impl ClaudeCli {
    pub fn new(path: &str, model: &str, workdir: PathBuf, timeout: Duration) -> Self {
        ClaudeCli {
            path: path.to_string(),
            model: model.to_string(),
            workdir,
            timeout,
        }
    }

    async fn call(&self, req: ChatRequest<'_>) -> Result<Completion, LlmError> {
        if let Some(session) = req.session {
            match self
                .run(req.user, Session::Resume(session), req.model)
                .await
            {
                Err(CliFailure::NoSuchSession) => {
                    tracing::info!(session, "claude-cli forgot the session; starting a new one");
                }
                other => return other.map_err(CliFailure::into_error),
            }
        }
        let id = uuid::Uuid::new_v4().to_string();
        self.run(&req.full_text(), Session::New(&id), req.model)
            .await
            .map_err(CliFailure::into_error)
    }

    async fn run(
        &self,
        prompt: &str,
        session: Session<'_>,
        model: Option<&str>,
    ) -> Result<Completion, CliFailure> {
        let model = model.unwrap_or(&self.model);
        std::fs::create_dir_all(&self.workdir).map_err(|e| {
            CliFailure::Other(LlmError::Cli {
                message: format!("cannot create {}: {e}", self.workdir.display()),
            })
        })?;
        let output = self.execute(self.command(model, session), prompt).await?;
        read_output(&output, session, model)
    }

    /// The command line for one call: JSON out, the model when set, the session.
    fn command(&self, model: &str, session: Session) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.path);
        cmd.arg("-p").arg("--output-format").arg("json");
        if !model.is_empty() {
            cmd.arg("--model").arg(model);
        }
        match session {
            Session::New(id) => cmd.arg("--session-id").arg(id),
            Session::Resume(id) => cmd.arg("--resume").arg(id),
        };
        cmd.current_dir(&self.workdir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    /// Runs the CLI with the prompt on stdin, within the timeout.
    async fn execute(
        &self,
        mut cmd: tokio::process::Command,
        prompt: &str,
    ) -> Result<Output, CliFailure> {
        let mut child = cmd.spawn().map_err(|e| {
            CliFailure::Other(LlmError::Cli {
                message: format!(
                    "cannot start `{}` ({e}); set [llm] claude_cli_path",
                    self.path
                ),
            })
        })?;
        let mut stdin = child.stdin.take().expect("stdin is piped");
        let input = prompt.to_string();
        let writer = tokio::spawn(async move {
            let _ = stdin.write_all(input.as_bytes()).await;
            let _ = stdin.shutdown().await;
        });
        let output = match tokio::time::timeout(self.timeout, child.wait_with_output()).await {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => {
                return Err(CliFailure::Other(LlmError::Cli {
                    message: format!("waiting for `{}`: {e}", self.path),
                }))
            }
            Err(_) => {
                return Err(CliFailure::Other(LlmError::Timeout {
                    provider: NAME,
                    secs: self.timeout.as_secs(),
                }))
            }
        };
        let _ = writer.await;
        Ok(output)
    }
}

/// What the CLI answered: its JSON result (the last JSON object it printed), or why there is
/// none; a resumed session it no longer knows is `NoSuchSession`.
fn read_output(output: &Output, session: Session, model: &str) -> Result<Completion, CliFailure> {
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let parsed: Option<Value> = stdout
        .lines()
        .rev()
        .find_map(|l| {
            serde_json::from_str::<Value>(l.trim())
                .ok()
                .filter(Value::is_object)
        })
        .or_else(|| serde_json::from_str(stdout.trim()).ok());
    let result_text = parsed
        .as_ref()
        .and_then(|v| v.get("result"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if matches!(session, Session::Resume(_))
        && (stderr.contains("No conversation found")
            || result_text.contains("No conversation found"))
    {
        return Err(CliFailure::NoSuchSession);
    }
    let Some(v) = parsed else {
        let detail = if stderr.trim().is_empty() {
            stdout.trim()
        } else {
            stderr.trim()
        };
        return Err(CliFailure::Other(LlmError::Cli {
            message: format!(
                "exit status {}, no JSON result: {}",
                output.status,
                detail.chars().take(300).collect::<String>()
            ),
        }));
    };
    let is_error = v.get("is_error").and_then(Value::as_bool).unwrap_or(false);
    let subtype = v.get("subtype").and_then(Value::as_str).unwrap_or("");
    if is_error || !output.status.success() || (subtype != "success" && !subtype.is_empty()) {
        let message = if result_text.is_empty() {
            subtype
        } else {
            &result_text
        };
        return Err(CliFailure::Other(LlmError::Cli {
            message: format!("{message} (exit status {})", output.status),
        }));
    }
    Ok(completion(&v, result_text, session, model))
}

/// A successful result: its text, model, stop reason, usage and session.
fn completion(v: &Value, text: String, session: Session, model: &str) -> Completion {
    let subtype = v.get("subtype").and_then(Value::as_str).unwrap_or("");
    let u = v.get("usage").cloned().unwrap_or(Value::Null);
    let n = |k: &str| u.get(k).and_then(Value::as_u64).unwrap_or(0);
    let session_id = v
        .get("session_id")
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| Some(session.id().to_string()));
    Completion {
        text,
        model: if model.is_empty() {
            "claude-code".into()
        } else {
            model.to_string()
        },
        stop_reason: Some(subtype.to_string()).filter(|s| !s.is_empty()),
        usage: Usage {
            input_tokens: n("input_tokens"),
            output_tokens: n("output_tokens"),
            cache_creation_tokens: n("cache_creation_input_tokens"),
            cache_read_tokens: n("cache_read_input_tokens"),
        },
        session: session_id,
    }
}

#[derive(Debug, Clone, Copy)]
enum Session<'a> {
    New(&'a str),
    Resume(&'a str),
}

impl Session<'_> {
    fn id(&self) -> &str {
        match self {
            Session::New(id) | Session::Resume(id) => id,
        }
    }
}

enum CliFailure {
    NoSuchSession,
    Other(LlmError),
}

impl CliFailure {
    fn into_error(self) -> LlmError {
        match self {
            CliFailure::NoSuchSession => LlmError::Cli {
                message: "the new session was not found either".into(),
            },
            CliFailure::Other(e) => e,
        }
    }
}

impl Provider for ClaudeCli {
    fn name(&self) -> &'static str {
        NAME
    }

    fn model(&self) -> &str {
        if self.model.is_empty() {
            "claude-code default"
        } else {
            &self.model
        }
    }

    fn keeps_sessions(&self) -> bool {
        true
    }

    fn complete<'a>(
        &'a self,
        req: ChatRequest<'a>,
        _deltas: Option<&'a Deltas>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        Box::pin(self.call(req))
    }
}
