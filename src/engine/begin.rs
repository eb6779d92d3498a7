//! The start of a turn, where the kinds of perception differ: a message is recorded, takes
//! its number and claims a whisper in one transaction, and ends the soul's rest; a quiet
//! spell reads the conversation as it stands. Either way the thread's history and its place
//! in the process machine are read.

use tracing::info;

use super::perception::Perception;
use super::shared::Shared;
use super::tracer::Tracer;
use super::EngineError;
use crate::config::Config;
use crate::memory::faces::{States, Turns};
use crate::memory::{now_ms, Entry, TurnContext, TurnStart};
use crate::process::machine;
use crate::process::{Loaded, ThreadProcess};

/// What the pipeline starts from, whatever the perception.
pub(super) struct Begun {
    pub ctx: TurnContext,
    /// The conversation as the model sees it before this perception.
    pub history: Vec<Entry>,
    /// The thread's place in the process machine as this perception enters it.
    pub state: ThreadProcess,
    /// The thread's turns for the rules (`turns`), this one included when it counts.
    pub turns: u64,
    pub idle_minutes: f64,
    /// A perception without a message: the minutes of quiet the prompt mentions.
    pub quiet_minutes: Option<u64>,
    /// Names this turn's claim on a whisper.
    pub claimant: String,
    /// The message's entry in working memory (none for a quiet spell).
    pub message: Option<i64>,
    /// What the message's shared files gave the turn (none for a quiet spell).
    pub shared: Shared,
    /// A daimon's whisper for this turn (when it claimed none of its own).
    pub heard: Option<crate::daimon::Heard>,
    /// What onboarding asks of this turn.
    pub onboard: crate::states::onboarding::Onboard,
}

/// The stage where the kinds differ: what is recorded and read before the first run, through
/// the turns face only. `keeps_sessions`: the provider keeps the conversation itself (the
/// prompt carries no history).
pub(super) async fn begin(
    turns: &dyn Turns,
    config: &Config,
    keeps_sessions: bool,
    p: &Perception,
    lib: &Loaded,
    shared: Shared,
) -> Result<Begun, EngineError> {
    let window = config.pipeline.memory_window;
    let claimant = uuid::Uuid::new_v4().simple().to_string();
    match p {
        Perception::Message(m) => {
            let claim_until_ms = now_ms() + claim_lease_ms(config, lib);
            let (message_id, ctx) = turns
                .begin_turn(TurnStart {
                    thread: m.thread.clone(),
                    user_id: m.user_id.clone(),
                    display_name: m.display_name.clone(),
                    text: shared.remembered(&m.text),
                    source: m.source.clone(),
                    inbox: m.inbox_id,
                    window,
                    claimant: claimant.clone(),
                    claim_until_ms,
                    conversation_claim: m.claim,
                })
                .await?;
            tracing::debug!(text = %m.text, "message recorded");
            let earlier = ctx.recent.iter().filter(|e| e.id < message_id);
            let idle_minutes = earlier
                .clone()
                .next_back()
                .map_or(0.0, |e| (now_ms() - e.created_at).max(0) as f64 / 60_000.0);
            let history = if keeps_sessions {
                Vec::new()
            } else {
                earlier.cloned().collect()
            };
            let state = machine::enter(ctx.process.as_ref(), &config.initial_process, lib);
            Ok(Begun {
                turns: ctx.thread_turns as u64 + 1,
                history,
                state,
                idle_minutes,
                quiet_minutes: None,
                claimant,
                heard: None,
                onboard: Default::default(),
                ctx,
                message: Some(message_id),
                shared,
            })
        }
        Perception::Quiet(q) => {
            let (user_id, name, last_at) = turns.last_speaker(&q.thread).await?;
            let ctx = turns.load_turn(&q.thread, &user_id, &name, window).await?;
            let quiet = ((q.now_ms - last_at).max(0) / 60_000) as u64;
            let history = if keeps_sessions {
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
                heard: None,
                onboard: Default::default(),
                ctx,
                message: None,
                shared,
            })
        }
    }
}

/// How long a turn's claim on a whisper lasts: longer than any model call with its retries
/// can take, so only a turn whose process died loses it this way.
fn claim_lease_ms(config: &Config, lib: &Loaded) -> i64 {
    let llm = &config.llm;
    // Every run of an execute_now chain, each with its retries and their waits (a
    // Retry-After is honoured up to a minute); an ISM run makes a selection and its
    // effects' calls per iteration, and a closing one.
    let per_call =
        llm.timeout_secs as i64 * (llm.max_retries as i64 + 1) + llm.max_retries as i64 * 60;
    let ism = &config.ism;
    let calls_per_run = lib
        .processes
        .values()
        .filter_map(|d| d.ism.as_ref())
        .filter(|_| ism.enabled)
        .map(|i| i.calls_per_run(ism.max_loops) as i64)
        .max()
        .unwrap_or(1);
    ((config.max_chain as i64 + 1) * calls_per_run * per_call + 60) * 1000
}

/// A message ends solitude (and a dream yields to it): the soul goes back to WORK, a legal
/// move from either, taken only if the soul is still there.
pub(super) async fn leave_rest(
    states: &dyn States,
    ctx: &mut TurnContext,
    tracer: &Tracer<'_>,
) -> Result<(), EngineError> {
    use crate::states::State;
    let from = State::from_name(&ctx.cognitive_state);
    if !matches!(from, Some(State::Solitude | State::Dream)) {
        return Ok(());
    }
    let moved = crate::memory::move_state(states, None, |row| {
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
    .await?;
    match moved {
        Ok(m) => {
            info!(from = %m.from, to = %m.to, "cognitive state moved: a message arrived");
            tracer.decision("state", || format!("{} → {} ({})", m.from, m.to, m.cause));
            ctx.cognitive_state = m.to;
        }
        Err(now) => ctx.cognitive_state = now,
    }
    Ok(())
}
