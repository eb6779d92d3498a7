//! The cognitive states at run time: the start (SHUTDOWN → WAKEUP → WORK, or straight to
//! WORK), SOLITUDE after a quiet spell, DREAM when one is due, and the SHUTDOWN protocol on
//! SIGTERM/SIGINT.
//!
//! What to do is decided by `states` (pure: the map, the consent decision, the calls' text);
//! this carries it out: moves written to the store with their cause, model calls through the
//! engine, notes to Slack. Nothing here can keep the daemon from starting or stopping: every
//! model call is bounded, a failed wakeup ends in WORK (degraded), and a shutdown ends within
//! the grace period whatever the soul answers.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;
use tracing::{info, warn};

use super::Scan;
use crate::config::Config;
use crate::engine::Engine;
use crate::memory::{move_state, now_ms, NewMove, Quiet, Store, StoreError};
use crate::metrics::Metrics;
use crate::router::Router;
use crate::slack::api::{BotIdentity, Outgoing, SlackApi};
use crate::states::calls;
use crate::states::shutdown::{self, Circumstances, RECENT_MS, REFERRAL_QUESTION};
use crate::states::{Map, State};

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

/// The newest person's message, the cognitive state and when the last message came. The
/// newest message is read first: one written between the reads is then in the quiet spell (no
/// move) or refuses the move, never in neither.
async fn quiet_spell(
    store: &dyn Store,
) -> Result<(Quiet, crate::memory::CognitiveRow, Option<i64>), StoreError> {
    let newest = Quiet(store.newest_message_id().await?);
    Ok((
        newest,
        store.cognitive_state().await?,
        store.last_message_ms().await?,
    ))
}

/// Moves to `to` if the template in force allows it from where the soul is; says why not.
/// `quiet: Some(newest)`: only if nobody has written since the newest message was `newest`.
async fn move_to(
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

/// `minutes` in milliseconds, saturating: the config accepts up to i64::MAX minutes.
fn minutes_ms(minutes: u64) -> i64 {
    i64::try_from(minutes)
        .unwrap_or(i64::MAX)
        .saturating_mul(60_000)
}

/// SOLITUDE: after `solitude_after_idle_minutes` without messages (when the template enables
/// it), the soul enters solitude and writes one journal entry. A message brings it back to
/// WORK (the engine does that as the message's turn begins).
pub(crate) async fn solitude(engine: Arc<Engine>, mut scan: Scan) {
    let idle_ms = minutes_ms(engine.config().states.solitude_after_idle_minutes);
    while scan.next().await {
        if !engine
            .library()
            .current()
            .template
            .behaviors
            .solitude
            .enabled
        {
            continue;
        }
        let store = engine.store().clone();
        let Ok((newest, row, last)) = quiet_spell(store.as_ref()).await else {
            continue;
        };
        if row.state != State::Work.name() {
            continue;
        }
        let quiet_since = last.unwrap_or(row.since_ms).max(row.since_ms);
        let idle = now_ms() - quiet_since;
        if idle < idle_ms {
            continue;
        }
        let idle_minutes = (idle / 60_000) as u64;
        if move_to(
            &engine,
            State::Solitude,
            format!("no message for {}", calls::duration_words(idle_minutes)),
            json!({ "idle_minutes": idle_minutes }),
            false,
            Some(newest),
        )
        .await
        .is_none()
        {
            continue;
        }
        let recent: Vec<(String, String)> = store
            .messages_since(quiet_since - 24 * 60 * 60 * 1000)
            .await
            .unwrap_or_default()
            .into_iter()
            .rev()
            .take(crate::states::quote::MAX_QUOTED_MESSAGES)
            .rev()
            .map(|(_, text)| ("someone".to_string(), text))
            .collect();
        let soul = engine.library().current().soul.soul_md.clone();
        let call = calls::journal(&soul, idle_minutes, &recent);
        let timeout = Duration::from_secs(engine.config().llm.timeout_secs);
        match engine.state_call(&call, timeout).await {
            Ok(text) => match calls::read_journal(&text) {
                Some(entry) => match store.add_journal(&entry).await {
                    Ok(_) => info!("solitude: a journal entry written"),
                    Err(e) => warn!(error = %e, "solitude: the journal entry was not stored"),
                },
                None => warn!("solitude: the model wrote no journal entry"),
            },
            Err(e) => warn!(error = %e, "solitude: no journal entry"),
        }
    }
}

/// DREAM on schedule: at each scan, when the template enables DREAM and `auto_schedule`, the
/// soul is in WORK or SOLITUDE, nobody has written for `solitude_after_idle_minutes` and
/// `states::dream::due` says so (at most every `min_interval_hours`, sooner only to resume a
/// dream that yielded or was killed), the engine dreams. Its own task: a message never
/// waits for it (the turn moves the soul back to WORK, and the dream yields after its
/// current batch); one that came after this scan read the newest message keeps it from
/// starting at all.
pub(crate) async fn dreams(engine: Arc<Engine>, mut scan: Scan) {
    let quiet_ms = minutes_ms(engine.config().states.solitude_after_idle_minutes);
    while scan.next().await {
        let dream = engine.library().current().template.behaviors.dream.clone();
        if !dream.enabled || !dream.auto_schedule {
            continue;
        }
        let store = engine.store().clone();
        let (Ok((newest, row, last_message)), Ok(last_dream)) =
            futures_util::future::join(quiet_spell(store.as_ref()), store.last_dream()).await
        else {
            continue;
        };
        // DREAM too: a dream whose process was killed left it there (the engine takes it
        // back to WORK when no dream holds the lock, and refuses while one does).
        if !matches!(
            State::from_name(&row.state),
            Some(State::Work | State::Solitude | State::Dream)
        ) {
            continue;
        }
        let now = now_ms();
        let quiet_since = last_message.unwrap_or(row.since_ms);
        let last = last_dream.map(|d| {
            let left_work = d.finished_ms.is_none() || d.report["yielded"] == true;
            (d.started_ms, left_work)
        });
        if !crate::states::dream::due(&dream, now - quiet_since, quiet_ms, now, last) {
            continue;
        }
        let cause = format!(
            "scheduled: no message for {}",
            calls::duration_words(((now - quiet_since).max(0) / 60_000) as u64)
        );
        // Only if nobody writes before it moves (see `Engine::dream`).
        match engine.dream(&cause, Some(newest)).await {
            Ok(r) => info!(
                id = r.id,
                complete = r.complete,
                yielded = r.yielded,
                "scheduled dream ended"
            ),
            Err(e) => info!(reason = %e, "scheduled dream not started"),
        }
    }
}

/// The SHUTDOWN protocol, within `deadline`: decide (and record which condition fired), ask
/// the soul when the template says so, record its answer with the move to SHUTDOWN, and
/// carry out an objection (warn, /metrics, the ops channel) and its closing notes. Never
/// keeps the daemon from stopping.
pub async fn shut_down(
    engine: &Engine,
    router: &Router,
    metrics: &Metrics,
    ops: Option<&Ops>,
    signal: &str,
    deadline: Instant,
) {
    let config: &Config = engine.config();
    let store = engine.store().clone();
    let template = engine.library().current().template.clone();
    let since = now_ms() - RECENT_MS;
    let keywords = config.states.crisis_keywords.clone();
    let gathered = async {
        let messages = store.messages_since(since).await?;
        let referral = store.answered_yes_since(REFERRAL_QUESTION, since).await?;
        let task = store
            .soul_state()
            .await?
            .get("currentTask")
            .trim()
            .to_string();
        Ok::<_, StoreError>((messages, referral, task))
    }
    .await;
    let (messages, referral, task) = gathered.unwrap_or_else(|e| {
        warn!(error = %e, "shutdown: cannot read the conditions; deciding without them");
        Default::default()
    });
    let circumstances = Circumstances {
        crisis_keyword: messages
            .iter()
            .find_map(|(_, text)| shutdown::crisis_keyword(&keywords, text))
            .map(str::to_string),
        referral,
        open_task: (!task.is_empty()).then_some(task),
    };
    let decision = shutdown::decide(&template.behaviors.shutdown, &circumstances);
    info!(mode = decision.mode, ask_consent = decision.ask_consent, fired = ?decision.fired, why = %decision.why, "shutdown decision");

    let mut answer = serde_json::Value::Null;
    let mut consent = None;
    if decision.ask_consent {
        // The last message of each conversation active in the last hour, most recent first.
        let active = calls::active_threads(&messages);
        let soul = engine.library().current().soul.soul_md.clone();
        let call = calls::consent(&soul, &decision.why, &active);
        let left = deadline.saturating_duration_since(Instant::now());
        match engine.state_call(&call, left).await {
            Ok(text) => {
                let c = calls::read_consent(&text);
                answer = json!({ "consent": c.consent, "reason": c.reason, "closing_note": c.closing_note });
                consent = Some((c, active));
            }
            Err(e) => {
                warn!(error = %e, "shutdown: the soul did not answer in time; shutting down");
                answer = json!({ "no_answer": e });
            }
        }
    }
    let from = store
        .cognitive_state()
        .await
        .map(|r| r.state)
        .unwrap_or_default();
    move_to(
        engine,
        State::Shutdown,
        format!("{signal}: {}", decision.why),
        json!({ "decision": decision, "answer": answer, "from": from }),
        false,
        None,
    )
    .await;
    let Some((c, active)) = consent else {
        return;
    };
    let notes = async {
        if !c.consent {
            warn!(reason = %c.reason, "the soul objects to being shut down; shutting down anyway");
            metrics.shutdown_objections.inc();
            if let Some(ops) = ops {
                let name = engine.library().current().soul.name().to_string();
                ops.say(&format!(
                    "{name} objected to being shut down ({signal}): {}. The shutdown went ahead.",
                    c.reason
                ))
                .await;
            }
        }
        if let Some(note) = &c.closing_note {
            for a in &active {
                if let Err(e) = router.say(&a.thread, note).await {
                    warn!(thread = %a.thread, error = %e, "the closing note was not posted");
                }
            }
        }
    };
    if tokio::time::timeout_at(deadline, notes).await.is_err() {
        warn!("shutdown: grace period over before every note was posted");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_idle_spell_the_config_accepts_stays_a_spell() {
        assert_eq!(minutes_ms(720), 43_200_000);
        // `anima check` accepts up to i64::MAX minutes ("never"): not a negative spell (at
        // once, every scan) nor a panic that ends the solitude and dream tasks.
        assert_eq!(minutes_ms(i64::MAX as u64), i64::MAX);
        assert_eq!(minutes_ms(u64::MAX), i64::MAX);
        assert_eq!(minutes_ms(1 << 50), i64::MAX);
    }
}
