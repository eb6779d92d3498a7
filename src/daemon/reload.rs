//! SIGHUP: the config file read again and checked as at start. `[[tools.servers]]` is put in
//! force at once (servers added, removed, changed ones restarted, the rest untouched), so the
//! next turn sees the new tools; every other section that differs from what the daemon started
//! with is named in one log line, for the next start. A config with problems changes nothing:
//! each problem is logged and the running servers stay as they were.
//!
//! Must not touch Slack, the router or the store, nor apply any section but the tool servers:
//! the other parts read theirs once, at start.

use std::sync::Arc;

use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::{self, Config};
use crate::engine::Engine;

/// Takes SIGHUP from now on (its default would end the daemon); `None` if the handler cannot
/// be installed (logged).
pub fn listen() -> Option<Signal> {
    match signal(SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            warn!(error = %e, "cannot take SIGHUP; the config cannot be reloaded");
            None
        }
    }
}

/// Reloads on every SIGHUP until the daemon stops (`stop` cancelled). `started` is the config
/// the daemon runs with: each reload names every section that still differs from it.
/// `hangups`: those `listen` took, or `None` to take them anew (a task started again).
pub async fn on_hangup(
    hangups: Option<Signal>,
    engine: Arc<Engine>,
    started: Arc<Config>,
    stop: CancellationToken,
) {
    let Some(mut hangups) = hangups.or_else(listen) else {
        // Said by `listen`; the daemon runs on without reloads.
        stop.cancelled().await;
        return;
    };
    loop {
        tokio::select! {
            got = hangups.recv() => if got.is_none() { return },
            _ = stop.cancelled() => return,
        }
        info!("SIGHUP: reading the config again");
        reload(&engine, &started).await;
    }
}

/// Reads and checks the file the daemon started from, then applies its tool servers.
async fn reload(engine: &Engine, started: &Config) {
    let Some(file) = started.source.as_deref() else {
        info!("anima started without a config file (built-in defaults): nothing to reload");
        return;
    };
    let next = match config::load(Some(file)) {
        Ok(c) => c,
        Err(e) => {
            for p in &e.problems {
                warn!("config not reloaded: {p}");
            }
            warn!(
                file = %file.display(),
                problems = e.problems.len(),
                "config not reloaded: fix the problems and send SIGHUP again; everything runs as before"
            );
            return;
        }
    };
    let later = config::changed_sections(started, &next);
    if !later.is_empty() {
        let names: Vec<String> = later.iter().map(|s| format!("[{s}]")).collect();
        warn!(
            sections = %later.join(","),
            "config: changes to {} take effect at the next start (a reload applies only [[tools.servers]])",
            names.join(", ")
        );
    }
    let Some(tools) = engine.tools() else {
        return;
    };
    let done = tools.reload(&next.tools).await;
    info!(
        added = %done.added.join(","),
        removed = %done.removed.join(","),
        restarted = %done.restarted.join(","),
        unchanged = %done.unchanged.join(","),
        "config reloaded: tool servers {}",
        if done.changed_anything() { "updated" } else { "unchanged" }
    );
}
