//! `anima run`: wiring, signals, graceful drain, and the cognitive states at run time
//! (`states`).
//!
//! Start: config, soul, provider, store → the wakeup (in the background; messages wait in
//! the inbox until it is over) → HTTP routes → Slack takes the tokens (auth.test, and
//! apps.connections.open in Socket Mode: retried while Slack is unreachable, exit 2 when it
//! refuses one) → router (resuming unfinished messages) → Socket Mode (`door`: closed while
//! the store does not answer) or Events API intake.
//! Each step is `start`'s; every task it starts in the background is supervised by `tasks`
//! (a task that fails is logged by name, then started again or stops the daemon).
//! SIGTERM/SIGINT, or a task the daemon cannot run without failing: stop intake; the shutdown
//! protocol (consent, as the template says) and the turns in flight end within
//! `shutdown_grace_secs`; exit 0 (non-zero after a failed task); unfinished inbox rows wait
//! for the next start (`shutdown`). SIGHUP: the config is read again and its tool servers put
//! in force (`reload`). Under systemd, the service manager hears READY, WATCHDOG and STOPPING
//! (`notify`).

mod company;
mod counsel;
mod door;
mod forgetting;
mod http;
mod notify;
mod reload;
mod scans;
mod shutdown;
mod start;
pub mod states;
mod tasks;
mod waiting;

use std::sync::Arc;

use tracing::info;

use crate::config::Config;
use crate::engine::BuildError;
use tasks::{Backoff, Stage, Tasks};

/// This machine's name, as the daemons sharing a soul record it (`anima watch` reaches a
/// daemon listening on every address of this machine through the loopback).
pub use company::host;

/// The file beside a SQLite home's database where its daemon writes the address it listens on
/// (`[http] listen` as bound: a port of 0 made a real one), for `anima watch`.
pub const LISTEN_FILE: &str = "daemon.listen";

/// Why the daemon could not run.
#[derive(Debug, thiserror::Error)]
pub enum DaemonError {
    /// Something the person must set or fix (a missing token, a bad soul file): exit 2.
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Runtime(String),
}

impl DaemonError {
    fn runtime(e: impl std::fmt::Display) -> Self {
        DaemonError::Runtime(e.to_string())
    }
}

impl From<BuildError> for DaemonError {
    fn from(e: BuildError) -> Self {
        match e {
            BuildError::Config(m) => DaemonError::Usage(m),
            BuildError::Runtime(m) => DaemonError::Runtime(m),
        }
    }
}

pub async fn run(config: Arc<Config>) -> Result<(), DaemonError> {
    let tokens = start::tokens(&config)?;
    // One daemon per SQLite home, from before anything wakes until this returns (or the
    // process ends, however). A home that cannot be held is the operator's to fix.
    let _home = crate::memory::home_lock::hold_home(&config.store, &config.db_path())
        .map_err(|e| DaemonError::Usage(e.to_string()))?;
    // Before anything slow: from here a SIGHUP waits to be handled rather than ending anima.
    let hangups = reload::listen();
    let tasks = Tasks::new(Backoff::DAEMON);
    let stop = tasks.stopping();
    let s = stop.clone();
    tasks.spawn_once("signals", Stage::AtStop, move |done| {
        shutdown::signals(s, done)
    });
    if !waiting::for_database(&config, &stop).await? {
        info!("stopped while waiting for the database");
        return Ok(());
    }
    let (listener, bound) = start::bind(&config).await?;
    let (soul, woken) = start::soul(&config, &tasks, hangups, bound).await?;
    let slack = start::slack(&config, &tokens, &soul.metrics);
    if let Some(files) = &slack.files {
        soul.engine.fetch_files_with(files.clone());
    }
    let events = start::http(listener, &tasks, &soul, &slack, &tokens).await?;

    let bot = match door::slack_takes_tokens(&slack.api, tokens.app.as_ref(), &stop).await {
        Ok(Some(bot)) => bot,
        stopped_or_refused => return shutdown::early(&tasks, &soul, stopped_or_refused).await,
    };
    let ops = (!config.ops_channel.is_empty()).then(|| states::Ops {
        api: slack.api.clone(),
        bot: bot.clone(),
        channel: config.ops_channel.clone(),
    });
    start::wakeup_note(&tasks, &soul.engine, ops.clone(), woken);
    info!(user = %bot.user_id, bot = bot.bot_id.as_deref().unwrap_or(""), team = %bot.team, "Slack identity known");

    let router = start::router(&config, &soul, &slack, &bot).await?;
    let socket = start::doors(
        &config, tokens.app, &tasks, &soul, &slack, bot, &router, &events,
    )
    .await;
    // From here a token Slack refuses is an ERROR line and a reason for `/healthz`.
    slack.api.refusals().arm();
    start::background(&tasks, &soul, &router);

    stop.cancelled().await;
    shutdown::stop(shutdown::Running {
        config: &config,
        tasks: &tasks,
        soul: &soul,
        router: &router,
        events: &events,
        socket,
        ops,
    })
    .await
}
