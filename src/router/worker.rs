//! A conversation's worker: it claims the conversation's rows one at a time, in order, runs
//! each row's turn, and leaves when none is open. What it does next is its `hold`'s to say
//! (a pure state machine); the worker carries that out. No row can wedge it: a turn that fails or
//! panics is recorded as a failure and tried again; a row out of attempts is answered with
//! the apology and marked failed, and the worker goes on with the next.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use futures_util::FutureExt;
use tracing::{error, info, warn};

use super::hold::{Act, Event, Hold, Letting};
use super::{address, panic_text, Part, PartMark, Router, FAILED_REPLY};
use crate::engine::EngineError;
use crate::memory::inbox::{MAX_FAILURES, MAX_INTERRUPTIONS};
use crate::memory::InboxItem;

impl Router {
    /// Drives the conversation's `Hold`: carries out each act against the store and the
    /// engine and feeds what came of it back, until the hold says the worker is done.
    pub(super) async fn work(self: Arc<Self>, guard: &WorkerGuard) {
        let key = &guard.key;
        let mut hold = Hold::new(self.lease, Instant::now());
        let mut act = Act::Between;
        loop {
            let event = match act {
                Act::Between => self.between(key),
                Act::Take => match self.take(key).await {
                    Ok(epoch) => Event::Taken(epoch, Instant::now()),
                    Err(e) => Event::Failed(e.to_string()),
                },
                Act::Confirm(epoch) => match self.still_holds(key, epoch).await {
                    Ok(holds) => Event::Confirmed(holds, Instant::now()),
                    Err(e) => Event::Failed(e.to_string()),
                },
                Act::Claim => self.claim_row(key).await,
                Act::Answer(item, epoch) => self.answer(item, epoch).await,
                Act::GiveUp(item) => match self.give_up(&item).await {
                    Ok(()) => Event::GaveUp,
                    Err(e) if super::claims::is_fenced(&e) => {
                        taken_away(&item);
                        Event::Fenced
                    }
                    Err(e) => Event::Failed(e.to_string()),
                },
                Act::Release(epoch) => Event::Released {
                    open: self.let_go(key, epoch).await,
                },
                Act::Leave(letting) => {
                    match letting {
                        Letting::Nothing => {}
                        Letting::Forget => {
                            self.forget_claim(key);
                            warn!("the conversation is another daemon's now; leaving it");
                        }
                        Letting::LetGo(epoch) => {
                            self.let_go(key, epoch).await;
                        }
                    }
                    Event::Left(self.leave(guard))
                }
                Act::Backoff { failures, error } => {
                    self.backoff(failures, &error).await;
                    self.between(key)
                }
                Act::Exit(epoch) => {
                    // Between rows: what is left here is the other daemons' at once.
                    if let Some(e) = epoch {
                        self.let_go(key, e).await;
                    }
                    break;
                }
            };
            act = hold.on(event);
        }
    }

    /// Between rows: no post of this worker's is in flight.
    fn between(&self, key: &str) -> Event<InboxItem> {
        self.posting.done(key);
        Event::Between {
            stopping: self.stopping.load(Ordering::SeqCst),
            now: Instant::now(),
        }
    }

    /// Claims the conversation's next row.
    async fn claim_row(&self, key: &str) -> Event<InboxItem> {
        // Rows accepted before this claim are the claim's to see (`others_waiting`): one
        // answered already, however late in order, is not newer than the next.
        self.newest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
        match self.store.claim_next(key).await {
            Ok(Some(item)) => Event::Claimed {
                exhausted: item.exhausted(),
                row: item,
            },
            Ok(None) => Event::NoRow,
            Err(e) => Event::Failed(e.to_string()),
        }
    }

    /// Runs `item`'s turn under the claim at `epoch`, catching a failure or a panic.
    async fn answer(&self, item: InboxItem, epoch: i64) -> Event<InboxItem> {
        let shown = item.clone();
        match AssertUnwindSafe(self.process(item, epoch))
            .catch_unwind()
            .await
        {
            Ok(Ok(())) => Event::Answered(Instant::now()),
            Ok(Err(e)) => {
                self.clear_working_sign(&shown);
                if matches!(e.downcast_ref(), Some(EngineError::Stopping)) {
                    info!(
                        inbox = shown.id,
                        "stopping before the soul woke: the message waits for the next start"
                    );
                    return Event::Stopping;
                }
                if super::claims::is_fenced(&e) {
                    taken_away(&shown);
                    return Event::Fenced;
                }
                // Work cut short by the shutdown is an interruption (the next start counts
                // it), not the message's failure.
                if !self.stopping.load(Ordering::SeqCst) {
                    self.note_failure(&shown).await;
                }
                Event::Failed(e.to_string())
            }
            Err(panic) => {
                self.metrics.note_panic();
                let failed = self.note_failure(&shown).await;
                error!(inbox = shown.id, failures = failed, max_failures = MAX_FAILURES, panic = %panic_text(&panic),
                    "a turn panicked; the message is tried again, then answered with an apology");
                self.clear_working_sign(&shown);
                Event::Failed("a turn panicked".into())
            }
        }
    }

    /// The worker leaves its conversation, unless a row came since it last looked (then it
    /// looks again: false). Under the lock that `notify` takes, so no row is left without a
    /// worker: the next row accepted gets a new one.
    fn leave(&self, guard: &WorkerGuard) -> bool {
        let key = &guard.key;
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        if active.dirty.remove(key) {
            return false;
        }
        active.working.remove(key);
        // Rows accepted from now on are found by the next worker's claim.
        self.newest
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(key);
        guard.left.store(true, Ordering::SeqCst);
        true
    }

    /// Records that the attempt at `item` under way failed; the row's failures so far (as
    /// claimed plus this one, if the store cannot say).
    async fn note_failure(&self, item: &InboxItem) -> i64 {
        let id = item.id;
        match self.store.note_failure(id).await {
            Ok(n) => n,
            Err(e) => {
                warn!(error = %e, inbox = id, "the failed attempt was not recorded");
                item.failures + 1
            }
        }
    }

    async fn backoff(&self, failures: u32, error: &str) {
        let wait = super::hold::backoff(failures);
        error!(
            error,
            retry_in_ms = wait.as_millis() as u64,
            "conversation worker failed; retrying"
        );
        tokio::time::sleep(wait).await;
    }

    /// Answers a row that failed on every attempt with the apology (unless part of its reply
    /// is already delivered) and marks it failed, so its conversation goes on.
    async fn give_up(&self, item: &InboxItem) -> anyhow::Result<()> {
        error!(
            inbox = item.id,
            failures = item.failures,
            max_failures = MAX_FAILURES,
            interruptions = item.interruptions,
            max_interruptions = MAX_INTERRUPTIONS,
            "a message is out of attempts (failed or interrupted); answering it with an apology"
        );
        let mut apology = None;
        if item.parts_posted == 0 {
            let id = item.id;
            let held = self.store.references_held(id).await?;
            if !self.may_post(&item.conversation).await? {
                return Err(Self::fenced(&item.conversation));
            }
            let part = Part {
                text: FAILED_REPLY,
                mark: Some(PartMark {
                    row: item.id,
                    part: 0,
                }),
                // A crash after this delivery and before the row is marked brings it back
                // here: always look first (a give-up is rare; one lookup is cheap).
                maybe_delivered: true,
                last: true,
                held: &held,
            };
            let to = address(item);
            let delivered = match &item.stream_ref {
                // The reply had begun streaming: the apology goes into that message.
                Some(reference) => self.surface.finish_stream(&to, reference, None, part).await,
                None => self.surface.deliver(&to, part).await,
            };
            match delivered {
                Ok(reference) => apology = Some(reference),
                Err(e) => warn!(error = %e, inbox = item.id, "the apology was not delivered"),
            }
        }
        let (id, why) = (
            item.id,
            format!(
                "given up after {} failed and {} interrupted attempts",
                item.failures, item.interruptions
            ),
        );
        self.store.mark_failed(id, &why, apology.as_deref()).await?;
        self.metrics.note_given_up();
        self.clear_working_sign(item);
        Ok(())
    }

    /// Clears the working sign of a row whose turn did not get to clear it.
    pub(super) fn clear_working_sign(&self, item: &InboxItem) {
        let (surface, at) = (self.surface.clone(), address(item));
        tokio::spawn(async move { surface.working(&at, false).await });
    }
}

/// The conversation is not this daemon's to post in now (another daemon took it, or its claim
/// ran too short to post under): nothing more is written or posted for it here. Its claim is
/// let go, if it is still this one's at the epoch the worker held (`Letting::LetGo`), and its
/// rows are answered by whoever takes it next (this worker too, if a row comes before it
/// leaves).
fn taken_away(item: &InboxItem) {
    warn!(
        inbox = item.id,
        "the conversation's claim no longer holds; leaving it without posting"
    );
}

/// A worker's place in the router: taken when it is spawned, given back when it ends, even by
/// a panic, so `drain` never waits for a worker that is gone.
pub(super) struct WorkerGuard {
    pub(super) router: Arc<Router>,
    pub(super) key: String,
    /// The worker left its conversation itself (under the lock, seeing no more rows).
    pub(super) left: AtomicBool,
}

impl WorkerGuard {
    pub(super) fn new(router: Arc<Router>, key: &str) -> Self {
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
            // Its claim is no longer renewed: it lapses within the lease, for this daemon's
            // next worker or another daemon. Forgotten before the conversation is free for a
            // next worker here, whose claim it must not forget.
            r.forget_claim(&self.key);
            r.posting.done(&self.key);
            let mut active = r.active.lock().unwrap_or_else(|e| e.into_inner());
            active.working.remove(&self.key);
            active.dirty.remove(&self.key);
        }
        if r.workers.fetch_sub(1, Ordering::SeqCst) == 1 {
            r.idle.notify_waiters();
        }
    }
}
