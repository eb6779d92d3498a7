//! A worker's hold on its conversation, as a pure state machine: what the worker learned
//! (an `Event`: the claim taken or refused, a row claimed or none, a turn answered, fenced,
//! failed) goes in; the hold's next state and what the worker does next (an `Act`: take the
//! claim, confirm it, claim a row, answer it, let the conversation go, back off, leave) come
//! out. The worker (`worker`) carries the acts out against the store and the engine and
//! feeds their results back; nothing here does I/O or reads a clock.
//!
//! The rules: a conversation is taken before any row of it is claimed; a claim not heard of
//! for a third of the lease is confirmed before the next row is claimed (the worker may have
//! been paused); with no row left the claim is let go at once, and taken again if another
//! daemon accepted a row meanwhile; a conversation that turns out to be another daemon's is
//! left without posting; failures back off, longer each time, until a turn is answered.

use std::time::{Duration, Instant};

/// What the worker learned since its last act. `R` is the row the worker claims (opaque
/// here: the hold only passes it on).
#[derive(Debug)]
pub(super) enum Event<R> {
    /// Between rows (no post of the worker's is in flight): whether the router is stopping.
    Between { stopping: bool, now: Instant },
    /// The claim on the conversation: its epoch, or `None` while another daemon holds it.
    Taken(Option<i64>, Instant),
    /// Whether the claim still holds.
    Confirmed(bool, Instant),
    /// A row claimed, and whether it is out of attempts.
    Claimed { row: R, exhausted: bool },
    /// No row is open.
    NoRow,
    /// The claim was let go; whether rows are open after all (another daemon accepted them).
    Released { open: bool },
    /// Whether the worker left (false: a row came since it looked, it looks again).
    Left(bool),
    /// A row out of attempts was answered with the apology and closed.
    GaveUp,
    /// A row's turn ended well.
    Answered(Instant),
    /// The conversation is another daemon's now (a write or a post was refused).
    Fenced,
    /// The daemon stopped while the soul was waking: the row waits for the next start.
    Stopping,
    /// Something failed (the store, or the turn: an error or a panic), in words.
    Failed(String),
}

/// What the worker does next.
#[derive(Debug, PartialEq)]
pub(super) enum Act<R> {
    /// Between rows again.
    Between,
    /// Take the conversation's claim.
    Take,
    /// Ask whether the claim at this epoch still holds.
    Confirm(i64),
    /// Claim the conversation's next row.
    Claim,
    /// Answer the row under the claim at this epoch.
    Answer(R, i64),
    /// Answer the row, out of attempts, with the apology.
    GiveUp(R),
    /// Let the claim go (no row is open): whether there are rows after all comes back.
    Release(i64),
    /// Give up the claim as said, then leave unless a row came.
    Leave(Letting),
    /// Wait before trying again: the failures in a row so far, and what failed.
    Backoff { failures: u32, error: String },
    /// Stop working the conversation, letting the claim at this epoch go first if any.
    Exit(Option<i64>),
}

/// What becomes of the claim as the worker leaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Letting {
    /// There is none.
    Nothing,
    /// It is no longer this daemon's: stop renewing it.
    Forget,
    /// It is another daemon's now (a write was refused): let it go if it is still this
    /// one's at the epoch.
    LetGo(i64),
}

/// A worker's hold on its conversation.
#[derive(Debug, Clone, Copy)]
pub(super) struct Hold {
    /// The claim's epoch while this daemon holds the conversation.
    epoch: Option<i64>,
    /// When the claim was last known to hold.
    confirmed: Instant,
    /// Failures in a row since the last answered turn.
    failures: u32,
    /// How long a claim outlives a daemon that stopped renewing it.
    lease: Duration,
}

impl Hold {
    pub(super) fn new(lease: Duration, now: Instant) -> Self {
        Hold {
            epoch: None,
            confirmed: now,
            failures: 0,
            lease,
        }
    }

    /// The hold after `event`, and what the worker does next.
    pub(super) fn on<R>(&mut self, event: Event<R>) -> Act<R> {
        match event {
            Event::Between { stopping: true, .. } => Act::Exit(self.epoch.take()),
            Event::Between { now, .. } => self.go_on(now),
            Event::Taken(Some(epoch), now) => {
                self.epoch = Some(epoch);
                self.confirmed = now;
                self.go_on(now)
            }
            // Another daemon works here: it finds these rows itself, unless it let the
            // conversation go since (a row accepted meanwhile says so).
            Event::Taken(None, _) => Act::Leave(Letting::Nothing),
            Event::Confirmed(true, now) => {
                self.confirmed = now;
                Act::Claim
            }
            Event::Confirmed(false, _) => {
                self.epoch = None;
                Act::Leave(Letting::Forget)
            }
            Event::Claimed { row, exhausted } => match self.epoch {
                Some(_) if exhausted => Act::GiveUp(row),
                Some(epoch) => Act::Answer(row, epoch),
                // Not reached: a row is claimed only under a claim.
                None => Act::Between,
            },
            // A row another daemon accepted while this one held the conversation is this
            // one's to answer: let go, it takes the conversation again.
            Event::NoRow => match self.epoch.take() {
                Some(epoch) => Act::Release(epoch),
                None => Act::Leave(Letting::Nothing),
            },
            Event::Released { open: true } | Event::Left(false) | Event::GaveUp => Act::Between,
            Event::Released { open: false } => Act::Leave(Letting::Nothing),
            Event::Left(true) | Event::Stopping => Act::Exit(None),
            Event::Answered(now) => {
                self.failures = 0;
                // Its commit and its posts asked.
                self.confirmed = now;
                Act::Between
            }
            Event::Fenced => match self.epoch.take() {
                Some(epoch) => Act::Leave(Letting::LetGo(epoch)),
                None => Act::Leave(Letting::Nothing),
            },
            Event::Failed(error) => {
                self.failures += 1;
                Act::Backoff {
                    failures: self.failures,
                    error,
                }
            }
        }
    }

    /// Between rows, not stopping: take the claim, confirm it, or claim the next row.
    fn go_on<R>(&self, now: Instant) -> Act<R> {
        match self.epoch {
            None => Act::Take,
            // A worker that has not heard for a third of the lease asks before it claims.
            Some(epoch) if now.saturating_duration_since(self.confirmed) > self.lease / 3 => {
                Act::Confirm(epoch)
            }
            Some(_) => Act::Claim,
        }
    }
}

/// How long a worker waits after `failures` failures in a row.
pub(super) fn backoff(failures: u32) -> Duration {
    Duration::from_millis(200 * 2u64.pow(failures.min(7)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LEASE: Duration = Duration::from_secs(30);

    fn between(h: &mut Hold, now: Instant) -> Act<&'static str> {
        h.on(Event::Between {
            stopping: false,
            now,
        })
    }

    /// A hold on the conversation at epoch 7, confirmed at `t0`.
    fn held(t0: Instant) -> Hold {
        let mut h = Hold::new(LEASE, t0);
        assert_eq!(between(&mut h, t0), Act::Take);
        assert_eq!(h.on::<&str>(Event::Taken(Some(7), t0)), Act::Claim);
        h
    }

    #[test]
    fn a_conversation_is_taken_before_a_row_is_claimed_and_answered_under_its_epoch() {
        let t0 = Instant::now();
        let mut h = held(t0);
        let row = h.on(Event::Claimed {
            row: "m1",
            exhausted: false,
        });
        assert_eq!(row, Act::Answer("m1", 7));
        assert_eq!(h.on::<&str>(Event::Answered(t0)), Act::Between);
        assert_eq!(between(&mut h, t0), Act::Claim, "still held: no new claim");
    }

    #[test]
    fn a_conversation_another_daemon_holds_is_left_to_it() {
        let t0 = Instant::now();
        let mut h = Hold::new(LEASE, t0);
        assert_eq!(between(&mut h, t0), Act::Take);
        assert_eq!(
            h.on::<&str>(Event::Taken(None, t0)),
            Act::Leave(Letting::Nothing)
        );
        assert_eq!(h.on::<&str>(Event::Left(true)), Act::Exit(None));
    }

    #[test]
    fn a_worker_that_stayed_because_a_row_came_looks_again() {
        let t0 = Instant::now();
        let mut h = Hold::new(LEASE, t0);
        h.on::<&str>(Event::Taken(None, t0));
        assert_eq!(h.on::<&str>(Event::Left(false)), Act::Between);
        assert_eq!(between(&mut h, t0), Act::Take);
    }

    #[test]
    fn a_claim_not_heard_of_for_a_third_of_the_lease_is_confirmed_first() {
        let t0 = Instant::now();
        let mut h = held(t0);
        let at_third = t0 + LEASE / 3;
        assert_eq!(
            between(&mut h, at_third),
            Act::Claim,
            "a third exactly: fine"
        );
        let later = at_third + Duration::from_millis(1);
        assert_eq!(between(&mut h, later), Act::Confirm(7));
        assert_eq!(h.on::<&str>(Event::Confirmed(true, later)), Act::Claim);
        assert_eq!(between(&mut h, later), Act::Claim, "confirmed anew");
    }

    #[test]
    fn a_claim_that_no_longer_holds_is_forgotten_and_retaken_if_the_worker_stays() {
        let t0 = Instant::now();
        let mut h = held(t0);
        let later = t0 + LEASE;
        assert_eq!(between(&mut h, later), Act::Confirm(7));
        assert_eq!(
            h.on::<&str>(Event::Confirmed(false, later)),
            Act::Leave(Letting::Forget)
        );
        assert_eq!(h.on::<&str>(Event::Left(false)), Act::Between);
        assert_eq!(between(&mut h, later), Act::Take);
    }

    #[test]
    fn an_answered_turn_counts_as_hearing_from_the_claim() {
        let t0 = Instant::now();
        let mut h = held(t0);
        let later = t0 + LEASE;
        h.on(Event::Claimed {
            row: "m1",
            exhausted: false,
        });
        h.on::<&str>(Event::Answered(later));
        assert_eq!(between(&mut h, later), Act::Claim);
    }

    #[test]
    fn with_no_row_left_the_claim_is_let_go_and_retaken_when_rows_came_meanwhile() {
        let t0 = Instant::now();
        let mut h = held(t0);
        assert_eq!(h.on::<&str>(Event::NoRow), Act::Release(7));
        assert_eq!(h.on::<&str>(Event::Released { open: true }), Act::Between);
        assert_eq!(
            between(&mut h, t0),
            Act::Take,
            "the claim went: taken again"
        );
    }

    #[test]
    fn with_no_row_left_and_none_open_the_worker_leaves() {
        let t0 = Instant::now();
        let mut h = held(t0);
        h.on::<&str>(Event::NoRow);
        assert_eq!(
            h.on::<&str>(Event::Released { open: false }),
            Act::Leave(Letting::Nothing)
        );
    }

    #[test]
    fn a_row_out_of_attempts_is_given_up_not_answered() {
        let t0 = Instant::now();
        let mut h = held(t0);
        let act = h.on(Event::Claimed {
            row: "m1",
            exhausted: true,
        });
        assert_eq!(act, Act::GiveUp("m1"));
        assert_eq!(h.on::<&str>(Event::GaveUp), Act::Between);
        assert_eq!(between(&mut h, t0), Act::Claim);
    }

    #[test]
    fn a_fenced_turn_lets_the_conversation_go_at_its_epoch_and_leaves() {
        let t0 = Instant::now();
        let mut h = held(t0);
        h.on(Event::Claimed {
            row: "m1",
            exhausted: false,
        });
        assert_eq!(h.on::<&str>(Event::Fenced), Act::Leave(Letting::LetGo(7)));
        assert_eq!(h.on::<&str>(Event::Left(false)), Act::Between);
        assert_eq!(between(&mut h, t0), Act::Take, "the claim is gone");
    }

    #[test]
    fn stopping_between_rows_lets_the_claim_go() {
        let t0 = Instant::now();
        let mut h = held(t0);
        let act = h.on::<&str>(Event::Between {
            stopping: true,
            now: t0,
        });
        assert_eq!(act, Act::Exit(Some(7)));
        let mut free = Hold::new(LEASE, t0);
        let act = free.on::<&str>(Event::Between {
            stopping: true,
            now: t0,
        });
        assert_eq!(act, Act::Exit(None));
    }

    #[test]
    fn a_turn_stopped_before_the_soul_woke_ends_the_worker_keeping_its_claim_to_lapse() {
        let t0 = Instant::now();
        let mut h = held(t0);
        assert_eq!(h.on::<&str>(Event::Stopping), Act::Exit(None));
    }

    #[test]
    fn failures_back_off_longer_each_time_until_a_turn_is_answered() {
        let t0 = Instant::now();
        let mut h = held(t0);
        let fail = |h: &mut Hold| match h.on::<&str>(Event::Failed("down".into())) {
            Act::Backoff { failures, error } => {
                assert_eq!(error, "down");
                failures
            }
            other => panic!("not a backoff: {other:?}"),
        };
        assert_eq!(fail(&mut h), 1);
        assert_eq!(fail(&mut h), 2);
        assert_eq!(between(&mut h, t0), Act::Claim, "a failure keeps the claim");
        h.on::<&str>(Event::Answered(t0));
        assert_eq!(fail(&mut h), 1, "an answered turn resets the count");
        assert_eq!(backoff(1), Duration::from_millis(400));
        assert_eq!(backoff(2), Duration::from_millis(800));
        assert_eq!(backoff(7), backoff(20), "capped");
    }
}
