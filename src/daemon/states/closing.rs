//! The SHUTDOWN protocol at run time, as `states::shutdown` decides it: the conditions read,
//! the soul asked for its consent when the template says so, its answer recorded with the
//! move to SHUTDOWN and carried out (an objection said, closing notes posted), all within
//! the grace period.

use serde_json::json;
use tokio::time::Instant;
use tracing::{info, warn};

use super::{move_to, Ops};
use crate::engine::Engine;
use crate::memory::{now_ms, StoreError};
use crate::metrics::Metrics;
use crate::router::Router;
use crate::states::calls;
use crate::states::shutdown::{self, Circumstances, RECENT_MS, REFERRAL_QUESTION};
use crate::states::State;

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
    let store = engine.store().clone();
    let (messages, circumstances) = circumstances(engine).await;
    let template = engine.library().current().template.clone();
    let from = store
        .cognitive_state()
        .await
        .map(|r| r.state)
        .unwrap_or_default();
    let mut decision = shutdown::decide(&template.behaviors.shutdown, &circumstances);
    // A soul still waking has not answered its wakeup: nobody waits for it to answer this.
    if decision.ask_consent && from == State::Wakeup.name() {
        decision.ask_consent = false;
        decision.why = format!(
            "{}; but the soul is still waking, so it is not asked",
            decision.why
        );
    }
    info!(mode = decision.mode, ask_consent = decision.ask_consent, fired = ?decision.fired, why = %decision.why, "shutdown decision");

    let (answer, consent) = if decision.ask_consent {
        ask_consent(engine, &decision.why, &messages, deadline).await
    } else {
        (serde_json::Value::Null, None)
    };
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
    let notes = closing_notes(engine, router, metrics, ops, signal, &c, &active);
    if tokio::time::timeout_at(deadline, notes).await.is_err() {
        warn!("shutdown: grace period over before every note was posted");
    }
}

/// The messages of the last hour and what the shutdown decision weighs: a crisis keyword
/// among them, a referral answered yes, an open task. A store that cannot say weighs
/// nothing.
async fn circumstances(engine: &Engine) -> (Vec<(String, String)>, Circumstances) {
    let store = engine.store().clone();
    let since = now_ms() - RECENT_MS;
    let keywords = &engine.config().states.crisis_keywords;
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
            .find_map(|(_, text)| shutdown::crisis_keyword(keywords, text))
            .map(str::to_string),
        referral,
        open_task: (!task.is_empty()).then_some(task),
    };
    (messages, circumstances)
}

/// Asks the soul whether it consents, within what is left of `deadline`: its answer as
/// recorded, and what it said with the conversations to leave a closing note in (`None`:
/// no answer in time).
async fn ask_consent(
    engine: &Engine,
    why: &str,
    messages: &[(String, String)],
    deadline: Instant,
) -> (
    serde_json::Value,
    Option<(calls::Consent, Vec<calls::ActiveThread>)>,
) {
    // The last message of each conversation active in the last hour, most recent first.
    let active = calls::active_threads(messages);
    let soul = engine.library().current().soul.soul_md.clone();
    let call = calls::consent(&soul, why, &active);
    let left = deadline.saturating_duration_since(Instant::now());
    match engine.state_call(&call, left).await {
        Ok(text) => {
            let c = calls::read_consent(&text);
            let answer =
                json!({ "consent": c.consent, "reason": c.reason, "closing_note": c.closing_note });
            (answer, Some((c, active)))
        }
        Err(e) => {
            warn!(error = %e, "shutdown: the soul did not answer in time; shutting down");
            (json!({ "no_answer": e }), None)
        }
    }
}

/// Carries out the soul's answer: an objection is said (warn, /metrics, the ops channel), and
/// its closing note is posted in each active conversation.
async fn closing_notes(
    engine: &Engine,
    router: &Router,
    metrics: &Metrics,
    ops: Option<&Ops>,
    signal: &str,
    c: &calls::Consent,
    active: &[calls::ActiveThread],
) {
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
        for a in active {
            if let Err(e) = router.say(&a.thread, note).await {
                warn!(thread = %a.thread, error = %e, "the closing note was not posted");
            }
        }
    }
}
