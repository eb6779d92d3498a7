//! The cognitive states of a quiet soul, at each scan the daemon leads: SOLITUDE after a
//! quiet spell (one journal entry), DREAM when one is due (the engine dreams). A message
//! brings the soul back to WORK (the engine does that as the message's turn begins).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tracing::{info, warn};

use super::move_to;
use crate::daemon::scans::Scan;
use crate::engine::Engine;
use crate::memory::{now_ms, Quiet, Store, StoreError};
use crate::states::{calls, State};

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
