//! The daemons that share one soul (several `anima run` on one PostgreSQL): this one joins
//! them when it starts and leaves when it stops, and its heartbeat says it is alive meanwhile.
//! The first to join wakes the soul; the last to leave runs the shutdown protocol; the others
//! only hand their conversations over. On SQLite a daemon is always alone.
//!
//! Joining and leaving are one at a time in the store, so of two daemons starting (or
//! stopping) together exactly one is the first (or the last).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{info, warn};

use crate::memory::Store;

/// Joins the daemons on this soul: true if no other runs (this one wakes the soul). A store
/// that cannot say is taken for no company, as a daemon alone would be.
pub async fn join(store: &Arc<dyn Store>, lease: Duration) -> bool {
    match store.join(&host(), std::process::id(), lease).await {
        Ok(0) => true,
        Ok(others) => {
            info!(
                others,
                "joining the daemons already running: the soul is awake"
            );
            false
        }
        Err(e) => {
            warn!(error = %e, "cannot tell which daemons run; starting as the first");
            true
        }
    }
}

/// Leaves the daemons on this soul: true if none is left (this one puts the soul to sleep).
pub async fn leave(store: &Arc<dyn Store>) -> bool {
    match store.leave().await {
        Ok(0) => true,
        Ok(others) => {
            info!(
                others,
                "other daemons run on: the soul stays awake, its conversations go to them"
            );
            false
        }
        Err(e) => {
            warn!(error = %e, "cannot tell which daemons run; stopping as the last");
            true
        }
    }
}

/// Renews this daemon's heartbeat every `lease / 3` until it stops.
pub async fn keep_alive(store: Arc<dyn Store>, lease: Duration, mut stop: watch::Receiver<bool>) {
    let mut beats = tokio::time::interval((lease / 3).max(Duration::from_millis(100)));
    beats.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let stopping = tokio::select! {
            _ = beats.tick() => false,
            _ = stop.wait_for(|s| *s) => true,
        };
        if stopping {
            return;
        }
        if let Err(e) = store.heartbeat(&[], lease).await {
            warn!(error = %e, "the daemon's heartbeat failed; retrying");
        }
    }
}

/// This machine's name, as `anima state` shows it.
fn host() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}
