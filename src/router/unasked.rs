//! Speaking unasked: what the soul overhears (kept closed unless the meaningfulness gate lets
//! it speak, then reopened as a row to answer), the tick that may bring it back to what it
//! overheard, what it feels without a word (a reaction, a person joining), and the follow-up
//! after a quiet spell.

use std::panic::AssertUnwindSafe;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;
use tracing::{error, info, warn, Instrument};

use super::worker::WorkerGuard;
use super::{panic_text, Address, Happening, Router};
use crate::engine::{Perception, Quiet};
use crate::memory::{now_ms, Inbound, Intake};

impl Router {
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
        let Intake::Accepted(id) = self.store.record_overheard(&m, &place).await? else {
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
        let last = self.store.last_overheard(since_us).await?;
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
        if !self.store.reopen_overheard(id).await? {
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
        // Under the conversation's claim, as a message's turn: a daemon answering a message
        // there is not followed up beside, and the follow-up commits and posts only while held.
        let Some(epoch) = self.take(conversation).await? else {
            return Ok(());
        };
        let Some((text, note)) = self.store.conversation_address(&key).await? else {
            return Ok(());
        };
        // A quiet spell's model call counts against max_concurrent_turns like any other.
        let permit = self.permits.clone().acquire_owned().await.ok();
        let outcome = self
            .engine
            .perceive(&Perception::Quiet(Quiet {
                thread: conversation.to_string(),
                now_ms: now_ms(),
                claim: Some(epoch),
            }))
            .await?;
        drop(permit);
        if outcome.said {
            if !self.may_post(conversation).await? {
                return Err(Self::fenced(conversation));
            }
            let to = Address { text, note };
            self.deliver(&to, &outcome.reply, None).await?;
            info!("proactive follow-up delivered");
        }
        Ok(())
    }
}
