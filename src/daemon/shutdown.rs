//! `anima run`'s end: the signals that stop it, and the stop itself, in this order:
//! 1. the daemon stops (SIGTERM/SIGINT, or a task it cannot run without failed): every task
//!    of `Stage::AtStop` is told at once (the scans, the heartbeat, the reloads, the door's
//!    watch of the store, the wakeup, the HTTP server stops taking connections);
//! 2. intake stops: `/healthz` and the Events API say so, the Socket Mode door shuts, held
//!    messages are let go to the inbox;
//! 3. the daemon leaves the others on its soul; the last runs the SHUTDOWN protocol (consent,
//!    as the template says) while the turns in flight drain, both within
//!    `shutdown_grace_secs`;
//! 4. every conversation is let go, then the claims' heartbeat stops (`Stage::AfterTurns`);
//! 5. the tool servers' children end; the tasks of step 1 are waited for (a bounded wait).
//!
//! Unfinished inbox rows wait for the next start. Exit 0, or non-zero naming the task that
//! failed.

use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::door::SocketDoor;
use super::start::Soul;
use super::tasks::{Stage, Tasks};
use super::{company, notify, states, DaemonError};
use crate::config::Config;
use crate::router::Router;
use crate::slack::events::EventsDoor;

/// How long the stop waits for each stage's tasks once told (the HTTP server's last
/// connections, a scan's call in flight).
const TASKS_WAIT: Duration = Duration::from_secs(2);

/// The signal that stopped the daemon, for the shutdown's record.
static SIGNAL: OnceLock<&'static str> = OnceLock::new();

/// Stops the daemon (`stop`) on SIGTERM or SIGINT; ends when `done` is cancelled.
pub(super) async fn signals(stop: CancellationToken, done: CancellationToken) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        warn!("cannot install signal handlers");
        return;
    };
    let name = tokio::select! {
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
        _ = done.cancelled() => return,
    };
    info!("{name}");
    let _ = SIGNAL.set(name);
    stop.cancel();
}

/// What the stop needs of the running daemon.
pub(super) struct Running<'a> {
    pub config: &'a Config,
    pub tasks: &'a Tasks,
    pub soul: &'a Soul,
    pub router: &'a Arc<Router>,
    pub events: &'a EventsDoor,
    pub socket: Option<Arc<SocketDoor>>,
    pub ops: Option<states::Ops>,
}

/// The stop, once the daemon is stopping (see the module's doc for the order).
pub(super) async fn stop(r: Running<'_>) -> Result<(), DaemonError> {
    let Running {
        config,
        tasks,
        soul,
        router,
        ..
    } = r;
    info!(
        grace_secs = config.shutdown_grace_secs,
        "stopping: no new messages; finishing turns in flight"
    );
    r.events.stopping.store(true, Ordering::SeqCst);
    notify::stopping();
    if let Some(door) = &r.socket {
        door.shut().await;
    }
    soul.metrics.slack_connected.store(false, Ordering::SeqCst);
    soul.engine.close_held();
    let grace = Duration::from_secs(config.shutdown_grace_secs);
    let deadline = deadline_after(grace);
    let why = match tasks.failed() {
        Some(task) => format!("task {task} failed"),
        None => SIGNAL.get().copied().unwrap_or("stop").to_string(),
    };
    // Only the last daemon puts the soul to sleep; one that leaves others running hands its
    // conversations over once its turns in flight are done.
    let last = company::leave(&soul.store).await;
    let shutdown = async {
        if last {
            let (engine, metrics) = (&soul.engine, &soul.metrics);
            states::shut_down(engine, router, metrics, r.ops.as_ref(), &why, deadline).await
        }
    };
    let (finished, ()) = tokio::join!(router.drain(grace), shutdown);
    router.let_go_all().await;
    tasks.finish(Stage::AfterTurns, TASKS_WAIT).await;
    if !finished {
        warn!("grace period over; unfinished messages stay in the inbox for the next start");
    }
    // The turns are done: the tool servers' children end.
    soul.engine.stop_tools().await;
    tasks.finish(Stage::AtStop, TASKS_WAIT).await;
    // The trace writer flushed when its stage ended; a trace queued since is written here.
    soul.engine.flush_traces().await;
    ended(tasks)
}

/// The daemon stops before Slack took its tokens: `answer` is Slack's refusal (exit 2), or
/// `Ok(None)` if the daemon was stopped first. The wakeup ends before the stop is recorded.
pub(super) async fn early<T>(
    tasks: &Tasks,
    soul: &Soul,
    answer: Result<Option<T>, String>,
) -> Result<(), DaemonError> {
    tasks.stopping().cancel();
    tasks.finish(Stage::AtStop, TASKS_WAIT).await;
    states::stopped_early(&soul.engine).await;
    soul.engine.flush_traces().await;
    match answer {
        Err(refused) => Err(DaemonError::Usage(refused)),
        Ok(_) if tasks.failed().is_some() => ended(tasks),
        Ok(_) => {
            info!("stopped before Slack answered");
            Ok(())
        }
    }
}

/// The daemon's last word: stopped, or the task whose failure stopped it.
fn ended(tasks: &Tasks) -> Result<(), DaemonError> {
    match tasks.failed() {
        Some(task) => Err(DaemonError::Runtime(format!(
            "stopped: the daemon's task {task} failed (its ERROR line above says how)"
        ))),
        None => {
            info!("stopped");
            Ok(())
        }
    }
}

/// The instant `grace` from now; a grace too long for the clock (the config accepts up to
/// i64::MAX seconds) is a century.
fn deadline_after(grace: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    now.checked_add(grace)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 60 * 60))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_grace_period_the_config_accepts_has_a_deadline() {
        let now = tokio::time::Instant::now();
        assert!(deadline_after(Duration::from_secs(5)) >= now + Duration::from_secs(5));
        // `anima check` accepts up to i64::MAX seconds: the shutdown must not panic (exit
        // 101) computing when the grace period ends.
        let far = deadline_after(Duration::from_secs(i64::MAX as u64));
        assert!(far > now + Duration::from_secs(365 * 24 * 60 * 60));
    }
}
