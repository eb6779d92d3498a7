//! This daemon's claims on its conversations, for several daemons sharing one store: a worker
//! takes its conversation before it claims a row there, asks before anything is posted there
//! whether it still holds it, and lets it go when it leaves. A heartbeat renews the claims of
//! the conversations being worked; a scan adopts conversations whose holder died.
//!
//! No daemon has to wake another: a row accepted by one daemon while another holds its
//! conversation is found by the holder, which looks for open rows once it has let the
//! conversation go (in the same call) and takes it again if there are any (`Router::work`);
//! a holder that died leaves its claim to lapse, and the scan of the others finds its
//! conversations within `lease / 4`. So neither LISTEN/NOTIFY nor a poll per conversation.
//!
//! A daemon that was paused past its lease (a stop signal, a stall, a partition) finds on
//! waking that it no longer holds the conversation: its commit is refused by the store
//! (`StoreError::Fenced`) and nothing is posted, since every post asks first, with a margin
//! of a third of the lease. What no check can close is a pause between the question and the
//! post itself longer than that margin: the new holder, resuming a row whose reply was fixed,
//! looks for the reply in Slack before posting it.
//!
//! A daemon that stops lets go at once the conversations whose turn can have no post in flight:
//! those between rows, and those whose turn has not yet asked to post (it waits on the model,
//! say). Only a turn that asked (`Posting`) may be mid-post, and keeps its claim to lapse.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tracing::{info, warn};

use super::Router;
use crate::memory::faces::Claims;
use crate::memory::StoreError;

/// A worker's claim on its conversation, as a task beside the turn (a reply's stream) asks
/// about it before posting.
#[derive(Clone)]
pub struct Fence {
    store: Arc<dyn Claims>,
    posting: Arc<Posting>,
    conversation: String,
    epoch: i64,
    margin: Duration,
}

impl Fence {
    /// Whether the claim still holds with `margin` of its lease left; a store that cannot say
    /// is a no. Asked right before a post: the turn is posting from then on.
    pub async fn holds(&self) -> bool {
        if !self.posting.enter(&self.conversation) {
            return false;
        }
        match self
            .store
            .holds(&self.conversation, self.epoch, self.margin)
            .await
        {
            Ok(holds) => holds,
            Err(e) => {
                warn!(error = %e, "cannot tell whether the conversation is still this daemon's; not posting");
                false
            }
        }
    }
}

/// Which conversations' turns may have a post in flight: a turn enters its posting phase when
/// it first asks whether it may post (a stream's first words, a reply's first part, an
/// apology) and leaves it when its worker goes on to the next row. A conversation let go at
/// shutdown before its turn got there never enters it: its turn posts nothing.
#[derive(Default)]
pub(super) struct Posting(Mutex<PostingInner>);

#[derive(Default)]
struct PostingInner {
    posting: HashSet<String>,
    let_go: HashSet<String>,
}

impl Posting {
    fn lock(&self) -> std::sync::MutexGuard<'_, PostingInner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The turn in `conversation` is about to ask whether it may post: false if its claim was
    /// let go at shutdown (it must not post).
    fn enter(&self, conversation: &str) -> bool {
        let mut p = self.lock();
        if p.let_go.contains(conversation) {
            return false;
        }
        p.posting.insert(conversation.to_string());
        true
    }

    /// The worker of `conversation` is between rows: nothing of it is being posted.
    pub(super) fn done(&self, conversation: &str) {
        self.lock().posting.remove(conversation);
    }

    /// At shutdown: whether `conversation`'s claim can go now, because no post of its turn may
    /// be in flight. If so, its turn never posts from now on.
    fn let_go(&self, conversation: &str) -> bool {
        let mut p = self.lock();
        if p.posting.contains(conversation) {
            return false;
        }
        p.let_go.insert(conversation.to_string());
        true
    }
}

impl Router {
    /// The fence a worker holding `conversation` at `epoch` posts behind.
    pub(super) fn fence(&self, conversation: &str, epoch: i64) -> Fence {
        Fence {
            store: self.claims.clone(),
            posting: self.posting.clone(),
            conversation: conversation.to_string(),
            epoch,
            margin: self.lease / 3,
        }
    }

    /// Takes `conversation` for this daemon: the claim's epoch, or `None` while another
    /// daemon holds it.
    pub(super) async fn take(&self, conversation: &str) -> Result<Option<i64>, StoreError> {
        let epoch = self.claims.claim(conversation, self.lease).await?;
        if let Some(e) = epoch {
            self.held
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(conversation.to_string(), e);
        }
        Ok(epoch)
    }

    /// Lets `conversation` go at once, so another daemon may take it: whether it has open rows
    /// after all (another daemon accepted them while this one held it: this one answers them).
    pub(super) async fn let_go(&self, conversation: &str, epoch: i64) -> bool {
        self.forget_claim(conversation);
        match self.claims.release(conversation, epoch).await {
            Ok(open) => open,
            Err(e) => {
                // It lapses by itself within the lease, and the scan finds what is left.
                warn!(error = %e, "the conversation's claim was not let go");
                false
            }
        }
    }

    /// Stops renewing `conversation`'s claim (it was taken from this daemon, or its worker
    /// is gone).
    pub(super) fn forget_claim(&self, conversation: &str) {
        self.held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(conversation);
    }

    /// Whether this daemon may post in `conversation` now: it holds the claim its worker took,
    /// with a third of the lease left at least. Asked right before each post: the turn is
    /// posting from then on. A store that cannot say is an error (the worker tries again
    /// later), not a lost claim.
    pub(super) async fn may_post(&self, conversation: &str) -> Result<bool, StoreError> {
        if !self.posting.enter(conversation) {
            return Ok(false);
        }
        let epoch = self
            .held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(conversation)
            .copied();
        match epoch {
            Some(epoch) => self.claims.holds(conversation, epoch, self.lease / 3).await,
            None => Ok(false),
        }
    }

    /// Whether this daemon still holds `conversation` at `epoch` at all (a worker asks before
    /// it claims a row, when it has not heard for a while: it may have been paused).
    pub(super) async fn still_holds(
        &self,
        conversation: &str,
        epoch: i64,
    ) -> Result<bool, StoreError> {
        self.claims.holds(conversation, epoch, Duration::ZERO).await
    }

    /// The error a worker gets when the conversation is no longer this daemon's.
    pub(super) fn fenced(conversation: &str) -> anyhow::Error {
        StoreError::Fenced {
            conversation: conversation.to_string(),
        }
        .into()
    }

    /// Lets every conversation this daemon holds go (it stops) but those whose turn, still at
    /// work after the grace, has begun to post: a post of theirs may be in flight, and their
    /// claims lapse instead, so that whoever takes them over finds the post in Slack. A turn
    /// that had not asked to post (it waits on the model) posts nothing from now on, and its
    /// conversation is the next holder's at once.
    pub async fn let_go_all(&self) {
        let working = self
            .active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .working
            .clone();
        let held: Vec<(String, i64)> = self
            .held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain()
            .filter(|(c, _)| !working.contains(c) || self.posting.let_go(c))
            .collect();
        for (conversation, epoch) in held {
            // What is still open there is the other daemons' (the scan finds it).
            if let Err(e) = self.claims.release(&conversation, epoch).await {
                warn!(error = %e, "a conversation's claim was not let go; it lapses by itself");
            }
        }
    }

    /// Renews the claims of the conversations this daemon works, and its own heartbeat.
    pub async fn heartbeat(&self) -> Result<(), StoreError> {
        let held: Vec<String> = self
            .held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .keys()
            .cloned()
            .collect();
        self.claims.heartbeat(&held, self.lease).await
    }

    /// Gives a worker to every conversation with open rows that no daemon holds (one whose
    /// holder died, or stopped before it was answered). How many there were.
    pub async fn adopt_unheld(self: &Arc<Self>) -> Result<usize, StoreError> {
        let keys = self.claims.unheld_conversations().await?;
        for k in &keys {
            self.notify(k);
        }
        Ok(keys.len())
    }

    /// How long a claim outlives a daemon that stopped renewing it.
    pub fn lease(&self) -> Duration {
        self.lease
    }
}

/// Whether `e` says the conversation is another daemon's now.
pub(super) fn is_fenced(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        matches!(
            c.downcast_ref::<StoreError>(),
            Some(StoreError::Fenced { .. })
        ) || matches!(
            c.downcast_ref::<crate::engine::EngineError>(),
            Some(crate::engine::EngineError::Store(StoreError::Fenced { .. }))
        )
    })
}

/// Renews this daemon's claims every `lease / 3` and adopts the conversations no one holds
/// every `lease / 4` (at least every 5 s), until the daemon stops.
pub async fn keep_claims(router: Arc<Router>, mut stop: watch::Receiver<bool>) {
    let lease = router.lease();
    let beat = (lease / 3).max(Duration::from_millis(100));
    let scan = (lease / 4).clamp(Duration::from_millis(100), Duration::from_secs(5));
    let mut beats = tokio::time::interval(beat);
    let mut scans = tokio::time::interval(scan);
    beats.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    scans.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    enum Due {
        Beat,
        Scan,
        Stop,
    }
    loop {
        let due = tokio::select! {
            _ = beats.tick() => Due::Beat,
            _ = scans.tick() => Due::Scan,
            _ = stop.wait_for(|s| *s) => Due::Stop,
        };
        match due {
            Due::Beat => {
                if let Err(e) = router.heartbeat().await {
                    warn!(error = %e, "the claims' heartbeat failed; retrying");
                }
            }
            Due::Scan => match router.adopt_unheld().await {
                Ok(0) => {}
                // Also one let go as a message came, in the moment before it is taken again:
                // not always a daemon's death.
                Ok(n) => info!(
                    conversations = n,
                    "picking up open conversations no daemon holds"
                ),
                Err(e) => warn!(error = %e, "cannot look for conversations no daemon holds"),
            },
            Due::Stop => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Posting;

    #[test]
    fn a_conversation_let_go_before_its_turn_posts_never_posts() {
        let p = Posting::default();
        assert!(p.let_go("C1"), "a turn waiting on the model: let go");
        assert!(!p.enter("C1"), "its turn may not post from then on");
    }

    #[test]
    fn a_turn_that_has_begun_to_post_keeps_its_claim_until_its_row_is_done() {
        let p = Posting::default();
        assert!(p.enter("C1"));
        assert!(
            !p.let_go("C1"),
            "a post may be in flight: the claim lapses instead"
        );
        assert!(p.enter("C1"), "and the turn goes on posting");
        p.done("C1");
        assert!(p.let_go("C1"), "between rows nothing is in flight");
    }
}
