//! MCP tool servers (`[[tools.servers]]`): started in parallel at start, each on its own task
//! (a slow or broken one holds nothing else up), and the one door through which an ISM's tool
//! action reaches them: [`Tools::call`] checks the tool may run (read-only by the server's
//! annotations, or allowed by the config), checks the arguments against the tool's schema
//! before anything is sent, bounds the call by the server's timeout and cuts the result.
//!
//! Knows nothing of Slack, prompts, the store or the engine: the engine calls it, and treats
//! what comes back as untrusted text. Never panics on what a server sends.

mod result;
pub mod schema;
mod server;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use serde::Serialize;
use tokio::sync::watch;
use tracing::Instrument;

use crate::config::ToolServer;
pub use result::cut;
use server::State;
pub use server::ToolInfo;

/// The running servers.
pub struct Tools {
    servers: BTreeMap<String, Server>,
    stop: watch::Sender<bool>,
    tasks: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

struct Server {
    config: ToolServer,
    state: watch::Receiver<State>,
    /// The supervisor's, shared so a call that finds the connection closed can say so.
    sender: Arc<watch::Sender<State>>,
}

/// How a call ended (the metrics' `outcome` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// The tool ran and answered.
    Ok,
    /// The tool ran and said it failed (`isError`).
    ToolError,
    /// Not read-only and not allowed: not sent.
    Refused,
    /// The arguments are not JSON or do not fit the schema: not sent.
    Invalid,
    /// No such server or tool.
    Unknown,
    /// The server is not running.
    Unavailable,
    /// No answer within the server's timeout.
    Timeout,
    /// The server failed (it died, or the transport broke).
    Failed,
}

impl Outcome {
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::ToolError => "tool_error",
            Outcome::Refused => "refused",
            Outcome::Invalid => "invalid",
            Outcome::Unknown => "unknown",
            Outcome::Unavailable => "unavailable",
            Outcome::Timeout => "timeout",
            Outcome::Failed => "failed",
        }
    }

    /// Whether anything was sent to the server.
    pub fn sent(self) -> bool {
        matches!(
            self,
            Outcome::Ok | Outcome::ToolError | Outcome::Timeout | Outcome::Failed
        )
    }
}

/// One call, done.
#[derive(Debug, Clone, Serialize)]
pub struct Called {
    pub outcome: Outcome,
    /// The result (cut), or what went wrong, in words: untrusted text either way.
    pub text: String,
    /// The arguments as sent (or as given, when not sent).
    pub arguments: String,
    pub ms: u64,
}

/// A server as `anima tools list` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct ServerReport {
    pub name: String,
    pub started: bool,
    /// Why not, when not.
    pub problem: Option<String>,
    pub tools: Vec<ToolReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ToolReport {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
    pub read_only: bool,
    pub may_run: bool,
    /// Why its calls are refused even so (a schema that does not compile).
    pub problem: Option<String>,
}

impl Tools {
    /// Starts every server on its own task and returns at once.
    pub fn start(servers: &[ToolServer]) -> Arc<Tools> {
        let (stop, stop_rx) = watch::channel(false);
        let mut map = BTreeMap::new();
        let mut tasks = Vec::new();
        for s in servers {
            let (tx, rx) = watch::channel(State::Starting);
            let tx = Arc::new(tx);
            let span = tracing::info_span!("tool_server", server = %s.name);
            tasks.push(tokio::spawn(
                server::supervise(s.clone(), tx.clone(), stop_rx.clone()).instrument(span),
            ));
            map.insert(
                s.name.clone(),
                Server {
                    config: s.clone(),
                    state: rx,
                    sender: tx,
                },
            );
        }
        Arc::new(Tools {
            servers: map,
            stop,
            tasks: std::sync::Mutex::new(tasks),
        })
    }

    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// Waits until no server is still starting, or `within` has passed.
    pub async fn settled(&self, within: Duration) {
        let all = async {
            for s in self.servers.values() {
                let mut rx = s.state.clone();
                let _ = rx.wait_for(|st| !matches!(st, State::Starting)).await;
            }
        };
        let _ = tokio::time::timeout(within, all).await;
    }

    /// Waits until `server` is no longer starting, at most its timeout (a turn that needs
    /// its tools waits for a server still starting, never for one that is down).
    pub async fn settle(&self, server: &str) {
        if let Some(s) = self.servers.get(server) {
            let mut rx = s.state.clone();
            let _ = tokio::time::timeout(
                s.config.timeout,
                rx.wait_for(|st| !matches!(st, State::Starting)),
            )
            .await
            .is_ok();
        }
    }

    /// Stops every server (children are ended) and waits a little for them.
    pub async fn shutdown(&self) {
        self.stop.send_replace(true);
        let tasks = std::mem::take(&mut *self.tasks.lock().unwrap_or_else(|p| p.into_inner()));
        for t in tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    }

    /// The server named `name`'s config.
    pub fn server(&self, name: &str) -> Option<&ToolServer> {
        self.servers.get(name).map(|s| &s.config)
    }

    /// The tool, when its server is running and lists it; `Err` says why not.
    pub fn tool(&self, server: &str, tool: &str) -> Result<Arc<ToolInfo>, (Outcome, String)> {
        let s = self.servers.get(server).ok_or_else(|| {
            (
                Outcome::Unknown,
                format!("there is no tool server `{server}`"),
            )
        })?;
        let state = s.state.borrow().clone();
        match state {
            State::Ready { tools, .. } => tools.get(tool).cloned().ok_or_else(|| {
                (
                    Outcome::Unknown,
                    format!("tool server `{server}` has no tool `{tool}`"),
                )
            }),
            State::Starting => Err((
                Outcome::Unavailable,
                format!("tool server `{server}` is still starting"),
            )),
            State::Down(why) => Err((
                Outcome::Unavailable,
                format!("tool server `{server}` is not running: {why}"),
            )),
        }
    }

    /// Whether `tool` of `server` may run: read-only by its annotations, or allowed.
    pub fn may_run(&self, server: &str, tool: &ToolInfo) -> bool {
        tool.read_only
            || self
                .server(server)
                .is_some_and(|s| s.allow.iter().any(|a| a == &tool.name))
    }

    /// Calls `server.tool` with the arguments the selection gave (`None`: none). Never sends
    /// what may not run or does not fit the schema; bounded by the server's timeout.
    pub async fn call(&self, server: &str, tool: &str, arguments: Option<&str>) -> Called {
        let began = Instant::now();
        let span = tracing::info_span!("tool_call", server = %server, tool = %tool, outcome = tracing::field::Empty, ms = tracing::field::Empty);
        let (outcome, text, sent) = self
            .call_inner(server, tool, arguments)
            .instrument(span.clone())
            .await;
        let ms = began.elapsed().as_millis() as u64;
        span.record("outcome", outcome.word());
        span.record("ms", ms);
        tracing::info!(parent: &span, server = %server, tool = %tool, outcome = outcome.word(), ms, "tool call");
        Called {
            outcome,
            text,
            arguments: sent.unwrap_or_else(|| arguments.unwrap_or("").trim().to_string()),
            ms,
        }
    }

    async fn call_inner(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<&str>,
    ) -> (Outcome, String, Option<String>) {
        let Some(s) = self.servers.get(server) else {
            return (
                Outcome::Unknown,
                format!("there is no tool server `{server}`"),
                None,
            );
        };
        let timeout = s.config.timeout;
        // A server that is (re)starting gets until the timeout to be ready.
        let mut rx = s.state.clone();
        let ready = tokio::time::timeout(timeout, rx.wait_for(|st| !matches!(st, State::Starting)))
            .await
            .is_ok();
        if !ready {
            return (
                Outcome::Unavailable,
                format!(
                    "tool server `{server}` did not start within {} s",
                    timeout.as_secs()
                ),
                None,
            );
        }
        let info = match self.tool(server, tool) {
            Ok(t) => t,
            Err((o, why)) => return (o, why, None),
        };
        if !self.may_run(server, &info) {
            tracing::warn!(server = %server, tool = %tool, "tool refused: not read-only and not allowed");
            return (
                Outcome::Refused,
                format!("refused: `{server}.{tool}` may change things (the server does not mark it read-only) and is not in the server's `allow` list; nothing was sent"),
                None,
            );
        }
        let args = match schema::arguments(info.compiled(), arguments) {
            Ok(a) => a,
            Err(why) => return (Outcome::Invalid, format!("not sent: {why}"), None),
        };
        let sent = serde_json::Value::Object(args.clone()).to_string();
        let (peer, generation) = match s.state.borrow().clone() {
            State::Ready {
                peer, generation, ..
            } => (peer, generation),
            _ => {
                return (
                    Outcome::Unavailable,
                    format!("tool server `{server}` is not running"),
                    Some(sent),
                )
            }
        };
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(args);
        match tokio::time::timeout(timeout, peer.call_tool(params)).await {
            Err(_) => (
                Outcome::Timeout,
                format!("no answer within {} s", timeout.as_secs()),
                Some(sent),
            ),
            Ok(Err(e)) => {
                if matches!(
                    e,
                    rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_)
                ) {
                    server::mark_dead(&s.sender, generation);
                }
                (Outcome::Failed, format!("the call failed: {e}"), Some(sent))
            }
            Ok(Ok(r)) => {
                let text = result::text(&r, s.config.max_result_chars);
                let outcome = if r.is_error == Some(true) {
                    Outcome::ToolError
                } else {
                    Outcome::Ok
                };
                (outcome, text, Some(sent))
            }
        }
    }

    /// Every server and its tools, as they stand.
    pub fn report(&self) -> Vec<ServerReport> {
        self.servers
            .iter()
            .map(|(name, s)| {
                let state = s.state.borrow().clone();
                match state {
                    State::Ready { tools, order, .. } => ServerReport {
                        name: name.clone(),
                        started: true,
                        problem: None,
                        tools: order
                            .iter()
                            .filter_map(|t| tools.get(t))
                            .map(|t| ToolReport {
                                name: t.name.clone(),
                                description: t.description.clone(),
                                input_schema: t.input_schema.clone(),
                                read_only: t.read_only,
                                may_run: self.may_run(name, t),
                                problem: t.compiled().as_ref().err().cloned(),
                            })
                            .collect(),
                    },
                    State::Starting => ServerReport {
                        name: name.clone(),
                        started: false,
                        problem: Some("still starting".into()),
                        tools: Vec::new(),
                    },
                    State::Down(why) => ServerReport {
                        name: name.clone(),
                        started: false,
                        problem: Some(why),
                        tools: Vec::new(),
                    },
                }
            })
            .collect()
    }
}
