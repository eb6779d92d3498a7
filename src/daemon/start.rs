//! `anima run`'s start, step by step (`run` calls them in order): the tokens; the soul (store,
//! engine, company, the wakeup); Slack's API; the HTTP routes; the router; the doors; the
//! background work. Each task it starts is supervised (`tasks`), its policy said where it
//! is started.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use slack_morphism::prelude::SlackHyperClient;
use tokio::signal::unix::Signal;
use tokio::sync::oneshot;
use tracing::info;

use super::company::{self, Lead};
use super::door::{self, SocketDoor};
use super::tasks::{self, Policy, Stage, Tasks};
use super::{http, notify, reload, scans, states, DaemonError};
use crate::assistant::Words;
use crate::config::secret::Secret;
use crate::config::{Config, SlackMode};
use crate::engine::Engine;
use crate::memory::Store;
use crate::metrics::Metrics;
use crate::router::Router;
use crate::slack::api::{self, BotIdentity, SlackApi};
use crate::slack::credentials;
use crate::slack::events::{self, EventsDoor};
use crate::slack::out::SlackSurface;
use crate::slack::{signature::Verifier, socket, Gate};

/// Secrets the daemon needs, read from the environment; a missing one is a usage error that
/// names the variable.
pub(super) struct Tokens {
    bot: Secret,
    pub app: Option<Secret>,
    signing: Option<Secret>,
}

pub(super) fn tokens(config: &Config) -> Result<Tokens, DaemonError> {
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

/// The soul at run time: its engine and store, and this daemon's place among those sharing
/// it.
pub(super) struct Soul {
    pub engine: Arc<Engine>,
    pub store: Arc<dyn Store>,
    pub metrics: Arc<Metrics>,
    pub lease: Duration,
    pub lead: Lead,
}

/// Builds the engine, joins the daemons on the soul and starts its heartbeat ("heartbeat":
/// restarted if it fails, the lease outlives a back-off), the wakeup ("wakeup": once; its
/// affirmation, if any, comes through the receiver) and the reloads on SIGHUP ("reload":
/// restarted).
/// `listen` is the address `bind` bound, recorded as this daemon's among those on the soul.
pub(super) async fn soul(
    config: &Arc<Config>,
    tasks: &Tasks,
    hangups: Option<Signal>,
    listen: SocketAddr,
) -> Result<(Soul, oneshot::Receiver<Option<String>>), DaemonError> {
    let metrics = Arc::new(Metrics::default());
    let engine = Arc::new(
        Engine::build(config)
            .await?
            .with_metrics(metrics.clone())
            .with_one_to_one(Arc::new(crate::slack::one_to_one))
            .start_tools(),
    );
    let store = engine.store().clone();
    // The trace writer: turns queue their traces, it writes them in batches until the turns
    // are over (`Stage::AfterTurns`), then flushes.
    let e = engine.clone();
    tasks.spawn("traces", Stage::AfterTurns, Policy::Restart, move |stop| {
        e.write_traces(stop.cancelled_owned())
    });
    let lease = Duration::from_secs(config.store.claim_lease_secs.max(1));
    let first = company::join(&store, lease, listen).await;
    let lead = Lead::new(engine.clone());
    company::take_lead(&store, lease, &lead).await;
    let (s, l) = (store.clone(), lead.clone());
    tasks.spawn("heartbeat", Stage::AtStop, Policy::Restart, move |stop| {
        company::keep_alive(s.clone(), lease, l.clone(), stop)
    });
    // Messages wait from here until the soul is awake: the first daemon wakes it; one
    // joining others finds it awake, or waking, and waits for the first one's wakeup.
    engine.hold();
    let (woke, woken) = oneshot::channel();
    let e = engine.clone();
    tasks.spawn_once("wakeup", Stage::AtStop, move |stop| async move {
        let wakeup = async {
            if first {
                states::start(e).await
            } else {
                states::await_wakeup(e, lease).await;
                None
            }
        };
        tokio::select! {
            affirmation = wakeup => { let _ = woke.send(affirmation); }
            _ = stop.cancelled() => {}
        }
    });
    if hangups.is_some() {
        let mut hangups = Some(hangups);
        let (e, c) = (engine.clone(), config.clone());
        tasks.spawn("reload", Stage::AtStop, Policy::Restart, move |stop| {
            reload::on_hangup(hangups.take().flatten(), e.clone(), c.clone(), stop)
        });
    }
    let soul = Soul {
        engine,
        store,
        metrics,
        lease,
        lead,
    };
    Ok((soul, woken))
}

/// Slack's Web API, with the bot token.
pub(super) struct Slack {
    pub client: Arc<SlackHyperClient>,
    pub api: Arc<SlackApi>,
    pub words: Arc<Words>,
    /// Fetches the files people share (with the bot token, from Slack's file hosts only).
    pub files: Option<Arc<crate::slack::files::SlackFiles>>,
}

pub(super) fn slack(config: &Config, tokens: &Tokens, metrics: &Arc<Metrics>) -> Slack {
    let client = Arc::new(slack_morphism::SlackClient::new(api::connector(
        &config.slack.api_base_url,
    )));
    let words = Arc::new(Words::load(&config.soul_dir));
    let api = Arc::new(
        SlackApi::new(client.clone(), &tokens.bot)
            .with_metrics(metrics.clone())
            .with_words(words.clone()),
    );
    let files = match crate::slack::files::SlackFiles::new(&config.slack.api_base_url, &tokens.bot)
    {
        Ok(f) => Some(Arc::new(f)),
        Err(e) => {
            tracing::warn!(error = %e, "shared files will not be read");
            None
        }
    };
    Slack {
        client,
        api,
        words,
        files,
    }
}

/// Binds `[http] listen`, before the soul joins the daemons on it, so that the address this
/// daemon records (`Claims::join`, for `anima watch`) is the one bound: a port of 0 is a free
/// one, chosen here. A store one process uses records no daemon rows, so on SQLite the address
/// is also written beside the database (`LISTEN_FILE`), where `anima watch` looks for it.
pub(super) async fn bind(
    config: &Config,
) -> Result<(tokio::net::TcpListener, SocketAddr), DaemonError> {
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
    if config.store.backend == crate::config::StoreBackend::Sqlite {
        let file = config.db_path().with_file_name(super::LISTEN_FILE);
        if let Err(e) = std::fs::write(&file, format!("{local}\n")) {
            tracing::warn!(file = %file.display(), error = %e, "cannot record where the daemon listens; `anima watch` will not find a port chosen at start");
        }
    }
    // Said once the address is recorded: whoever waits for this line finds it there.
    info!(addr = %local, "http listening");
    Ok((listener, local))
}

/// Serves the routes on `listener` ("http": the daemon stops if the server ends, since
/// `/healthz` and the Events API are gone with it). The Events API's door has no gate until
/// `doors`.
pub(super) async fn http(
    listener: tokio::net::TcpListener,
    tasks: &Tasks,
    soul: &Soul,
    slack: &Slack,
    tokens: &Tokens,
) -> Result<Arc<EventsDoor>, DaemonError> {
    let stopping = Arc::new(AtomicBool::new(false));
    let door = Arc::new(EventsDoor {
        verifier: tokens.signing.as_ref().map(Verifier::new),
        gate: OnceLock::new(),
        metrics: soul.metrics.clone(),
        stopping: stopping.clone(),
    });
    let http_state = Arc::new(http::HttpState {
        store: soul.store.clone(),
        library: soul.engine.library().clone(),
        metrics: soul.metrics.clone(),
        whisper_token: Secret::from_env("ANIMA_WHISPER_TOKEN"),
        admin_token: Secret::from_env("ANIMA_ADMIN_TOKEN"),
        counsel: super::counsel::Counsel::from_env(&soul.engine),
        last_probe_ms: Default::default(),
        stopping,
        slack_refusals: slack.api.refusals().clone(),
    });
    let local = listener.local_addr().map_err(DaemonError::runtime)?;
    let inspector = Secret::from_env("ANIMA_INSPECT_TOKEN")
        .map(|token| crate::inspect::Inspector::new(soul.engine.clone(), token));
    if let Some(inspector) = &inspector {
        info!(addr = %local, "the inspector is served at /inspect/ (ANIMA_INSPECT_TOKEN)");
        // A turn's page links its reply to Slack once auth.test has named the workspace.
        let api = slack.api.clone();
        inspector.placing_replies(Arc::new(move |address, reference| {
            crate::slack::why::permalink(api.workspace_url().as_deref(), address, reference)
        }));
    }
    let routes = http::routes(http_state, events::routes(door.clone()), inspector.clone());
    // Started once (`Policy::StopDaemon`): the listener is the first start's.
    let mut listener = Some(listener);
    tasks.spawn("http", Stage::AtStop, Policy::StopDaemon, move |stop| {
        let (listener, routes, inspector) = (listener.take(), routes.clone(), inspector.clone());
        async move {
            let Some(listener) = listener else { return };
            let stopped = async move {
                stop.cancelled_owned().await;
                // The inspector's streams end, or the graceful shutdown would wait on them.
                if let Some(inspector) = inspector {
                    inspector.close();
                }
            };
            let _ = axum::serve(listener, routes)
                .with_graceful_shutdown(stopped)
                .await;
        }
    });
    Ok(door)
}

/// Once the wakeup is over and Slack known: its note to the ops channel ("wakeup-note":
/// once; none if the daemon stops first).
pub(super) fn wakeup_note(
    tasks: &Tasks,
    engine: &Arc<Engine>,
    ops: Option<states::Ops>,
    woken: oneshot::Receiver<Option<String>>,
) {
    let engine = engine.clone();
    tasks.spawn_once("wakeup-note", Stage::AtStop, move |stop| async move {
        let affirmation = tokio::select! {
            woken = woken => woken,
            _ = stop.cancelled() => return,
        };
        if let Ok(affirmation) = affirmation {
            states::wakeup_note(&engine, ops.as_ref(), affirmation).await;
        }
    });
}

/// The router, with Slack as its surface, once it has resumed the unfinished messages.
pub(super) async fn router(
    config: &Config,
    soul: &Soul,
    slack: &Slack,
    bot: &BotIdentity,
) -> Result<Arc<Router>, DaemonError> {
    let surface = Arc::new(SlackSurface::new(
        slack.api.clone(),
        bot.clone(),
        (
            config.slack.allow_broadcast,
            config.slack.stream_replies && config.llm.stream,
        ),
        crate::slack::budget::Limits::new(soul.store.clone()),
    ));
    let router = Router::new(
        soul.engine.clone(),
        surface,
        config.slack.max_concurrent_turns,
        soul.lease,
        soul.metrics.clone(),
    );
    let resumed = router.resume().await.map_err(DaemonError::runtime)?;
    if resumed > 0 {
        info!(conversations = resumed, "resuming unfinished messages");
    }
    Ok(router)
}

/// The gate for Slack's events, then the door they come through: Socket Mode's connections
/// (and "door", which keeps them open only while the store takes writes: the daemon stops if
/// it fails, rather than hold events it cannot record), or the Events API's route.
#[allow(clippy::too_many_arguments)]
pub(super) async fn doors(
    config: &Config,
    app: Option<Secret>,
    tasks: &Tasks,
    soul: &Soul,
    slack: &Slack,
    bot: BotIdentity,
    router: &Arc<Router>,
    events: &EventsDoor,
) -> Option<Arc<SocketDoor>> {
    let gate = Arc::new(Gate {
        bot,
        config: config.slack.clone(),
        router: router.clone(),
        metrics: soul.metrics.clone(),
        api: slack.api.clone(),
        store: soul.store.clone(),
        admins: config.admin_users.clone(),
        words: slack.words.clone(),
        inspect: config.inspect.clone(),
    });
    let _ = events.gate.set(gate.clone());
    match config.slack.mode {
        SlackMode::Socket => {
            let app = app.expect("socket mode has an app token");
            let door = SocketDoor::new(
                socket::listener(slack.client.clone(), gate),
                app,
                slack.api.clone(),
                soul.metrics.clone(),
                Duration::from_secs(config.slack.app_token_check_secs.max(1)),
            );
            door.connect().await;
            let (d, s) = (door.clone(), soul.store.clone());
            tasks.spawn("door", Stage::AtStop, Policy::StopDaemon, move |stop| {
                door::follow_the_store(d.clone(), s.clone(), stop)
            });
            Some(door)
        }
        SlackMode::Events => {
            soul.metrics.slack_connected.store(true, Ordering::SeqCst);
            info!("ready for Events API requests on POST /slack/events");
            None
        }
    }
}

/// The work beside the turns: the claims' heartbeat ("claims": restarted; it runs until the
/// turns in flight are let go, `Stage::AfterTurns`, since a turn draining after the stop
/// still posts under its claim), the service manager's READY ("ready": once) and watchdog
/// ("watchdog": restarted), and the scans (`scans`).
pub(super) fn background(tasks: &Tasks, soul: &Soul, router: &Arc<Router>) {
    let r = router.clone();
    tasks.spawn("claims", Stage::AfterTurns, Policy::Restart, move |stop| {
        let r = r.clone();
        tasks::watching(stop, move |stop| crate::router::keep_claims(r, stop))
    });
    if notify::managed() {
        let metrics = soul.metrics.clone();
        tasks.spawn_once("ready", Stage::AtStop, move |stop| {
            notify::ready_when_connected(metrics, stop)
        });
    }
    if let Some(every) = notify::watchdog_every() {
        let store = soul.store.clone();
        tasks.spawn("watchdog", Stage::AtStop, Policy::Restart, move |stop| {
            notify::watchdog(store.clone(), every, stop)
        });
    }
    scans::start(tasks, &soul.engine, router, &soul.lead);
}
