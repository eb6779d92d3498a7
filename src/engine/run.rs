//! One run of a process, fixed or ISM, as the pipeline sees it: the calls it makes, each
//! applied to the turn's `Outcome` as it comes back.
//!
//! A fixed process is one call with its planned steps. An ISM process is the loop the pure
//! core in `crate::ism` keeps: before each iteration a newer message may interrupt it; a
//! selection call (on `[ism] selection_model` when set) names actions; each chosen effect is
//! one call (think: a monologue; query: one question; respond: the answering steps), a tool
//! call (tool: see `tool`), or none (transition, done); what each produced goes into the log
//! the next selection sees. A loop that ends without an answer gets one closing answering
//! call, unless a newer message interrupted it: then that message is answered next, with
//! these thoughts in memory. An answer is said only from its dialogue: a closing answer
//! without one is asked for once more, then the short apology is said.

use serde_json::json;
use tracing::{info, warn};

use super::apply::Outcome;
use super::model::{Caller, Run, Streaming};
use super::prompting::{run_prompt, RunInput};
use super::tracer::Sent;
use crate::ism::{Action, Choice, Effect, Ending, Ism, Iteration, Loop};
use crate::llm::LlmError;
use crate::memory::{Entry, EntryType, NewEntry, SoulState, UsageRecord, UserRecord};
use crate::parse::{parse_selection, MentalQuery, ReplySource, EMPTY_REPLY_APOLOGY};
use crate::prompt::ism::{LoggedIteration, MachineCall, MachineInput};
use crate::prompt::TurnPlan;
use crate::steps::Step;

/// What one process run leaves for the pipeline.
pub(super) struct Ran {
    /// The call that stands for the run: the answer (its reply is everything the run says),
    /// or, for a run that says nothing, its last call (none when it made no call).
    pub last: Option<Run>,
    /// Whether the run has an answer to say (false: interrupted before it spoke, or handed
    /// over to a process that answers at once).
    pub speaks: bool,
    /// A newer message interrupted it: nothing more happens for this one.
    pub interrupted: bool,
    /// A transition action the soul chose.
    pub handed_over: Option<HandOver>,
    /// ISM iterations (0 for a fixed process).
    pub iterations: u32,
    /// The iterations themselves.
    pub log: Vec<Iteration>,
}

/// A hand-over the soul chose: the action, and the transition it names.
pub(super) struct HandOver {
    pub action: String,
    pub to: String,
    pub params: serde_json::Map<String, serde_json::Value>,
    pub execute_now: bool,
}

/// What a turn's calls cost, summed over its runs.
#[derive(Default)]
pub(super) struct Spent {
    pub usage: Vec<UsageRecord>,
    pub model_us: u64,
}

/// What every call of a run shares, and what the calls write to.
pub(super) struct RunState<'a, 'b> {
    pub input: RunInput<'a>,
    pub soul: &'b mut SoulState,
    pub outcome: &'b mut Outcome,
    pub user: Option<&'a UserRecord>,
    pub meta: serde_json::Value,
    pub spent: &'b mut Spent,
    pub session: Option<&'a str>,
    /// The run's answer may be shown as it is written (a fixed run's call; an ISM's final
    /// respond or closing answer, never a thought or a selection).
    pub stream: Option<&'a Streaming<'a>>,
}

impl Caller<'_> {
    /// A fixed process: one call with the planned steps.
    pub(super) async fn run_fixed(&self, rs: RunState<'_, '_>) -> Result<Ran, (LlmError, u64)> {
        let plan = rs.input.plan.clone();
        let stream = rs.stream;
        let run = self
            .call_applied(rs, plan, None, None, None, stream)
            .await?;
        Ok(Ran {
            last: Some(run),
            speaks: true,
            interrupted: false,
            handed_over: None,
            iterations: 0,
            log: Vec::new(),
        })
    }

    /// An ISM process: the loop, then the closing answer if it ended without one.
    pub(super) async fn run_machine(
        &self,
        ism: &Ism,
        mut rs: RunState<'_, '_>,
        newer: Option<&super::Newer>,
        hand_over_now: bool,
    ) -> Result<Ran, (LlmError, u64)> {
        let mut lp = Loop::new(ism, self.config.ism.max_loops);
        let actions: Vec<(&str, &str)> = ism
            .actions
            .iter()
            .map(|a| (a.name.as_str(), a.description.as_str()))
            .collect();
        let tool_schemas = self.tool_schemas(ism).await;
        let tool_schemas: Vec<(&str, &str)> =
            tool_schemas.iter().map(|(a, s)| (*a, s.as_str())).collect();
        let carried = interrupted_iterations(&rs.input.ctx.recent);
        let carried: Vec<LoggedIteration> = carried.iter().map(logged).collect();
        let frame = Frame {
            ism,
            actions: &actions,
            tools: &tool_schemas,
            carried: &carried,
        };
        let mut got = Gathered::default();
        let ending = self
            .iterate(&frame, &mut lp, &mut rs, &mut got, newer)
            .await?;
        let interrupted = ending == Ending::Interrupted;
        // A hand-over at once: the process handed to answers.
        let answered_next =
            hand_over_now && got.handed_over.as_ref().is_some_and(|h| h.execute_now);
        if got.said.is_empty() && !interrupted && !answered_next {
            // Every message gets its answer: the loop ended without one.
            let run = self.close(&frame, &lp, &mut rs).await?;
            got.said.push(run.cognition.reply.clone());
            got.answer = Some(run);
        }
        record_iterations(&lp, &mut got.recorded, &mut rs, Some(&ending));
        info!(process = %rs.input.def.name, iterations = lp.iterations(), ending = ending.word(), why = %ending, spoke = !got.said.is_empty(), "ism loop ended");
        if let Some(m) = &self.metrics {
            m.ism_loop(ending.word(), lp.iterations());
        }
        Ok(got.ran(&lp, interrupted))
    }

    /// The loop's iterations: before each, a newer message may interrupt it; a selection
    /// call names actions, each carried out (`act`) and its account logged. How it ended.
    async fn iterate(
        &self,
        frame: &Frame<'_>,
        lp: &mut Loop<'_>,
        rs: &mut RunState<'_, '_>,
        got: &mut Gathered,
        newer: Option<&super::Newer>,
    ) -> Result<Ending, (LlmError, u64)> {
        let selection_model =
            Some(self.config.ism.selection_model.as_str()).filter(|m| !m.is_empty());
        loop {
            record_iterations(lp, &mut got.recorded, rs, None);
            let arrived = newer.is_some_and(|n| n.arrived());
            if let Some(end) = lp.before_iteration(arrived) {
                return Ok(end);
            }
            let select = TurnPlan {
                steps: Vec::new(),
                ..rs.input.plan.clone()
            };
            let machine = (frame, &*lp, MachineCall::Select);
            let run = self
                .call_applied_with(rs, select, Some(machine), None, selection_model, None)
                .await?;
            let choice = parse_selection(&run.completion.text).map(|s| Choice {
                actions: s.actions,
                reasoning: s.reasoning,
                arguments: s.arguments,
            });
            let given = choice.clone().unwrap_or_default();
            (self.tracer).decision("selection", || match &choice {
                Some(c) => format!("{} ({})", c.actions.join(", "), c.reasoning.trim()),
                None => "no selection could be read from the answer".into(),
            });
            got.last = Some(run);
            let decision = lp.choose(choice);
            if let Some(it) = lp.log().last() {
                for name in &it.unknown {
                    warn!(process = %rs.input.def.name, action = %name, "the soul chose an action there is not; skipped");
                }
            }
            if let Some(end) = decision.ending {
                return Ok(end);
            }
            for action in decision.run {
                let account = self.act(frame, lp, rs, got, action, &given).await?;
                if let Some(end) = lp.produced(action, &account) {
                    return Ok(end);
                }
            }
        }
    }

    /// Carries out one chosen action: a call (think, query, respond), a tool call, a
    /// hand-over or nothing. What the log says it produced.
    async fn act(
        &self,
        frame: &Frame<'_>,
        lp: &mut Loop<'_>,
        rs: &mut RunState<'_, '_>,
        got: &mut Gathered,
        action: &Action,
        given: &Choice,
    ) -> Result<String, (LlmError, u64)> {
        let m = (frame, &*lp, MachineCall::Act(&action.name));
        Ok(match &action.effect {
            Effect::Think => {
                let plan = step_plan(rs, &[Step::InternalMonologue]);
                let run = self
                    .call_applied_with(rs, plan, Some(m), None, None, None)
                    .await?;
                let thought = run.cognition.monologue.as_ref().map(|m| m.text.clone());
                got.last = Some(run);
                thought.unwrap_or_default()
            }
            Effect::Query { question } => {
                let plan = step_plan(rs, &[Step::MentalQuery]);
                let questions = [question.clone()];
                let run = self
                    .call_applied_with(rs, plan, Some(m), Some(&questions), None, None)
                    .await?;
                let answer = super::perception::answer(&run.cognition, question);
                got.asked.push(MentalQuery {
                    question: question.clone(),
                    answer,
                });
                got.last = Some(run);
                format!(
                    "{question} {}",
                    answer.map_or("(no answer)", |a| if a { "true" } else { "false" })
                )
            }
            Effect::Respond { keep_going } => {
                let plan = rs.input.plan.clone();
                // Only the answer that ends the loop is streamed.
                let stream = rs.stream.filter(|_| !keep_going && got.said.is_empty());
                let run = self
                    .call_applied_with(rs, plan, Some(m), None, None, stream)
                    .await?;
                if has_dialogue(&run) {
                    let reply = run.cognition.reply.clone();
                    got.said.push(reply.clone());
                    got.answer = Some(run);
                    reply
                } else {
                    warn!(process = %rs.input.def.name, action = %action.name, "the answer has no dialogue; nothing of it is said");
                    got.last = Some(run);
                    SAID_NOTHING.to_string()
                }
            }
            Effect::Transition {
                to,
                params,
                execute_now,
            } => {
                got.handed_over = Some(HandOver {
                    action: action.name.clone(),
                    to: to.clone(),
                    params: params.clone(),
                    execute_now: *execute_now,
                });
                format!("handed over to {to}")
            }
            Effect::Done => String::new(),
            Effect::Tool { server, tool } => {
                let arguments = given.arguments_for(&action.name);
                let (call, account) = self.call_tool(&action.name, server, tool, arguments).await;
                (self.tracer).decision("tool", || {
                    let (tool, outcome, ms) = (&call.tool, &call.outcome, call.ms);
                    let size = account.chars().count();
                    format!(
                        "{tool} {}: {outcome} in {ms} ms, {size} characters back",
                        call.arguments
                    )
                });
                lp.called(call);
                account
            }
        })
    }

    /// The closing answer of a loop that ended without one. Only a dialogue is said: an
    /// answer without one (a confused model's selection block, its reasoning and all) is
    /// asked for once more, then the short apology stands in.
    async fn close(
        &self,
        frame: &Frame<'_>,
        lp: &Loop<'_>,
        rs: &mut RunState<'_, '_>,
    ) -> Result<Run, (LlmError, u64)> {
        let mut attempt = 1;
        loop {
            let plan = rs.input.plan.clone();
            let m = (frame, lp, MachineCall::Close);
            let stream = rs.stream;
            let mut run = self
                .call_applied_with(rs, plan, Some(m), None, None, stream)
                .await?;
            if has_dialogue(&run) {
                return Ok(run);
            }
            if attempt == CLOSING_ATTEMPTS {
                warn!(process = %rs.input.def.name, attempts = attempt, "the closing answer has no dialogue; the short apology is said");
                run.cognition.reply = EMPTY_REPLY_APOLOGY.to_string();
                run.cognition.reply_source = ReplySource::Apology;
                return Ok(run);
            }
            warn!(process = %rs.input.def.name, "the closing answer has no dialogue; asking once more");
            attempt += 1;
        }
    }

    async fn call_applied(
        &self,
        mut rs: RunState<'_, '_>,
        plan: TurnPlan,
        machine: Option<(&Frame<'_>, &Loop<'_>, MachineCall<'_>)>,
        queries: Option<&[String]>,
        model: Option<&str>,
        stream: Option<&Streaming<'_>>,
    ) -> Result<Run, (LlmError, u64)> {
        self.call_applied_with(&mut rs, plan, machine, queries, model, stream)
            .await
    }

    /// One call: its prompt, the model, the answer applied to the turn's outcome (only the
    /// steps `plan` asked for), its cost counted.
    async fn call_applied_with(
        &self,
        rs: &mut RunState<'_, '_>,
        plan: TurnPlan,
        machine: Option<(&Frame<'_>, &Loop<'_>, MachineCall<'_>)>,
        queries: Option<&[String]>,
        model: Option<&str>,
        stream: Option<&Streaming<'_>>,
    ) -> Result<Run, (LlmError, u64)> {
        let built = {
            let log: Vec<LoggedIteration> = machine
                .map(|(_, lp, _)| lp.log().iter().map(logged).collect())
                .unwrap_or_default();
            let input = RunInput {
                soul: &*rs.soul,
                plan: &plan,
                machine: machine.map(|(frame, lp, call)| frame.input(lp, &log, call)),
                queries,
                ..rs.input
            };
            let form = self.provider.structured();
            let reply_chars = self.config.pipeline.max_response_chars;
            let (built, shape) = run_prompt(&input, form.map(|_| reply_chars));
            let constraint = form.zip(shape).map(|(f, s)| self.constraint(s, f));
            (built, constraint)
        };
        let (built, constraint) = built;
        let purpose = purpose(machine.map(|(_, _, call)| call));
        self.tracer.sent(&purpose, Sent::Built(&built));
        let called = self
            .call(&built, rs.session, plan, model, stream, constraint.as_ref())
            .await;
        self.count_call(&called);
        let answered = match &called {
            Ok(run) => Ok((&run.completion, run.latency_us)),
            Err((e, us)) => Err((e, *us)),
        };
        let asked = model.unwrap_or(self.provider.model());
        (self.tracer).answered(&purpose, Sent::Built(&built), asked, answered);
        self.tracer.images(self.images);
        let run = called.map_err(|(e, us)| (e, rs.spent.model_us + us))?;
        if !matches!(machine, Some((_, _, MachineCall::Select))) {
            self.tracer.cognition(&run.cognition);
        }
        rs.spent.model_us += run.latency_us;
        rs.spent.usage.push(self.usage_record(&run));
        rs.outcome
            .apply(&run.plan, &run.cognition, rs.user, rs.soul, &rs.meta);
        Ok(run)
    }
}

/// What an ISM loop gathered as it ran: its answers and the calls that stand for it.
#[derive(Default)]
struct Gathered {
    /// The replies said, in order.
    said: Vec<String>,
    /// The last answering call.
    answer: Option<Run>,
    /// The last call of any kind.
    last: Option<Run>,
    /// The questions the loop's query actions asked, with their answers.
    asked: Vec<MentalQuery>,
    handed_over: Option<HandOver>,
    /// Iterations already in the turn's entries.
    recorded: usize,
}

impl Gathered {
    /// What the loop leaves for the pipeline: the answer, with everything said and every
    /// question asked, stands for it; without one, its last call.
    fn ran(self, lp: &Loop, interrupted: bool) -> Ran {
        let speaks = !self.said.is_empty();
        let mut asked = self.asked;
        let last = match self.answer {
            Some(mut run) => {
                run.cognition.reply = self.said.join("\n\n");
                // The rules after the run read every answer the loop got.
                asked.append(&mut run.cognition.mental_queries);
                run.cognition.mental_queries = asked;
                Some(run)
            }
            None => self.last,
        };
        Ran {
            last,
            speaks,
            interrupted,
            handed_over: self.handed_over.filter(|_| !interrupted),
            iterations: lp.iterations(),
            log: lp.log().to_vec(),
        }
    }
}

/// What a call is for, as its trace names it.
fn purpose(call: Option<MachineCall>) -> String {
    match call {
        None => "turn".into(),
        Some(MachineCall::Select) => "selection".into(),
        Some(MachineCall::Act(action)) => format!("effect: {action}"),
        Some(MachineCall::Close) => "closing".into(),
    }
}

/// How many closing answers a loop asks for before the apology stands in for a dialogue.
const CLOSING_ATTEMPTS: u32 = 2;

/// What the log says an answering action produced when its answer had no dialogue.
const SAID_NOTHING: &str = "(said nothing: the answer had no dialogue)";

/// Whether an answering call said something: an ISM's reply comes only from a dialogue,
/// never from the text around the tags (which, from a confused model, may be a selection
/// block with its reasoning).
fn has_dialogue(run: &Run) -> bool {
    run.cognition.reply_source == ReplySource::Dialogue
}

/// The loop's constant part of every call's `<implicit_machine>` section.
struct Frame<'a> {
    ism: &'a Ism,
    actions: &'a [(&'a str, &'a str)],
    /// (action, its arguments' schema, compact) of each tool action.
    tools: &'a [(&'a str, &'a str)],
    carried: &'a [LoggedIteration<'a>],
}

impl Frame<'_> {
    fn input<'l>(
        &'l self,
        lp: &Loop,
        log: &'l [LoggedIteration<'l>],
        call: MachineCall<'l>,
    ) -> MachineInput<'l> {
        MachineInput {
            goal: &self.ism.goal,
            playbook: &self.ism.playbook,
            actions: self.actions,
            tools: self.tools,
            log,
            carried: self.carried,
            // A selection opens the next iteration; an action belongs to the current one.
            iteration: (lp.iterations() + u32::from(call == MachineCall::Select)).max(1),
            max_loops: lp.max_loops(),
            call,
        }
    }
}

/// The iterations of a loop that a newer message interrupted: those recorded since the
/// soul last spoke in the thread (what it was doing when this message came).
fn interrupted_iterations(recent: &[Entry]) -> Vec<Iteration> {
    let since = recent
        .iter()
        .rposition(|e| e.entry_type == EntryType::ExternalDialog)
        .map_or(0, |i| i + 1);
    recent[since..]
        .iter()
        .filter(|e| e.entry_type == EntryType::ActionSelection)
        .map(|e| Iteration::from_record(&e.content, &e.metadata))
        .collect()
}

/// An iteration as the prompt takes it.
fn logged(it: &Iteration) -> LoggedIteration<'_> {
    LoggedIteration {
        number: it.number,
        chosen: &it.chosen,
        unknown: &it.unknown,
        reasoning: &it.reasoning,
        produced: &it.produced,
    }
}

/// A plan for one effect's call: only `steps` (the user-model and soul-state gates do not
/// apply to thinking or asking).
fn step_plan(rs: &RunState, steps: &[Step]) -> TurnPlan {
    TurnPlan {
        steps: steps.to_vec(),
        inject_user_model: rs.input.plan.inject_user_model,
        user_model_reason: rs.input.plan.user_model_reason,
    }
}

/// Adds the iterations not yet in the turn's entries (with the loop's ending on the last).
fn record_iterations(lp: &Loop, recorded: &mut usize, rs: &mut RunState, ending: Option<&Ending>) {
    let log = lp.log();
    while *recorded < log.len() {
        let it = &log[*recorded];
        *recorded += 1;
        let mut meta = it.record();
        if let (Some(obj), Some(extra)) = (meta.as_object_mut(), rs.meta.as_object()) {
            obj.extend(extra.clone());
        }
        rs.outcome
            .entries
            .push(NewEntry::new(EntryType::ActionSelection, &it.reasoning).metadata(meta));
    }
    // The ending goes on this loop's last iteration; a loop stopped before its first has
    // none (an earlier loop's entry in the same turn keeps its own ending).
    if let Some(end) = ending.filter(|_| *recorded > 0) {
        if let Some(entry) = rs
            .outcome
            .entries
            .iter_mut()
            .rev()
            .find(|e| e.entry_type == EntryType::ActionSelection)
        {
            entry.metadata["ending"] = json!(end.word());
        }
    }
}
