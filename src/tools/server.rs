//! One MCP server's life: started (a child process with only the environment it is given, or
//! a streamable HTTP session), its tools listed, listed again when it says they changed,
//! restarted with backoff when it dies, stopped at shutdown or when a reload removes or
//! replaces it. What the rest of anima sees is the server's [`State`], published on a watch
//! channel, and a [`Handle`] that stops it.
//!
//! Never logs a bearer token or a server's environment values.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::model::Tool;
use rmcp::service::{NotificationContext, QuitReason, RunningService};
use rmcp::{ClientHandler, Peer, RoleClient};
use tokio::sync::{watch, Notify};
use tokio::time::Instant;
use tracing::{debug, info, warn, Instrument};

use super::schema::{self, Compiled};
use super::words::words;
use super::{start, stderr};
use crate::config::ToolServer;

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

/// Tells the supervisor that the server's tools changed, and counts how often it said so.
pub(super) struct Handler {
    changed: Arc<Notify>,
    notices: Arc<AtomicU64>,
}

impl ClientHandler for Handler {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.notices.fetch_add(1, Ordering::Relaxed);
        self.changed.notify_one();
    }
}

/// At most one re-list a second: a storm of `list_changed` notices is one re-list a second.
const RELIST_EVERY: Duration = Duration::from_secs(1);
/// Quiet this long after a re-list ends a run of changes: one log line says how many.
const QUIET: Duration = Duration::from_secs(2);

/// Runs `server` until `stop` says so, publishing its state on `state`: starts it, and
/// after it fails or dies waits (doubling, from `FIRST_BACKOFF` after a good start) and
/// starts it again.
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
        match run_once(&server, &state, &mut stop, generation, started_once).await {
            Ended::Stopping => break,
            Ended::Stopped => return,
            Ended::Failed => {}
            Ended::Died => {
                started_once = true;
                backoff = FIRST_BACKOFF;
            }
        }
        if !wait_or_stop(&mut stop, backoff).await {
            break;
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
    state.send_replace(State::Down("stopped".into()));
}

/// How one start of a server ended.
enum Ended {
    /// Told to stop before it was up.
    Stopping,
    /// Told to stop while it served: it is stopped and said so.
    Stopped,
    /// It did not start, or its tools could not be listed.
    Failed,
    /// It served, then died.
    Died,
}

/// A server up and listed: what serving it needs.
struct Live {
    running: Running,
    stderr: Option<stderr::Stderr>,
    changed: Arc<Notify>,
    notices: Arc<AtomicU64>,
    peer: Peer<RoleClient>,
    generation: u64,
}

/// Starts the server, lists its tools, and serves it until it dies or `stop` says so.
async fn run_once(
    server: &ToolServer,
    state: &watch::Sender<State>,
    stop: &mut watch::Receiver<bool>,
    generation: u64,
    started_once: bool,
) -> Ended {
    let changed = Arc::new(Notify::new());
    let notices = Arc::new(AtomicU64::new(0));
    // A server trying again after failing to start stays down meanwhile: calls fail at
    // once and `tools list` says why, rather than every call waiting for it.
    state.send_if_modified(|st| {
        let starting = !matches!(st, State::Down(_));
        if starting {
            *st = State::Starting;
        }
        starting
    });
    let handler = Handler {
        changed: changed.clone(),
        notices: notices.clone(),
    };
    let started = tokio::select! {
        s = start::start(server, handler) => s,
        _ = stop.changed() => return Ended::Stopping,
    };
    let (running, stderr) = match started {
        Ok(r) => r,
        Err(why) => {
            warn!(server = %server.name, "tool server did not start; its tools are unavailable: {why}");
            state.send_replace(State::Down(why));
            return Ended::Failed;
        }
    };
    let peer = running.peer().clone();
    match list(server, &peer, state, generation).await {
        Ok(tools) => info!(server = %server.name, tools, "tool server ready"),
        Err(why) => {
            let why = stderr::quoting(why, stderr.as_ref()).await;
            warn!(server = %server.name, "tool server's tools could not be listed: {why}");
            state.send_replace(State::Down(why));
            let _ = running.cancel().await;
            return Ended::Failed;
        }
    }
    if started_once {
        info!(server = %server.name, "tool server restarted");
    }
    let live = Live {
        running,
        stderr,
        changed,
        notices,
        peer,
        generation,
    };
    serve(server, state, stop, live).await
}

/// Serves a listed server: re-lists its tools when it says they changed (at most once a
/// second, one log line per run of changes), until it dies or `stop` says so.
async fn serve(
    server: &ToolServer,
    state: &watch::Sender<State>,
    stop: &mut watch::Receiver<bool>,
    live: Live,
) -> Ended {
    let Live {
        running,
        stderr,
        changed,
        notices,
        peer,
        generation,
    } = live;
    let cancel = running.cancellation_token();
    let mut waiting = Box::pin(running.waiting());
    let mut relists = Relists::default();
    loop {
        tokio::select! {
            quit = &mut waiting => {
                let why = match quit {
                    Ok(QuitReason::Cancelled) => "the server stopped (cancelled)".to_string(),
                    Ok(QuitReason::Closed) => "the server closed its output (it exited)".to_string(),
                    Ok(QuitReason::JoinError(e)) => format!("the server's task failed: {e}"),
                    Err(e) => format!("the server's task failed: {e}"),
                    Ok(_) => "the server stopped".to_string(),
                };
                let why = stderr::quoting(why, stderr.as_ref()).await;
                warn!(server = %server.name, "tool server died; restarting it: {why}");
                // Calls wait for the restart (up to their timeout) rather than fail.
                state.send_replace(State::Starting);
                return Ended::Died;
            }
            _ = changed.notified(), if relists.due.is_none() => {
                relists.due = Some(relists.last.map_or_else(Instant::now, |l| (l + RELIST_EVERY).max(Instant::now())));
            }
            _ = tokio::time::sleep_until(relists.due.unwrap_or_else(far)), if relists.due.is_some() => {
                relists.due = None;
                relists.changes += notices.swap(0, Ordering::Relaxed);
                relists.lists += 1;
                debug!(server = %server.name, "tool list changed; listing again");
                if let Err(why) = list(server, &peer, state, generation).await {
                    warn!(server = %server.name, "tool server's tools could not be listed again: {why}");
                }
                relists.last = Some(Instant::now());
            }
            _ = tokio::time::sleep_until(relists.last.map_or_else(far, |l| l + QUIET)), if relists.due.is_none() && relists.lists > 0 => {
                info!(server = %server.name, changes = relists.changes, lists = relists.lists, "tool list changed {}; re-listed {}", times(relists.changes), times(relists.lists));
                relists = Relists { last: relists.last, ..Relists::default() };
            }
            _ = stop.changed() => {
                cancel.cancel();
                let _ = tokio::time::timeout(Duration::from_secs(3), waiting).await;
                state.send_replace(State::Down("stopped".into()));
                return Ended::Stopped;
            }
        }
    }
}

/// The re-lists of one start, after the first listing.
#[derive(Default)]
struct Relists {
    /// When the next is due (a notice came).
    due: Option<Instant>,
    /// When the last ended.
    last: Option<Instant>,
    /// Notices and re-lists since the last log line.
    changes: u64,
    lists: u64,
}

/// `n` times, in words.
fn times(n: u64) -> String {
    match n {
        1 => "once".into(),
        2 => "twice".into(),
        n => format!("{n} times"),
    }
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(86_400)
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

/// Lists the server's tools and publishes them; how many there are.
async fn list(
    server: &ToolServer,
    peer: &Peer<RoleClient>,
    state: &watch::Sender<State>,
    generation: u64,
) -> Result<usize, String> {
    let listed = tokio::time::timeout(server.timeout, peer.list_all_tools())
        .await
        .map_err(|_| format!("no tool list within {} s", server.timeout.as_secs()))?
        .map_err(|e| format!("tools/list failed: {}", words(&e)))?;
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
    let count = order.len();
    state.send_replace(State::Ready {
        generation,
        peer: peer.clone(),
        tools: Arc::new(tools),
        order: Arc::new(order),
    });
    Ok(count)
}

pub(super) type Running = RunningService<RoleClient, Handler>;

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
