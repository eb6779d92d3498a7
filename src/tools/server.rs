//! One MCP server's life: started (a child process with only the environment it is given, or
//! a streamable HTTP session), its tools listed, listed again when it says they changed,
//! restarted with backoff when it dies, stopped at shutdown or when a reload removes or
//! replaces it. What the rest of anima sees is the server's [`State`], published on a watch
//! channel, and a [`Handle`] that stops it.
//!
//! Never logs a bearer token or a server's environment values.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::model::Tool;
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceExt};
use tokio::io::AsyncReadExt;
use tokio::sync::{watch, Notify};
use tracing::{debug, info, warn, Instrument};

use super::schema::{self, Compiled};
use crate::config::{ToolServer, ToolTransport};

/// A tool as its server listed it.
pub struct ToolInfo {
    pub name: String,
    pub description: String,
    pub input_schema: serde_json::Value,
    /// The server marks it read-only (`annotations.readOnlyHint`).
    pub read_only: bool,
    /// Compiled on first use.
    compiled: OnceLock<Compiled>,
}

impl ToolInfo {
    fn from_listed(t: &Tool) -> ToolInfo {
        ToolInfo {
            name: t.name.to_string(),
            description: t.description.as_deref().unwrap_or("").to_string(),
            input_schema: serde_json::Value::Object((*t.input_schema).clone()),
            read_only: t
                .annotations
                .as_ref()
                .and_then(|a| a.read_only_hint)
                .unwrap_or(false),
            compiled: OnceLock::new(),
        }
    }

    /// The compiled input schema (compiled once).
    pub fn compiled(&self) -> &Compiled {
        self.compiled
            .get_or_init(|| schema::compile(&self.input_schema))
    }
}

/// Where a server is.
#[derive(Clone)]
pub enum State {
    /// Starting, or restarting after it died: calls wait for it (up to their timeout).
    Starting,
    Ready {
        /// Which start of the server this is (a call that finds the connection closed marks
        /// this one dead, and no later one).
        generation: u64,
        peer: Peer<RoleClient>,
        tools: Arc<HashMap<String, Arc<ToolInfo>>>,
        /// In the server's order.
        order: Arc<Vec<String>>,
    },
    /// Not running, and why (it is tried again after a while); calls fail at once.
    Down(String),
}

/// The first wait before a restart; doubled each time up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
const MAX_BACKOFF: Duration = Duration::from_secs(60);
/// Stderr reads logged per start (the rest are counted).
const STDERR_PIECES: u32 = 20;

/// How long a stop waits for the server to end by itself before its task is aborted (which
/// kills a child all the same).
const STOP_WAIT: Duration = Duration::from_secs(5);

/// One supervised server: its config, its state, and the way to stop it.
pub struct Handle {
    pub config: ToolServer,
    pub state: watch::Receiver<State>,
    /// The supervisor's, shared so a call that finds the connection closed can say so.
    pub sender: Arc<watch::Sender<State>>,
    stop: watch::Sender<bool>,
    /// True once the supervisor has returned (its child is gone).
    done: watch::Receiver<bool>,
    task: tokio::task::AbortHandle,
}

impl Handle {
    /// Supervises `config` on its own task, once `replaces` (the server it takes the place
    /// of, after a reload changed it) has stopped: two children of one server never run
    /// side by side. Meanwhile it is starting, and calls wait for it.
    pub fn spawn(config: &ToolServer, replaces: Option<Arc<Handle>>) -> Handle {
        let (tx, rx) = watch::channel(State::Starting);
        let sender = Arc::new(tx);
        let (stop, stop_rx) = watch::channel(false);
        let (done_tx, done) = watch::channel(false);
        let span = tracing::info_span!("tool_server", server = %config.name);
        let run = {
            let (config, sender) = (config.clone(), sender.clone());
            async move {
                if let Some(old) = replaces {
                    old.stop().await;
                }
                supervise(config, sender, stop_rx).await;
                done_tx.send_replace(true);
            }
        };
        let task = tokio::spawn(run.instrument(span)).abort_handle();
        Handle {
            config: config.clone(),
            state: rx,
            sender,
            stop,
            done,
            task,
        }
    }

    /// Stops the server and waits until it has ended (its child process with it), at most
    /// [`STOP_WAIT`]; then its task is aborted. Any number of callers may wait.
    pub async fn stop(&self) {
        self.stop.send_replace(true);
        let mut done = self.done.clone();
        if tokio::time::timeout(STOP_WAIT, done.wait_for(|d| *d))
            .await
            .is_err()
        {
            warn!(server = %self.config.name, "tool server did not stop in time; ended");
            self.task.abort();
        }
    }
}

/// Tells the supervisor that the server's tools changed.
struct Handler {
    changed: Arc<Notify>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.notify_one();
    }
}

/// Runs `server` until `stop` says so, publishing its state on `state`.
async fn supervise(
    server: ToolServer,
    state: Arc<watch::Sender<State>>,
    mut stop: watch::Receiver<bool>,
) {
    let mut backoff = FIRST_BACKOFF;
    let mut started_once = false;
    let mut generation = 0;
    loop {
        generation += 1;
        if *stop.borrow() {
            break;
        }
        let changed = Arc::new(Notify::new());
        // A server trying again after failing to start stays down meanwhile: calls fail at
        // once and `tools list` says why, rather than every call waiting for it.
        state.send_if_modified(|st| {
            let starting = !matches!(st, State::Down(_));
            if starting {
                *st = State::Starting;
            }
            starting
        });
        let started = tokio::select! {
            s = start(&server, changed.clone()) => s,
            _ = stop.changed() => break,
        };
        let running = match started {
            Ok(r) => r,
            Err(why) => {
                warn!(server = %server.name, error = %why, "tool server did not start; its tools are unavailable");
                state.send_replace(State::Down(why));
                if !wait_or_stop(&mut stop, backoff).await {
                    break;
                }
                backoff = (backoff * 2).min(MAX_BACKOFF);
                continue;
            }
        };
        let peer = running.peer().clone();
        if let Err(why) = list(&server, &peer, &state, generation).await {
            warn!(server = %server.name, error = %why, "tool server's tools could not be listed");
            state.send_replace(State::Down(why));
            let _ = running.cancel().await;
            if !wait_or_stop(&mut stop, backoff).await {
                break;
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
            continue;
        }
        if started_once {
            info!(server = %server.name, "tool server restarted");
        }
        started_once = true;
        backoff = FIRST_BACKOFF;
        let cancel = running.cancellation_token();
        let mut waiting = Box::pin(running.waiting());
        loop {
            tokio::select! {
                quit = &mut waiting => {
                    let why = format!("the server stopped ({})", match quit {
                        Ok(reason) => format!("{reason:?}"),
                        Err(e) => e.to_string(),
                    });
                    warn!(server = %server.name, why = %why, "tool server died; restarting it");
                    // Calls wait for the restart (up to their timeout) rather than fail.
                    state.send_replace(State::Starting);
                    break;
                }
                _ = changed.notified() => {
                    debug!(server = %server.name, "tool list changed; listing again");
                    if let Err(why) = list(&server, &peer, &state, generation).await {
                        warn!(server = %server.name, error = %why, "tool server's tools could not be listed again");
                    }
                }
                _ = stop.changed() => {
                    cancel.cancel();
                    let _ = tokio::time::timeout(Duration::from_secs(3), waiting).await;
                    state.send_replace(State::Down("stopped".into()));
                    return;
                }
            }
        }
        if !wait_or_stop(&mut stop, backoff).await {
            break;
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
    state.send_replace(State::Down("stopped".into()));
}

/// Waits `d`, or returns false at once when told to stop.
async fn wait_or_stop(stop: &mut watch::Receiver<bool>, d: Duration) -> bool {
    if *stop.borrow() {
        return false;
    }
    tokio::select! {
        _ = tokio::time::sleep(d) => !*stop.borrow(),
        _ = stop.changed() => false,
    }
}

/// Lists the server's tools and publishes them.
async fn list(
    server: &ToolServer,
    peer: &Peer<RoleClient>,
    state: &watch::Sender<State>,
    generation: u64,
) -> Result<(), String> {
    let listed = tokio::time::timeout(server.timeout, peer.list_all_tools())
        .await
        .map_err(|_| format!("no tool list within {} s", server.timeout.as_secs()))?
        .map_err(|e| format!("tools/list failed: {e}"))?;
    let mut tools = HashMap::with_capacity(listed.len());
    let mut order = Vec::with_capacity(listed.len());
    for t in &listed {
        let info = ToolInfo::from_listed(t);
        if tools.contains_key(&info.name) {
            continue;
        }
        order.push(info.name.clone());
        tools.insert(info.name.clone(), Arc::new(info));
    }
    info!(server = %server.name, tools = order.len(), "tool server ready");
    state.send_replace(State::Ready {
        generation,
        peer: peer.clone(),
        tools: Arc::new(tools),
        order: Arc::new(order),
    });
    Ok(())
}

type Running = RunningService<RoleClient, Handler>;

/// Starts the server and makes the MCP handshake, within the server's timeout.
async fn start(server: &ToolServer, changed: Arc<Notify>) -> Result<Running, String> {
    let handler = Handler { changed };
    let within = server.timeout;
    let timed_out = || format!("no answer to `initialize` within {} s", within.as_secs());
    match &server.transport {
        ToolTransport::Stdio { command, env, dir } => {
            let mut cmd = tokio::process::Command::new(program(&command[0], dir));
            cmd.args(&command[1..])
                .current_dir(dir)
                .env_clear()
                .kill_on_drop(true);
            for name in env {
                if let Some(v) = std::env::var_os(name) {
                    cmd.env(name, v);
                }
            }
            let (transport, stderr) = rmcp::transport::TokioChildProcess::builder(cmd)
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("`{}` could not be started: {e}", command[0]))?;
            if let Some(stderr) = stderr {
                tokio::spawn(drain_stderr(server.name.clone(), stderr));
            }
            tokio::time::timeout(within, handler.serve(transport))
                .await
                .map_err(|_| timed_out())?
                .map_err(|e| format!("the MCP handshake failed: {e}"))
        }
        ToolTransport::Http { url, bearer_env } => {
            use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            if !bearer_env.is_empty() {
                let token = std::env::var(bearer_env).map_err(|_| {
                    format!("the bearer token's variable `{bearer_env}` is not set")
                })?;
                config = config.auth_header(token);
            }
            let client = reqwest::Client::builder()
                .connect_timeout(within)
                .build()
                .map_err(|e| format!("no HTTP client: {e}"))?;
            let transport =
                rmcp::transport::StreamableHttpClientTransport::with_client(client, config);
            tokio::time::timeout(within, handler.serve(transport))
                .await
                .map_err(|_| timed_out())?
                .map_err(|e| format!("the MCP handshake with {url} failed: {e}"))
        }
    }
}

/// A program named with a path is relative to the config file's folder; a bare name is
/// looked up on anima's `PATH` (the server itself gets only the variables it is given).
fn program(name: &str, dir: &std::path::Path) -> std::path::PathBuf {
    let p = std::path::Path::new(name);
    if p.components().count() > 1 || p.is_absolute() {
        return dir.join(p);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|c| c.is_file())
        .unwrap_or_else(|| p.to_path_buf())
}

/// Reads the server's stderr so it can never block on a full pipe; the first pieces of each
/// start are logged (at debug), the rest only counted.
async fn drain_stderr(server: String, mut stderr: tokio::process::ChildStderr) {
    let mut buf = vec![0u8; 8192];
    let mut pieces: u32 = 0;
    let mut bytes: u64 = 0;
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            break;
        }
        bytes += n as u64;
        pieces += 1;
        if pieces <= STDERR_PIECES {
            let text: String = String::from_utf8_lossy(&buf[..n])
                .chars()
                .take(500)
                .collect();
            debug!(server = %server, text = %text.trim_end(), "tool server stderr");
        }
    }
    if pieces > STDERR_PIECES {
        debug!(server = %server, bytes, "tool server stderr (only the first pieces logged)");
    }
}

/// A call found start `generation`'s connection closed: calls wait for the restart (the
/// supervisor sees the death a moment later, and a later start is left alone).
pub fn mark_dead(state: &watch::Sender<State>, generation: u64) {
    state.send_if_modified(|st| {
        let dead = matches!(st, State::Ready { generation: g, .. } if *g == generation);
        if dead {
            *st = State::Starting;
        }
        dead
    });
}
