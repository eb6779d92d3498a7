//! From the durable inbox to replies: one worker per conversation, messages in ts order, at
//! most `max_concurrent_turns` model calls at once across all conversations.
//!
//! A worker takes its conversation's oldest open row, runs the turn (which fixes the reply
//! in the turn's own transaction), posts the reply part by part (recording each), and marks
//! the row done. After a crash the open rows are resumed where they stopped: a row whose reply
//! is fixed is only posted, never answered again, and a part that may have been in flight is
//! looked for in the conversation first. Knows nothing about how events arrive.
//!
//! No row can wedge its conversation: a turn that fails or panics is caught, the row is tried
//! again up to `MAX_ATTEMPTS` pick-ups (restarts included), then answered with a short
//! apology and marked failed, and the conversation goes on with its next message.

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use tokio::sync::{Notify, Semaphore};
use tracing::{error, info, warn, Instrument};

use crate::engine::{Engine, Perception};
use crate::memory::inbox::MAX_ATTEMPTS;
use crate::memory::{now_us, InboxItem, InboxStatus, Store, StoreError};
use crate::metrics::Metrics;
use crate::slack::api::{BotIdentity, Outgoing, PostMark, SlackApi};
use crate::slack::mrkdwn;

/// What a person is told when their message could not be answered after every attempt.
pub const FAILED_REPLY: &str =
    "Sorry, something went wrong on my side and I couldn't answer that message. Please try again, perhaps in other words.";

#[derive(Default)]
struct Active {
    working: HashSet<String>,
    dirty: HashSet<String>,
}

pub struct Router {
    store: Arc<Store>,
    engine: Arc<Engine>,
    slack: Arc<SlackApi>,
    bot: BotIdentity,
    allow_broadcast: bool,
    permits: Arc<Semaphore>,
    /// Conversations with a worker, and those notified while their worker was looking.
    active: Mutex<Active>,
    workers: AtomicU64,
    idle: Notify,
    stopping: AtomicBool,
    metrics: Arc<Metrics>,
}

impl Router {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        store: Arc<Store>,
        engine: Arc<Engine>,
        slack: Arc<SlackApi>,
        bot: BotIdentity,
        allow_broadcast: bool,
        max_concurrent_turns: usize,
        metrics: Arc<Metrics>,
    ) -> Arc<Router> {
        Arc::new(Router {
            store,
            engine,
            slack,
            bot,
            allow_broadcast,
            permits: Arc::new(Semaphore::new(max_concurrent_turns)),
            active: Mutex::new(Active::default()),
            workers: AtomicU64::new(0),
            idle: Notify::new(),
            stopping: AtomicBool::new(false),
            metrics,
        })
    }

    /// A conversation has a new open row: make sure a worker is on it.
    pub fn notify(self: &Arc<Self>, thread_key: &str) {
        if self.stopping.load(Ordering::SeqCst) {
            return;
        }
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        if active.working.contains(thread_key) {
            // Its worker will look again before it leaves.
            active.dirty.insert(thread_key.to_string());
        } else {
            active.working.insert(thread_key.to_string());
            let guard = WorkerGuard::new(self.clone(), thread_key);
            let span = tracing::info_span!("conversation", thread = %thread_key);
            tokio::spawn(async move { guard.router.clone().work(&guard).await }.instrument(span));
        }
    }

    /// Runs the proactive process for a quiet conversation, unless a worker is on it; then
    /// carries on with any message that arrived meanwhile, like any worker.
    pub fn follow_up(self: &Arc<Self>, thread_key: &str) {
        if self.stopping.load(Ordering::SeqCst) {
            return;
        }
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        if active.working.contains(thread_key) {
            return;
        }
        active.working.insert(thread_key.to_string());
        let guard = WorkerGuard::new(self.clone(), thread_key);
        let span = tracing::info_span!("proactive", thread = %thread_key);
        tokio::spawn(
            async move {
                let me = guard.router.clone();
                match AssertUnwindSafe(me.proactive(&guard.key))
                    .catch_unwind()
                    .await
                {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => warn!(error = %e, "proactive follow-up failed"),
                    Err(panic) => {
                        me.metrics.note_panic();
                        error!(panic = %panic_text(&panic), "proactive follow-up panicked");
                    }
                }
                me.work(&guard).await
            }
            .instrument(span),
        );
    }

    async fn proactive(&self, key: &str) -> anyhow::Result<()> {
        let store = self.store.clone();
        let k = key.to_string();
        let Some((channel, thread_ts, last_ts)) =
            blocking(move || store.slack_location(&k)).await?
        else {
            return Ok(());
        };
        let Some(reply) = self.engine.proactive(key, crate::memory::now_ms()).await? else {
            return Ok(());
        };
        for part in mrkdwn::render(&reply, self.allow_broadcast, mrkdwn::MESSAGE_LIMIT) {
            let out = Outgoing {
                channel: &channel,
                thread_ts: thread_ts.as_deref(),
                after_ts: &last_ts,
                text: &part,
                mark: None,
            };
            let ts = self.slack.post(&self.bot, &out, false).await?;
            Metrics::inc(&self.metrics.replies_posted);
            info!(ts = %ts, "proactive follow-up posted");
        }
        Ok(())
    }

    /// Resumes every conversation with open rows (after a restart).
    pub async fn resume(self: &Arc<Self>) -> anyhow::Result<usize> {
        let store = self.store.clone();
        let keys = blocking(move || store.open_threads()).await?;
        for k in &keys {
            self.notify(k);
        }
        Ok(keys.len())
    }

    /// Stops taking new work and waits up to `grace` for turns in flight. True if all finished.
    pub async fn drain(&self, grace: Duration) -> bool {
        self.stopping.store(true, Ordering::SeqCst);
        let wait = async {
            while self.workers.load(Ordering::SeqCst) > 0 {
                let notified = self.idle.notified();
                if self.workers.load(Ordering::SeqCst) == 0 {
                    break;
                }
                notified.await;
            }
        };
        tokio::time::timeout(grace, wait).await.is_ok()
    }

    async fn work(self: Arc<Self>, guard: &WorkerGuard) {
        let key = &guard.key;
        let mut failures = 0u32;
        loop {
            if self.stopping.load(Ordering::SeqCst) {
                break;
            }
            let store = self.store.clone();
            let k = key.clone();
            let item = match blocking(move || store.claim_next(&k)).await {
                Ok(Some(item)) => item,
                Ok(None) => {
                    let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
                    if active.dirty.remove(key) {
                        continue;
                    }
                    active.working.remove(key);
                    guard.left.store(true, Ordering::SeqCst);
                    break;
                }
                Err(e) => {
                    self.backoff(&mut failures, &e.to_string()).await;
                    continue;
                }
            };
            if item.attempts > MAX_ATTEMPTS {
                if let Err(e) = self.give_up(&item).await {
                    self.backoff(&mut failures, &e.to_string()).await;
                }
                continue;
            }
            let (id, shown) = (item.id, item.clone());
            match AssertUnwindSafe(self.process(item)).catch_unwind().await {
                Ok(Ok(())) => failures = 0,
                Ok(Err(e)) => self.backoff(&mut failures, &e.to_string()).await,
                Err(panic) => {
                    self.metrics.note_panic();
                    error!(inbox = id, attempt = shown.attempts, max_attempts = MAX_ATTEMPTS, panic = %panic_text(&panic),
                        "a turn panicked; the message is tried again, then answered with an apology");
                    self.clear_working_sign(&shown);
                    self.backoff(&mut failures, "a turn panicked").await;
                }
            }
        }
    }

    /// Answers a row that failed on every attempt with the apology (unless part of its reply
    /// is already in Slack) and marks it failed, so its conversation goes on.
    async fn give_up(&self, item: &InboxItem) -> anyhow::Result<()> {
        error!(
            inbox = item.id,
            attempts = item.attempts - 1,
            "a message failed on every attempt; answering it with an apology"
        );
        if item.parts_posted == 0 {
            let out = Outgoing {
                channel: &item.channel,
                thread_ts: item.reply_thread_ts.as_deref(),
                after_ts: &item.ts,
                text: FAILED_REPLY,
                mark: Some(PostMark {
                    inbox: item.id,
                    part: 0,
                }),
            };
            // A crash after this post and before the row is marked brings it back here:
            // look before posting again.
            let again = item.attempts > MAX_ATTEMPTS + 1;
            if let Err(e) = self.slack.post(&self.bot, &out, again).await {
                warn!(error = %e, inbox = item.id, "the apology was not delivered");
            }
        }
        let store = self.store.clone();
        let id = item.id;
        blocking(move || store.mark_failed(id, "failed on every attempt")).await?;
        self.metrics.note_given_up();
        self.clear_working_sign(item);
        Ok(())
    }

    /// Clears the working sign of a row whose turn did not get to clear it.
    fn clear_working_sign(&self, item: &InboxItem) {
        let slack = self.slack.clone();
        let (channel, ts) = (item.channel.clone(), item.ts.clone());
        let assistant = assistant_thread(item);
        tokio::spawn(async move {
            slack
                .working(&channel, &ts, assistant.as_deref(), false)
                .await
        });
    }

    async fn backoff(&self, failures: &mut u32, error: &str) {
        *failures += 1;
        let wait = Duration::from_millis(200 * 2u64.pow((*failures).min(7)));
        error!(
            error,
            retry_in_ms = wait.as_millis() as u64,
            "conversation worker failed; retrying"
        );
        tokio::time::sleep(wait).await;
    }

    async fn process(&self, mut item: InboxItem) -> anyhow::Result<()> {
        let assistant = assistant_thread(&item);
        // A row whose reply was fixed before this pick-up may have had a part in flight when
        // anima stopped: that part is looked for in the conversation before it is posted.
        let mut maybe_posted = item.status == InboxStatus::Replying;
        let mut model_us = 0;
        // The working sign is shown and cleared off the reply's path: never awaited before
        // the model call or the post.
        let mut sign = None;
        if item.status == InboxStatus::Pending {
            let permit = self.permits.clone().acquire_owned().await.ok();
            let in_flight = InFlight::new(&self.metrics);
            let (slack, channel, ts, thread) = (
                self.slack.clone(),
                item.channel.clone(),
                item.ts.clone(),
                assistant.clone(),
            );
            sign = Some(tokio::spawn(async move {
                slack.working(&channel, &ts, thread.as_deref(), true).await
            }));
            let name = self.slack.display_name(&item.user_id).await;
            let result = self
                .engine
                .turn(&Perception {
                    thread: item.thread_key.clone(),
                    user_id: item.user_id.clone(),
                    display_name: name,
                    text: item.text.clone(),
                    source: Some(item.source()),
                    inbox_id: Some(item.id),
                })
                .await;
            drop(in_flight);
            drop(permit);
            let outcome = result?;
            model_us = outcome.model_us;
            if outcome.error.is_some() {
                Metrics::inc(&self.metrics.turns_failed);
                let store = self.store.clone();
                let (id, reply) = (item.id, outcome.reply.clone());
                blocking(move || store.set_inbox_reply(id, &reply)).await?;
            } else {
                Metrics::inc(&self.metrics.turns_completed);
            }
            // The turn's transaction (or set_inbox_reply) fixed exactly this reply.
            item.reply = Some(outcome.reply);
            item.status = InboxStatus::Replying;
        }

        let mut done = false;
        let reply = item.reply.clone().unwrap_or_default();
        // Tests arm this to prove that a panic here cannot wedge the conversation.
        crate::failpoint::panic_if("reply", reply.contains("\u{1F4A5}"));
        let parts = mrkdwn::render(&reply, self.allow_broadcast, mrkdwn::MESSAGE_LIMIT);
        for (i, part) in parts
            .iter()
            .enumerate()
            .skip(item.parts_posted.max(0) as usize)
        {
            let out = Outgoing {
                channel: &item.channel,
                thread_ts: item.reply_thread_ts.as_deref(),
                after_ts: &item.ts,
                text: part,
                mark: Some(PostMark {
                    inbox: item.id,
                    part: i + 1,
                }),
            };
            let posted = self.slack.post(&self.bot, &out, maybe_posted).await;
            maybe_posted = false;
            match posted {
                Ok(ts) => {
                    Metrics::inc(&self.metrics.replies_posted);
                    let store = self.store.clone();
                    let (id, channel, thread) =
                        (item.id, item.channel.clone(), item.reply_thread_ts.clone());
                    let last = i + 1 == parts.len();
                    blocking(move || {
                        store.mark_part_posted(
                            id,
                            i as i64 + 1,
                            &ts,
                            thread.as_deref().map(|t| (channel.as_str(), t)),
                            last,
                        )
                    })
                    .await?;
                    done |= last;
                }
                Err(e) => {
                    // Slack refused it for good (e.g. not_in_channel): give up on this reply
                    // rather than retry forever; the message and reply stay in the store.
                    Metrics::inc(&self.metrics.replies_undeliverable);
                    warn!(error = %e, inbox = item.id, "reply not delivered");
                    break;
                }
            }
        }
        if let Some(shown) = sign {
            let (slack, channel, ts) = (self.slack.clone(), item.channel.clone(), item.ts.clone());
            tokio::spawn(async move {
                let _ = shown.await;
                slack
                    .working(&channel, &ts, assistant.as_deref(), false)
                    .await
            });
        }
        if !done {
            let store = self.store.clone();
            let id = item.id;
            blocking(move || store.mark_done(id)).await?;
        }
        let overhead_us = (now_us() - item.received_us - model_us as i64).max(0) as u64;
        self.metrics.overhead.observe(overhead_us);
        info!(inbox = item.id, parts = parts.len(), "replied");
        Ok(())
    }
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> anyhow::Result<T> {
    Ok(tokio::task::spawn_blocking(f).await??)
}

/// The assistant thread a row's working sign goes to, when it is in one.
fn assistant_thread(item: &InboxItem) -> Option<String> {
    item.assistant_thread
        .then(|| item.reply_thread_ts.clone())
        .flatten()
}

/// A worker's place in the router: taken when it is spawned, given back when it ends, even by
/// a panic, so `drain` never waits for a worker that is gone.
struct WorkerGuard {
    router: Arc<Router>,
    key: String,
    /// The worker left its conversation itself (under the lock, seeing no more rows).
    left: AtomicBool,
}

impl WorkerGuard {
    fn new(router: Arc<Router>, key: &str) -> Self {
        router.workers.fetch_add(1, Ordering::SeqCst);
        WorkerGuard {
            router,
            key: key.to_string(),
            left: AtomicBool::new(false),
        }
    }
}

impl Drop for WorkerGuard {
    fn drop(&mut self) {
        let r = &self.router;
        // A worker that stopped early (shutdown, or a panic outside a turn) frees its
        // conversation, so the next message gets a new worker.
        if !self.left.load(Ordering::SeqCst) {
            let mut active = r.active.lock().unwrap_or_else(|e| e.into_inner());
            active.working.remove(&self.key);
            active.dirty.remove(&self.key);
        }
        if r.workers.fetch_sub(1, Ordering::SeqCst) == 1 {
            r.idle.notify_waiters();
        }
    }
}

/// Counts a turn in flight for as long as it lives.
struct InFlight<'a>(&'a Metrics);

impl<'a> InFlight<'a> {
    fn new(metrics: &'a Metrics) -> Self {
        metrics.turns_in_flight.fetch_add(1, Ordering::Relaxed);
        InFlight(metrics)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.turns_in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

/// What a panic said.
fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}
