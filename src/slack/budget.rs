//! How many stream calls Slack will take, and where it said no: one workspace-wide budget per
//! stream method (Slack limits each method per workspace: start and stop are Tier 2, about
//! 20 a minute; append is Tier 4, about 100), shared by every thread, and the kinds of
//! channel where a stream was refused lately.
//!
//! Each budget is a token bucket whose burst plus its refill over a minute is the tier's
//! figure, so no 60-second window ever holds more calls than the tier allows.
//!
//! Pure bookkeeping over instants the caller passes in; no I/O.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A token bucket: `burst` calls at once, refilled at `per_minute`.
#[derive(Debug, Clone)]
pub struct Bucket {
    burst: f64,
    per_minute: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A bucket for a tier of `limit` calls a minute: a fourth of it at once, the rest
    /// refilled over the minute.
    pub fn tier(limit: u32, now: Instant) -> Bucket {
        let burst = (limit / 4).max(1);
        Bucket {
            burst: burst as f64,
            per_minute: (limit - burst) as f64,
            tokens: burst as f64,
            at: now,
        }
    }

    fn refill(&mut self, now: Instant) {
        let secs = now.saturating_duration_since(self.at).as_secs_f64();
        self.tokens = (self.tokens + secs * self.per_minute / 60.0).min(self.burst);
        self.at = self.at.max(now);
    }

    /// Whether a call may go now.
    pub fn available(&mut self, now: Instant) -> bool {
        self.refill(now);
        self.tokens >= 1.0
    }

    /// Takes one call if there is one.
    pub fn take(&mut self, now: Instant) -> bool {
        let ok = self.available(now);
        if ok {
            self.tokens -= 1.0;
        }
        ok
    }

    /// Slack said 429: nothing more until the bucket refills.
    pub fn drain(&mut self, now: Instant) {
        self.refill(now);
        self.tokens = self.tokens.min(0.0);
    }
}

/// Slack's rate tiers for the stream methods, per workspace.
pub const START_PER_MINUTE: u32 = 20;
pub const APPEND_PER_MINUTE: u32 = 100;
pub const STOP_PER_MINUTE: u32 = 20;

/// The workspace's stream budget.
#[derive(Debug, Clone)]
pub struct Budget {
    pub start: Bucket,
    pub append: Bucket,
    pub stop: Bucket,
}

impl Budget {
    pub fn new(now: Instant) -> Budget {
        Budget {
            start: Bucket::tier(START_PER_MINUTE, now),
            append: Bucket::tier(APPEND_PER_MINUTE, now),
            stop: Bucket::tier(STOP_PER_MINUTE, now),
        }
    }

    /// A stream may begin only if it can also be stopped within the budget: both are taken
    /// together, or neither.
    pub fn begin(&mut self, now: Instant) -> bool {
        if self.start.available(now) && self.stop.available(now) {
            self.start.take(now);
            self.stop.take(now);
            true
        } else {
            false
        }
    }
}

/// The kinds of conversation Slack treats differently for streams, told by the channel id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Dm,
    Channel,
    Group,
    /// Every kind (a missing scope is the app's, not the channel's).
    All,
}

impl Kind {
    pub fn of(channel: &str) -> Kind {
        match channel.as_bytes().first() {
            Some(b'D') => Kind::Dm,
            Some(b'G') => Kind::Group,
            _ => Kind::Channel,
        }
    }
}

/// How long a refusal keeps replies to that kind of conversation whole before a stream is
/// tried there again.
pub const REFUSAL_LASTS: Duration = Duration::from_secs(600);

/// Where Slack refused a stream lately.
#[derive(Debug, Clone, Default)]
pub struct Refusals {
    at: HashMap<Kind, (Instant, String)>,
}

impl Refusals {
    /// Remembers a refusal (`code`) for `channel`'s kind, or for every kind when the app
    /// lacks a scope.
    pub fn note(&mut self, channel: &str, code: &str, now: Instant) {
        let kind = if code == "missing_scope" || code == "not_allowed_token_type" {
            Kind::All
        } else {
            Kind::of(channel)
        };
        self.at.insert(kind, (now, code.to_string()));
    }

    /// The refusal still in force for `channel`, if any.
    pub fn refused(&self, channel: &str, now: Instant) -> Option<&str> {
        [Kind::All, Kind::of(channel)].iter().find_map(|k| {
            self.at
                .get(k)
                .filter(|(at, _)| now.saturating_duration_since(*at) < REFUSAL_LASTS)
                .map(|(_, code)| code.as_str())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tier_2_bucket_gives_5_at_once_then_one_every_4_seconds() {
        let t0 = Instant::now();
        let mut b = Bucket::tier(20, t0);
        assert_eq!((0..25).filter(|_| b.take(t0)).count(), 5);
        // 15 a minute after the burst: one every 4 s.
        assert!(!b.take(t0 + Duration::from_millis(3_900)));
        assert!(b.take(t0 + Duration::from_millis(4_000)));
        assert!(!b.take(t0 + Duration::from_millis(4_100)));
        // Never more than its burst, however long it rests.
        let later = t0 + Duration::from_secs(3600);
        assert_eq!((0..25).filter(|_| b.take(later)).count(), 5);
    }

    #[test]
    fn no_minute_ever_holds_more_calls_than_the_tier() {
        // Taking greedily every 100 ms for five minutes.
        for limit in [START_PER_MINUTE, APPEND_PER_MINUTE] {
            let t0 = Instant::now();
            let mut b = Bucket::tier(limit, t0);
            let taken: Vec<Duration> = (0..3000)
                .map(|i| Duration::from_millis(100 * i))
                .filter(|d| b.take(t0 + *d))
                .collect();
            for (i, first) in taken.iter().enumerate() {
                let in_minute = taken[i..]
                    .iter()
                    .take_while(|d| **d < *first + Duration::from_secs(60))
                    .count();
                assert!(
                    in_minute <= limit as usize,
                    "{in_minute} calls in a minute, tier {limit}"
                );
            }
        }
    }

    #[test]
    fn a_429_drains_the_bucket() {
        let t0 = Instant::now();
        let mut b = Bucket::tier(100, t0);
        b.drain(t0);
        assert!(!b.take(t0));
        // 75 a minute after the burst: one every 0.8 s.
        assert!(b.take(t0 + Duration::from_millis(800)));
    }

    #[test]
    fn a_stream_begins_only_when_it_can_also_be_stopped() {
        let t0 = Instant::now();
        let mut budget = Budget::new(t0);
        while budget.stop.take(t0) {}
        assert!(!budget.begin(t0));
        // The start was not spent by the refused begin.
        assert!(budget.start.available(t0));
        assert!(budget.begin(t0 + Duration::from_secs(4)));
    }

    #[test]
    fn refusals_are_remembered_per_kind_of_conversation_for_a_while() {
        let t0 = Instant::now();
        let mut r = Refusals::default();
        r.note("C123", "channel_type_not_supported", t0);
        assert_eq!(r.refused("C999", t0), Some("channel_type_not_supported"));
        assert_eq!(r.refused("D123", t0), None);
        assert_eq!(r.refused("C999", t0 + REFUSAL_LASTS), None);
        // A missing scope holds everywhere.
        r.note("D1", "missing_scope", t0);
        assert_eq!(r.refused("G1", t0), Some("missing_scope"));
    }
}
