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
//! with its next message. A crash loop delays a message; only its own failures give it up.
//!
//! Knows nothing of Slack: addresses are the surface's own text.

pub mod stream;
pub mod surface;

use std::collections::{HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use tokio::sync::{Notify, Semaphore};
use tracing::{error, info, warn, Instrument};

use crate::engine::{Engine, EngineError, Message, Newer, Perception, Quiet};
use crate::memory::inbox::{MAX_FAILURES, MAX_INTERRUPTIONS};
use crate::memory::{now_ms, now_us, Inbound, InboxItem, InboxStatus, Intake, Store, StoreError};
use crate::metrics::Metrics;
use stream::{StreamRef, Streamed, Streamer};
pub use surface::{Address, Appended, Begun, Part, PartMark, Surface, Undeliverable};

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
    store: Arc<Store>,
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
        metrics: Arc<Metrics>,
    ) -> Arc<Router> {
        Arc::new(Router {
            store: engine.store().clone(),
            engine,
            surface,
            permits: Arc::new(Semaphore::new(max_concurrent_turns)),
            active: Mutex::new(Active::default()),
            newest: Arc::default(),
            running: Mutex::default(),
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
        let intake = self.store.call(move |s| s.accept_inbound(&m)).await?;
        if let Intake::Accepted(id) = intake {
            self.open_row(&conversation, seq, id);
        }
        Ok(intake)
    }

    /// A message that does not address the soul, in `channel` where it listens: recorded
    /// (closed, so a retry of it is seen once), applied to the soul's substrate, and judged by
    /// the meaningfulness gate. When the soul is to speak, the message is answered like any
    /// other, in its conversation. `None` for a duplicate; otherwise whether the soul speaks.
    pub async fn overhear(
        self: &Arc<Self>,
        m: Inbound,
        channel: &str,
    ) -> anyhow::Result<Option<bool>> {
        let (conversation, seq) = (m.conversation.clone(), m.seq);
        let (user, text) = (m.user_id.clone(), m.text.clone());
        let place = channel.to_string();
        let Intake::Accepted(id) = self
            .store
            .call(move |s| s.record_overheard(&m, &place))
            .await?
        else {
            return Ok(None);
        };
        // Keyed by the row's working-memory source: the turn that may answer it does not
        // move the substrate a second time.
        let source = format!("inbox:{id}");
        let heard = self
            .engine
            .overhear(channel, &user, &text, now_ms(), &source)
            .await?;
        let Some(decision) = heard else {
            return Ok(Some(false));
        };
        info!(
            inbox = id,
            verdict = decision.verdict.name(),
            "the gate decided"
        );
        if decision.verdict != crate::psyche::Verdict::Speak {
            return Ok(Some(false));
        }
        Ok(Some(self.speak_to(id, &conversation, seq).await?))
    }

    /// Time passes for the soul: the tick moves its inner life, once per `source`. When the
    /// last message it overheard came within `reach` and it has not spoken to it, that is
    /// where the tick happens: if the gate lets the tick through there (something presses
    /// on the soul's mind and the message touches it, the cooldown over), the soul comes back
    /// to the message and answers it in its conversation. The verdict; `None` when this tick
    /// was felt before.
    pub async fn tick(
        self: &Arc<Self>,
        source: &str,
        reach: Duration,
    ) -> anyhow::Result<Option<crate::psyche::Verdict>> {
        let now = now_ms();
        let since_us = (now - reach.as_millis() as i64) * 1_000;
        let last = self.store.call(move |s| s.last_overheard(since_us)).await?;
        let happened = crate::engine::Happened {
            kind: crate::psyche::EventKind::Tick,
            channel: last.as_ref().map(|o| o.place.as_str()),
            person: None,
            text: last.as_ref().map_or("", |o| o.item.text.as_str()),
            at_ms: now,
        };
        let Some(decision) = self.engine.feel(happened, source).await? else {
            return Ok(None);
        };
        if decision.verdict == crate::psyche::Verdict::Speak {
            if let Some(o) = last {
                if self
                    .speak_to(o.item.id, &o.item.conversation, o.item.seq)
                    .await?
                {
                    info!(
                        inbox = o.item.id,
                        "the soul comes back to what it overheard"
                    );
                }
            }
        }
        Ok(Some(decision.verdict))
    }

    /// The soul speaks unasked on overheard row `id`: it is opened to answer, unless it was
    /// already (or the daemon is stopping). Whether it was.
    async fn speak_to(
        self: &Arc<Self>,
        id: i64,
        conversation: &str,
        seq: f64,
    ) -> anyhow::Result<bool> {
        if self.stopping.load(Ordering::SeqCst) {
            return Ok(false);
        }
        if !self.store.call(move |s| s.reopen_overheard(id)).await? {
            return Ok(false);
        }
        self.open_row(conversation, seq, id);
        Ok(true)
    }

    /// Something happened to the soul (a reaction to its message, a person joining): it moves
    /// its inner life, once per `source`. Nothing is said. False when it was felt before.
    pub async fn feel(
        &self,
        happening: Happening,
        channel: &str,
        user: &str,
        text: &str,
        source: &str,
    ) -> anyhow::Result<bool> {
        let kind = match happening {
            Happening::Reaction => crate::psyche::EventKind::Reaction,
            Happening::Joined => crate::psyche::EventKind::Joined,
        };
        let happened = crate::engine::Happened {
            kind,
            channel: Some(channel),
            person: Some(user),
            text,
            at_ms: now_ms(),
        };
        Ok(self.engine.feel(happened, source).await?.is_some())
    }

    /// The soul takes part in a conversation from its start; the surface's note goes with
    /// its messages.
    pub async fn note_conversation(&self, key: &str, note: &str) -> Result<(), StoreError> {
        let (k, n) = (key.to_string(), note.to_string());
        self.store.call(move |s| s.note_conversation(&k, &n)).await
    }

    /// Row `id` (at `seq`) of `conversation` is open to answer: a turn in progress there
    /// learns a newer message came, and a worker is on it.
    fn open_row(self: &Arc<Self>, conversation: &str, seq: f64, id: i64) {
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
    fn notify(self: &Arc<Self>, conversation: &str) {
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

    /// A quiet conversation gets its proactive perception, unless a worker is on it; then
    /// its worker carries on with any message that arrived meanwhile.
    pub fn follow_up(self: &Arc<Self>, conversation: &str) {
        if self.stopping.load(Ordering::SeqCst) {
            return;
        }
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        if active.working.contains(conversation) {
            return;
        }
        active.working.insert(conversation.to_string());
        let guard = WorkerGuard::new(self.clone(), conversation);
        let span = tracing::info_span!("proactive", thread = %conversation);
        tokio::spawn(
            async move {
                let me = guard.router.clone();
                match AssertUnwindSafe(me.quiet(&guard.key)).catch_unwind().await {
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

    async fn quiet(&self, conversation: &str) -> anyhow::Result<()> {
        let key = conversation.to_string();
        let Some((text, note)) = self
            .store
            .call(move |s| s.conversation_address(&key))
            .await?
        else {
            return Ok(());
        };
        // A quiet spell's model call counts against max_concurrent_turns like any other.
        let permit = self.permits.clone().acquire_owned().await.ok();
        let outcome = self
            .engine
            .perceive(&Perception::Quiet(Quiet {
                thread: conversation.to_string(),
                now_ms: now_ms(),
            }))
            .await?;
        drop(permit);
        if outcome.said {
            let to = Address { text, note };
            self.deliver(&to, &outcome.reply, None).await?;
            info!("proactive follow-up delivered");
        }
        Ok(())
    }

    /// Says `text` in a conversation outside any turn (a closing note before a shutdown).
    /// False when the conversation has no address.
    pub async fn say(&self, conversation: &str, text: &str) -> anyhow::Result<bool> {
        let key = conversation.to_string();
        let Some((address, note)) = self
            .store
            .call(move |s| s.conversation_address(&key))
            .await?
        else {
            return Ok(false);
        };
        let to = Address {
            text: address,
            note,
        };
        self.deliver(&to, text, None).await?;
        Ok(true)
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
        let keys = self.store.call(|s| s.open_conversations()).await?;
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
            // Rows accepted before this claim are the claim's to see (`others_waiting`): one
            // answered already, however late in order, is not newer than the next.
            self.newest
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(key);
            let k = key.clone();
            let item = match self.store.call(move |s| s.claim_next(&k)).await {
                Ok(Some(item)) => item,
                Ok(None) => {
                    let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
                    if active.dirty.remove(key) {
                        continue;
                    }
                    active.working.remove(key);
                    // Rows accepted from now on are found by the next worker's claim.
                    self.newest
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(key);
                    guard.left.store(true, Ordering::SeqCst);
                    break;
                }
                Err(e) => {
                    self.backoff(&mut failures, &e.to_string()).await;
                    continue;
                }
            };
            if item.exhausted() {
                if let Err(e) = self.give_up(&item).await {
                    self.backoff(&mut failures, &e.to_string()).await;
                }
                continue;
            }
            let shown = item.clone();
            match AssertUnwindSafe(self.process(item)).catch_unwind().await {
                Ok(Ok(())) => failures = 0,
                Ok(Err(e)) => {
                    self.clear_working_sign(&shown);
                    if matches!(e.downcast_ref(), Some(EngineError::Stopping)) {
                        info!(
                            inbox = shown.id,
                            "stopping before the soul woke: the message waits for the next start"
                        );
                        break;
                    }
                    // Work cut short by the shutdown is an interruption (the next start
                    // counts it), not the message's failure.
                    if !self.stopping.load(Ordering::SeqCst) {
                        self.note_failure(&shown).await;
                    }
                    self.backoff(&mut failures, &e.to_string()).await
                }
                Err(panic) => {
                    self.metrics.note_panic();
                    let failed = self.note_failure(&shown).await;
                    error!(inbox = shown.id, failures = failed, max_failures = MAX_FAILURES, panic = %panic_text(&panic),
                        "a turn panicked; the message is tried again, then answered with an apology");
                    self.clear_working_sign(&shown);
                    self.backoff(&mut failures, "a turn panicked").await;
                }
            }
        }
    }

    /// Records that the attempt at `item` under way failed; the row's failures so far (as
    /// claimed plus this one, if the store cannot say).
    async fn note_failure(&self, item: &InboxItem) -> i64 {
        let id = item.id;
        match self.store.call(move |s| s.note_failure(id)).await {
            Ok(n) => n,
            Err(e) => {
                warn!(error = %e, inbox = id, "the failed attempt was not recorded");
                item.failures + 1
            }
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
        let to = address(&item);
        // A row whose reply was fixed before this pick-up may have had a part in flight when
        // anima stopped: that part is looked for before it is delivered.
        let maybe_delivered = item.status == InboxStatus::Replying;
        let mut model_us = 0;
        // All that streamed into the reply's message in this pick-up, every piece known to
        // have arrived.
        let mut live: Option<String> = None;
        // The working sign is shown and cleared off the reply's path: never awaited before
        // the model call or the delivery.
        let mut sign = None;
        if item.status == InboxStatus::Pending {
            let permit = self.permits.clone().acquire_owned().await.ok();
            let in_flight = InFlight::new(&self.metrics);
            let (surface, at) = (self.surface.clone(), to.clone());
            sign = Some(tokio::spawn(
                async move { surface.working(&at, true).await },
            ));
            let name = self.surface.speaker_name(&item.user_id).await;
            if item.attempts >= 1 && item.stream_ref.is_none() {
                // A turn of this row began before: a stream it began may not have been
                // recorded (anima stopped while Slack was answering). Its reply goes there,
                // never into a message the inbox gave to another row.
                let id = item.id;
                let held = self.store.call(move |s| s.references_held(id)).await?;
                if let Some(found) = self.surface.find_unrecorded_stream(&to, &held).await {
                    let (id, r) = (item.id, found.clone());
                    self.store.call(move |s| s.set_stream_ref(id, &r)).await?;
                    item.stream_ref = Some(found);
                }
            }
            // A row whose reply already began streaming (before a restart) is not streamed
            // again: its reply goes into that message when it is fixed.
            let streaming = StreamRef::default();
            if let Some(r) = &item.stream_ref {
                streaming.set(r);
            }
            let streamer = (item.stream_ref.is_none() && self.surface.streams(&to)).then(|| {
                Streamer::start(
                    self.surface.clone(),
                    self.store.clone(),
                    item.id,
                    to.clone(),
                    item.user_id.clone(),
                    streaming.clone(),
                )
            });
            let stop = Arc::new(Notify::new());
            let running = Running::new(
                &self.running,
                &item.conversation,
                (stop.clone(), streaming.clone()),
            );
            let perception = Perception::Message(Message {
                thread: item.conversation.clone(),
                user_id: item.user_id.clone(),
                display_name: name,
                text: item.text.clone(),
                source: Some(item.source()),
                inbox_id: Some(item.id),
                newer: Some(self.newer_than(&item)),
                speech: streamer.as_ref().map(Streamer::speech),
            });
            let result = tokio::select! {
                result = self.engine.perceive(&perception) => Some(result),
                _ = stop.notified() => None,
            };
            drop(perception);
            drop(running);
            drop(in_flight);
            drop(permit);
            let streamed = match streamer {
                Some(s) => s.end().await,
                None => Streamed::default(),
            };
            if let Some(r) = &streamed.reference {
                item.stream_ref = Some(r.clone());
            }
            let Some(result) = result else {
                return self.stopped(&item, &streamed, sign, to).await;
            };
            let mut outcome = result?;
            model_us = outcome.model_us;
            if outcome.error.is_some() {
                Metrics::inc(&self.metrics.turns_failed);
                // What the person saw stays; the apology follows it in the same message.
                let said = streamed.said();
                if streamed.reference.is_some() && !said.trim().is_empty() {
                    outcome.reply = format!("{}\n\n{}", said.trim_end(), outcome.reply);
                }
                let (id, reply) = (item.id, outcome.reply.clone());
                self.store
                    .call(move |s| s.set_inbox_reply(id, &reply))
                    .await?;
            } else {
                Metrics::inc(&self.metrics.turns_completed);
            }
            // The turn's transaction (or set_inbox_reply) fixed exactly this reply.
            item.reply = Some(outcome.reply);
            item.status = InboxStatus::Replying;
            live = streamed.shown.filter(|_| streamed.reference.is_some());
        }

        let reply = item.reply.clone().unwrap_or_default();
        // Tests arm this to prove that a panic here cannot wedge the conversation.
        crate::failpoint::panic_if("reply", reply.contains('\u{1F4A5}'));
        let row = Row {
            item: &item,
            maybe_delivered,
            live: live.as_deref(),
        };
        let parts = self.deliver(&to, &reply, Some(row)).await?;
        self.clear_sign_after(sign, to);
        let overhead_us = (now_us() - item.received_us - model_us as i64).max(0) as u64;
        self.metrics.overhead.observe(overhead_us as f64 / 1e6);
        info!(inbox = item.id, parts, "replied");
        Ok(())
    }

    /// Closes a row whose turn the person stopped: what was shown stays as it is, nothing
    /// more is said, and the conversation goes on.
    async fn stopped(
        &self,
        item: &InboxItem,
        streamed: &Streamed,
        sign: Option<tokio::task::JoinHandle<()>>,
        to: Address,
    ) -> anyhow::Result<()> {
        self.clear_sign_after(sign, to.clone());
        let (id, said) = (item.id, streamed.said());
        let text = said.clone();
        let closed = self.store.call(move |s| s.mark_stopped(id, &text)).await?;
        if !closed {
            // Part of the reply was delivered already: it is delivered to the end.
            return Ok(());
        }
        if let Some(reference) = &item.stream_ref {
            match &streamed.shown {
                // The message holds what streamed: it stops with the rest of what was said.
                Some(_) => {
                    let mark = Some(PartMark { row: id, part: 1 });
                    self.surface
                        .halt_stream(&to, reference, &streamed.pending, mark)
                        .await
                }
                // An append may or may not have arrived: the message is rewritten to what was
                // said, whole.
                None => {
                    if let Some(text) = self.surface.parts(&said).first() {
                        let part = Part {
                            text,
                            mark: Some(PartMark { row: id, part: 1 }),
                            maybe_delivered: false,
                            last: true,
                            held: &[],
                        };
                        if let Err(e) = self.surface.finish_stream(&to, reference, None, part).await
                        {
                            warn!(error = %e, "the stopped reply's message was not rewritten");
                        }
                    }
                }
            }
        }
        Metrics::inc(&self.metrics.turns_stopped);
        info!(inbox = id, "the person stopped the turn");
        Ok(())
    }

    /// Whether a message newer than `item` has come in its conversation: one waited when it
    /// was claimed (the claim takes the first in order, so all others come after it), or one
    /// accepted since comes after it in order. No store read.
    fn newer_than(&self, item: &InboxItem) -> Newer {
        let (waiting, at, key) = (
            item.others_waiting,
            (item.seq, item.id),
            item.conversation.clone(),
        );
        let newest = self.newest.clone();
        Newer::new(move || {
            waiting
                || newest
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .get(&key)
                    .is_some_and(|n| *n > at)
        })
    }

    /// Delivers a reply part by part. For an inbox row, each part is marked, the parts it
    /// already has are skipped, each delivery is recorded, and the row is done at the end (or
    /// when the surface refuses the reply for good). Returns the number of parts.
    async fn deliver(
        &self,
        to: &Address,
        reply: &str,
        row: Option<Row<'_>>,
    ) -> anyhow::Result<usize> {
        // An empty reply says nothing: a message that a newer one in its conversation
        // interrupted is answered by that one's reply.
        let parts = if reply.trim().is_empty() {
            Vec::new()
        } else {
            self.surface.parts(reply)
        };
        let (skip, mut maybe_delivered) = row.map_or((0, false), |r| {
            (r.item.parts_posted.max(0) as usize, r.maybe_delivered)
        });
        // The first part goes into the message the reply streamed into, if it began one.
        let stream_ref = row.and_then(|r| r.item.stream_ref.as_deref());
        if let (Some(reference), true) = (stream_ref, parts.is_empty()) {
            // Nothing to say after all (a newer message took over): it ends as it stands.
            let mark = row.map(|r| PartMark {
                row: r.item.id,
                part: 1,
            });
            self.surface.halt_stream(to, reference, "", mark).await;
        }
        let mut finished = false;
        let mut streamed = false;
        // What the inbox holds in the conversation, once a part may have been delivered (kept
        // up to date with this reply's parts): none of it is taken for that part's copy.
        let mut held: Option<Vec<String>> = None;
        'parts: for (i, text) in parts.iter().enumerate().skip(skip) {
            let mut wait = Duration::from_secs(1);
            loop {
                if let (Some(r), true, None) = (row, maybe_delivered, &held) {
                    let id = r.item.id;
                    held = Some(self.store.call(move |s| s.references_held(id)).await?);
                }
                let part = Part {
                    text,
                    mark: row.map(|r| PartMark {
                        row: r.item.id,
                        part: i + 1,
                    }),
                    maybe_delivered,
                    last: i + 1 == parts.len(),
                    held: held.as_deref().unwrap_or_default(),
                };
                let delivered = match stream_ref.filter(|_| i == 0) {
                    Some(reference) => {
                        // All that streamed, if it is known to have arrived (never after a
                        // failed attempt to finish: that may have added to it).
                        let live = row.and_then(|r| r.live).filter(|_| !maybe_delivered);
                        streamed = true;
                        self.surface.finish_stream(to, reference, live, part).await
                    }
                    None => self.surface.deliver(to, part).await,
                };
                match delivered {
                    Ok(reference) => {
                        maybe_delivered = false;
                        if let Some(h) = held.as_mut() {
                            h.push(reference.clone());
                        }
                        Metrics::inc(&self.metrics.replies_posted);
                        if let Some(Row { item: r, .. }) = row {
                            let (id, last) = (r.id, i + 1 == parts.len());
                            self.store
                                .call(move |s| {
                                    s.mark_part_posted(id, i as i64 + 1, &reference, last)
                                })
                                .await?;
                            finished = last;
                        }
                        break;
                    }
                    Err(Undeliverable::Unavailable(e)) => {
                        // Not now: the same part again later (it may have arrived, so it is
                        // looked for first). No attempt is spent; at shutdown the row waits
                        // for the next start.
                        maybe_delivered = true;
                        if self.stopping.load(Ordering::SeqCst) {
                            anyhow::bail!("stopping with a part undelivered: {e}");
                        }
                        warn!(error = %e, retry_in_ms = wait.as_millis() as u64, "reply not delivered yet; trying again");
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(Duration::from_secs(60));
                    }
                    Err(e @ Undeliverable::Refused(_)) => {
                        // Refused for good (e.g. not_in_channel): give up on this reply rather
                        // than retry forever; the message and reply stay in the store.
                        Metrics::inc(&self.metrics.replies_undeliverable);
                        warn!(error = %e, "reply not delivered");
                        break 'parts;
                    }
                }
            }
        }
        if finished || row.is_none() {
            let mode = if streamed { "streamed" } else { "whole" };
            Metrics::inc(
                &self
                    .metrics
                    .replies
                    .get_or_create(&crate::metrics::ReplyLabels { mode }),
            );
        }
        if let (Some(Row { item: r, .. }), false) = (row, finished) {
            // Refused, or nothing (more) to deliver: the row is done all the same.
            let id = r.id;
            self.store.call(move |s| s.mark_done(id)).await?;
        }
        Ok(parts.len())
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
            "a message failed on every attempt; answering it with an apology"
        );
        let mut apology = None;
        if item.parts_posted == 0 {
            let id = item.id;
            let held = self.store.call(move |s| s.references_held(id)).await?;
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
        self.store
            .call(move |s| s.mark_failed(id, &why, apology.as_deref()))
            .await?;
        self.metrics.note_given_up();
        self.clear_working_sign(item);
        Ok(())
    }

    /// Clears the working sign at `to` once the task that showed it (`sign`) is done: off the
    /// reply's path, never awaited.
    fn clear_sign_after(&self, sign: Option<tokio::task::JoinHandle<()>>, to: Address) {
        if let Some(shown) = sign {
            let surface = self.surface.clone();
            tokio::spawn(async move {
                let _ = shown.await;
                surface.working(&to, false).await
            });
        }
    }

    /// Clears the working sign of a row whose turn did not get to clear it.
    fn clear_working_sign(&self, item: &InboxItem) {
        let (surface, at) = (self.surface.clone(), address(item));
        tokio::spawn(async move { surface.working(&at, false).await });
    }
}

/// The inbox row a reply answers, as delivery sees it.
#[derive(Clone, Copy)]
struct Row<'a> {
    item: &'a InboxItem,
    /// A part may have been delivered before this pick-up: look for it first.
    maybe_delivered: bool,
    /// All that streamed into the reply's message during this pick-up.
    live: Option<&'a str>,
}

fn address(item: &InboxItem) -> Address {
    Address {
        text: item.address.clone(),
        note: item.note.clone(),
    }
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

/// A conversation's running turn, registered for the stop button for as long as it lives.
struct Running<'a> {
    map: &'a Mutex<HashMap<String, (Arc<Notify>, StreamRef)>>,
    key: &'a str,
}

impl<'a> Running<'a> {
    fn new(
        map: &'a Mutex<HashMap<String, (Arc<Notify>, StreamRef)>>,
        key: &'a str,
        stop: (Arc<Notify>, StreamRef),
    ) -> Self {
        map.lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key.to_string(), stop);
        Running { map, key }
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.map
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(self.key);
    }
}

/// Counts a turn in flight for as long as it lives.
struct InFlight<'a>(&'a Metrics);

impl<'a> InFlight<'a> {
    fn new(metrics: &'a Metrics) -> Self {
        metrics.turns_in_flight.inc();
        InFlight(metrics)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.turns_in_flight.dec();
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
