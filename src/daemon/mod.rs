//! `anima run`: wiring, signals, graceful drain, and the cognitive states at run time
//! (`states`).
//!
//! Start: config, soul, provider, store → the wakeup (in the background; messages wait in
//! the inbox until it is over) → HTTP routes → Slack takes the tokens (auth.test, and
//! apps.connections.open in Socket Mode: retried while Slack is unreachable, exit 2 when it
//! refuses one) → router (resuming unfinished messages) → Socket Mode (`door`: closed while
//! the store does not answer) or Events API intake.
//! SIGTERM/SIGINT: stop intake; the shutdown protocol (consent, as the template says) and
//! the turns in flight end within `shutdown_grace_secs`; exit 0; unfinished inbox rows wait
//! for the next start. SIGHUP: the config is read again and its tool servers put in force
//! (`reload`). Under systemd, the service manager hears READY, WATCHDOG and STOPPING
//! (`notify`).

mod company;
mod door;
mod forgetting;
mod http;
mod notify;
mod reload;
pub mod states;
mod waiting;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::sync::watch;
use tracing::{info, warn};

use crate::config::secret::Secret;
use crate::config::{Config, SlackMode};
use crate::engine::{BuildError, Engine};
use crate::metrics::Metrics;
use crate::router::Router;
use crate::slack::api::{self, SlackApi};
use crate::slack::credentials;
use crate::slack::events::{self, EventsDoor};
use crate::slack::out::SlackSurface;
use crate::slack::{signature::Verifier, socket, Gate};

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

/// Secrets the daemon needs, read from the environment; a missing one is a usage error that
/// names the variable.
struct Tokens {
    bot: Secret,
    app: Option<Secret>,
    signing: Option<Secret>,
}

fn tokens(config: &Config) -> Result<Tokens, DaemonError> {
    let need = |name: &str, what: &str| {
        Secret::from_env(name)
            .ok_or_else(|| DaemonError::Usage(format!("{name} is not set: export {what}")))
    };
    let bot = need(
        "SLACK_BOT_TOKEN",
        "the bot token (xoxb-…) from your Slack app's OAuth page",
    )?;
    let (app, signing) = match config.slack.mode {
        SlackMode::Socket => (
            Some(need(
                "SLACK_APP_TOKEN",
                "an app-level token (xapp-…) with connections:write, for Socket Mode",
            )?),
            None,
        ),
        SlackMode::Events => (
            None,
            Some(need(
                "SLACK_SIGNING_SECRET",
                "the signing secret from your Slack app's Basic Information page",
            )?),
        ),
    };
    let misplaced = credentials::misplaced_all(&bot, app.as_ref());
    if !misplaced.is_empty() {
        return Err(DaemonError::Usage(misplaced.join("; ")));
    }
    Ok(Tokens { bot, app, signing })
}

pub async fn run(config: Arc<Config>) -> Result<(), DaemonError> {
    let tokens = tokens(&config)?;
    // One daemon per SQLite home, from before anything wakes until this returns (or the
    // process ends, however). A home that cannot be held is the operator's to fix.
    let _home = crate::memory::home_lock::hold_home(&config.store, &config.db_path())
        .map_err(|e| DaemonError::Usage(e.to_string()))?;
    // Before anything slow: from here a SIGHUP waits to be handled rather than ending anima.
    let hangups = reload::listen();
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(signals(stop_tx));
    if !waiting::for_database(&config, &mut stop_rx.clone()).await? {
        info!("stopped while waiting for the database");
        return Ok(());
    }
    let metrics = Arc::new(Metrics::default());
    let engine = Arc::new(
        Engine::build(&config)
            .await?
            .with_metrics(metrics.clone())
            .start_tools(),
    );
    let store = engine.store().clone();
    let lease = Duration::from_secs(config.store.claim_lease_secs.max(1));
    let first = company::join(&store, lease).await;
    let lead = company::Lead::new(engine.clone());
    company::take_lead(&store, lease, &lead).await;
    tokio::spawn(company::keep_alive(
        store.clone(),
        lease,
        lead.clone(),
        stop_rx.clone(),
    ));
    let waking = {
        let engine = engine.clone();
        // Messages wait from here until the soul is awake: the first daemon wakes it; one
        // joining others finds it awake, or waking, and waits for the first one's wakeup.
        engine.hold();
        tokio::spawn(async move {
            if first {
                states::start(engine).await
            } else {
                states::await_wakeup(engine, lease).await;
                None
            }
        })
    };

    tokio::spawn(reload::on_hangup(
        hangups,
        engine.clone(),
        config.clone(),
        stop_rx.clone(),
    ));

    let client = Arc::new(slack_morphism::SlackClient::new(api::connector(
        &config.slack.api_base_url,
    )));
    let words = Arc::new(crate::assistant::Words::load(&config.soul_dir));
    let slack = Arc::new(
        SlackApi::new(client.clone(), &tokens.bot)
            .with_metrics(metrics.clone())
            .with_words(words.clone()),
    );

    let stopping = Arc::new(AtomicBool::new(false));
    let door = Arc::new(EventsDoor {
        verifier: tokens.signing.as_ref().map(Verifier::new),
        gate: OnceLock::new(),
        metrics: metrics.clone(),
        stopping: stopping.clone(),
    });
    let http_state = Arc::new(http::HttpState {
        store: store.clone(),
        library: engine.library().clone(),
        metrics: metrics.clone(),
        whisper_token: Secret::from_env("ANIMA_WHISPER_TOKEN"),
        admin_token: Secret::from_env("ANIMA_ADMIN_TOKEN"),
        last_probe_ms: Default::default(),
        stopping: stopping.clone(),
        slack_refusals: slack.refusals().clone(),
    });
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| {
            DaemonError::Runtime(format!(
                "cannot listen on {} (`[http] listen` in {}): {e}",
                config.listen,
                config.origin()
            ))
        })?;
    let local = listener.local_addr().map_err(DaemonError::runtime)?;
    info!(addr = %local, "http listening");
    let mut http_stop = stop_rx.clone();
    let routes = http::routes(http_state, events::routes(door.clone()));
    let server = tokio::spawn(async move {
        let _ = axum::serve(listener, routes)
            .with_graceful_shutdown(async move {
                let _ = http_stop.wait_for(|s| *s).await;
            })
            .await;
    });

    let bot = match door::slack_takes_tokens(&slack, tokens.app.as_ref(), &stop_rx).await {
        Ok(Some(bot)) => bot,
        stopped_or_refused => {
            waking.abort();
            states::stopped_early(&engine).await;
            return match stopped_or_refused {
                Err(refused) => Err(DaemonError::Usage(refused)),
                Ok(_) => {
                    info!("stopped before Slack answered");
                    Ok(())
                }
            };
        }
    };
    let ops = (!config.ops_channel.is_empty()).then(|| states::Ops {
        api: slack.clone(),
        bot: bot.clone(),
        channel: config.ops_channel.clone(),
    });
    let waking_abort = waking.abort_handle();
    {
        let (engine, ops) = (engine.clone(), ops.clone());
        tokio::spawn(async move {
            if let Ok(affirmation) = waking.await {
                states::wakeup_note(&engine, ops.as_ref(), affirmation).await;
            }
        });
    }
    info!(user = %bot.user_id, bot = bot.bot_id.as_deref().unwrap_or(""), team = %bot.team, "Slack identity known");

    let surface = Arc::new(SlackSurface::new(
        slack.clone(),
        bot.clone(),
        (
            config.slack.allow_broadcast,
            config.slack.stream_replies && config.llm.stream,
        ),
        crate::slack::budget::Limits::new(engine.store().clone()),
    ));
    let router = Router::new(
        engine.clone(),
        surface,
        config.slack.max_concurrent_turns,
        lease,
        metrics.clone(),
    );
    let resumed = router.resume().await.map_err(DaemonError::runtime)?;
    if resumed > 0 {
        info!(conversations = resumed, "resuming unfinished messages");
    }
    let gate = Arc::new(Gate {
        bot,
        config: config.slack.clone(),
        router: router.clone(),
        metrics: metrics.clone(),
        api: slack.clone(),
        store: store.clone(),
        admins: config.admin_users.clone(),
        words,
    });
    let _ = door.gate.set(gate.clone());

    let socket = match config.slack.mode {
        SlackMode::Socket => {
            let app = tokens.app.expect("socket mode has an app token");
            let door = door::SocketDoor::new(
                socket::listener(client, gate),
                app,
                slack.clone(),
                metrics.clone(),
                Duration::from_secs(config.slack.app_token_check_secs.max(1)),
            );
            door.connect().await;
            tokio::spawn(door::follow_the_store(
                door.clone(),
                store.clone(),
                stop_rx.clone(),
            ));
            Some(door)
        }
        SlackMode::Events => {
            metrics.slack_connected.store(true, Ordering::SeqCst);
            info!("ready for Events API requests on POST /slack/events");
            None
        }
    };
    // From here a token Slack refuses is an ERROR line and a reason for `/healthz`.
    slack.refusals().arm();

    // Claims are renewed until the turns in flight are over and let go, not only until the
    // stop signal: a turn draining after it still posts under its claim.
    let (claims_done, claims_stop) = watch::channel(false);
    tokio::spawn(crate::router::keep_claims(router.clone(), claims_stop));
    notify::ready_when_connected(metrics.clone(), stop_rx.clone());
    notify::watchdog(store.clone(), stop_rx.clone());
    let every = Duration::from_secs(config.proactive_scan_secs);
    let scan = || Scan::new(every, stop_rx.clone(), lead.clone());
    tokio::spawn(states::solitude(engine.clone(), scan()));
    tokio::spawn(states::dreams(engine.clone(), scan()));
    tokio::spawn(follow_ups(engine.clone(), router.clone(), scan()));
    tokio::spawn(psyche_ticks(router.clone(), every, scan()));
    tokio::spawn(model_exports(engine.clone(), scan()));
    tokio::spawn(forgetting::quiet_conversations(
        store.clone(),
        config.memory.keep,
        scan(),
    ));

    let mut stop = stop_rx.clone();
    let _ = stop.wait_for(|s| *s).await;
    info!(
        grace_secs = config.shutdown_grace_secs,
        "stopping: no new messages; finishing turns in flight"
    );
    stopping.store(true, Ordering::SeqCst);
    notify::stopping();
    if let Some(door) = &socket {
        door.shut().await;
    }
    metrics.slack_connected.store(false, Ordering::SeqCst);
    waking_abort.abort();
    engine.close_held();
    let grace = Duration::from_secs(config.shutdown_grace_secs);
    let deadline = deadline_after(grace);
    let signal = SIGNAL.get().copied().unwrap_or("stop");
    // Only the last daemon puts the soul to sleep; one that leaves others running hands its
    // conversations over once its turns in flight are done.
    let last = company::leave(&store).await;
    let shutdown = async {
        if last {
            states::shut_down(&engine, &router, &metrics, ops.as_ref(), signal, deadline).await
        }
    };
    let (finished, ()) = tokio::join!(router.drain(grace), shutdown);
    router.let_go_all().await;
    let _ = claims_done.send(true);
    if !finished {
        warn!("grace period over; unfinished messages stay in the inbox for the next start");
    }
    // The turns are done: the tool servers' children end.
    engine.stop_tools().await;
    let _ = tokio::time::timeout(Duration::from_secs(2), server).await;
    info!("stopped");
    Ok(())
}

/// Every `[processes] proactive_scan_secs`: quiet threads get a chance at one proactive
/// follow-up.
/// A periodic scan (quiet threads, solitude, dreams, the psyche's tick) that ends when the
/// daemon stops, and runs only while this daemon leads the soul's scheduled work (one daemon
/// of those sharing a soul). A scan that runs late skips the ticks it missed.
pub(crate) struct Scan {
    tick: tokio::time::Interval,
    stop: watch::Receiver<bool>,
    lead: company::Lead,
}

impl Scan {
    pub(crate) fn new(every: Duration, stop: watch::Receiver<bool>, lead: company::Lead) -> Scan {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        Scan { tick, stop, lead }
    }

    /// Waits for the next scan this daemon leads: false once the daemon is stopping.
    pub(crate) async fn next(&mut self) -> bool {
        loop {
            let ticked = tokio::select! {
                _ = self.tick.tick() => true,
                _ = self.stop.wait_for(|s| *s) => false,
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

/// How far back a tick looks for an overheard message to come back to.
const TICK_REACH: Duration = Duration::from_secs(15 * 60);

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

/// The instant `grace` from now; a grace too long for the clock (the config accepts up to
/// i64::MAX seconds) is a century.
fn deadline_after(grace: Duration) -> tokio::time::Instant {
    let now = tokio::time::Instant::now();
    now.checked_add(grace)
        .unwrap_or_else(|| now + Duration::from_secs(100 * 365 * 24 * 60 * 60))
}

/// The signal that stopped the daemon, for the shutdown's record.
static SIGNAL: OnceLock<&'static str> = OnceLock::new();

async fn signals(stop: watch::Sender<bool>) {
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
    };
    info!("{name}");
    let _ = SIGNAL.set(name);
    let _ = stop.send(true);
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
