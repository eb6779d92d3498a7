//! The one turn pipeline, for every kind of perception:
//! begin (record the message, take its number, claim a whisper, read the context) → the
//! thread's process, run after run (plan → prompt → model → parse → apply → step) → commit
//! the turn in one transaction → export changed user models to git.
//!
//! What differs between kinds is the `Policy` (counted or not, whisper or not, chaining or
//! not, extra questions) and the stage `begin`; everything else is shared.

use serde_json::json;
use tracing::{info, warn};

use super::apply::Outcome;
use super::model::Streaming;
use super::perception::{answer, Perception, FOLLOW_UP_QUESTION};
use super::prompting::{facts_for, gate_input, will_stand, Moment, RunInput};
use super::run::{Ran, RunState, Spent};
use super::{Engine, EngineError, TurnOutcome, PROVIDER_DOWN_REPLY};
use crate::llm::LlmError;
use crate::memory::{now_ms, Entry, EntryType, NewEntry, TurnContext, TurnRecord, TurnStart};
use crate::process::machine::{self, Chaining};
use crate::process::ThreadProcess;
use crate::prompt::{self, Gates, TurnPlan};

/// What the pipeline starts from, whatever the perception.
struct Begun {
    ctx: TurnContext,
    /// The conversation as the model sees it before this perception.
    history: Vec<Entry>,
    /// The thread's place in the process machine as this perception enters it.
    state: ThreadProcess,
    /// The thread's turns for the rules (`turns`), this one included when it counts.
    turns: u64,
    idle_minutes: f64,
    /// A perception without a message: the minutes of quiet the prompt mentions.
    quiet_minutes: Option<u64>,
    /// Names this turn's claim on a whisper.
    claimant: String,
}

impl Engine {
    pub(super) async fn run(&self, p: &Perception) -> Result<TurnOutcome, EngineError> {
        let started = std::time::Instant::now();
        let policy = p.policy();
        let lib = self.library.current();
        let mut begun = self.begin(p, &lib).await?;
        if matches!(p, Perception::Message(_)) {
            self.leave_rest(&mut begun.ctx).await?;
        }
        let packet = match p {
            Perception::Message(m) => self.psyche_turn(m, &lib).await,
            Perception::Quiet(_) => None,
        };
        let ctx = &begun.ctx;
        let moment = Moment {
            turns: begun.turns,
            idle_minutes: begun.idle_minutes,
            cognitive_state: &ctx.cognitive_state,
            inner: packet.as_ref().map(|p| p.words),
        };
        let user = (!policy.proactive).then_some(&ctx.user);
        let message = match p {
            Perception::Message(m) => Some((m.display_name.as_str(), m.text.as_str())),
            Perception::Quiet(_) => None,
        };
        let (newer, speech) = match p {
            Perception::Message(m) => (m.newer.as_ref(), m.speech.as_ref()),
            Perception::Quiet(_) => (None, None),
        };
        let mut state = begun.state.clone();
        let mut soul = ctx.soul.clone();
        let mut outcome = Outcome::default();
        let (mut transitions, mut ran) = (Vec::new(), Vec::new());
        let mut spent = Spent::default();
        let (mut chain, mut iterations) = (0, 0);
        let mut machine_log = Vec::new();
        // A template whose shutdown asks consent while a referral is pending has the soul
        // say, turn by turn, whether it is referring someone on.
        let mut extra_queries: Vec<&str> = policy.extra_queries.to_vec();
        if !policy.proactive && asks_about_referrals(&lib.template) {
            extra_queries.push(crate::states::shutdown::REFERRAL_QUESTION);
        }
        let last = loop {
            let def = machine::begin_run(&mut state, &lib);
            ran.push(def.name.clone());
            let plan = self.plan(def, ctx);
            info!(process = %def.name, interaction = ctx.interaction, steps = ?plan.steps, user_model = plan.inject_user_model, why = plan.user_model_reason, "turn planned");
            // Shown as it is written only when no execute_now rule can hand the message on.
            let soul_now = speech.map(|_| soul.clone());
            let stands = |raw: &str| {
                soul_now.as_ref().is_some_and(|soul| {
                    will_stand(def, raw, self.config.pipeline.max_response_chars, |c| {
                        facts_for(soul, &state, c, &def.name, &moment)
                    })
                })
            };
            let streaming = speech.map(|speech| Streaming {
                speech,
                stands: &stands,
            });
            let rs = RunState {
                input: RunInput {
                    lib: &lib,
                    def,
                    state: &state,
                    ctx,
                    soul: &ctx.soul,
                    plan: &plan,
                    history: &begun.history,
                    extra_queries: &extra_queries,
                    whisper: ctx.whisper.as_ref().filter(|_| policy.whisper),
                    message,
                    quiet_minutes: begun.quiet_minutes,
                    machine: None,
                    queries: None,
                    psyche: packet.as_ref(),
                },
                soul: &mut soul,
                outcome: &mut outcome,
                user,
                meta: policy.entry_meta(&def.name),
                spent: &mut spent,
                session: ctx.claude_session.as_deref(),
                stream: streaming.as_ref(),
            };
            let result = match def.ism.as_ref().filter(|_| self.config.ism.enabled) {
                Some(ism) => {
                    let hand_over_now = policy.chains && chain < self.config.max_chain;
                    self.run_machine(ism, rs, newer, hand_over_now).await
                }
                None => self.run_fixed(rs).await,
            };
            let run = match result {
                Ok(run) => run,
                Err((e, model_us)) => {
                    // The calls that answered before the one that failed, and that one.
                    let calls = spent.usage.len() as u32 + 1;
                    return self
                        .failed(p, &begun, state.current, ran, e, (model_us, calls))
                        .await;
                }
            };
            iterations += run.iterations;
            machine_log.extend(run.log.iter().cloned());
            let chaining = Chaining {
                done: chain,
                max: self.config.max_chain,
                // An interrupted run hands nothing on: the newer message comes next.
                allowed: policy.chains && !run.interrupted,
            };
            let step = match (&run.handed_over, &run.last) {
                (Some(h), _) => machine::hand_over(
                    def,
                    &h.action,
                    &h.to,
                    &h.params,
                    h.execute_now,
                    &lib,
                    chaining,
                ),
                (None, Some(last)) if !run.interrupted => {
                    let facts = facts_for(&soul, &state, &last.cognition, &def.name, &moment);
                    machine::step(def, state.clone(), &facts, &lib, chaining)
                }
                // Interrupted before it spoke: the thread stays where it is.
                (None, _) => machine::Step {
                    state: state.clone(),
                    record: None,
                    run_again: false,
                    fell_back_from: None,
                    chain_cut: false,
                },
            };
            log_step(&step, self.config.max_chain);
            state = step.state;
            transitions.extend(step.record);
            if !step.run_again {
                break run;
            }
            chain += 1;
        };
        let model_us = spent.model_us;
        let usage = std::mem::take(&mut spent.usage);
        let model_calls = usage.len() as u32;

        let said = last.speaks
            && last
                .last
                .as_ref()
                .is_some_and(|run| policy.speaks(&run.cognition));
        if let (true, Some(run)) = (said, &last.last) {
            outcome.say(&run.cognition, &policy.said_meta());
        } else if policy.proactive && outcome.entries.is_empty() {
            // A silent quiet-spell turn still leaves its mark, so the spell gets one attempt.
            let result = last
                .last
                .as_ref()
                .and_then(|run| answer(&run.cognition, FOLLOW_UP_QUESTION));
            outcome.entries.push(
                NewEntry::new(EntryType::MentalQuery, FOLLOW_UP_QUESTION)
                    .metadata(json!({ "result": result, "proactive": true })),
            );
        }
        if policy.proactive {
            info!(thread = p.thread(), quiet_minutes = ?begun.quiet_minutes, follow_up = said, "proactive turn");
        }
        let user_model_updated = outcome.user_model.is_some();
        let iterations_done = iterations;
        let Ran { last, speaks, .. } = last;
        let streamed = last
            .as_ref()
            .filter(|_| said)
            .map(|r| r.shown.clone())
            .unwrap_or_default();
        // Interrupted before it spoke: no reply (the newer message's answers both).
        let reply = match &last {
            Some(run) if speaks => run.cognition.reply.clone(),
            _ => String::new(),
        };
        let (user_id, inbox) = match p {
            Perception::Message(m) => (m.user_id.clone(), m.inbox_id.map(|id| (id, reply.clone()))),
            Perception::Quiet(_) => (String::new(), None),
        };
        let record = TurnRecord {
            thread: p.thread().to_string(),
            user_id,
            interaction: if policy.counted {
                ctx.interaction
            } else {
                ctx.interaction.saturating_sub(1)
            },
            entries: std::mem::take(&mut outcome.entries),
            soul_updates: std::mem::take(&mut outcome.soul_updates),
            user_model: outcome.user_model.take(),
            injected_user_model: outcome.injected_user_model,
            whisper_id: ctx
                .whisper
                .as_ref()
                .filter(|_| policy.whisper)
                .map(|w| w.id),
            whisper_claimant: Some(begun.claimant.clone()),
            claude_session: last.as_ref().and_then(|r| r.completion.session.clone()),
            usage,
            inbox,
            process: Some(state.clone()),
            transitions,
            proactive: !policy.counted,
            since_id: Some(ctx.since_id),
        };
        let steps = last
            .iter()
            .flat_map(|r| r.plan.steps.iter().map(|s| s.name()))
            .collect::<Vec<_>>()
            .join(",");
        let outcome_word = match (policy.proactive, said) {
            (false, true) => "completed",
            (false, false) => "interrupted",
            (true, true) => "followed_up",
            (true, false) => "stayed_quiet",
        };
        self.count_turn(
            &state.current,
            outcome_word,
            &record.transitions,
            started,
            model_us,
        );
        let span = tracing::Span::current();
        span.record("process", state.current.as_str());
        span.record("steps", steps.as_str());
        if let Some(run) = &last {
            span.record("model", run.completion.model.as_str());
        }
        span.record("model_calls", model_calls);
        span.record("iterations", iterations_done);
        span.record(
            "input_tokens",
            record.usage.iter().map(|u| u.input_tokens).sum::<u64>(),
        );
        span.record(
            "output_tokens",
            record.usage.iter().map(|u| u.output_tokens).sum::<u64>(),
        );
        span.record("model_ms", model_us / 1000);
        span.record(
            "engine_ms",
            (started.elapsed().as_micros() as u64).saturating_sub(model_us) / 1000,
        );
        span.record("outcome", outcome_word);
        info!("turn done");
        let requested = record
            .transitions
            .last()
            .and_then(|t| t.params.get(REQUEST_STATE))
            .and_then(|v| v.as_str())
            .map(str::to_string);
        let changed_user = self.store.call(move |s| s.commit_turn(&record)).await?;
        if let Some(to) = requested {
            self.request_state(&to, &state.current).await?;
        }
        if changed_user.is_some() {
            // Every version git has not seen yet, this one last (the model is safe in SQLite
            // whatever happens here).
            self.export_pending_models().await?;
        }
        if let (Perception::Message(m), Some(run)) = (p, &last) {
            self.psyche_after(&run.completion.text, m, &lib).await;
        }
        Ok(TurnOutcome {
            reply,
            said,
            thread: p.thread().to_string(),
            process: state.current,
            ran,
            interaction: policy.counted.then_some(ctx.interaction),
            plan: last.as_ref().map(|r| r.plan.clone()).unwrap_or(TurnPlan {
                steps: Vec::new(),
                inject_user_model: false,
                user_model_reason: "no call",
            }),
            cognition: last.map(|r| r.cognition),
            state_changes: outcome.state_changes,
            user_model_updated,
            error: None,
            model_us,
            model_calls,
            iterations: iterations_done,
            streamed,
            machine_log,
        })
    }

    /// The stage where the kinds differ: what is recorded and read before the first run.
    async fn begin(
        &self,
        p: &Perception,
        lib: &crate::process::Loaded,
    ) -> Result<Begun, EngineError> {
        let window = self.config.pipeline.memory_window;
        let claimant = uuid::Uuid::new_v4().simple().to_string();
        match p {
            Perception::Message(m) => {
                let claim_until_ms = now_ms() + self.claim_lease_ms(lib);
                let (pm, who) = (m.clone(), claimant.clone());
                let (message_id, ctx) = self
                    .store
                    .call(move |s| {
                        s.begin_turn(&TurnStart {
                            thread: &pm.thread,
                            user_id: &pm.user_id,
                            display_name: &pm.display_name,
                            text: &pm.text,
                            source: pm.source.as_deref(),
                            inbox: pm.inbox_id,
                            window,
                            claimant: &who,
                            claim_until_ms,
                        })
                    })
                    .await?;
                tracing::debug!(text = %m.text, "message recorded");
                let earlier = ctx.recent.iter().filter(|e| e.id < message_id);
                let idle_minutes = earlier
                    .clone()
                    .next_back()
                    .map_or(0.0, |e| (now_ms() - e.created_at).max(0) as f64 / 60_000.0);
                let history = if self.provider.keeps_sessions() {
                    Vec::new()
                } else {
                    earlier.cloned().collect()
                };
                let state = machine::enter(ctx.process.as_ref(), &self.config.initial_process, lib);
                Ok(Begun {
                    turns: ctx.thread_turns as u64 + 1,
                    history,
                    state,
                    idle_minutes,
                    quiet_minutes: None,
                    claimant,
                    ctx,
                })
            }
            Perception::Quiet(q) => {
                let thread = q.thread.clone();
                let (ctx, last_at) = self
                    .store
                    .call(move |s| {
                        let (user_id, name, last_at) = s.last_speaker(&thread)?;
                        let ctx = s.load_turn(&thread, &user_id, &name, window)?;
                        Ok((ctx, last_at))
                    })
                    .await?;
                let quiet = ((q.now_ms - last_at).max(0) / 60_000) as u64;
                let history = if self.provider.keeps_sessions() {
                    Vec::new()
                } else {
                    ctx.recent.clone()
                };
                let state = machine::enter_proactive(ctx.process.as_ref());
                Ok(Begun {
                    turns: ctx.thread_turns as u64,
                    history,
                    state,
                    idle_minutes: quiet as f64,
                    quiet_minutes: Some(quiet),
                    claimant,
                    ctx,
                })
            }
        }
    }

    /// The model failed: a message gets the short apology and gives back its number and its
    /// whisper (the message stays in working memory); a quiet spell stays silent.
    async fn failed(
        &self,
        p: &Perception,
        begun: &Begun,
        process: String,
        ran: Vec<String>,
        e: LlmError,
        (model_us, model_calls): (u64, u32),
    ) -> Result<TurnOutcome, EngineError> {
        let said = matches!(p, Perception::Message(_));
        if said {
            warn!(provider = self.provider.name(), error = %e, "model call failed; the message stays in working memory");
            let (n, claimant) = (begun.ctx.interaction, begun.claimant.clone());
            let whisper = begun.ctx.whisper.as_ref().map(|w| w.id);
            self.store
                .call(move |s| s.release_turn(n, whisper.map(|id| (id, claimant.as_str()))))
                .await?;
        } else {
            warn!(thread = p.thread(), error = %e, "proactive turn: the model failed; no follow-up for this quiet spell");
            // The attempt is this spell's one: marked, so an outage does not bring a model
            // call for every quiet thread at every scan.
            let record = TurnRecord {
                thread: p.thread().to_string(),
                interaction: begun.ctx.interaction.saturating_sub(1),
                entries: vec![NewEntry::new(EntryType::MentalQuery, FOLLOW_UP_QUESTION)
                    .metadata(json!({ "result": null, "proactive": true, "failed": true }))],
                proactive: true,
                ..TurnRecord::default()
            };
            self.store.call(move |s| s.commit_turn(&record)).await?;
        }
        tracing::Span::current().record("process", process.as_str());
        tracing::Span::current().record("outcome", "model_failed");
        self.count_turn(&process, "model_failed", &[], std::time::Instant::now(), 0);
        Ok(TurnOutcome {
            reply: if said {
                PROVIDER_DOWN_REPLY.to_string()
            } else {
                String::new()
            },
            said,
            thread: p.thread().to_string(),
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
            model_calls,
            iterations: 0,
            streamed: String::new(),
            machine_log: Vec::new(),
        })
    }

    fn plan(&self, def: &crate::process::ProcessDef, ctx: &TurnContext) -> TurnPlan {
        prompt::plan(
            &def.steps,
            &gate_input(ctx),
            Gates {
                soul_state_interval: self.config.pipeline.soul_state_interval,
                user_model_interval: self.config.pipeline.user_model_interval,
            },
        )
    }

    /// Counts a model call: outcome, latency, tokens.
    pub(super) fn count_call(&self, called: &Result<super::model::Run, (LlmError, u64)>) {
        let Some(m) = &self.metrics else { return };
        let provider = self.provider.name();
        match called {
            Ok(run) => {
                let u = &run.completion.usage;
                m.model_call(
                    provider,
                    true,
                    std::time::Duration::from_micros(run.latency_us),
                    [
                        u.input_tokens,
                        u.output_tokens,
                        u.cache_read_tokens,
                        u.cache_creation_tokens,
                    ],
                );
            }
            Err((_, latency_us)) => m.model_call(
                provider,
                false,
                std::time::Duration::from_micros(*latency_us),
                [0; 4],
            ),
        }
    }

    /// Counts a finished turn: by process and outcome, its transitions, its own time.
    fn count_turn(
        &self,
        process: &str,
        outcome: &'static str,
        transitions: &[crate::process::TransitionRecord],
        started: std::time::Instant,
        model_us: u64,
    ) {
        let Some(m) = &self.metrics else { return };
        m.turns
            .get_or_create(&crate::metrics::TurnLabels {
                process: process.to_string(),
                outcome,
            })
            .inc();
        for t in transitions {
            m.transitions
                .get_or_create(&crate::metrics::TransitionLabels {
                    from: t.from.clone(),
                    to: t.to.clone(),
                })
                .inc();
        }
        let own = (started.elapsed().as_micros() as u64).saturating_sub(model_us);
        m.engine_seconds.observe(own as f64 / 1e6);
    }

    /// How long a turn's claim on a whisper lasts: longer than any model call with its
    /// retries can take, so only a turn whose process died loses it this way.
    fn claim_lease_ms(&self, lib: &crate::process::Loaded) -> i64 {
        let llm = &self.config.llm;
        // Every run of an execute_now chain, each with its retries and their waits (a
        // Retry-After is honoured up to a minute); an ISM run makes a selection and its
        // effects' calls per iteration, and a closing one.
        let per_call =
            llm.timeout_secs as i64 * (llm.max_retries as i64 + 1) + llm.max_retries as i64 * 60;
        let ism = &self.config.ism;
        let calls_per_run = lib
            .processes
            .values()
            .filter_map(|d| d.ism.as_ref())
            .filter(|_| ism.enabled)
            .map(|i| i.calls_per_run(ism.max_loops) as i64)
            .max()
            .unwrap_or(1);
        ((self.config.max_chain as i64 + 1) * calls_per_run * per_call + 60) * 1000
    }
}

/// The transition parameter by which a process rule requests a cognitive state (`PLAY` or
/// `WORK`): `params = { request_state = "PLAY" }`.
pub const REQUEST_STATE: &str = "request_state";

/// Whether the template's shutdown reads `pending_professional_referral`.
fn asks_about_referrals(t: &crate::states::Template) -> bool {
    let s = &t.behaviors.shutdown;
    s.mode == crate::states::ShutdownMode::Conditional
        && s.require_consent_when
            .contains(&crate::states::Condition::PendingProfessionalReferral)
}

impl Engine {
    /// A message ends solitude (and a dream yields to it): the soul goes back to WORK, a
    /// legal move from either, taken only if the soul is still there.
    async fn leave_rest(&self, ctx: &mut TurnContext) -> Result<(), EngineError> {
        use crate::states::State;
        let from = State::from_name(&ctx.cognitive_state);
        if !matches!(from, Some(State::Solitude | State::Dream)) {
            return Ok(());
        }
        let moved = self
            .store
            .call(|s| {
                s.move_state(|row| {
                    if !matches!(
                        State::from_name(&row.state),
                        Some(State::Solitude | State::Dream)
                    ) {
                        return Err(row.state.clone());
                    }
                    Ok(crate::memory::NewMove {
                        to: State::Work.name().into(),
                        cause: "a message arrived".into(),
                        detail: serde_json::Value::Null,
                        degraded: false,
                    })
                })
            })
            .await?;
        match moved {
            Ok(m) => {
                info!(from = %m.from, to = %m.to, "cognitive state moved: a message arrived");
                ctx.cognitive_state = m.to;
            }
            Err(now) => ctx.cognitive_state = now,
        }
        Ok(())
    }

    /// A process rule asked for PLAY or WORK: moved if the template allows it from where the
    /// soul is, else said why not (the turn is done either way).
    async fn request_state(&self, to: &str, process: &str) -> Result<(), EngineError> {
        let Some(to) = crate::states::State::from_name(to) else {
            warn!(
                process,
                requested = to,
                "a process rule requests an unknown cognitive state"
            );
            return Ok(());
        };
        let template = self.library.current().template.clone();
        let by = format!("the process rule into {process}");
        let moved = self
            .store
            .call(move |s| Ok(crate::admin::request_state(s, &template, to, &by)))
            .await?;
        match moved {
            Ok(m) => info!(from = %m.from, to = %m.to, cause = %m.cause, "cognitive state moved"),
            Err(crate::admin::RequestError::Store(e)) => return Err(e.into()),
            Err(refused) => info!(reason = %refused, "cognitive state request refused"),
        }
        Ok(())
    }
}

/// Says what the machine did.
fn log_step(step: &machine::Step, max_chain: u32) {
    let Some(r) = &step.record else { return };
    if let Some(missing) = &step.fell_back_from {
        warn!(from = %r.from, to = %missing, "transition names an unknown process; falling back to main");
    }
    info!(from = %r.from, to = %r.to, rule = ?r.rule, execute_now = r.execute_now, "process transition");
    if step.chain_cut {
        warn!(
            max_chain,
            "execute_now chain bound reached (a cycle?); the next message runs the target"
        );
    }
}
