//! Runs one perception through the stages and applies the effects. The stages, one file
//! each: `perception` (what happened, and the policy its kind runs with) → `pipeline` (begin,
//! then the thread's process run after run, then one commit) using `run` (one process run:
//! a fixed process's call, or an ISM's loop of calls), `prompting` (a call's prompt, the
//! facts rules read, whether a dialogue will stand), `model` (the call, streamed or not,
//! parsed) and `apply` (answers → writes); `psyche` takes a message into the psychology
//! substrate and gives the turn its inner life in words; `daimons` asks the configured
//! daimons for the turn's whisper meanwhile, decides onboarding, and gives anima's own
//! counsel; `dream` carries out a dream and
//! `consolidate` its memory consolidation; `tracer` gathers what a model-facing turn leaves
//! for the soul's window (its trace, kept after the commit) and sends its moments to the soul
//! stream (`Engine::hub`) as they happen.
//!
//! Each stage takes what it uses, not the engine: `begin`, `commit`'s write, `psyche` and
//! `consolidate` the store's faces they read or write (`Turns`, `States`, `Psychology`,
//! `Dreams`, upcast from the engine's `Store`); the calling stages (`chain`, `run`, `model`,
//! `tool`) a `Caller` (config, provider, shapes, counters, tools), which reaches no store.
//! Each returns what it decided (`Begun`, `Chained`, `Ran`, `Settled`, `Batched`) for the
//! next; `Engine` only wires them.
//!
//! The one place where store, process machine, prompt, provider and parser meet. Knows
//! nothing about where a perception came from (terminal or Slack) or where the reply goes.

mod apply;
mod begin;
mod chain;
mod commit;
mod consolidate;
mod daimons;
mod dossiers;
mod dream;
mod model;
mod perception;
mod pipeline;
mod prompting;
mod psyche;
mod run;
mod shared;
mod tool;
mod tracer;

use std::sync::Arc;

use serde::Serialize;
use tracing::{warn, Instrument};

pub use apply::StateChange;
pub use daimons::{CounselError, OneToOne};
pub use dossiers::load_hand_written;
pub use dream::{DreamError, DreamReport};
pub use perception::{
    Message, Newer, Perception, Quiet, Speech, CLOSED_QUESTION, FOLLOW_UP_QUESTION,
};
/// How the store's records become the prompt's inputs (public for the turn benchmark).
pub use prompting::{gate_input, spoken};
pub use psyche::Happened;
pub use tracer::writer::{Queued, TraceWriter};

use crate::config::Config;
use crate::llm::select::{self, Environment, SelectError};
use crate::llm::Provider;
use crate::memory::model_repo::Exporter;
use crate::memory::{Store, StoreError};
use crate::metrics::Metrics;
use crate::parse::Cognition;
use crate::process::Library;
use crate::prompt::TurnPlan;
use crate::soul::SoulFiles;
use crate::window::Kind;

/// What the user is told when the model cannot be reached. Short and honest; the full error
/// goes to the log.
pub const PROVIDER_DOWN_REPLY: &str =
    "Sorry, I can't think right now: my model isn't answering. Your message is saved, so try me again in a moment.";

/// What a turn produced.
#[derive(Debug, Clone, Serialize)]
pub struct TurnOutcome {
    /// What the soul says (for a message, always something: the dialogue, a fallback or an
    /// apology).
    pub reply: String,
    /// Whether `reply` is to be said: false after a quiet spell the soul let be.
    #[serde(skip)]
    pub said: bool,
    pub thread: String,
    /// The process the thread is in after this turn.
    pub process: String,
    /// The processes that ran, in order (more than one after an execute_now transition).
    pub ran: Vec<String>,
    /// The interaction number, when the turn completed and counted.
    pub interaction: Option<u64>,
    #[serde(skip)]
    pub cognition: Option<Cognition>,
    #[serde(skip)]
    pub plan: TurnPlan,
    pub state_changes: Vec<StateChange>,
    pub user_model_updated: bool,
    /// The provider's error, when the model failed (the reply is then the apology).
    pub error: Option<String>,
    /// Time spent waiting for the model, retries included (µs).
    pub model_us: u64,
    /// Model calls the turn made (an ISM makes several).
    pub model_calls: u32,
    /// ISM loop iterations (0 for a fixed process).
    pub iterations: u32,
    /// What was shown while the reply was written (empty when nothing streamed); the caller
    /// corrects it when `reply` differs.
    #[serde(skip)]
    pub streamed: String,
    /// The ISM iterations themselves, oldest first (for `--show-thoughts`).
    #[serde(skip)]
    pub machine_log: Vec<crate::ism::Iteration>,
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The daemon is stopping while messages were held (a wakeup cut short): the message
    /// was not begun, and waits in the inbox for the next start.
    #[error("stopping: the message waits for the next start")]
    Stopping,
}

/// Whether messages may begin their turns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Gate {
    Open,
    Held,
    Closed,
}

/// Why an engine could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A configuration the person must fix (no provider, bad soul or process files, a
    /// database from a newer anima).
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    Runtime(String),
}

pub struct Engine {
    config: Arc<Config>,
    store: Arc<dyn Store>,
    library: Arc<Library>,
    provider: Arc<dyn Provider>,
    models: Arc<Exporter>,
    metrics: Option<Arc<Metrics>>,
    /// The grammars and schemas built for the calls' shapes (when the server takes one).
    shapes: Arc<crate::prompt::shape::Cache>,
    /// The MCP tool servers an ISM's tool actions call (none configured: `None`).
    tools: Option<Arc<crate::tools::Tools>>,
    /// Open unless the soul is waking up: messages wait here, in the inbox, until it is
    /// awake; closed when the daemon stops while they wait.
    awake: tokio::sync::watch::Sender<Gate>,
    /// The soul stream: the turn's phases, sent to whoever watches.
    hub: crate::window::Hub,
    /// Fetches the files shared with a message (the surface's; see `fetch_files_with`).
    fetcher: std::sync::OnceLock<Arc<dyn crate::files::Fetch>>,
    /// `[[daimons]]`, asked before a message's prompt (none configured: never).
    daimons: Arc<crate::daimon::Daimons>,
    /// Which conversations are one-to-one, as the door knows (onboarding); `None`: not told.
    one_to_one: Option<OneToOne>,
    /// The dossiers: hand-written ones in force, the index recall reads.
    dossiers: Arc<dossiers::Keeper>,
    /// Where finished traces wait to be written, off the turn's path.
    traces: Arc<TraceWriter>,
}

impl Engine {
    pub fn new(
        config: Arc<Config>,
        store: Arc<dyn Store>,
        library: Arc<Library>,
        provider: Arc<dyn Provider>,
    ) -> Self {
        Engine {
            traces: TraceWriter::new(store.clone()),
            models: Arc::new(Exporter::new(&config.memory_dir())),
            daimons: Arc::new(crate::daimon::Daimons::new(&config.daimons)),
            one_to_one: None,
            dossiers: Arc::new(dossiers::Keeper::new(&config.soul_dir)),
            config,
            store,
            library,
            provider,
            metrics: None,
            shapes: Default::default(),
            tools: None,
            awake: tokio::sync::watch::Sender::new(Gate::Open),
            hub: Default::default(),
            fetcher: Default::default(),
        }
    }

    /// Tells the engine which conversations are one-to-one (a Slack DM), for onboarding.
    pub fn with_one_to_one(mut self, one_to_one: OneToOne) -> Self {
        self.one_to_one = Some(one_to_one);
        self
    }

    /// Messages wait (their turns do not begin) until [`Engine::release`].
    pub fn hold(&self) {
        self.awake.send_replace(Gate::Held);
    }

    /// Messages go ahead again, unless the daemon has closed the gate to stop.
    pub fn release(&self) {
        self.awake.send_if_modified(|g| {
            let held = *g == Gate::Held;
            if held {
                *g = Gate::Open;
            }
            held
        });
    }

    /// The daemon stops: messages still held are not begun (they wait in the inbox for the
    /// next start), so the drain does not wait for a wakeup that will not come.
    pub fn close_held(&self) {
        self.awake.send_if_modified(|g| {
            let held = *g == Gate::Held;
            if held {
                *g = Gate::Closed;
            }
            held
        });
    }

    /// Waits while messages are held.
    async fn wait_awake(&self) -> Result<(), EngineError> {
        let mut rx = self.awake.subscribe();
        match rx.wait_for(|g| *g != Gate::Held).await.map(|g| *g) {
            Ok(Gate::Closed) => Err(EngineError::Stopping),
            _ => Ok(()),
        }
    }

    /// One model call a cognitive state makes outside any conversation (wakeup, consent,
    /// journal), bounded by `timeout`, without retries: the caller decides whether to try
    /// again. Returns the answer's text, or what went wrong in words.
    pub async fn state_call(
        &self,
        call: &crate::states::calls::Call,
        timeout: std::time::Duration,
    ) -> Result<String, String> {
        let id = uuid::Uuid::new_v4().simple().to_string();
        let tracer = tracer::Tracer::new(&self.hub, &id, Kind::State, "", self.keeps_traces());
        tracer.stimulus(call.kind);
        let answer = self.caller(&tracer).state_call(call, timeout).await;
        if let Ok(text) = &answer {
            tracer.response(text);
        }
        self.keep_trace(tracer.finish(tracer::Columns::outside()))
            .await;
        answer
    }

    /// Counts turns, model calls, tokens and transitions in `metrics` (the daemon's).
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// The engine `chat` and `run` share: the provider (`auto` resolved, the choice logged),
    /// the soul and process files (watched), the store; user models that missed git are
    /// committed.
    pub async fn build(config: &Arc<Config>) -> Result<Engine, BuildError> {
        let selected = select::select(
            &config.llm,
            config.source.as_deref(),
            &config.home,
            &Environment::from_process(),
        )
        .await
        .map_err(|e| match e {
            SelectError::Build(e) => BuildError::Runtime(e.to_string()),
            other => BuildError::Config(other.to_string()),
        })?;
        tracing::info!(
            provider = selected.provider.name(),
            model = selected.provider.model(),
            reason = selected.reason,
            "model provider chosen"
        );
        let library = Library::load(&config.soul_dir, &config.processes_dir)
            .map_err(|e| BuildError::Config(e.to_string()))?;
        let store = match crate::memory::open::open(&config.store, &config.db_path()).await {
            Ok(s) => s,
            // The connection string `[store] backend = "postgres"` needs is not set.
            Err(e @ StoreError::Connect { .. }) if e.is_unset_url() => {
                return Err(BuildError::Config(format!("{}: {e}", config.origin())))
            }
            Err(
                e @ (StoreError::TooNew { .. }
                | StoreError::TooNewDatabase { .. }
                | StoreError::Connect { .. }
                | StoreError::Unreachable { .. }),
            ) => return Err(BuildError::Config(e.to_string())),
            Err(e) => return Err(BuildError::Runtime(e.to_string())),
        };
        let engine = Engine::new(config.clone(), store, Arc::new(library), selected.provider);
        if config.store.backend == crate::config::StoreBackend::Postgres {
            // Daemons on other machines may share the soul: their leader alone exports (see
            // `daemon::company::Lead`), and a process started beside them leaves the versions
            // to it; one started while none runs exports what it finds.
            let alone = engine
                .store
                .daemons()
                .await
                .is_ok_and(|running| running.is_empty());
            engine.export_models_here(alone);
        }
        engine
            .export_pending_models()
            .await
            .map_err(|e| BuildError::Runtime(e.to_string()))?;
        Ok(engine)
    }

    /// An engine whose soul never changes and which runs only the built-in main process.
    pub fn with_soul(
        config: Arc<Config>,
        store: Arc<dyn Store>,
        soul: SoulFiles,
        provider: Arc<dyn Provider>,
    ) -> Self {
        let library = Arc::new(Library::fixed(soul, Default::default()));
        Self::new(config, store, library, provider)
    }

    /// Starts the config's tool servers (`[[tools.servers]]`), for `chat` and `run`. Each
    /// starts on its own task: none holds up the engine, Slack's connection or the others.
    /// With none configured there is still a (empty) set, which a config reload can add to.
    pub fn start_tools(self) -> Self {
        let tools = crate::tools::Tools::start(&self.config.tools);
        self.with_tools(tools)
    }

    /// Calls an ISM's tool actions through `tools`.
    pub fn with_tools(mut self, tools: Arc<crate::tools::Tools>) -> Self {
        self.tools = Some(tools);
        self
    }

    pub fn tools(&self) -> Option<&Arc<crate::tools::Tools>> {
        self.tools.as_ref()
    }

    /// Stops the tool servers (their child processes end).
    pub async fn stop_tools(&self) {
        if let Some(t) = &self.tools {
            t.shutdown().await;
        }
    }

    pub fn config(&self) -> &Arc<Config> {
        &self.config
    }

    pub fn metrics(&self) -> Option<&Arc<Metrics>> {
        self.metrics.as_ref()
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    pub fn library(&self) -> &Arc<Library> {
        &self.library
    }

    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    /// The soul stream this engine's turns are sent to (the inspector and `anima watch`
    /// subscribe to it).
    pub fn hub(&self) -> &crate::window::Hub {
        &self.hub
    }

    /// Writes every trace still queued; whatever ends (the daemon, `chat`, `inspect`,
    /// `dream`, an eval's run) calls it before it exits.
    pub async fn flush_traces(&self) {
        self.traces.flush().await;
    }

    /// The trace writer on duty until `stop` (then flushed): the daemon runs it among its
    /// supervised tasks. Without it, queued traces are written by a task started as needed.
    pub fn write_traces(
        &self,
        stop: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        self.traces.clone().run(stop)
    }

    /// The trace writer (for the benchmarks and the tests).
    pub fn trace_writer(&self) -> &Arc<TraceWriter> {
        &self.traces
    }

    /// Runs one perception through the pipeline. Errors only when the store fails; a model
    /// failure is an outcome.
    pub async fn perceive(&self, p: &Perception) -> Result<TurnOutcome, EngineError> {
        if matches!(p, Perception::Message(_)) {
            self.wait_awake().await?;
        }
        let trace = uuid::Uuid::new_v4().simple().to_string();
        // One span per perception; the pipeline records what happened into it at the end.
        let empty = tracing::field::Empty;
        let span = match p {
            Perception::Message(m) => {
                tracing::info_span!("turn", trace = &trace[..12], thread = %m.thread, user = %m.user_id,
                process = empty, steps = empty, model = empty, input_tokens = empty, output_tokens = empty,
                model_ms = empty, engine_ms = empty, outcome = empty, model_calls = empty, iterations = empty)
            }
            Perception::Quiet(q) => {
                tracing::info_span!("proactive_turn", trace = &trace[..12], thread = %q.thread,
                process = empty, steps = empty, model = empty, input_tokens = empty, output_tokens = empty,
                model_ms = empty, engine_ms = empty, outcome = empty, model_calls = empty, iterations = empty)
            }
        };
        self.run(p, &trace).instrument(span).await
    }

    /// Threads quiet for `proactive_idle_minutes` at `now_ms` (a clock the caller controls).
    pub async fn quiet_threads(&self, now_ms: i64) -> Result<Vec<String>, EngineError> {
        let since = now_ms - self.config.proactive_idle_minutes as i64 * 60_000;
        let rows = self.store.quiet_threads(since).await?;
        Ok(rows.into_iter().map(|(t, _)| t).collect())
    }

    /// Whether this process exports user models to git (it does unless told otherwise; of
    /// several daemons sharing a store, the leading one does).
    pub fn export_models_here(&self, here: bool) {
        self.models.export_here(here);
    }

    /// Commits user models that SQLite has but git does not (after a crash between the two,
    /// or while the repository could not be written). Returns the commits made.
    pub async fn export_pending_models(&self) -> Result<usize, EngineError> {
        if let Err(e) = self
            .models
            .export_pending_dossiers(self.store.as_ref())
            .await
        {
            warn!(error = %e, "dossiers not committed to git; they will be at the next change or start");
        }
        match self.models.export_pending(self.store.as_ref()).await {
            Ok(n) => Ok(n),
            Err(e) => {
                warn!(error = %e, "user models not committed to git; they will be at the next change or start");
                Ok(0)
            }
        }
    }
}
