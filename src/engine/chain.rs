//! The run chain of a turn: the thread's process runs (plan → prompt → model → parse →
//! apply → step), and runs again while an execute_now rule hands the message on, up to
//! `[processes] max_chain`. Writes nothing to the store: what the runs decided is carried to
//! the commit.

use tracing::{info, warn};

use super::apply::Outcome;
use super::begin::Begun;
use super::model::{Caller, Streaming};
use super::perception::{Perception, Policy};
use super::prompting::{facts_for, gate_input, will_stand, Moment, RunInput};
use super::run::{Ran, RunState, Spent};
use crate::ism::Iteration;
use crate::llm::LlmError;
use crate::memory::{SoulState, TurnContext};
use crate::process::machine::{self, Chaining};
use crate::process::{Loaded, ProcessDef, ThreadProcess, TransitionRecord};
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

/// What every run of a turn's chain shares, from the perception and its begin.
struct Turn<'a> {
    p: &'a Perception,
    begun: &'a Begun,
    lib: &'a Loaded,
    packet: Option<&'a Packet>,
    /// A message's dossiers: recalled, and the names the dossier steps ask about.
    dossiers: Option<&'a super::dossiers::DossierTurn>,
    policy: Policy,
    moment: Moment<'a>,
    /// The questions the engine adds to the processes' own.
    extra_queries: Vec<&'static str>,
    /// The files shared with the message, as the prompt shows them.
    attachments: Vec<prompt::Attachment<'a>>,
}

/// What the chain's runs have decided so far.
struct Sofar {
    /// The thread's place in the machine.
    state: ThreadProcess,
    /// The soul's state as the runs have left it.
    soul: SoulState,
    outcome: Outcome,
    transitions: Vec<TransitionRecord>,
    ran: Vec<String>,
    spent: Spent,
    iterations: u32,
    machine_log: Vec<Iteration>,
}

impl Caller<'_> {
    /// Runs the thread's process, and the processes execute_now rules hand the message to.
    /// A model that refuses the message's images (`LlmError::ImagesRefused`: nothing was
    /// answered, nothing written) is asked once more without them, the soul told it cannot
    /// see them.
    pub(super) async fn chain(
        &self,
        p: &Perception,
        begun: &Begun,
        lib: &Loaded,
        packet: Option<&Packet>,
        dossiers: Option<&super::dossiers::DossierTurn>,
    ) -> Result<Chained, Failed> {
        let seeing = !self.images.is_empty();
        let chained = self.chain_with(p, begun, lib, packet, dossiers).await;
        match chained {
            Err(f) if seeing && matches!(f.error, LlmError::ImagesRefused { .. }) => {
                warn!(error = %f.error, "the model refused the message's images; asked again, the soul told it cannot see them");
                self.tracer.decision("images", || {
                    "refused by the model: asked again without them".into()
                });
                let blind = Caller {
                    images: &[],
                    ..*self
                };
                blind.chain_with(p, begun, lib, packet, dossiers).await
            }
            other => other,
        }
    }

    /// The chain with the message's images shown, or (none left to show) each named as not
    /// seen.
    async fn chain_with(
        &self,
        p: &Perception,
        begun: &Begun,
        lib: &Loaded,
        packet: Option<&Packet>,
        dossiers: Option<&super::dossiers::DossierTurn>,
    ) -> Result<Chained, Failed> {
        let ctx = &begun.ctx;
        let policy = p.policy();
        // A template whose shutdown asks consent while a referral is pending has the soul
        // say, turn by turn, whether it is referring someone on.
        let mut extra_queries: Vec<&str> = policy.extra_queries.to_vec();
        if !policy.proactive && asks_about_referrals(&lib.template) {
            extra_queries.push(crate::states::shutdown::REFERRAL_QUESTION);
        }
        let turn = Turn {
            p,
            begun,
            lib,
            packet,
            dossiers,
            moment: Moment {
                turns: begun.turns,
                idle_minutes: begun.idle_minutes,
                cognitive_state: &ctx.cognitive_state,
                inner: packet.map(|p| p.words),
            },
            policy,
            extra_queries,
            attachments: begun.shared.sections(!self.images.is_empty()),
        };
        let mut sofar = Sofar {
            state: begun.state.clone(),
            soul: ctx.soul.clone(),
            outcome: Outcome::default(),
            transitions: Vec::new(),
            ran: Vec::new(),
            spent: Spent::default(),
            iterations: 0,
            machine_log: Vec::new(),
        };
        let mut chain = 0;
        let last = loop {
            let def = machine::begin_run(&mut sofar.state, lib);
            sofar.ran.push(def.name.clone());
            let run = match self.run_once(&turn, def, &mut sofar, chain).await {
                Ok(run) => run,
                Err((error, model_us)) => {
                    // The calls that answered before the one that failed, and that one.
                    let calls = sofar.spent.usage.len() as u32 + 1;
                    return Err(Failed {
                        error,
                        model_us,
                        calls,
                        process: sofar.state.current,
                        ran: sofar.ran,
                    });
                }
            };
            sofar.iterations += run.iterations;
            sofar.machine_log.extend(run.log.iter().cloned());
            let chaining = Chaining {
                done: chain,
                max: self.config.max_chain,
                // An interrupted run hands nothing on: the newer message comes next.
                allowed: turn.policy.chains && !run.interrupted,
            };
            let step = step_after(def, &run, &sofar, &turn, chaining);
            log_step(&step, self.config.max_chain);
            trace_step(self.tracer, &step);
            sofar.state = step.state;
            sofar.transitions.extend(step.record);
            if !step.run_again {
                break run;
            }
            chain += 1;
        };
        Ok(Chained {
            last,
            state: sofar.state,
            outcome: sofar.outcome,
            transitions: sofar.transitions,
            ran: sofar.ran,
            spent: sofar.spent,
            iterations: sofar.iterations,
            machine_log: sofar.machine_log,
        })
    }

    /// One run of `def`: its plan, its prompt's inputs, its calls (fixed or ISM), applied to
    /// what the chain decided so far.
    async fn run_once(
        &self,
        turn: &Turn<'_>,
        def: &ProcessDef,
        sofar: &mut Sofar,
        chain: u32,
    ) -> Result<Ran, (LlmError, u64)> {
        let (ctx, policy) = (&turn.begun.ctx, &turn.policy);
        let plan = self.plan(def, ctx, turn.begun.onboard.model_in_view);
        info!(process = %def.name, interaction = ctx.interaction, steps = ?plan.steps, user_model = plan.inject_user_model, why = plan.user_model_reason, "turn planned");
        let why = plan.user_model_reason;
        (self.tracer).plan(&def.name, &plan.steps, plan.inject_user_model, why);
        let (message, newer, speech) = match turn.p {
            Perception::Message(m) => (
                Some((m.display_name.as_str(), m.text.as_str())),
                m.newer.as_ref(),
                m.speech.as_ref(),
            ),
            Perception::Quiet(_) => (None, None, None),
        };
        let Sofar {
            state,
            soul,
            outcome,
            spent,
            ..
        } = sofar;
        let state = &*state;
        // Shown as it is written only when no execute_now rule can hand the message on.
        let soul_now = speech.map(|_| soul.clone());
        let stands = |raw: &str| {
            soul_now.as_ref().is_some_and(|soul| {
                will_stand(def, raw, self.config.pipeline.max_response_chars, |c| {
                    facts_for(soul, state, c, &def.name, &turn.moment)
                })
            })
        };
        let streaming = speech.map(|speech| Streaming {
            speech,
            stands: &stands,
        });
        let rs = RunState {
            input: RunInput {
                lib: turn.lib,
                def,
                state,
                ctx,
                soul: &ctx.soul,
                plan: &plan,
                history: &turn.begun.history,
                extra_queries: &turn.extra_queries,
                whisper: turn.begun.intuition().filter(|_| policy.whisper),
                onboard: turn.begun.onboard.ask,
                message,
                quiet_minutes: turn.begun.quiet_minutes,
                machine: None,
                queries: None,
                psyche: turn.packet,
                attachments: &turn.attachments,
                dossiers: turn.dossiers,
            },
            soul,
            outcome,
            user: (!policy.proactive).then_some(&ctx.user),
            meta: policy.entry_meta(&def.name),
            spent,
            session: ctx.claude_session.as_deref(),
            stream: streaming.as_ref(),
        };
        match def.ism.as_ref().filter(|_| self.config.ism.enabled) {
            Some(ism) => {
                let hand_over_now = policy.chains && chain < self.config.max_chain;
                self.run_machine(ism, rs, newer, hand_over_now).await
            }
            None => self.run_fixed(rs).await,
        }
    }

    /// The gates' plan; `model_in_view` (onboarding someone new) keeps the user model in,
    /// with its update step when the process has one.
    fn plan(&self, def: &ProcessDef, ctx: &TurnContext, model_in_view: bool) -> TurnPlan {
        let mut plan = prompt::plan(
            &def.steps,
            &gate_input(ctx),
            Gates {
                soul_state_interval: self.config.pipeline.soul_state_interval,
                user_model_interval: self.config.pipeline.user_model_interval,
            },
        );
        if model_in_view && !plan.inject_user_model {
            plan = prompt::plan(
                &def.steps,
                &crate::prompt::GateInput {
                    thread_turns: 0,
                    ..gate_input(ctx)
                },
                Gates {
                    soul_state_interval: self.config.pipeline.soul_state_interval,
                    user_model_interval: self.config.pipeline.user_model_interval,
                },
            );
            plan.user_model_reason = "someone new, still without a model (onboarding)";
        }
        plan
    }
}

/// Where the machine takes the thread after a run: the hand-over the soul chose, else the
/// process's rules on what the run decided; an interrupted run that did not speak leaves the
/// thread where it is.
fn step_after(
    def: &ProcessDef,
    run: &Ran,
    sofar: &Sofar,
    turn: &Turn,
    chaining: Chaining,
) -> machine::Step {
    match (&run.handed_over, &run.last) {
        (Some(h), _) => machine::hand_over(
            def,
            &h.action,
            &h.to,
            &h.params,
            h.execute_now,
            turn.lib,
            chaining,
        ),
        (None, Some(last)) if !run.interrupted => {
            let facts = facts_for(
                &sofar.soul,
                &sofar.state,
                &last.cognition,
                &def.name,
                &turn.moment,
            );
            machine::step(def, sofar.state.clone(), &facts, turn.lib, chaining)
        }
        // Interrupted before it spoke: the thread stays where it is.
        (None, _) => machine::Step {
            state: sofar.state.clone(),
            record: None,
            run_again: false,
            fell_back_from: None,
            chain_cut: false,
        },
    }
}

/// Tells the turn's trace where the machine took the thread.
fn trace_step(tracer: &super::tracer::Tracer, step: &machine::Step) {
    let Some(r) = &step.record else { return };
    tracer.decision("process", || {
        let by = match (&r.action, r.rule) {
            (Some(action), _) => format!("the action {action}"),
            (None, Some(rule)) => format!("rule {rule}"),
            (None, None) => "a fallback".to_string(),
        };
        let mut text = format!("{} → {} ({by}", r.from, r.to);
        if r.execute_now {
            text.push_str(", at once");
        }
        if let Some(missing) = &step.fell_back_from {
            text.push_str(&format!("; {missing} does not exist, so main"));
        }
        if step.chain_cut {
            text.push_str("; the execute_now chain's bound was reached");
        }
        text.push(')');
        text
    });
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
