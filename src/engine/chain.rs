//! The run chain of a turn: the thread's process runs (plan → prompt → model → parse →
//! apply → step), and runs again while an execute_now rule hands the message on, up to
//! `[processes] max_chain`. Writes nothing to the store: what the runs decided is carried to
//! the commit.

use tracing::{info, warn};

use super::apply::Outcome;
use super::begin::Begun;
use super::model::{Caller, Streaming};
use super::perception::Perception;
use super::prompting::{facts_for, gate_input, will_stand, Moment, RunInput};
use super::run::{Ran, RunState, Spent};
use crate::ism::Iteration;
use crate::llm::LlmError;
use crate::memory::TurnContext;
use crate::process::machine::{self, Chaining};
use crate::process::{Loaded, ThreadProcess, TransitionRecord};
use crate::prompt::{self, Gates, TurnPlan};
use crate::psyche::Packet;

/// What the chain of runs decided, for the commit.
pub(super) struct Chained {
    /// The run that ends the chain.
    pub last: Ran,
    /// The thread's place in the machine after it.
    pub state: ThreadProcess,
    pub outcome: Outcome,
    pub transitions: Vec<TransitionRecord>,
    /// The processes that ran, in order.
    pub ran: Vec<String>,
    pub spent: Spent,
    pub iterations: u32,
    pub machine_log: Vec<Iteration>,
}

/// A model call failed mid-chain.
pub(super) struct Failed {
    pub error: LlmError,
    pub model_us: u64,
    /// The calls that answered before the one that failed, and that one.
    pub calls: u32,
    /// The process the thread was in when it failed.
    pub process: String,
    pub ran: Vec<String>,
}

impl Caller<'_> {
    /// Runs the thread's process, and the processes execute_now rules hand the message to.
    pub(super) async fn chain(
        &self,
        p: &Perception,
        begun: &Begun,
        lib: &Loaded,
        packet: Option<&Packet>,
    ) -> Result<Chained, Failed> {
        let ctx = &begun.ctx;
        let policy = p.policy();
        let moment = Moment {
            turns: begun.turns,
            idle_minutes: begun.idle_minutes,
            cognitive_state: &ctx.cognitive_state,
            inner: packet.map(|p| p.words),
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
            let def = machine::begin_run(&mut state, lib);
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
                    lib,
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
                    psyche: packet,
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
                    return Err(Failed {
                        error: e,
                        model_us,
                        calls,
                        process: state.current,
                        ran,
                    });
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
                    lib,
                    chaining,
                ),
                (None, Some(last)) if !run.interrupted => {
                    let facts = facts_for(&soul, &state, &last.cognition, &def.name, &moment);
                    machine::step(def, state.clone(), &facts, lib, chaining)
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
        Ok(Chained {
            last,
            state,
            outcome,
            transitions,
            ran,
            spent,
            iterations,
            machine_log,
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
}

/// Whether the template's shutdown reads `pending_professional_referral`.
fn asks_about_referrals(t: &crate::states::Template) -> bool {
    let s = &t.behaviors.shutdown;
    s.mode == crate::states::ShutdownMode::Conditional
        && s.require_consent_when
            .contains(&crate::states::Condition::PendingProfessionalReferral)
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
