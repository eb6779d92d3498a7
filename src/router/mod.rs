//! From the durable inbox to replies: one worker per conversation, messages in order, at
//! most `max_concurrent_turns` model calls at once across all conversations.
//!
//! The router owns the inbox's life cycle: it accepts rows (from whichever door), runs each
//! row's turn through the engine (which fixes the reply in the turn's own transaction),
//! delivers the reply part by part through its `Surface` (recording each part), and marks
//! the row done. After a crash the open rows are resumed where they stopped: a row whose
//! reply is fixed is only delivered, never answered again, and a part that may have been in
//! flight is looked for first. Quiet conversations get their proactive perception here too,
//! and what the soul overhears (kept closed unless the gate lets it speak, then reopened as a
//! row to answer, at once or on a later tick: `overhear`, `tick`).
//!
//! No row can wedge its conversation: a turn that fails or panics is caught and its failure
//! recorded, and the row is tried again; after `MAX_FAILURES` failures, or `MAX_INTERRUPTIONS`
//! attempts cut short by a process that stopped (counted by the store when the row is claimed
//! again), it is answered with a short apology and marked failed, and the conversation goes on
//! with its next message. A crash loop delays a message: a few kills cost it nothing, and only
//! a loop long enough to interrupt it `MAX_INTERRUPTIONS` times (a message that kills the
//! process itself, or rows unlucky enough to be in flight beside one at every crash) gives
//! it up.
//!
//! Several daemons can share one store: a conversation is worked by the daemon that holds its
//! claim (`claims`), and a row is answered by whichever daemon holds its conversation.
//!
//! By stage: `claims` (this daemon's claims on conversations, the heartbeat, the scan for
//! conversations no daemon holds), `hold` (a worker's hold on its conversation: a pure state machine), `worker` (a
//! conversation's worker driving it: claims, failures, the apology), `turn` (one
//! row's turn and the stop button), `deliver` (a reply part by part), `unasked` (what the soul
//! overhears, the tick, follow-ups after a quiet spell), `stream` (a reply's stream task) and
//! `surface` (the trait a reply surface implements). This file holds the router itself: it
//! accepts rows and keeps each conversation's worker.
//!
//! Knows nothing of Slack: addresses are the surface's own text.

mod claims;
mod deliver;
mod hold;
pub mod stream;
pub mod surface;
mod turn;
mod unasked;
mod worker;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tracing::Instrument;

use crate::engine::Engine;
use crate::memory::faces::{Claims, Inbox};
use crate::memory::{Inbound, InboxItem, Intake, StoreError};
use crate::metrics::Metrics;
pub use claims::keep_claims;
use stream::StreamRef;
pub use surface::{Address, Appended, Begun, Part, PartMark, Surface, Undeliverable};
use worker::WorkerGuard;

/// Something that happened to the soul that is not a message to answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Happening {
    /// A reaction to one of its messages.
    Reaction,
    /// A person joined a channel it is in.
    Joined,
}

/// What a person is told when their message could not be answered after every attempt.
pub const FAILED_REPLY: &str =
    "Sorry, something went wrong on my side and I couldn't answer that message. Please try again, perhaps in other words.";

#[derive(Default)]
struct Active {
    working: HashSet<String>,
    dirty: HashSet<String>,
}

pub struct Router {
    /// The store's faces the router uses: its inbox (rows, replies, parts) and this daemon's
    /// claims on conversations; nothing else of the store.
    store: Arc<dyn Inbox>,
    claims: Arc<dyn Claims>,
    engine: Arc<Engine>,
    surface: Arc<dyn Surface>,
    permits: Arc<Semaphore>,
    /// Conversations with a worker, and those notified while their worker was looking.
    active: Mutex<Active>,
    /// The last row in order (seq, then id) accepted in each conversation since its worker's
    /// latest claim: a turn in progress asks it whether a newer message has arrived (an ISM's
    /// loop stops for one). An older message delivered late is not newer.
    newest: Arc<Mutex<HashMap<String, (f64, i64)>>>,
    /// The turn running in each conversation: how to stop it (the person's stop button), and
    /// the message its reply streams into, once begun.
    running: Mutex<HashMap<String, (Arc<Notify>, StreamRef)>>,
    /// The conversations this daemon holds a claim on, with the claim's epoch.
    held: Mutex<HashMap<String, i64>>,
    /// The conversations whose turn may have a post in flight.
    posting: Arc<claims::Posting>,
    /// How long a claim outlives a daemon that stopped renewing it.
    lease: Duration,
    workers: AtomicU64,
    idle: Notify,
    stopping: AtomicBool,
    metrics: Arc<Metrics>,
}

impl Router {
    pub fn new(
        engine: Arc<Engine>,
        surface: Arc<dyn Surface>,
        max_concurrent_turns: usize,
        lease: Duration,
        metrics: Arc<Metrics>,
    ) -> Arc<Router> {
        let store = engine.store().clone();
        Arc::new(Router {
            claims: store.clone(),
            store,
            engine,
            surface,
            permits: Arc::new(Semaphore::new(max_concurrent_turns)),
            active: Mutex::new(Active::default()),
            newest: Arc::default(),
            running: Mutex::default(),
            held: Mutex::default(),
            posting: Arc::default(),
            lease,
            workers: AtomicU64::new(0),
            idle: Notify::new(),
            stopping: AtomicBool::new(false),
            metrics,
        })
    }

    /// Records a message durably (the caller acknowledges it only after this returns `Ok`)
    /// and makes sure its conversation has a worker.
    pub async fn accept(self: &Arc<Self>, m: Inbound) -> Result<Intake, StoreError> {
        let (conversation, seq) = (m.conversation.clone(), m.seq);
        let intake = self.store.accept_inbound(&m).await?;
        if let Intake::Accepted(id) = intake {
            self.open_row(&conversation, seq, id);
        }
        Ok(intake)
    }

    /// Writes the turns' traces still queued (the engine's trace writer), so a reader that
    /// follows a reply (Slack's "why") finds its trace.
    pub async fn flush_traces(&self) {
        self.engine.flush_traces().await;
    }

    /// The soul takes part in a conversation from its start; the surface's note goes with
    /// its messages.
    pub async fn note_conversation(&self, key: &str, note: &str) -> Result<(), StoreError> {
        let (k, n) = (key.to_string(), note.to_string());
        self.store.note_conversation(&k, &n).await
    }

    /// Row `id` (at `seq`) of `conversation` is open to answer: a turn in progress there
    /// learns a newer message came, and a worker is on it.
    pub(super) fn open_row(self: &Arc<Self>, conversation: &str, seq: f64, id: i64) {
        {
            let mut newest = self.newest.lock().unwrap_or_else(|e| e.into_inner());
            let n = newest.entry(conversation.to_string()).or_insert((seq, id));
            if (seq, id) > *n {
                *n = (seq, id);
            }
        }
        self.notify(conversation);
    }

    /// A conversation has a new open row: make sure a worker is on it.
    pub(super) fn notify(self: &Arc<Self>, conversation: &str) {
        if self.stopping.load(Ordering::SeqCst) {
            return;
        }
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        if active.working.contains(conversation) {
            // Its worker will look again before it leaves.
            active.dirty.insert(conversation.to_string());
        } else {
            active.working.insert(conversation.to_string());
            let guard = WorkerGuard::new(self.clone(), conversation);
            let span = tracing::info_span!("conversation", thread = %conversation);
            tokio::spawn(async move { guard.router.clone().work(&guard).await }.instrument(span));
        }
    }

    /// The person asked to stop the turn running in `conversation`: its model call is
    /// abandoned, what was shown stays, nothing more is said. `streams`: the messages the
    /// surface says were streaming (none: any); a turn streaming into another message is not
    /// the one stopped. False when no such turn runs there.
    pub fn stop(&self, conversation: &str, streams: &[String]) -> bool {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        match running.get(conversation) {
            Some((_, streaming)) if !streams.is_empty() && !streaming.is_among(streams) => false,
            Some((stop, _)) => {
                // A permit is kept if the turn is not waiting yet, so no stop is lost.
                stop.notify_one();
                true
            }
            None => false,
        }
    }

    /// Resumes every conversation with open rows (after a restart).
    pub async fn resume(self: &Arc<Self>) -> Result<usize, StoreError> {
        let keys = self.store.open_conversations().await?;
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
}

pub(super) fn address(item: &InboxItem) -> Address {
    Address {
        text: item.address.clone(),
        note: item.note.clone(),
    }
}

/// What a panic said.
pub(super) fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_string())
}
