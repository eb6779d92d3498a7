//! Tells the service manager how the daemon is, over systemd's `NOTIFY_SOCKET` (through the
//! sd-notify crate): READY=1 once the store is open and Slack is connected, WATCHDOG=1 from
//! the daemon's own runtime at half the interval the manager asks for (each ping first
//! proves the store answers, so a wedged runtime or store gets the service restarted), and
//! STOPPING=1 at shutdown. Without `NOTIFY_SOCKET` nothing is sent.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use sd_notify::NotifyState;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::memory::Store;
use crate::metrics::Metrics;

fn send(state: NotifyState) {
    if let Err(e) = sd_notify::notify(&[state]) {
        warn!(error = %e, "cannot notify the service manager");
    }
}

/// Whether a service manager listens (`NOTIFY_SOCKET`): without one, nothing is sent.
pub fn managed() -> bool {
    std::env::var_os("NOTIFY_SOCKET").is_some()
}

/// READY=1 as soon as Slack is connected (the store is open before this is called), unless
/// `stop` is cancelled first. Call only when `managed`.
pub async fn ready_when_connected(metrics: Arc<Metrics>, stop: CancellationToken) {
    while !metrics.slack_connected.load(Ordering::SeqCst) {
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            _ = stop.cancelled() => return,
        }
    }
    send(NotifyState::Ready);
    info!("told the service manager: ready");
}

/// How often the watchdog pings: half of `WATCHDOG_USEC`; `None` when the manager asks for
/// none.
pub fn watchdog_every() -> Option<Duration> {
    let every = sd_notify::watchdog_enabled()?;
    let every = (every / 2).max(Duration::from_millis(100));
    info!(every_ms = every.as_millis() as u64, "watchdog pings on");
    Some(every)
}

/// WATCHDOG=1 `every`, each after a trivial read proves the store answers, until `stop` is
/// cancelled.
pub async fn watchdog(store: Arc<dyn Store>, every: Duration, stop: CancellationToken) {
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.cancelled() => return,
        }
        match store.interactions().await {
            Ok(_) => {
                send(NotifyState::Watchdog);
                debug!("watchdog ping");
            }
            Err(e) => warn!(error = %e, "the store did not answer; no watchdog ping"),
        }
    }
}

/// STOPPING=1: the shutdown has begun.
pub fn stopping() {
    if managed() {
        send(NotifyState::Stopping);
    }
}
