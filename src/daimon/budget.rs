//! A daimon's hourly budget: at most `per_hour` asks in any hour, counted by this process
//! alone (several daemons sharing one soul on PostgreSQL each count their own, so together
//! they may ask up to that many times `per_hour`). Pure bookkeeping over instants the caller
//! passes in.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

const HOUR: Duration = Duration::from_secs(3600);

/// The asks of the last hour.
#[derive(Debug, Clone)]
pub struct Hourly {
    per_hour: usize,
    asked: VecDeque<Instant>,
}

impl Hourly {
    pub fn new(per_hour: u32) -> Hourly {
        Hourly {
            per_hour: per_hour.max(1) as usize,
            asked: VecDeque::new(),
        }
    }

    /// Takes one ask at `now` if the last hour holds fewer than `per_hour`: whether taken.
    pub fn take(&mut self, now: Instant) -> bool {
        while let Some(first) = self.asked.front() {
            if now.saturating_duration_since(*first) >= HOUR {
                self.asked.pop_front();
            } else {
                break;
            }
        }
        let ok = self.asked.len() < self.per_hour;
        if ok {
            self.asked.push_back(now);
        }
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_hour_holds_more_than_per_hour_asks() {
        let t0 = Instant::now();
        let mut b = Hourly::new(3);
        let at = |s: u64| t0 + Duration::from_secs(s);
        assert!(b.take(at(0)));
        assert!(b.take(at(10)));
        assert!(b.take(at(20)));
        assert!(!b.take(at(30)), "a fourth in the same hour");
        assert!(!b.take(at(3599)));
        assert!(b.take(at(3600)), "the first has left the hour");
        assert!(!b.take(at(3601)));
        assert!(b.take(at(3610)));
    }

    #[test]
    fn a_refused_ask_takes_nothing() {
        let t0 = Instant::now();
        let mut b = Hourly::new(1);
        assert!(b.take(t0));
        for s in 1..100 {
            assert!(!b.take(t0 + Duration::from_secs(s)));
        }
        assert!(b.take(t0 + HOUR));
    }
}
