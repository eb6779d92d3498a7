//! MCP tool servers (`[[tools.servers]]`): started in parallel at start, each on its own task
//! (a slow or broken one holds nothing else up); brought in line with a new list when the
//! config is reloaded (servers added or removed, changed ones restarted, the rest untouched);
//! and the one door through which an ISM's tool action reaches them: [`Tools::call`] checks
//! the tool may run (read-only by the server's annotations, or allowed by the config), checks
//! the arguments against the tool's schema before anything is sent, bounds the call by the
//! server's timeout and cuts the result.
//!
//! Knows nothing of Slack, prompts, the store or the engine: the engine calls it, and treats
//! what comes back as untrusted text. Never panics on what a server sends.

mod http;
mod result;
mod scan;
pub mod schema;
mod server;
mod start;
mod stderr;
mod stdio;
mod words;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use serde::Serialize;
use tracing::Instrument;

use crate::config::ToolServer;
pub use result::cut;
pub use server::ToolInfo;
use server::{Handle, State};

/// The running servers. A reload ([`Tools::reload`]) changes which servers there are while
/// calls go on: a call holds on to the server it began with.
pub struct Tools {
    servers: RwLock<BTreeMap<String, Arc<Handle>>>,
    /// Set by [`Tools::shutdown`]: a reload after it starts nothing.
    closed: AtomicBool,
}

/// What a reload did, by server name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reloaded {
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Their settings changed: stopped, and started again with the new ones.
    pub restarted: Vec<String>,
    /// Left running, untouched.
    pub unchanged: Vec<String>,
}

impl Reloaded {
    pub fn changed_anything(&self) -> bool {
        !(self.added.is_empty() && self.removed.is_empty() && self.restarted.is_empty())
    }
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
        let map = servers
            .iter()
            .map(|s| (s.name.clone(), Arc::new(Handle::spawn(s, None))))
            .collect();
        Arc::new(Tools {
            servers: RwLock::new(map),
            closed: AtomicBool::new(false),
        })
    }

    fn get(&self, name: &str) -> Option<Arc<Handle>> {
        self.read().get(name).cloned()
    }

    fn all(&self) -> Vec<Arc<Handle>> {
        self.read().values().cloned().collect()
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, Arc<Handle>>> {
        self.servers.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, Arc<Handle>>> {
        self.servers.write().unwrap_or_else(|p| p.into_inner())
    }

    pub fn is_empty(&self) -> bool {
        self.read().is_empty()
    }

    /// Makes the running servers those of `servers`, by name: a server not there before is
    /// started, one no longer there is stopped (its child ends), one whose settings differ in
    /// any way is stopped and started anew with them, and the rest keep running untouched.
    /// Calls made from now on see the new set at once (a server starting is waited for, as
    /// at start); returns once the servers gone are stopped.
    pub async fn reload(&self, servers: &[ToolServer]) -> Reloaded {
        let mut done = Reloaded::default();
        let mut stopping = Vec::new();
        {
            let mut map = self.write();
            if self.closed.load(Ordering::SeqCst) {
                return done;
            }
            let wanted: BTreeMap<&str, &ToolServer> =
                servers.iter().map(|s| (s.name.as_str(), s)).collect();
            map.retain(|name, old| {
                let keep = wanted.contains_key(name.as_str());
                if !keep {
                    done.removed.push(name.clone());
                    stopping.push(old.clone());
                }
                keep
            });
            for (name, config) in wanted {
                match map.get(name) {
                    Some(old) if old.config == *config => done.unchanged.push(name.to_string()),
                    Some(old) => {
                        let old = old.clone();
                        stopping.push(old.clone());
                        map.insert(name.to_string(), Arc::new(Handle::spawn(config, Some(old))));
                        done.restarted.push(name.to_string());
                    }
                    None => {
                        map.insert(name.to_string(), Arc::new(Handle::spawn(config, None)));
                        done.added.push(name.to_string());
                    }
                }
            }
        }
        futures_util::future::join_all(stopping.iter().map(|h| h.stop())).await;
        done
    }

    /// Waits until no server is still starting, or `within` has passed.
    pub async fn settled(&self, within: Duration) {
        let servers = self.all();
        let all = async {
            for s in &servers {
                let mut rx = s.state.clone();
                let _ = rx.wait_for(|st| !matches!(st, State::Starting)).await;
            }
        };
        let _ = tokio::time::timeout(within, all).await;
    }

    /// Waits until `server` is no longer starting, at most its timeout (a turn that needs
    /// its tools waits for a server still starting, never for one that is down).
    pub async fn settle(&self, server: &str) {
        if let Some(s) = self.get(server) {
            let mut rx = s.state.clone();
            let _ = tokio::time::timeout(
                s.config.timeout,
                rx.wait_for(|st| !matches!(st, State::Starting)),
            )
            .await
            .is_ok();
        }
    }

    /// Stops every server (children are ended) and waits a little for them; a reload after
    /// this starts nothing.
    pub async fn shutdown(&self) {
        let servers: Vec<Arc<Handle>> = {
            let map = self.write();
            self.closed.store(true, Ordering::SeqCst);
            map.values().cloned().collect()
        };
        futures_util::future::join_all(servers.iter().map(|h| h.stop())).await;
    }

    /// The server named `name`'s config.
    pub fn server(&self, name: &str) -> Option<ToolServer> {
        self.get(name).map(|s| s.config.clone())
    }

    /// The tool, when its server is running and lists it; `Err` says why not.
    pub fn tool(&self, server: &str, tool: &str) -> Result<Arc<ToolInfo>, (Outcome, String)> {
        let s = self.get(server).ok_or_else(|| {
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
        self.get(server).is_some_and(|s| may_run(&s.config, tool))
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
        let Some(s) = self.get(server) else {
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
        if !may_run(&s.config, &info) {
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
                (
                    Outcome::Failed,
                    format!("the call failed: {}", words::words(&e)),
                    Some(sent),
                )
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
        self.all()
            .iter()
            .map(|s| {
                let name = &s.config.name;
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
                                may_run: may_run(&s.config, t),
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

/// Whether `tool` may run on `server`: read-only by its annotations, or allowed.
fn may_run(server: &ToolServer, tool: &ToolInfo) -> bool {
    tool.read_only || server.allow.iter().any(|a| a == &tool.name)
}
