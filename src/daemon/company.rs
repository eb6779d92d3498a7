//! The daemons that share one soul (several `anima run` on one PostgreSQL): this one joins
//! them when it starts and leaves when it stops, and its heartbeat says it is alive meanwhile.
//! The first to join wakes the soul; the last to leave runs the shutdown protocol; the others
//! only hand their conversations over. On SQLite a daemon is always alone.
//!
//! Joining and leaving are one at a time in the store, so of two daemons starting (or
//! stopping) together exactly one is the first (or the last).
//!
//! One daemon at a time leads the soul's scheduled work (dreams, solitude, follow-ups, the
//! psyche's tick, upkeep: every `Scan`): the lead is a lease the heartbeat renews, so when the
//! leader dies another daemon takes it within the lease. A leader that was only paused may
//! finish the scan it was in when it wakes; the work itself is guarded in the store (a
//! follow-up runs under its conversation's claim and is fenced like a message's turn; a
//! dream's consolidation and a state move are conditioned on what they read).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::engine::Engine;
use crate::memory::{DaemonRow, Store};

/// Joins the daemons on this soul: true if no other runs (this one wakes the soul). A store
/// that cannot say is taken for no company, as a daemon alone would be. A daemon of this
/// machine whose process is gone (this one's predecessor, killed) and whose heartbeat stands
/// still is buried first: its conversations are this one's at once, and the soul's crash is
/// recorded as for one daemon.
/// `listen` is where its HTTP server listens (`[http] listen` as bound: a port of 0 is the
/// one chosen), kept for whoever follows its soul stream.
pub async fn join(store: &Arc<dyn Store>, lease: Duration, listen: SocketAddr) -> bool {
    let host = host();
    match store.daemons().await {
        Ok(running) => {
            // Not joined yet: a row of this machine with this process's pid is a predecessor
            // too (a container restarted, its daemon process 1 again).
            let own = i64::from(std::process::id());
            let gone: Vec<DaemonRow> = running
                .into_iter()
                .filter(|d| d.host == host && (d.pid == own || !alive(d.pid)))
                .collect();
            bury_the_still(store, gone, lease).await;
        }
        Err(e) => warn!(error = %e, "cannot list the daemons running"),
    }
    let listen = listen.to_string();
    match store.join(&host, std::process::id(), &listen, lease).await {
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

/// Whether this daemon leads the soul's scheduled work now (set by `keep_alive`). The leader
/// alone exports user models to git: one repository at a time receives every version, once
/// and in order (the others' turns leave theirs to it; it catches up at every scan).
#[derive(Clone)]
pub struct Lead {
    leads: Arc<AtomicBool>,
    engine: Arc<Engine>,
}

impl Lead {
    /// Not leading (yet): `engine` exports nothing until it leads.
    pub fn new(engine: Arc<Engine>) -> Lead {
        engine.export_models_here(false);
        Lead {
            leads: Arc::default(),
            engine,
        }
    }

    pub fn leads(&self) -> bool {
        self.leads.load(Ordering::SeqCst)
    }

    fn set(&self, leads: bool) {
        self.engine.export_models_here(leads);
        if self.leads.swap(leads, Ordering::SeqCst) != leads {
            if leads {
                info!("leading the soul's scheduled work");
            } else {
                info!("another daemon leads the soul's scheduled work");
            }
        }
    }
}

/// Buries those of `gone` whose heartbeat stands still over a beat: a name and a pid of this
/// machine that no process here has are not proof enough (a replica in another pid namespace
/// may share both), a heartbeat that does not move is.
async fn bury_the_still(store: &Arc<dyn Store>, gone: Vec<DaemonRow>, lease: Duration) {
    if gone.is_empty() {
        return;
    }
    tokio::time::sleep(lease / 3 + Duration::from_millis(500)).await;
    let now = match store.daemons().await {
        Ok(now) => now,
        Err(e) => {
            warn!(error = %e, "cannot list the daemons running");
            return;
        }
    };
    for d in gone {
        let still = now
            .iter()
            .any(|n| n.daemon == d.daemon && n.heartbeat_ms == d.heartbeat_ms);
        if !still {
            continue;
        }
        info!(
            pid = d.pid,
            "a daemon of this machine died; taking its place"
        );
        if let Err(e) = store.bury(&d.daemon).await {
            warn!(error = %e, "the dead daemon stays until its lease ends");
        }
    }
}

/// Takes the lead if no daemon holds it, before the scans begin (so a daemon alone has its
/// first scans at start, not a period later).
pub async fn take_lead(store: &Arc<dyn Store>, lease: Duration, lead: &Lead) {
    match store.lead(lease).await {
        Ok(leads) => lead.set(leads),
        Err(e) => warn!(error = %e, "cannot tell who leads; not leading meanwhile"),
    }
}

/// Renews this daemon's heartbeat, and takes or renews the lead, every `lease / 3` until it
/// stops (`stop` cancelled). A lead the store cannot confirm is not held.
pub async fn keep_alive(
    store: Arc<dyn Store>,
    lease: Duration,
    lead: Lead,
    stop: CancellationToken,
) {
    let mut beats = tokio::time::interval((lease / 3).max(Duration::from_millis(100)));
    beats.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let stopping = tokio::select! {
            _ = beats.tick() => false,
            _ = stop.cancelled() => true,
        };
        if stopping {
            // The scans stop; the lead's claim is this daemon's until it leaves, so the turns
            // still draining export their users' models as before.
            lead.leads.store(false, Ordering::SeqCst);
            return;
        }
        if let Err(e) = store.heartbeat(&[], lease).await {
            warn!(error = %e, "the daemon's heartbeat failed; retrying");
        }
        match store.lead(lease).await {
            Ok(leads) => lead.set(leads),
            Err(e) => {
                warn!(error = %e, "cannot tell who leads; not leading meanwhile");
                lead.set(false);
            }
        }
    }
}

/// Whether process `pid` of this machine still runs (Linux: it has a `/proc` entry, and is not
/// a zombie waiting for its parent to read its end).
fn alive(pid: i64) -> bool {
    if pid <= 0 {
        return false;
    }
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the command's name, which is in parentheses.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_none_or(|(_, rest)| !rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// This machine's name, as `anima state` shows it.
pub fn host() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}
