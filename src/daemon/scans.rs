//! The soul's scheduled work, every `[processes] proactive_scan_secs` while this daemon leads
//! it (`company::Lead`): quiet threads' follow-ups, SOLITUDE and DREAM (`states`), the
//! psyche's tick, the user models' export, the forgetting of quiet conversations
//! (`forgetting`), the pruning of traces to `[inspect] keep_turns` and the inner life's
//! samples for the window's charts (every `SAMPLE_EVERY`, the newest `SAMPLES_KEPT`). Each scan is a task of its own (`tasks`), started again if it fails, and
//! ends when the daemon stops.
//!
//! Owns when the scans run; what each does is the engine's, the router's or the store's.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use super::company::Lead;
use super::tasks::{Policy, Stage, Tasks};
use super::{forgetting, states};
use crate::engine::Engine;
use crate::memory::Store;
use crate::router::Router;

/// How far back a tick looks for an overheard message to come back to.
const TICK_REACH: Duration = Duration::from_secs(15 * 60);

/// How often the inner life is sampled for the window's charts.
const SAMPLE_EVERY: Duration = Duration::from_secs(5 * 60);

/// The inner life's samples kept (the newest): a week of them.
const SAMPLES_KEPT: u64 = 2_016;

/// A periodic scan (quiet threads, solitude, dreams, the psyche's tick) that ends when its
/// token is cancelled (the daemon stops), and runs only while this daemon leads the soul's
/// scheduled work (one daemon of those sharing a soul). A scan that runs late skips the ticks
/// it missed.
pub(crate) struct Scan {
    tick: tokio::time::Interval,
    stop: CancellationToken,
    lead: Lead,
}

impl Scan {
    pub(crate) fn new(every: Duration, stop: CancellationToken, lead: Lead) -> Scan {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        Scan { tick, stop, lead }
    }

    /// Waits for the next scan this daemon leads: false once the daemon is stopping.
    pub(crate) async fn next(&mut self) -> bool {
        loop {
            let ticked = tokio::select! {
                _ = self.tick.tick() => true,
                _ = self.stop.cancelled() => false,
            };
            if !ticked {
                return false;
            }
            if self.lead.leads() {
                return true;
            }
        }
    }
}

/// Starts every scan, each every `every` while `lead` leads, in `Stage::AtStop`; each is
/// started again after a failure (`Policy::Restart`): a scan keeps nothing between two ticks
/// that a new start would miss.
pub(super) fn start(tasks: &Tasks, engine: &Arc<Engine>, router: &Arc<Router>, lead: &Lead) {
    let every = Duration::from_secs(engine.config().proactive_scan_secs);
    let scan = {
        let lead = lead.clone();
        move |token| Scan::new(every, token, lead.clone())
    };
    let (e, s) = (engine.clone(), scan.clone());
    tasks.spawn("solitude", Stage::AtStop, Policy::Restart, move |t| {
        states::solitude(e.clone(), s(t))
    });
    let (e, s) = (engine.clone(), scan.clone());
    tasks.spawn("dreams", Stage::AtStop, Policy::Restart, move |t| {
        states::dreams(e.clone(), s(t))
    });
    let (e, r, s) = (engine.clone(), router.clone(), scan.clone());
    tasks.spawn("follow-ups", Stage::AtStop, Policy::Restart, move |t| {
        follow_ups(e.clone(), r.clone(), s(t))
    });
    let (r, s) = (router.clone(), scan.clone());
    tasks.spawn("psyche-ticks", Stage::AtStop, Policy::Restart, move |t| {
        psyche_ticks(r.clone(), every, s(t))
    });
    let (e, s) = (engine.clone(), scan.clone());
    tasks.spawn("model-exports", Stage::AtStop, Policy::Restart, move |t| {
        model_exports(e.clone(), s(t))
    });
    let (store, s) = (engine.store().clone(), scan.clone());
    let keep_turns = engine.config().inspect.keep_turns;
    tasks.spawn("trace-pruning", Stage::AtStop, Policy::Restart, move |t| {
        prune_traces(store.clone(), keep_turns, s(t))
    });
    let (e, l) = (engine.clone(), lead.clone());
    tasks.spawn("psyche-samples", Stage::AtStop, Policy::Restart, move |t| {
        psyche_samples(e.clone(), Scan::new(SAMPLE_EVERY, t, l.clone()))
    });
    // Without `[memory] keep_days` nothing is forgotten: no task.
    if let Some(keep) = engine.config().memory.keep {
        let (store, s) = (engine.store().clone(), scan);
        tasks.spawn("forgetting", Stage::AtStop, Policy::Restart, move |t| {
            forgetting::quiet_conversations(store.clone(), keep, s(t))
        });
    }
}

/// Keeps the newest `keep` traces (`[inspect] keep_turns`; 0 keeps none): at start, then at
/// every scan.
async fn prune_traces(store: Arc<dyn Store>, keep: u64, mut scan: Scan) {
    while scan.next().await {
        match store.prune_traces(keep).await {
            Ok(0) => {}
            Ok(n) => debug!(pruned = n, keep, "traces pruned ([inspect] keep_turns)"),
            Err(e) => warn!(error = %e, "cannot prune the traces"),
        }
    }
}

/// Samples the inner life for the window's charts: at start, then every `SAMPLE_EVERY`.
async fn psyche_samples(engine: Arc<Engine>, mut scan: Scan) {
    while scan.next().await {
        if let Err(e) = engine.sample_inner_life(SAMPLES_KEPT).await {
            warn!(error = %e, "the inner life was not sampled");
        }
    }
}

/// Quiet threads get a chance at one proactive follow-up.
async fn follow_ups(engine: Arc<Engine>, router: Arc<Router>, mut scan: Scan) {
    while scan.next().await {
        if engine
            .library()
            .current()
            .process(crate::process::PROACTIVE)
            .is_none()
        {
            continue;
        }
        match engine.quiet_threads(crate::memory::now_ms()).await {
            Ok(threads) => threads.iter().for_each(|t| router.follow_up(t)),
            Err(e) => warn!(error = %e, "cannot look for quiet threads"),
        }
    }
}

/// The leader brings git up to date with the user models the other daemons' turns changed
/// (theirs export nothing).
async fn model_exports(engine: Arc<Engine>, mut scan: Scan) {
    while scan.next().await {
        let _ = engine.export_pending_models().await;
    }
}

/// Time passes for the soul's inner life: a tick every `every` (drives drift, arcs, mood and
/// relationships ease by the time elapsed, so how often does not change where they go), felt
/// once per period, the first at start; on a tick the soul may come back to what it overheard
/// (`Router::tick`).
async fn psyche_ticks(router: Arc<Router>, every: Duration, mut scan: Scan) {
    let period_ms = (every.as_millis() as i64).max(1);
    while scan.next().await {
        let source = format!("tick:{}", crate::memory::now_ms() / period_ms);
        if let Err(e) = router.tick(&source, TICK_REACH).await {
            warn!(error = %e, "the psyche's tick was not felt");
        }
    }
}
