//! From the durable inbox to replies: one worker per conversation, messages in ts order, at
//! most `max_concurrent_turns` model calls at once across all conversations.
//!
//! A worker takes its conversation's oldest open row, runs the turn (which fixes the reply
//! in the turn's own transaction), posts the reply part by part (recording each), and marks
//! the row done. After a crash the open rows are resumed where they stopped: a row whose reply
//! is fixed is only posted, never answered again. Knows nothing about how events arrive.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tracing::{error, info, warn, Instrument};

use crate::engine::{Engine, Perception};
use crate::memory::{now_us, InboxItem, InboxStatus, Store, StoreError};
use crate::metrics::Metrics;
use crate::slack::api::{BotIdentity, SlackApi};
use crate::slack::mrkdwn;

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
            self.workers.fetch_add(1, Ordering::SeqCst);
            let me = self.clone();
            let key = thread_key.to_string();
            let span = tracing::info_span!("conversation", thread = %key);
            tokio::spawn(async move { me.work(key).await }.instrument(span));
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
        self.workers.fetch_add(1, Ordering::SeqCst);
        let me = self.clone();
        let key = thread_key.to_string();
        let span = tracing::info_span!("proactive", thread = %key);
        tokio::spawn(
            async move {
                if let Err(e) = me.proactive(&key).await {
                    warn!(error = %e, "proactive follow-up failed");
                }
                me.work(key).await
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
            let ts = self
                .slack
                .post(&self.bot, &channel, thread_ts.as_deref(), &last_ts, &part)
                .await?;
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

    async fn work(self: Arc<Self>, key: String) {
        let mut failures = 0u32;
        loop {
            if self.stopping.load(Ordering::SeqCst) {
                break;
            }
            let store = self.store.clone();
            let k = key.clone();
            let item = match blocking(move || store.next_open(&k)).await {
                Ok(Some(item)) => item,
                Ok(None) => {
                    let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
                    if active.dirty.remove(&key) {
                        continue;
                    }
                    active.working.remove(&key);
                    break;
                }
                Err(e) => {
                    self.backoff(&mut failures, &e.to_string()).await;
                    continue;
                }
            };
            match self.process(item).await {
                Ok(()) => failures = 0,
                Err(e) => self.backoff(&mut failures, &e.to_string()).await,
            }
        }
        if self.stopping.load(Ordering::SeqCst) {
            let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
            active.working.remove(&key);
            active.dirty.remove(&key);
        }
        if self.workers.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.idle.notify_waiters();
        }
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
        let assistant = item
            .assistant_thread
            .then(|| item.reply_thread_ts.clone())
            .flatten();
        let mut model_us = 0;
        // The working sign is shown and cleared off the reply's path: never awaited before
        // the model call or the post.
        let mut sign = None;
        if item.status == InboxStatus::Pending {
            let permit = self.permits.clone().acquire_owned().await.ok();
            self.metrics.turns_in_flight.fetch_add(1, Ordering::Relaxed);
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
            self.metrics.turns_in_flight.fetch_sub(1, Ordering::Relaxed);
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
        let parts = mrkdwn::render(&reply, self.allow_broadcast, mrkdwn::MESSAGE_LIMIT);
        for (i, part) in parts
            .iter()
            .enumerate()
            .skip(item.parts_posted.max(0) as usize)
        {
            match self
                .slack
                .post(
                    &self.bot,
                    &item.channel,
                    item.reply_thread_ts.as_deref(),
                    &item.ts,
                    part,
                )
                .await
            {
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
