//! The cognitive states at run time: the start (SHUTDOWN → WAKEUP → WORK, or straight to
//! WORK), SOLITUDE after a quiet spell, DREAM when one is due, and the SHUTDOWN protocol on
//! SIGTERM/SIGINT.
//!
//! What to do is decided by `states` (pure: the map, the consent decision, the calls' text);
//! this carries it out: moves written to the store with their cause, model calls through the
//! engine, notes to Slack. Nothing here can keep the daemon from starting or stopping: every
//! model call is bounded, a failed wakeup ends in WORK (degraded), and a shutdown ends within
//! the grace period whatever the soul answers. SOLITUDE and DREAM are `idle`'s, the SHUTDOWN
//! protocol `closing`'s.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tracing::{info, warn};

use crate::engine::Engine;
use crate::memory::{move_state, now_ms, NewMove, Quiet};
use crate::slack::api::{BotIdentity, Outgoing, SlackApi};
use crate::states::calls;
use crate::states::{Map, State};

mod closing;
mod idle;
pub use closing::shut_down;
pub(crate) use idle::{dreams, solitude};

/// Wakeup attempts before the soul works degraded.
pub const WAKEUP_ATTEMPTS: u32 = 3;

/// Where notes for the operator go: `[daemon] ops_channel` in Slack.
#[derive(Clone)]
pub struct Ops {
    pub api: Arc<SlackApi>,
    pub bot: BotIdentity,
    pub channel: String,
}

impl Ops {
    async fn say(&self, text: &str) {
        let out = Outgoing {
            channel: &self.channel,
            thread_ts: None,
            after_ts: "0",
            text,
            mark: None,
            feedback: false,
            held: &[],
        };
        if let Err(e) = self.api.post(&self.bot, &out, false).await {
            warn!(channel = %self.channel, error = %e, "cannot post to the ops channel");
        }
    }
}

/// Moves to `to` if the template in force allows it from where the soul is; says why not.
/// `quiet: Some(newest)`: only if nobody has written since the newest message was `newest`.
pub(super) async fn move_to(
    engine: &Engine,
    to: State,
    cause: String,
    detail: serde_json::Value,
    degraded: bool,
    quiet: Option<Quiet>,
) -> Option<crate::memory::StateMove> {
    let map = Map::new(&engine.library().current().template.behaviors);
    let busy = quiet.map(|q| (q, "someone wrote meanwhile".to_string()));
    let moved = move_state(engine.store().as_ref(), busy, move |row| {
        let from = State::from_name(&row.state).unwrap_or(State::Shutdown);
        map.check(from, to).map_err(|r| r.to_string())?;
        Ok::<_, String>(NewMove {
            to: to.name().into(),
            cause,
            detail,
            degraded,
        })
    })
    .await;
    match moved {
        Ok(Ok(m)) => {
            info!(from = %m.from, to = %m.to, cause = %m.cause, degraded, "cognitive state moved");
            Some(m)
        }
        Ok(Err(refused)) => {
            info!(reason = %refused, "cognitive state move refused");
            None
        }
        Err(e) => {
            warn!(error = %e, "cannot record a cognitive state move");
            None
        }
    }
}

/// A daemon joining others while the soul wakes: its messages wait, as the first daemon's
/// do, while the first one (the soul's waker) holds the wakeup, or for as long as a wakeup may
/// take plus `lease`. A soul found in WAKEUP with no waker was left there by one that died: it
/// goes to WORK, degraded. The caller holds the engine before the router starts.
pub async fn await_wakeup(engine: Arc<Engine>, lease: Duration) {
    let limit = Duration::from_secs(engine.config().llm.timeout_secs) * WAKEUP_ATTEMPTS + lease;
    let began = std::time::Instant::now();
    let store = engine.store().clone();
    loop {
        match store.waking().await {
            Ok(false) => {
                woken_for_the_dead(&engine).await;
                break;
            }
            Ok(true) => {}
            Err(e) => warn!(error = %e, "cannot tell whether the soul is waking; waiting"),
        }
        if began.elapsed() > limit {
            warn!("the soul is still waking after {limit:?}; answering anyway");
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    engine.release();
}

/// WAKEUP → WORK, degraded, if the soul is still in WAKEUP: its waker died.
async fn woken_for_the_dead(engine: &Engine) {
    let moved = move_state(engine.store().as_ref(), None, |row| {
        if row.state != State::Wakeup.name() {
            return Err(format!("the soul is in {} now", row.state));
        }
        Ok::<_, String>(NewMove {
            to: State::Work.name().into(),
            cause: "the daemon waking the soul stopped; working degraded".into(),
            detail: json!({}),
            degraded: true,
        })
    })
    .await;
    match moved {
        Ok(Ok(m)) => info!(from = %m.from, to = %m.to, cause = %m.cause, "cognitive state moved"),
        Ok(Err(_)) => {}
        Err(e) => warn!(error = %e, "the soul left in WAKEUP was not moved to WORK"),
    }
}

/// The first daemon wakes the soul (see `wake_up`), then tells the daemons waiting for it.
/// The caller holds the engine (see [`Engine::hold`]) before the router starts; this releases it
/// however the wakeup ends.
pub async fn start(engine: Arc<Engine>) -> Option<String> {
    let affirmation = wake_up(engine.clone()).await;
    if let Err(e) = engine.store().woke().await {
        warn!(error = %e, "the others were not told the soul is awake; they wait for its lease");
    }
    engine.release();
    affirmation
}

/// The start. A soul found in any state but SHUTDOWN was not shut down (a crash or SIGKILL):
/// that is recorded first. Then WAKEUP (messages wait in the inbox meanwhile) or, when the
/// template disables it, WORK. Returns the wakeup's affirmation, if there was one.
async fn wake_up(engine: Arc<Engine>) -> Option<String> {
    let store = engine.store().clone();
    let before = match store.cognitive_state().await {
        Ok(row) => row,
        Err(e) => {
            warn!(error = %e, "cannot read the cognitive state; starting as if shut down");
            return None;
        }
    };
    if before.state != State::Shutdown.name() {
        move_to(
            &engine,
            State::Shutdown,
            "the last run ended without a shutdown (a crash or SIGKILL)".into(),
            json!({ "found": before.state }),
            false,
            None,
        )
        .await;
    }
    let template = engine.library().current().template.clone();
    let map = Map::new(&template.behaviors);
    if map.start() == State::Work {
        let why = template
            .behaviors
            .wakeup
            .rationale
            .clone()
            .unwrap_or_default();
        move_to(
            &engine,
            State::Work,
            format!("daemon started; the template disables wakeup: {why}"),
            json!({}),
            false,
            None,
        )
        .await;
        return None;
    }
    move_to(
        &engine,
        State::Wakeup,
        "daemon started".into(),
        json!({}),
        false,
        None,
    )
    .await;
    let slept_minutes =
        (before.since_ms > 0).then(|| ((now_ms() - before.since_ms).max(0) / 60_000) as u64);
    let affirmation = wake(&engine, slept_minutes).await;
    let (cause, degraded) = match &affirmation {
        Ok((text, attempts)) => (
            (
                format!("identity affirmed (attempt {attempts})"),
                json!({ "affirmation": text, "attempts": attempts }),
            ),
            false,
        ),
        Err(errors) => {
            warn!(degraded = true, attempts = WAKEUP_ATTEMPTS, errors = ?errors, "the wakeup failed; working degraded");
            if let Some(m) = engine.metrics() {
                m.wakeups_degraded.inc();
            }
            (
                (
                    format!("the wakeup failed {WAKEUP_ATTEMPTS} times; working degraded"),
                    json!({ "errors": errors }),
                ),
                true,
            )
        }
    };
    move_to(&engine, State::Work, cause.0, cause.1, degraded, None).await;
    affirmation.ok().map(|(t, _)| t)
}

/// Up to three bounded calls; the affirmation and the attempt it took, or every error.
async fn wake(engine: &Engine, slept_minutes: Option<u64>) -> Result<(String, u32), Vec<String>> {
    let store = engine.store().clone();
    let snapshot = store.snapshot().await.ok();
    let last_words = store
        .journal(1)
        .await
        .ok()
        .and_then(|j| j.into_iter().next())
        .map(|e| e.entry);
    let soul_state: Vec<(String, String)> = snapshot
        .as_ref()
        .map(|s| s.soul_state.clone())
        .unwrap_or_default();
    let state_pairs: Vec<(&str, &str)> = soul_state
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    let conversations: Vec<(String, i64)> = snapshot
        .as_ref()
        .map(|s| {
            s.conversations
                .iter()
                .map(|c| (c.thread.clone(), c.turns))
                .collect()
        })
        .unwrap_or_default();
    let timeout = Duration::from_secs(engine.config().llm.timeout_secs);
    let mut errors = Vec::new();
    for attempt in 1..=WAKEUP_ATTEMPTS {
        let soul = engine.library().current().soul.soul_md.clone();
        let call = calls::wakeup(
            &soul,
            &calls::WakeupInput {
                soul_state: &state_pairs,
                slept_minutes,
                last_words: last_words.as_deref(),
                conversations: &conversations,
                attempt,
            },
        );
        match engine.state_call(&call, timeout).await {
            Ok(text) => match calls::read_affirmation(&text) {
                Some(a) => return Ok((a, attempt)),
                None => errors.push("an empty answer".to_string()),
            },
            Err(e) => errors.push(e),
        }
        warn!(
            attempt,
            error = errors.last().map(String::as_str).unwrap_or(""),
            "wakeup attempt failed"
        );
    }
    Err(errors)
}

/// After the wakeup: a note to the ops channel, unless the template resumes silently.
pub async fn wakeup_note(engine: &Engine, ops: Option<&Ops>, affirmation: Option<String>) {
    let template = engine.library().current().template.clone();
    let p = &template.behaviors.state_preservation;
    if p.resume_silently {
        return;
    }
    let (Some(ops), Some(a)) = (ops, affirmation) else {
        return;
    };
    let name = engine.library().current().soul.name().to_string();
    ops.say(&format!("{name} is awake: {a}")).await;
}

/// Stopped before the start was over (Slack never answered): recorded as a shutdown.
pub async fn stopped_early(engine: &Engine) {
    move_to(
        engine,
        State::Shutdown,
        "stopped before Slack answered".into(),
        json!({}),
        false,
        None,
    )
    .await;
}
