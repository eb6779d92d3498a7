//! One inbox row's turn: the working sign, the stream its reply may begin, the stop button,
//! the engine's turn (which fixes the reply in its own transaction), then the delivery. A
//! row whose reply was fixed before a restart is only delivered, never answered again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use tracing::{info, warn};

use super::deliver::Row;
use super::stream::{StreamRef, Streamed, Streamer};
use super::{address, Address, Part, PartMark, Router};
use crate::engine::{Message, Newer, Perception};
use crate::memory::{now_us, InboxItem, InboxStatus};
use crate::metrics::Metrics;

impl Router {
    /// Answers `item` under this daemon's claim on its conversation (`epoch`).
    pub(super) async fn process(&self, mut item: InboxItem, epoch: i64) -> anyhow::Result<()> {
        let to = address(&item);
        let fence = self.fence(&item.conversation, epoch);
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
            self.adopt_stream(&mut item, &to).await?;
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
                    (to.clone(), fence.clone()),
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
                attachments: self.surface.attachments(&to),
                source: Some(item.source()),
                inbox_id: Some(item.id),
                claim: Some(epoch),
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
            self.count_outcome(&item, &mut outcome, &streamed).await?;
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

    /// A turn of this row began before: a stream it began may not have been recorded (anima
    /// stopped while Slack was answering). Its reply goes there, never into a message the
    /// inbox gave to another row.
    async fn adopt_stream(&self, item: &mut InboxItem, to: &Address) -> anyhow::Result<()> {
        if item.attempts < 1 || item.stream_ref.is_some() {
            return Ok(());
        }
        let held = self.store.references_held(item.id).await?;
        if let Some(found) = self.surface.find_unrecorded_stream(to, &held).await {
            self.store.set_stream_ref(item.id, &found).await?;
            item.stream_ref = Some(found);
        }
        Ok(())
    }

    /// Counts a turn's outcome; a failed model's apology is fixed as the row's reply, after
    /// what the person saw of it (which stays, in the same message).
    async fn count_outcome(
        &self,
        item: &InboxItem,
        outcome: &mut crate::engine::TurnOutcome,
        streamed: &Streamed,
    ) -> anyhow::Result<()> {
        if outcome.error.is_none() {
            Metrics::inc(&self.metrics.turns_completed);
            return Ok(());
        }
        Metrics::inc(&self.metrics.turns_failed);
        let said = streamed.said();
        if streamed.reference.is_some() && !said.trim().is_empty() {
            outcome.reply = format!("{}\n\n{}", said.trim_end(), outcome.reply);
        }
        self.store.set_inbox_reply(item.id, &outcome.reply).await?;
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
        let closed = self.store.mark_stopped(id, &text).await?;
        if !closed {
            // The turn had fixed its reply and the stop cut nothing of it (part was out
            // already, or all of it was said): the worker delivers it to the end, and it
            // counts as the reply it is.
            Metrics::inc(&self.metrics.turns_completed);
            info!(
                inbox = id,
                "the stop came after the reply was said; it is delivered"
            );
            return Ok(());
        }
        if item.stream_ref.is_some() && !self.may_post(&item.conversation).await? {
            return Err(Self::fenced(&item.conversation));
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
