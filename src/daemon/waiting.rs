//! Waiting for a database that cannot be reached when the daemon starts (PostgreSQL down,
//! still starting, or across a network that is not up yet): tried again with backoff, said
//! in the log, and `/healthz` answers 503 with the reason meanwhile. No door to Slack is
//! open until the store can record what comes through it, so no event is acknowledged that
//! could not be stored. Refused credentials or a missing database are not waited for: they
//! are the configuration's to fix.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::DaemonError;
use crate::config::{Config, StoreBackend};
use crate::memory::postgres::Postgres;
use crate::memory::StoreError;

/// The longest wait between two tries.
const MAX_WAIT: Duration = Duration::from_secs(30);

/// Returns once the configured database answers; at once for SQLite. `false`: asked to stop
/// (`stop` cancelled) while waiting.
pub async fn for_database(config: &Config, stop: &CancellationToken) -> Result<bool, DaemonError> {
    if config.store.backend != StoreBackend::Postgres {
        return Ok(true);
    }
    let url = crate::memory::open::database_url()
        .map_err(|e| DaemonError::Usage(format!("{}: {e}", config.origin())))?;
    let reason = Arc::new(Mutex::new(String::new()));
    let mut health: Option<(
        tokio::task::JoinHandle<()>,
        tokio::sync::oneshot::Sender<()>,
    )> = None;
    let mut wait = Duration::from_secs(1);
    let outcome = loop {
        match Postgres::inspect(url.expose()).await {
            Ok(_) => break Ok(true),
            Err(e @ StoreError::Unreachable { .. }) => {
                warn!(error = %e, retry_in_secs = wait.as_secs(), "waiting for the database");
                *reason.lock().unwrap_or_else(|p| p.into_inner()) =
                    format!("waiting for the database: {e}");
                if health.is_none() {
                    health = serve_waiting(config, reason.clone()).await;
                }
                tokio::select! {
                    _ = tokio::time::sleep(wait) => {}
                    _ = stop.cancelled() => break Ok(false),
                }
                wait = (wait * 2).min(MAX_WAIT);
            }
            Err(e) => break Err(DaemonError::Usage(e.to_string())),
        }
    };
    if let Some((server, quit)) = health {
        let _ = quit.send(());
        let _ = server.await;
    }
    if matches!(outcome, Ok(true)) && wait > Duration::from_secs(1) {
        info!("the database answers");
    }
    outcome
}

/// `/healthz` (503, the reason) on `[http] listen` while the daemon waits; stopped, and the
/// port let go, before the daemon's own routes take it.
async fn serve_waiting(
    config: &Config,
    reason: Arc<Mutex<String>>,
) -> Option<(
    tokio::task::JoinHandle<()>,
    tokio::sync::oneshot::Sender<()>,
)> {
    let listener = match tokio::net::TcpListener::bind(config.listen).await {
        Ok(l) => l,
        Err(e) => {
            warn!(addr = %config.listen, error = %e, "cannot listen while waiting for the database");
            return None;
        }
    };
    if let Ok(addr) = listener.local_addr() {
        info!(addr = %addr, "health answers 503 until the database does");
    }
    let routes = axum::Router::new()
        .route(
            "/healthz",
            get(|State(r): State<Arc<Mutex<String>>>| async move {
                let why = r.lock().unwrap_or_else(|p| p.into_inner()).clone();
                (StatusCode::SERVICE_UNAVAILABLE, why)
            }),
        )
        .with_state(reason);
    let (quit, quitting) = tokio::sync::oneshot::channel();
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, routes)
            .with_graceful_shutdown(async move {
                let _ = quitting.await;
            })
            .await;
    });
    Some((server, quit))
}
