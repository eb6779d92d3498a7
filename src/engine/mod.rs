//! Runs one perception through the stages and applies the effects:
//! record the message → load context → for the thread's process: plan → build prompt →
//! call the model → parse → take the first matching transition (again at once on
//! execute_now, at most `max_chain` times) → persist the turn in one transaction → export a
//! changed user model to git.
//!
//! The one place where store, process machine, prompt, provider and parser meet. Knows
//! nothing about where the message came from (terminal or Slack) or where the reply goes.

mod apply;
mod proactive;

use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use tracing::{debug, info, warn, Instrument};

pub use apply::StateChange;
pub use proactive::{CLOSED_QUESTION, FOLLOW_UP_QUESTION};

use crate::config::Config;
use crate::llm::{self, ChatRequest, Completion, LlmError, Provider};
use crate::memory::model_repo::Exporter;
use crate::memory::process_state::TransitionRecord;
use crate::memory::{
    now_ms, Entry, SoulState, Store, StoreError, TurnContext, TurnRecord, TurnStart, UsageRecord,
    Whisper,
};
use crate::parse::{parse_response, Cognition};
use crate::process::when::Facts;
use crate::process::{self, Library, Loaded, ProcessDef, ThreadProcess, MAIN};
use crate::prompt::{self, Gates, ProcessInstructions, PromptInput, TurnPlan};
use crate::soul::SoulFiles;
use apply::Outcome;

/// What the user is told when the model cannot be reached. Short and honest; the full error
/// goes to the log.
pub const PROVIDER_DOWN_REPLY: &str =
    "Sorry, I can't think right now: my model isn't answering. Your message is saved, so try me again in a moment.";

/// One incoming message, wherever it came from.
#[derive(Debug, Clone)]
pub struct Perception {
    /// The conversation: a Slack thread (`channel:thread_ts`) or a terminal thread id.
    pub thread: String,
    pub user_id: String,
    pub display_name: String,
    pub text: String,
    /// Where the message came from (e.g. an inbox row), so a retried turn records it once.
    pub source: Option<String>,
    /// The inbox row this turn answers; its reply is fixed in the turn's transaction.
    pub inbox_id: Option<i64>,
}

/// What a turn produced.
#[derive(Debug, Clone, Serialize)]
pub struct TurnOutcome {
    pub reply: String,
    pub thread: String,
    /// The process the thread is in after this turn.
    pub process: String,
    /// The processes that ran, in order (more than one after an execute_now transition).
    pub ran: Vec<String>,
    /// The interaction number, when the turn completed.
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
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("a store task failed: {0}")]
    Join(#[from] tokio::task::JoinError),
}

pub struct Engine {
    config: Arc<Config>,
    store: Arc<Store>,
    library: Arc<Library>,
    provider: Arc<dyn Provider>,
    models: Arc<Exporter>,
}

/// One process run's result.
struct Run {
    cognition: Cognition,
    plan: TurnPlan,
    completion: Completion,
    latency_us: u64,
}

impl Engine {
    pub fn new(
        config: Arc<Config>,
        store: Arc<Store>,
        library: Arc<Library>,
        provider: Arc<dyn Provider>,
    ) -> Self {
        Engine {
            models: Arc::new(Exporter::new(&config.memory_dir())),
            config,
            store,
            library,
            provider,
        }
    }

    /// An engine whose soul never changes and which runs only the built-in main process.
    pub fn with_soul(
        config: Arc<Config>,
        store: Arc<Store>,
        soul: SoulFiles,
        provider: Arc<dyn Provider>,
    ) -> Self {
        let library = Arc::new(Library::fixed(soul, Default::default()));
        Self::new(config, store, library, provider)
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    pub fn library(&self) -> &Arc<Library> {
        &self.library
    }

    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    /// Commits user models that SQLite has but git does not (after a crash between the two,
    /// or while the repository could not be written). Returns the commits made.
    pub async fn export_pending_models(&self) -> Result<usize, EngineError> {
        let (models, store) = (self.models.clone(), self.store.clone());
        match tokio::task::spawn_blocking(move || models.export_pending(&store)).await? {
            Ok(n) => Ok(n),
            Err(e) => {
                warn!(error = %e, "user models not committed to git; they will be at the next change or start");
                Ok(0)
            }
        }
    }

    /// Runs one turn. Errors only when the store fails; a model failure is an outcome.
    pub async fn turn(&self, p: &Perception) -> Result<TurnOutcome, EngineError> {
        let trace = uuid::Uuid::new_v4().simple().to_string();
        let span = tracing::info_span!("turn", trace = &trace[..12], thread = %p.thread, user = %p.user_id);
        self.turn_inner(p).instrument(span).await
    }

    async fn turn_inner(&self, p: &Perception) -> Result<TurnOutcome, EngineError> {
        let window = self.config.pipeline.memory_window;
        let store = self.store.clone();
        let pc = p.clone();
        let claimant = uuid::Uuid::new_v4().simple().to_string();
        let claim_until_ms = now_ms() + self.claim_lease_ms();
        let who = claimant.clone();
        let (message_id, ctx) = tokio::task::spawn_blocking(move || {
            store.begin_turn(&TurnStart {
                thread: &pc.thread,
                user_id: &pc.user_id,
                display_name: &pc.display_name,
                text: &pc.text,
                source: pc.source.as_deref(),
                window,
                claimant: &who,
                claim_until_ms,
            })
        })
        .await??;
        debug!(text = %p.text, "message recorded");

        let lib = self.library.current();
        let history: Vec<_> = if self.provider.keeps_sessions() {
            Vec::new()
        } else {
            ctx.recent
                .iter()
                .filter(|e| e.id < message_id)
                .cloned()
                .collect()
        };
        let idle_minutes = ctx
            .recent
            .iter()
            .rev()
            .find(|e| e.id < message_id)
            .map_or(0.0, |e| (now_ms() - e.created_at).max(0) as f64 / 60_000.0);
        let mut state = self.entry_state(&lib, &ctx);
        let mut soul = ctx.soul.clone();
        let mut outcome = Outcome::default();
        let mut transitions = Vec::new();
        let mut usage = Vec::new();
        let mut ran = Vec::new();
        let mut model_us = 0;
        let mut chain = 0;
        let last = loop {
            let def = lib.process(&state.current).unwrap_or_else(|| lib.main());
            state.invocations += 1;
            ran.push(def.name.clone());
            let plan = self.plan(def, &ctx);
            info!(process = %def.name, interaction = ctx.interaction, steps = ?plan.steps, user_model = plan.inject_user_model, why = plan.user_model_reason, "turn planned");
            let built = run_prompt(&RunInput {
                lib: &lib,
                def,
                state: &state,
                ctx: &ctx,
                soul: &soul,
                plan: &plan,
                history: &history,
                extra_queries: &[],
                whisper: ctx.whisper.as_ref(),
                message: Some((&p.display_name, &p.text)),
                quiet_minutes: None,
            });
            let run = match self.call(&built, ctx.claude_session.as_deref(), plan).await {
                Ok(run) => run,
                Err((e, latency_us)) => {
                    // The turn did not happen: its number and its whisper go back.
                    let store = self.store.clone();
                    let (n, whisper) = (ctx.interaction, ctx.whisper.as_ref().map(|w| w.id));
                    tokio::task::spawn_blocking(move || {
                        store.release_turn(n, whisper.map(|id| (id, claimant.as_str())))
                    })
                    .await??;
                    return Ok(self.failed_turn(
                        p,
                        state.current.clone(),
                        ran,
                        e,
                        model_us + latency_us,
                    ));
                }
            };
            model_us += run.latency_us;
            usage.push(self.usage_record(&run));
            outcome.apply(
                &run.plan,
                &run.cognition,
                Some(&ctx.user),
                &mut soul,
                &serde_json::json!({ "process": def.name }),
            );

            let facts = facts_for(
                &soul,
                &state,
                &run.cognition,
                ctx.thread_turns as u64 + 1,
                idle_minutes,
                &def.name,
            );
            let Some((rule, t)) = process::next(def, &facts) else {
                break run;
            };
            let (record, next_state) = take(&lib, &def.name, rule, t);
            transitions.push(record);
            state = next_state;
            if !t.execute_now {
                break run;
            }
            if chain >= self.config.max_chain {
                warn!(
                    chain,
                    max_chain = self.config.max_chain,
                    "execute_now chain bound reached (a cycle?); the next message runs the target"
                );
                break run;
            }
            chain += 1;
        };

        outcome.say(&last.cognition, &serde_json::json!({}));
        let user_model_updated = outcome.user_model.is_some();
        let reply = last.cognition.reply.clone();
        let record = TurnRecord {
            thread: p.thread.clone(),
            user_id: p.user_id.clone(),
            interaction: ctx.interaction,
            entries: std::mem::take(&mut outcome.entries),
            soul_updates: std::mem::take(&mut outcome.soul_updates),
            user_model: outcome.user_model.take(),
            injected_user_model: outcome.injected_user_model,
            whisper_id: ctx.whisper.as_ref().map(|w| w.id),
            claude_session: last.completion.session.clone(),
            usage,
            inbox: p.inbox_id.map(|id| (id, reply.clone())),
            process: Some(state.clone()),
            transitions,
            proactive: false,
        };
        let store = self.store.clone();
        let changed_user =
            tokio::task::spawn_blocking(move || store.commit_turn(&record)).await??;
        if changed_user.is_some() {
            // Every version git has not seen yet, this one last (the model is safe in SQLite
            // whatever happens here).
            self.export_pending_models().await?;
        }
        Ok(TurnOutcome {
            reply,
            thread: p.thread.clone(),
            process: state.current,
            ran,
            interaction: Some(ctx.interaction),
            cognition: Some(last.cognition),
            plan: last.plan,
            state_changes: outcome.state_changes,
            user_model_updated,
            error: None,
            model_us,
        })
    }

    /// How long a turn's claim on a whisper lasts: longer than any model call with its
    /// retries can take, so only a turn whose process died loses it this way.
    fn claim_lease_ms(&self) -> i64 {
        let llm = &self.config.llm;
        (llm.timeout_secs as i64 * (llm.max_retries as i64 + 1) + 60) * 1000
    }

    /// The thread's process at the start of a turn: its stored one, or for a new thread the
    /// configured initial process (`greeting`), else main.
    fn entry_state(&self, lib: &Loaded, ctx: &TurnContext) -> ThreadProcess {
        if let Some(state) = &ctx.process {
            return state.clone();
        }
        let initial = &self.config.initial_process;
        let current = if lib.process(initial).is_some() {
            initial.clone()
        } else {
            MAIN.to_string()
        };
        ThreadProcess {
            current,
            ..ThreadProcess::default()
        }
    }

    fn plan(&self, def: &ProcessDef, ctx: &TurnContext) -> TurnPlan {
        prompt::plan(
            &def.steps,
            ctx.interaction,
            ctx.thread_turns,
            &ctx.recent,
            &ctx.user,
            Gates {
                soul_state_interval: self.config.pipeline.soul_state_interval,
                user_model_interval: self.config.pipeline.user_model_interval,
            },
        )
    }

    /// One model call with retries, parsed.
    async fn call(
        &self,
        built: &prompt::Prompt,
        session: Option<&str>,
        plan: TurnPlan,
    ) -> Result<Run, (LlmError, u64)> {
        let started = Instant::now();
        let max_tokens = self.config.llm.max_tokens;
        let result = llm::retry::with_retries(self.config.llm.max_retries, || {
            self.provider.complete(
                ChatRequest {
                    prompt: built,
                    max_tokens,
                    session,
                },
                None,
            )
        })
        .await;
        let latency_us = started.elapsed().as_micros() as u64;
        let completion = result.map_err(|e| (e, latency_us))?;
        info!(
            model = %completion.model,
            input_tokens = completion.usage.input_tokens,
            output_tokens = completion.usage.output_tokens,
            cache_read = completion.usage.cache_read_tokens,
            cache_write = completion.usage.cache_creation_tokens,
            latency_ms = latency_us / 1000,
            stop_reason = completion.stop_reason.as_deref().unwrap_or(""),
            "model answered"
        );
        debug!(raw = %completion.text, "model output");
        let cognition = parse_response(&completion.text, self.config.pipeline.max_response_chars);
        Ok(Run {
            cognition,
            plan,
            completion,
            latency_us,
        })
    }

    fn usage_record(&self, run: &Run) -> UsageRecord {
        UsageRecord {
            provider: self.provider.name().to_string(),
            model: run.completion.model.clone(),
            input_tokens: run.completion.usage.input_tokens,
            output_tokens: run.completion.usage.output_tokens,
            cache_creation_tokens: run.completion.usage.cache_creation_tokens,
            cache_read_tokens: run.completion.usage.cache_read_tokens,
            latency_ms: run.latency_us / 1000,
            stop_reason: run.completion.stop_reason.clone(),
        }
    }

    fn failed_turn(
        &self,
        p: &Perception,
        process: String,
        ran: Vec<String>,
        e: LlmError,
        model_us: u64,
    ) -> TurnOutcome {
        warn!(provider = self.provider.name(), error = %e, "model call failed; the message stays in working memory");
        TurnOutcome {
            reply: PROVIDER_DOWN_REPLY.to_string(),
            thread: p.thread.clone(),
            process,
            ran,
            interaction: None,
            cognition: None,
            plan: TurnPlan {
                steps: Vec::new(),
                inject_user_model: false,
                user_model_reason: "the model failed",
            },
            state_changes: Vec::new(),
            user_model_updated: false,
            error: Some(e.to_string()),
            model_us,
        }
    }
}

/// What one process run's prompt is made from.
struct RunInput<'a> {
    lib: &'a Loaded,
    def: &'a ProcessDef,
    state: &'a ThreadProcess,
    ctx: &'a TurnContext,
    soul: &'a SoulState,
    plan: &'a TurnPlan,
    history: &'a [Entry],
    /// Questions the engine adds to the process's own.
    extra_queries: &'a [&'a str],
    whisper: Option<&'a Whisper>,
    /// (speaker, text); `None` for a proactive turn.
    message: Option<(&'a str, &'a str)>,
    quiet_minutes: Option<u64>,
}

/// Builds one process run's prompt: its process section, its instructions, the gated user
/// model, and the message (or the quiet).
fn run_prompt(i: &RunInput) -> prompt::Prompt {
    let note = prompt::process_note(
        &i.def.name,
        &i.def.description,
        i.state.invocations,
        i.state.previous.as_deref(),
        &i.state.params,
    );
    let instructions = instructions_of(i.def, i.extra_queries);
    let model_text = i.ctx.user.model_or_blueprint();
    let (speaker, message) = i.message.unwrap_or(("", ""));
    prompt::build_prompt(&PromptInput {
        soul: &i.lib.soul,
        soul_state: i.soul,
        whisper: i.whisper.map(|w| prompt::Intuition {
            text: &w.text,
            source: &w.source,
        }),
        user_model: i
            .plan
            .inject_user_model
            .then_some((i.ctx.user.display_name.as_str(), model_text.as_str())),
        steps: &i.plan.steps,
        process: &instructions,
        history: i.history,
        speaker,
        message,
        process_note: Some(&note),
        quiet_minutes: i.quiet_minutes,
    })
}

/// The instructions a process contributes: its overrides, its note, and the questions its
/// rules (and `extra`) ask.
fn instructions_of(def: &ProcessDef, extra: &[&str]) -> ProcessInstructions {
    let mut mental_queries = def.queries.clone();
    for q in extra {
        if !mental_queries.iter().any(|m| m == q) {
            mental_queries.push(q.to_string());
        }
    }
    ProcessInstructions {
        overrides: def.overrides.clone(),
        note: def.instructions.clone(),
        mental_queries,
    }
}

/// Takes a transition out of `from`: the record of it and the thread's new state. A target
/// that does not exist falls back to main.
fn take(
    lib: &Loaded,
    from: &str,
    rule: usize,
    t: &process::Transition,
) -> (TransitionRecord, ThreadProcess) {
    let target = if lib.process(&t.to).is_some() {
        t.to.clone()
    } else {
        warn!(from, to = %t.to, "transition names an unknown process; falling back to main");
        MAIN.to_string()
    };
    info!(from, to = %target, rule, execute_now = t.execute_now, "process transition");
    let record = TransitionRecord {
        from: from.to_string(),
        to: target.clone(),
        rule: Some(rule),
        execute_now: t.execute_now,
        params: t.params.clone(),
    };
    let state = ThreadProcess {
        current: target,
        previous: Some(from.to_string()),
        invocations: 0,
        params: t.params.clone().into_iter().collect(),
    };
    (record, state)
}

/// What a process's rules read after a run.
fn facts_for(
    soul: &SoulState,
    state: &ThreadProcess,
    c: &Cognition,
    turns: u64,
    idle_minutes: f64,
    process: &str,
) -> Facts {
    Facts {
        state: soul
            .all()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        params: state.params.clone(),
        queries: c
            .mental_queries
            .iter()
            .map(|q| (q.question.clone(), q.answer))
            .collect(),
        user_model_check: c.user_model_check,
        invocations: state.invocations,
        turns,
        idle_minutes,
        previous: state.previous.clone(),
        process: process.to_string(),
    }
}
