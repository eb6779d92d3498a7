//! Budgets of calls an outside service allows a minute, and the refusals it gave lately, as a
//! store one process uses keeps them: in that process's memory (`Local`). A store several
//! daemons share keeps them in the database (PostgreSQL: migrations/postgres/0006), with the
//! same arithmetic on the server's clock.
//!
//! A budget is a token bucket whose burst plus its refill over a minute is the limit, so no
//! 60-second window ever holds more calls than the service allows. Pure bookkeeping over
//! instants the caller passes in; no I/O, and no service's words (the names are the caller's).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::StoreError;

/// A token bucket: `burst` calls at once, refilled at `per_minute`.
#[derive(Debug, Clone)]
pub struct Bucket {
    burst: f64,
    per_minute: f64,
    tokens: f64,
    at: Instant,
}

impl Bucket {
    /// A bucket for `limit` calls a minute: a fourth of it at once (one at least), the rest
    /// refilled over the minute.
    pub fn tier(limit: u32, now: Instant) -> Bucket {
        let burst = (limit / 4).max(1);
        Bucket {
            burst: burst as f64,
            per_minute: limit.saturating_sub(burst) as f64,
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

    /// The service said it had too many: nothing more until the bucket refills.
    pub fn drain(&mut self, now: Instant) {
        self.refill(now);
        self.tokens = self.tokens.min(0.0);
    }
}

/// One process's budgets and refusals.
#[derive(Debug, Default)]
pub struct Local {
    buckets: HashMap<String, Bucket>,
    refusals: HashMap<String, (Instant, String)>,
}

impl Local {
    /// Takes one call from each bucket (name, calls a minute), all or none.
    pub fn take(&mut self, buckets: &[(&str, u32)], now: Instant) -> bool {
        let all = buckets.iter().all(|(name, limit)| {
            self.buckets
                .entry(name.to_string())
                .or_insert_with(|| Bucket::tier(*limit, now))
                .available(now)
        });
        if all {
            for (name, _) in buckets {
                if let Some(b) = self.buckets.get_mut(*name) {
                    b.take(now);
                }
            }
        }
        all
    }

    /// Empties bucket `name` (if it was ever used: one never used has spent nothing).
    pub fn drain(&mut self, name: &str, now: Instant) {
        if let Some(b) = self.buckets.get_mut(name) {
            b.drain(now);
        }
    }

    pub fn note_refusal(&mut self, kind: &str, code: &str, now: Instant) {
        self.refusals
            .insert(kind.to_string(), (now, code.to_string()));
    }

    /// The code of the first of `kinds` refused within `within` of `now`.
    pub fn refusal(&self, kinds: &[&str], within: Duration, now: Instant) -> Option<String> {
        kinds.iter().find_map(|k| {
            self.refusals
                .get(*k)
                .filter(|(at, _)| now.saturating_duration_since(*at) < within)
                .map(|(_, code)| code.clone())
        })
    }
}

/// One process uses a SQLite file: it keeps its budgets and refusals in its own memory.
#[async_trait::async_trait]
impl super::faces::Budgets for super::sqlite::Sqlite {
    async fn take_budget(&self, buckets: &[(&str, u32)]) -> Result<bool, StoreError> {
        Ok(self.blocking().budgets().take(buckets, Instant::now()))
    }
    async fn drain_budget(&self, bucket: &str) -> Result<(), StoreError> {
        self.blocking().budgets().drain(bucket, Instant::now());
        Ok(())
    }
    async fn note_refusal(&self, kind: &str, code: &str) -> Result<(), StoreError> {
        self.blocking()
            .budgets()
            .note_refusal(kind, code, Instant::now());
        Ok(())
    }
    async fn refusal(
        &self,
        kinds: &[&str],
        within: Duration,
    ) -> Result<Option<String>, StoreError> {
        Ok(self
            .blocking()
            .budgets()
            .refusal(kinds, within, Instant::now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bucket_of_20_a_minute_gives_5_at_once_then_one_every_4_seconds() {
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
    fn no_minute_ever_holds_more_calls_than_the_limit() {
        // Taking greedily every 100 ms for five minutes.
        for limit in [20, 100] {
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
                    "{in_minute} calls in a minute, limit {limit}"
                );
            }
        }
    }

    #[test]
    fn a_drained_bucket_waits_for_its_refill() {
        let t0 = Instant::now();
        let mut b = Bucket::tier(100, t0);
        b.drain(t0);
        assert!(!b.take(t0));
        // 75 a minute after the burst: one every 0.8 s.
        assert!(b.take(t0 + Duration::from_millis(800)));
    }

    #[test]
    fn calls_taken_together_are_taken_all_or_none() {
        let t0 = Instant::now();
        let mut l = Local::default();
        while l.take(&[("stop", 20)], t0) {}
        assert!(!l.take(&[("start", 20), ("stop", 20)], t0));
        // The start was not spent by the refused pair.
        assert_eq!((0..9).filter(|_| l.take(&[("start", 20)], t0)).count(), 5);
        assert!(l.take(&[("stop", 20)], t0 + Duration::from_secs(4)));
    }

    #[test]
    fn refusals_are_remembered_per_kind_for_a_while() {
        let t0 = Instant::now();
        let mut l = Local::default();
        let lasts = Duration::from_secs(600);
        l.note_refusal("channel", "channel_type_not_supported", t0);
        assert_eq!(
            l.refusal(&["all", "channel"], lasts, t0).as_deref(),
            Some("channel_type_not_supported")
        );
        assert_eq!(l.refusal(&["all", "dm"], lasts, t0), None);
        assert_eq!(l.refusal(&["channel"], lasts, t0 + lasts), None);
    }
}
