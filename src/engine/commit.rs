//! The end of a turn: what the runs decided becomes one `TurnRecord`, committed in one
//! transaction (the entries, the soul's state, the user model, the whisper, the inbox row's
//! reply, the process and its transitions, the usage); then, outside it, a requested
//! cognitive state, the git export of changed user models and the psyche's after-thought.
//! A failed model call ends a turn here too.

use std::time::Instant;

use serde_json::json;
use tracing::{info, warn};

use super::apply::Outcome;
use super::begin::Begun;
use super::chain::{Chained, Failed};
use super::model::Run;
use super::perception::{answer, Perception, Policy, FOLLOW_UP_QUESTION};
use super::run::Ran;
use super::tracer::{Columns, Tracer};
use super::{Engine, EngineError, TurnOutcome, PROVIDER_DOWN_REPLY};
use crate::memory::faces::Turns;
use crate::memory::{EntryType, NewEntry, StoreError, TurnRecord, UserRecord};
use crate::process::{Loaded, TransitionRecord};
use crate::prompt::TurnPlan;

/// What a turn settled into before anything is written.
struct Settled {
    /// What the commit writes, in one transaction.
    record: TurnRecord,
    /// What a message turn's begin took (its number and its whisper's claim), given back if
    /// the commit is refused.
    taken: Option<(u64, Option<(i64, String)>)>,
    /// The cognitive state a process rule requested.
    requested: Option<String>,
    /// What the turn did, but its cognition (that of `last`).
    outcome: TurnOutcome,
    /// The call that stands for the turn.
    last: Option<Run>,
    /// How the turn ended, in a word (`completed`, `interrupted`, `followed_up`,
    /// `stayed_quiet`).
    word: &'static str,
}

/// What the chain decided, as the turn's record and outcome: what is said (and, for a quiet
/// spell that says nothing, the mark of its one attempt), the interaction it counts as, the
/// whisper it used, the state a rule requested. Pure: nothing is written or counted.
fn settle(p: &Perception, begun: &Begun, chained: Chained) -> Settled {
    let policy = p.policy();
    let ctx = &begun.ctx;
    let Chained {
        last,
        state,
        mut outcome,
        transitions,
        ran,
        spent,
        iterations,
        machine_log,
    } = chained;
    let said = say(p, &policy, begun, &last, &mut outcome);
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
    let (user_id, inbox, claim) = match p {
        Perception::Message(m) => (
            m.user_id.clone(),
            m.inbox_id.map(|id| (id, reply.clone())),
            m.claim,
        ),
        Perception::Quiet(q) => (String::new(), None, q.claim),
    };
    let model_calls = spent.usage.len() as u32;
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
        usage: spent.usage,
        inbox,
        process: Some(state.clone()),
        transitions,
        proactive: !policy.counted,
        since_id: Some(ctx.since_id),
        claim,
    };
    let word = outcome_word(policy.proactive, said);
    let requested = requested_state(&record.transitions);
    let taken = policy.counted.then(|| {
        let whisper = ctx.whisper.as_ref().map(|w| (w.id, begun.claimant.clone()));
        (ctx.interaction, whisper)
    });
    let outcome = TurnOutcome {
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
        cognition: None,
        state_changes: outcome.state_changes,
        user_model_updated: record.user_model.is_some(),
        error: None,
        model_us: spent.model_us,
        model_calls,
        iterations,
        streamed,
        machine_log,
    };
    Settled {
        record,
        taken,
        requested,
        outcome,
        last,
        word,
    }
}

/// Whether the turn says its answer (recorded in `outcome` if so); a quiet spell that says
/// nothing still leaves its mark, so the spell gets one attempt.
fn say(p: &Perception, policy: &Policy, begun: &Begun, last: &Ran, outcome: &mut Outcome) -> bool {
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
    said
}

/// How a turn ended, in a word.
fn outcome_word(proactive: bool, said: bool) -> &'static str {
    match (proactive, said) {
        (false, true) => "completed",
        (false, false) => "interrupted",
        (true, true) => "followed_up",
        (true, false) => "stayed_quiet",
    }
}

/// The cognitive state the turn's last transition requests (`request_state`), if any.
fn requested_state(transitions: &[TransitionRecord]) -> Option<String> {
    transitions
        .last()
        .and_then(|t| t.params.get(REQUEST_STATE))
        .and_then(|v| v.as_str())
        .map(str::to_string)
}

/// Records what the turn did into its span, and says it is done.
fn trace_turn(
    record: &TurnRecord,
    outcome: &TurnOutcome,
    last: Option<&Run>,
    word: &str,
    started: Instant,
) {
    let steps = last
        .iter()
        .flat_map(|r| r.plan.steps.iter().map(|s| s.name()))
        .collect::<Vec<_>>()
        .join(",");
    let span = tracing::Span::current();
    span.record("process", outcome.process.as_str());
    span.record("steps", steps.as_str());
    if let Some(run) = last {
        span.record("model", run.completion.model.as_str());
    }
    span.record("model_calls", outcome.model_calls);
    span.record("iterations", outcome.iterations);
    span.record(
        "input_tokens",
        record.usage.iter().map(|u| u.input_tokens).sum::<u64>(),
    );
    span.record(
        "output_tokens",
        record.usage.iter().map(|u| u.output_tokens).sum::<u64>(),
    );
    let model_us = outcome.model_us;
    span.record("model_ms", model_us / 1000);
    span.record(
        "engine_ms",
        (started.elapsed().as_micros() as u64).saturating_sub(model_us) / 1000,
    );
    span.record("outcome", word);
    info!("turn done");
}

/// Tells the trace what the committed turn wrote and what it says.
fn trace_written(tracer: &Tracer, begun: &Begun, outcome: &TurnOutcome) {
    if outcome.user_model_updated {
        let user = &begun.ctx.user;
        let version = user.model_version + 1;
        tracer.memory("user_model", || {
            format!(
                "{} ({}): version {version}",
                user.display_name, user.user_id
            )
        });
    }
    for c in &outcome.state_changes {
        tracer.memory("soul_state", || format!("{}: {} → {}", c.key, c.from, c.to));
    }
    if outcome.said {
        tracer.response(&outcome.reply);
    }
}

/// The columns a turn's trace is found by: who spoke, the inbox row answered, where the
/// thread stands, what was said; the processes that ran and, if it moved on after them, where
/// it stands.
fn columns(p: &Perception, outcome: &TurnOutcome) -> Columns {
    let (person, inbox) = match p {
        Perception::Message(m) => (Some(m.user_id.clone()), m.inbox_id),
        Perception::Quiet(_) => (None, None),
    };
    let mut processes = outcome.ran.clone();
    if processes.last() != Some(&outcome.process) {
        processes.push(outcome.process.clone());
    }
    Columns {
        person,
        inbox,
        process: outcome.process.clone(),
        reply: outcome.said.then(|| outcome.reply.clone()),
        processes,
    }
}

/// Writes the turn in one transaction: the user whose model changed, if any. When another
/// daemon holds the conversation now nothing of the turn is written, and what its begin
/// took goes back (the number, if no turn began since; the whisper at once, not when its
/// claim lapses).
async fn write(
    turns: &dyn Turns,
    record: TurnRecord,
    taken: Option<(u64, Option<(i64, String)>)>,
) -> Result<Option<UserRecord>, EngineError> {
    match turns.commit_turn(record).await {
        Err(e @ StoreError::Fenced { .. }) => {
            if let Some((n, whisper)) = taken {
                if let Err(release) = turns.release_turn(n, whisper).await {
                    warn!(error = %release, "a refused turn's number and whisper were not given back");
                }
            }
            Err(e.into())
        }
        other => Ok(other?),
    }
}

/// The transition parameter by which a process rule requests a cognitive state (`PLAY` or
/// `WORK`): `params = { request_state = "PLAY" }`.
pub const REQUEST_STATE: &str = "request_state";

impl Engine {
    /// Commits what the chain decided and says what the turn did: the turn settled into its
    /// record (`settle`, pure), counted and traced, written (`write`, through the turns face
    /// only), then what follows a commit outside its transaction.
    pub(super) async fn commit(
        &self,
        p: &Perception,
        begun: &Begun,
        lib: &Loaded,
        chained: Chained,
        started: Instant,
        tracer: Tracer<'_>,
    ) -> Result<TurnOutcome, EngineError> {
        let Settled {
            record,
            taken,
            requested,
            outcome,
            last,
            word,
        } = settle(p, begun, chained);
        self.count_turn(
            &outcome.process,
            word,
            &record.transitions,
            started,
            outcome.model_us,
        );
        trace_turn(&record, &outcome, last.as_ref(), word, started);
        let changed_user = match write(self.store.as_ref(), record, taken).await {
            Ok(changed) => changed,
            Err(e) => {
                tracer.error(|| format!("the turn was not committed: {e}"));
                self.keep_trace(tracer.finish(columns(p, &outcome))).await;
                return Err(e);
            }
        };
        trace_written(&tracer, begun, &outcome);
        if let Some(to) = requested {
            self.request_state(&to, &outcome.process, &tracer).await?;
        }
        if changed_user.is_some() {
            // Every version git has not seen yet, this one last (the model is safe in SQLite
            // whatever happens here).
            self.export_pending_models().await?;
        }
        if let (Perception::Message(m), Some(run)) = (p, &last) {
            let store = self.store.as_ref();
            super::psyche::psyche_after(store, &run.completion.text, m, lib, &tracer).await;
        }
        self.keep_trace(tracer.finish(columns(p, &outcome))).await;
        Ok(TurnOutcome {
            cognition: last.map(|r| r.cognition),
            ..outcome
        })
    }

    /// The model failed: a message gets the short apology and gives back its number and its
    /// whisper (the message stays in working memory); a quiet spell stays silent.
    pub(super) async fn failed(
        &self,
        p: &Perception,
        begun: &Begun,
        failed: Failed,
        tracer: Tracer<'_>,
    ) -> Result<TurnOutcome, EngineError> {
        let Failed {
            error: e,
            model_us,
            calls: model_calls,
            process,
            ran,
        } = failed;
        let said = matches!(p, Perception::Message(_));
        let turns: &dyn Turns = self.store.as_ref();
        if said {
            warn!(provider = self.provider.name(), error = %e, "model call failed; the message stays in working memory");
            let (n, claimant) = (begun.ctx.interaction, begun.claimant.clone());
            let whisper = begun.ctx.whisper.as_ref().map(|w| w.id);
            turns
                .release_turn(n, whisper.map(|id| (id, claimant)))
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
            turns.commit_turn(record).await?;
        }
        tracing::Span::current().record("process", process.as_str());
        tracing::Span::current().record("outcome", "model_failed");
        self.count_turn(&process, "model_failed", &[], std::time::Instant::now(), 0);
        let outcome = TurnOutcome {
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
        };
        if outcome.said {
            tracer.response(&outcome.reply);
        }
        self.keep_trace(tracer.finish(columns(p, &outcome))).await;
        Ok(outcome)
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

    /// A process rule asked for PLAY or WORK: moved if the template allows it from where the
    /// soul is, else said why not (the turn is done either way).
    async fn request_state(
        &self,
        to: &str,
        process: &str,
        tracer: &Tracer<'_>,
    ) -> Result<(), EngineError> {
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
        let moved = crate::admin::request_state(self.store.as_ref(), &template, to, &by).await;
        match moved {
            Ok(m) => {
                info!(from = %m.from, to = %m.to, cause = %m.cause, "cognitive state moved");
                tracer.decision("state", || format!("{} → {} ({})", m.from, m.to, m.cause));
            }
            Err(crate::admin::RequestError::Store(e)) => return Err(e.into()),
            Err(refused) => {
                info!(reason = %refused, "cognitive state request refused");
                tracer.decision("state", || format!("{to} refused: {refused}"));
            }
        }
        Ok(())
    }
}
