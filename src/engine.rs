//! Runs one perception through the stages and applies the effects:
//! record the message → load context → plan → build prompt → call the model → parse →
//! persist the turn in one transaction → export a changed user model to git.
//!
//! The one place where store, prompt, provider and parser meet. Knows nothing about where
//! the message came from (terminal or Slack) or where the reply goes.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;
use tracing::{debug, info, warn, Instrument};

use crate::config::Config;
use crate::llm::{self, ChatRequest, Completion, LlmError, Provider};
use crate::memory::model_repo::ModelRepo;
use crate::memory::soul_state::model_may_set;
use crate::memory::working::{SOUL_STATE_CHECK, USER_MODEL_CHECK};
use crate::memory::{
    EntryType, NewEntry, Store, StoreError, TurnContext, TurnRecord, UsageRecord, UserRecord,
};
use crate::parse::{parse_response, Cognition};
use crate::prompt::{self, Gates, ProcessInstructions, PromptInput, TurnPlan};
use crate::soul::SoulFiles;
use crate::steps::Step;

/// What the user is told when the model cannot be reached. Short and honest; the full error
/// goes to the log.
pub const PROVIDER_DOWN_REPLY: &str =
    "Sorry, I can't think right now: my model isn't answering. Your message is saved, so try me again in a moment.";

/// The steps of the main process (the seed's full pipeline).
pub const MAIN_STEPS: [Step; 6] = [
    Step::InternalMonologue,
    Step::ExternalDialogue,
    Step::UserModelCheck,
    Step::UserModelUpdate,
    Step::SoulStateCheck,
    Step::SoulStateUpdate,
];

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

/// A soul-state key that changed this turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateChange {
    pub key: String,
    pub from: String,
    pub to: String,
}

/// What a turn produced.
#[derive(Debug, Clone, Serialize)]
pub struct TurnOutcome {
    pub reply: String,
    pub thread: String,
    pub process: String,
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
    soul: SoulFiles,
    provider: Arc<dyn Provider>,
    repo: Arc<Mutex<Option<ModelRepo>>>,
    process: ProcessInstructions,
}

impl Engine {
    pub fn new(
        config: Arc<Config>,
        store: Arc<Store>,
        soul: SoulFiles,
        provider: Arc<dyn Provider>,
    ) -> Self {
        Engine {
            config,
            store,
            soul,
            provider,
            repo: Arc::new(Mutex::new(None)),
            process: ProcessInstructions::default(),
        }
    }

    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    pub fn soul(&self) -> &SoulFiles {
        &self.soul
    }

    pub fn provider(&self) -> &Arc<dyn Provider> {
        &self.provider
    }

    /// Commits user models that SQLite has but git does not (after a crash between the two).
    pub async fn export_pending_models(&self) -> Result<usize, EngineError> {
        let store = self.store.clone();
        let pending = tokio::task::spawn_blocking(move || store.unexported_models()).await??;
        let n = pending.len();
        for user in pending {
            self.export_model(user).await;
        }
        Ok(n)
    }

    /// Runs one turn. Errors only when the store fails; a model failure is an outcome.
    pub async fn turn(&self, p: &Perception) -> Result<TurnOutcome, EngineError> {
        let trace = uuid::Uuid::new_v4().simple().to_string();
        let span = tracing::info_span!("turn", trace = &trace[..12], thread = %p.thread, user = %p.user_id, process = "main");
        self.turn_inner(p).instrument(span).await
    }

    async fn turn_inner(&self, p: &Perception) -> Result<TurnOutcome, EngineError> {
        let window = self.config.pipeline.memory_window;
        let store = self.store.clone();
        let pc = p.clone();
        let (message_id, ctx) = tokio::task::spawn_blocking(move || {
            let id = store.record_user_message(
                &pc.thread,
                &pc.user_id,
                &pc.display_name,
                &pc.text,
                pc.source.as_deref(),
            )?;
            let ctx = store.load_turn(&pc.thread, &pc.user_id, &pc.display_name, window)?;
            Ok::<_, StoreError>((id, ctx))
        })
        .await??;
        debug!(text = %p.text, "message recorded");

        let process = ctx.soul.get("currentProcess").to_string();
        let plan = prompt::plan(
            &MAIN_STEPS,
            ctx.interaction,
            ctx.thread_turns,
            &ctx.recent,
            &ctx.user,
            Gates {
                soul_state_interval: self.config.pipeline.soul_state_interval,
                user_model_interval: self.config.pipeline.user_model_interval,
            },
        );
        info!(interaction = ctx.interaction, steps = ?plan.steps, user_model = plan.inject_user_model, why = plan.user_model_reason, "turn planned");

        let keeps_sessions = self.provider.keeps_sessions();
        let history: Vec<_> = if keeps_sessions {
            Vec::new()
        } else {
            ctx.recent
                .iter()
                .filter(|e| e.id < message_id)
                .cloned()
                .collect()
        };
        let model_text = ctx.user.model_or_blueprint();
        let built = prompt::build_prompt(&PromptInput {
            soul: &self.soul,
            soul_state: &ctx.soul,
            whisper: ctx.whisper.as_ref().map(|w| w.1.as_str()),
            user_model: plan
                .inject_user_model
                .then_some((ctx.user.display_name.as_str(), model_text.as_str())),
            steps: &plan.steps,
            process: &self.process,
            history: &history,
            speaker: &p.display_name,
            message: &p.text,
        });

        let started = Instant::now();
        let session = ctx.claude_session.clone();
        let max_tokens = self.config.llm.max_tokens;
        let result = llm::retry::with_retries(self.config.llm.max_retries, || {
            self.provider.complete(
                ChatRequest {
                    prompt: &built,
                    max_tokens,
                    session: session.as_deref(),
                },
                None,
            )
        })
        .await;
        let model_us = started.elapsed().as_micros() as u64;
        let latency_ms = model_us / 1000;
        let completion = match result {
            Ok(c) => c,
            Err(e) => {
                let mut failed = self.failed_turn(p, process, plan, e);
                failed.model_us = model_us;
                return Ok(failed);
            }
        };
        info!(
            model = %completion.model,
            input_tokens = completion.usage.input_tokens,
            output_tokens = completion.usage.output_tokens,
            cache_read = completion.usage.cache_read_tokens,
            cache_write = completion.usage.cache_creation_tokens,
            latency_ms,
            stop_reason = completion.stop_reason.as_deref().unwrap_or(""),
            "model answered"
        );
        debug!(raw = %completion.text, "model output");

        let cognition = parse_response(&completion.text, self.config.pipeline.max_response_chars);
        let (mut record, state_changes) =
            self.record_for(p, &ctx, &plan, &cognition, &completion, latency_ms);
        record.inbox = p.inbox_id.map(|id| (id, cognition.reply.clone()));
        let user_model_updated = record.user_model.is_some();
        let store = self.store.clone();
        let changed_user =
            tokio::task::spawn_blocking(move || store.commit_turn(&record)).await??;
        if let Some(user) = changed_user {
            self.export_model(user).await;
        }
        Ok(TurnOutcome {
            reply: cognition.reply.clone(),
            thread: p.thread.clone(),
            process,
            interaction: Some(ctx.interaction),
            cognition: Some(cognition),
            plan,
            state_changes,
            user_model_updated,
            error: None,
            model_us,
        })
    }

    fn failed_turn(
        &self,
        p: &Perception,
        process: String,
        plan: TurnPlan,
        e: LlmError,
    ) -> TurnOutcome {
        warn!(provider = self.provider.name(), error = %e, "model call failed; the message stays in working memory");
        TurnOutcome {
            reply: PROVIDER_DOWN_REPLY.to_string(),
            thread: p.thread.clone(),
            process,
            interaction: None,
            cognition: None,
            plan,
            state_changes: Vec::new(),
            user_model_updated: false,
            error: Some(e.to_string()),
            model_us: 0,
        }
    }

    /// Turns the parsed answer into the turn's writes, acting only on requested steps.
    fn record_for(
        &self,
        p: &Perception,
        ctx: &TurnContext,
        plan: &TurnPlan,
        c: &Cognition,
        completion: &Completion,
        latency_ms: u64,
    ) -> (TurnRecord, Vec<StateChange>) {
        let mut entries = Vec::new();
        if let Some(m) = c
            .monologue
            .as_ref()
            .filter(|_| plan.requests(Step::InternalMonologue))
        {
            entries.push(NewEntry::new(EntryType::InternalMonologue, &m.text).verb(m.verb.clone()));
        }
        entries.push(
            NewEntry::new(EntryType::ExternalDialog, &c.reply)
                .verb(c.dialogue.as_ref().and_then(|d| d.verb.clone()))
                .metadata(serde_json::json!({ "source": c.reply_source })),
        );
        if plan.requests(Step::MentalQuery) {
            for q in &c.mental_queries {
                entries.push(
                    NewEntry::new(EntryType::MentalQuery, &q.question)
                        .metadata(serde_json::json!({ "result": q.answer })),
                );
            }
        }
        if plan.requests(Step::UserModelCheck) {
            if let Some(answer) = c.user_model_check {
                entries.push(
                    NewEntry::new(EntryType::MentalQuery, USER_MODEL_CHECK)
                        .user(&p.user_id)
                        .metadata(serde_json::json!({ "result": answer })),
                );
            }
        }

        let mut user_model = None;
        match (
            &c.user_model_update,
            plan.requests(Step::UserModelUpdate),
            c.user_model_check,
        ) {
            (Some(model), true, Some(true)) => {
                let note = c
                    .model_change_note
                    .clone()
                    .unwrap_or_else(|| format!("Updated the model of {}.", ctx.user.display_name));
                entries.push(
                    NewEntry::new(EntryType::UserModelUpdate, &note)
                        .user(&p.user_id)
                        .metadata(serde_json::json!({ "version": ctx.user.model_version + 1 })),
                );
                user_model = Some((model.clone(), note));
            }
            (Some(_), true, _) => debug!("user_model_update ignored: the check did not say true"),
            (Some(_), false, _) => {
                debug!("volunteered user_model_update ignored: not requested this turn")
            }
            (None, ..) => {}
        }

        let mut soul_updates = Vec::new();
        let mut state_changes = Vec::new();
        if plan.requests(Step::SoulStateCheck) {
            if let Some(answer) = c.soul_state_check {
                entries.push(
                    NewEntry::new(EntryType::MentalQuery, SOUL_STATE_CHECK)
                        .metadata(serde_json::json!({ "result": answer })),
                );
            }
        }
        if !c.soul_state_update.is_empty() {
            if !plan.requests(Step::SoulStateUpdate) {
                debug!("volunteered soul_state_update ignored: not requested this turn");
            } else if c.soul_state_check != Some(true) {
                debug!("soul_state_update ignored: the check did not say true");
            } else {
                for (key, value) in &c.soul_state_update {
                    if !model_may_set(key) {
                        info!(key = %key, "unknown soul-state key ignored");
                        continue;
                    }
                    let from = ctx.soul.get(key).to_string();
                    if from != *value {
                        state_changes.push(StateChange {
                            key: key.clone(),
                            from,
                            to: value.clone(),
                        });
                        soul_updates.push((key.clone(), value.clone()));
                    }
                }
                if !soul_updates.is_empty() {
                    let lines: Vec<String> = soul_updates
                        .iter()
                        .map(|(k, v)| format!("{k}: {v}"))
                        .collect();
                    entries.push(NewEntry::new(EntryType::SoulStateUpdate, lines.join("\n")));
                }
            }
        }

        let record = TurnRecord {
            thread: p.thread.clone(),
            user_id: p.user_id.clone(),
            interaction: ctx.interaction,
            entries,
            soul_updates,
            user_model,
            injected_user_model: plan.inject_user_model,
            whisper_id: ctx.whisper.as_ref().map(|w| w.0),
            claude_session: completion.session.clone(),
            usage: Some(UsageRecord {
                provider: self.provider.name().to_string(),
                model: completion.model.clone(),
                input_tokens: completion.usage.input_tokens,
                output_tokens: completion.usage.output_tokens,
                cache_creation_tokens: completion.usage.cache_creation_tokens,
                cache_read_tokens: completion.usage.cache_read_tokens,
                latency_ms,
                stop_reason: completion.stop_reason.clone(),
            }),
            inbox: None,
        };
        (record, state_changes)
    }

    /// Commits a user's current model to the git repository; failures are logged and retried
    /// at the next start (the model is safe in SQLite).
    async fn export_model(&self, user: UserRecord) {
        let repo = self.repo.clone();
        let store = self.store.clone();
        let root = self.config.memory_dir();
        let result = tokio::task::spawn_blocking(move || -> Result<(), String> {
            let Some(model) = user.model.as_deref() else {
                return Ok(());
            };
            let note = store
                .model_history(&user.user_id)
                .map_err(|e| e.to_string())?
                .into_iter()
                .rev()
                .find(|h| h.0 == user.model_version)
                .map(|h| h.1)
                .unwrap_or_default();
            let mut guard = repo.lock().unwrap_or_else(|e| e.into_inner());
            if guard.is_none() {
                *guard = Some(ModelRepo::open_or_init(&root).map_err(|e| e.to_string())?);
            }
            let repo = guard.as_ref().expect("opened above");
            repo.commit_model(&user.slug, model, &note)
                .map_err(|e| e.to_string())?;
            store
                .mark_exported(&user.user_id, user.model_version)
                .map_err(|e| e.to_string())?;
            info!(user = %user.slug, version = user.model_version, "user model committed");
            Ok(())
        })
        .await;
        match result {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                warn!(error = %e, "user model not committed to git; will retry at next start")
            }
            Err(e) => warn!(error = %e, "user model export task failed"),
        }
    }
}
