//! The Socket Mode door: opened once Slack takes the app token, closed while the store does
//! not take writes, opened again once it does.
//!
//! A daemon whose store does not answer cannot record an event, so it leaves it
//! unacknowledged; while its connections stay open, Slack's retries keep landing on it (Slack
//! gives each envelope to one of the app's open connections) and an event can use up its
//! retries there. So such a daemon steps aside: once a write failed for want of the store
//! (`WriteHealth`) and a probe write fails too, it closes its Socket Mode connections, and
//! Slack sends its retries to the other daemons' connections, or, with no other daemon, to
//! this one's once it is back. A probe write every second says when the store answers again;
//! then the connections open anew. `/healthz` answers 503 meanwhile (the store's reason).
//!
//! At start, before any message is taken, Slack must take both tokens (`slack_takes_tokens`:
//! auth.test, apps.connections.open): a refusal ends the daemon (exit 2). On a reopening, a
//! refused app token is an ERROR line, `/healthz` names it, and the door is tried again every
//! minute. While the door is open, Slack is asked every `[slack] app_token_check_secs` whether
//! it still takes the app token: slack-morphism reconnects its connections by itself and says
//! nothing of a refusal, so a token revoked while connected would otherwise go unsaid. Owns
//! no event: `slack::socket` reads them and `Gate` records them.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use slack_morphism::prelude::SlackApiToken;
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::secret::Secret;
use crate::memory::Store;
use crate::metrics::Metrics;
use crate::slack::api::{BotIdentity, SlackApi};
use crate::slack::credentials::{self, Answer, Token};
use crate::slack::socket::{self, Listener};

/// How often an open door looks at the store's last writes.
const WATCH_EVERY: Duration = Duration::from_millis(250);
/// How often a closed door proves the store with a write.
const PROBE_EVERY: Duration = Duration::from_secs(1);
/// How long a probe write may take before the store counts as not answering.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// The longest wait between two tries of apps.connections.open while Slack is unreachable.
const MAX_WAIT: Duration = Duration::from_secs(30);
/// The wait between two tries while Slack refuses the app token.
const REFUSED_WAIT: Duration = Duration::from_secs(60);

pub struct SocketDoor {
    listener: Listener,
    app: Secret,
    api: Arc<SlackApi>,
    metrics: Arc<Metrics>,
    /// How often an open door asks Slack whether it still takes the app token.
    check_every: Duration,
    /// Open (connections registered and started); `None` once shut for good.
    open: Mutex<Option<bool>>,
}

impl SocketDoor {
    pub fn new(
        listener: Listener,
        app: Secret,
        api: Arc<SlackApi>,
        metrics: Arc<Metrics>,
        check_every: Duration,
    ) -> Arc<SocketDoor> {
        Arc::new(SocketDoor {
            listener,
            app,
            api,
            metrics,
            check_every,
            open: Mutex::new(Some(false)),
        })
    }

    fn token(&self) -> SlackApiToken {
        socket::app_token(&self.app)
    }

    /// Registers and starts the connections (slack-morphism's listener takes a new token
    /// registration after a shutdown: its clients were drained). At start, after
    /// `slack_takes_tokens`.
    pub async fn connect(&self) {
        let mut open = self.open.lock().await;
        if *open != Some(false) {
            return;
        }
        if let Err(e) = self.listener.listen_for(&self.token()).await {
            warn!(error = %e, "Socket Mode: the connections could not be set up");
            return;
        }
        self.listener.start().await;
        *open = Some(true);
    }

    /// Closes the connections; Slack gives their unacknowledged envelopes to others.
    async fn close(&self) {
        let mut open = self.open.lock().await;
        if *open == Some(true) {
            self.listener.shutdown().await;
            *open = Some(false);
        }
        self.metrics.slack_connected.store(false, Ordering::SeqCst);
    }

    /// Closes the connections for good (the daemon stops): nothing opens them again.
    pub async fn shut(&self) {
        self.close().await;
        *self.open.lock().await = None;
    }

    /// Opens the door again after stepping aside: apps.connections.open until Slack takes
    /// the token (a refusal is an ERROR line, through the API's `Refusals`, and is tried
    /// again every minute), then the connections. False: stopped first.
    async fn reopen(&self, stop: &CancellationToken) -> bool {
        let mut wait = Duration::from_millis(500);
        loop {
            match credentials::ask_app(&self.api, &self.app).await {
                Answer::Accepted => break,
                Answer::Refused { code, .. } => {
                    warn!(var = Token::App.var(), code = %code, "Socket Mode: Slack refuses the app token; trying again in a minute");
                    wait = REFUSED_WAIT;
                }
                Answer::Unanswered(e) => {
                    warn!(error = %e, retry_in_ms = wait.as_millis() as u64, "Socket Mode: Slack did not open a connection; retrying");
                    wait = (wait * 2).min(MAX_WAIT);
                }
            }
            if stopped_during(stop, wait).await {
                return false;
            }
        }
        self.connect().await;
        true
    }
}

/// At start, before any message is taken: Slack answers and takes the tokens, the bot's
/// (auth.test, which gives the bot's identity) and in Socket Mode the app's
/// (apps.connections.open), each asked until Slack answers (backing off while it is
/// unreachable). `Ok(None)`: asked to stop first; `Err`: the paragraph that says which token
/// Slack refuses, which no retry mends.
pub async fn slack_takes_tokens(
    api: &SlackApi,
    app: Option<&Secret>,
    stop: &CancellationToken,
) -> Result<Option<BotIdentity>, String> {
    // The API's wait watches a channel of its own: it is left when `stop` is cancelled.
    let never = tokio::sync::watch::channel(false);
    let bot = tokio::select! {
        bot = api.connect(&never.1) => bot?,
        _ = stop.cancelled() => None,
    };
    let Some(bot) = bot else {
        return Ok(None);
    };
    let Some(app) = app else {
        return Ok(Some(bot));
    };
    let mut wait = Duration::from_millis(500);
    loop {
        match credentials::ask_app(api, app).await {
            Answer::Accepted => return Ok(Some(bot)),
            Answer::Refused { why, .. } => return Err(why),
            Answer::Unanswered(e) => {
                warn!(error = %e, retry_in_ms = wait.as_millis() as u64, "Socket Mode: Slack did not open a connection; retrying")
            }
        }
        if stopped_during(stop, wait).await {
            return Ok(None);
        }
        wait = (wait * 2).min(MAX_WAIT);
    }
}

/// Sleeps `wait`; true if `stop` was cancelled meanwhile.
async fn stopped_during(stop: &CancellationToken, wait: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(wait) => false,
        _ = stop.cancelled() => true,
    }
}

/// Probe writes that prove the store answers, one at a time: one that takes longer than
/// `PROBE_TIMEOUT` counts as a failure and is left to finish (SQLite waits out its busy
/// timeout) before the next begins, so a long outage does not pile probes up.
struct Prober {
    store: Arc<dyn Store>,
    running: Option<tokio::task::JoinHandle<bool>>,
}

impl Prober {
    async fn store_answers(&mut self) -> bool {
        let mut probe = self.running.take().unwrap_or_else(|| {
            let store = self.store.clone();
            tokio::spawn(async move { store.probe().await.is_ok() })
        });
        match tokio::time::timeout(PROBE_TIMEOUT, &mut probe).await {
            Ok(done) => done.unwrap_or(false),
            Err(_) => {
                self.running = Some(probe);
                false
            }
        }
    }
}

/// Keeps the door open while the store takes writes, and closed while it does not, until
/// the daemon stops (`stop` cancelled).
pub async fn follow_the_store(
    door: Arc<SocketDoor>,
    store: Arc<dyn Store>,
    stop: CancellationToken,
) {
    let mut prober = Prober {
        store: store.clone(),
        running: None,
    };
    loop {
        // Open: a failed write, confirmed by a probe (one broken connection in a pool is not
        // a store that does not answer), sends the daemon aside.
        let mut asked = tokio::time::Instant::now();
        loop {
            if stopped_during(&stop, WATCH_EVERY).await {
                return;
            }
            if store.write_health().failing().is_some() && !prober.store_answers().await {
                break;
            }
            if asked.elapsed() >= door.check_every {
                // A refusal is noted by the call itself (an ERROR line, `/healthz`), and so
                // is Slack taking the token again; a Slack that does not answer says nothing
                // of the token.
                let _ = credentials::ask_app(&door.api, &door.app).await;
                asked = tokio::time::Instant::now();
            }
        }
        let why = store.write_health().failing().unwrap_or_default();
        warn!(error = %why, "the store does not answer: closing the Socket Mode connections until it does, so that Slack sends its events to another daemon or again later");
        door.close().await;
        loop {
            if stopped_during(&stop, PROBE_EVERY).await {
                return;
            }
            if prober.store_answers().await {
                break;
            }
        }
        info!("the store answers again: opening the Socket Mode connections");
        if !door.reopen(&stop).await {
            return;
        }
    }
}
