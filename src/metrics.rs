//! The daemon's counters, rendered in Prometheus text format for `GET /metrics`.
//!
//! Counters only; nothing here blocks a turn.

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use tracing::{debug, warn};

/// How long a failure keeps `/healthz` saying "degraded".
const DEGRADED_FOR_MS: i64 = 15 * 60 * 1000;

#[derive(Debug, Default)]
pub struct Metrics {
    pub events_received: AtomicU64,
    pub events_accepted: AtomicU64,
    pub events_duplicate: AtomicU64,
    pub events_ignored: AtomicU64,
    pub events_malformed: AtomicU64,
    pub turns_completed: AtomicU64,
    pub turns_failed: AtomicU64,
    pub replies_posted: AtomicU64,
    pub replies_undeliverable: AtomicU64,
    pub turns_in_flight: AtomicU64,
    /// Turns that panicked (caught; the message is tried again).
    pub turns_panicked: AtomicU64,
    /// Messages given up after every attempt and answered with the apology.
    pub messages_failed: AtomicU64,
    /// Unix ms of the last panic or give-up (0: none).
    last_failure_ms: AtomicI64,
    /// (event accepted → reply posted) minus model time.
    pub overhead: Histogram,
    pub slack_connected: AtomicBool,
    /// HTTP requests refused for a bad signature or token.
    pub refusals: Refusals,
}

impl Metrics {
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn note_panic(&self) {
        Self::inc(&self.turns_panicked);
        self.last_failure_ms
            .store(crate::memory::now_ms(), Ordering::Relaxed);
    }

    pub fn note_given_up(&self) {
        Self::inc(&self.messages_failed);
        self.last_failure_ms
            .store(crate::memory::now_ms(), Ordering::Relaxed);
    }

    /// Why the daemon is degraded: a turn panicked or a message was given up recently.
    pub fn degraded(&self, now_ms: i64) -> Option<String> {
        let last = self.last_failure_ms.load(Ordering::Relaxed);
        (last > 0 && now_ms - last < DEGRADED_FOR_MS).then(|| {
            format!(
                "degraded: {} turn(s) panicked and {} message(s) were answered with an apology after every attempt failed; the last {} s ago (see the log)",
                self.turns_panicked.load(Ordering::Relaxed),
                self.messages_failed.load(Ordering::Relaxed),
                (now_ms - last) / 1000
            )
        })
    }

    /// One counter, rendered like the others.
    pub fn render_counter(out: &mut String, name: &str, help: &str, value: u64) {
        let _ = writeln!(
            out,
            "# HELP {name} {help}.\n# TYPE {name} counter\n{name} {value}"
        );
    }

    /// The store's write failures, rendered with the rest (the store keeps the count).
    pub fn render_store(out: &mut String, write_errors: u64, writable: bool) {
        let _ = writeln!(
            out,
            "# HELP anima_store_write_errors_total Writes that failed because the store could not write.\n# TYPE anima_store_write_errors_total counter\nanima_store_write_errors_total {write_errors}"
        );
        let _ = writeln!(
            out,
            "# HELP anima_store_writable Whether the store's last write succeeded.\n# TYPE anima_store_writable gauge\nanima_store_writable {}",
            u8::from(writable)
        );
    }

    pub fn render(&self) -> String {
        let mut out = String::with_capacity(2048);
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let counters: [(&str, &str, &AtomicU64); 11] = [
            (
                "anima_slack_events_received_total",
                "Slack events received",
                &self.events_received,
            ),
            (
                "anima_slack_events_accepted_total",
                "Slack messages written to the inbox",
                &self.events_accepted,
            ),
            (
                "anima_slack_events_duplicate_total",
                "Slack retries and twins dropped",
                &self.events_duplicate,
            ),
            (
                "anima_slack_events_ignored_total",
                "Slack events anima does not answer",
                &self.events_ignored,
            ),
            (
                "anima_slack_events_malformed_total",
                "Slack payloads that could not be read",
                &self.events_malformed,
            ),
            (
                "anima_turns_completed_total",
                "turns whose model call succeeded",
                &self.turns_completed,
            ),
            (
                "anima_turns_failed_total",
                "turns answered with the apology",
                &self.turns_failed,
            ),
            (
                "anima_replies_posted_total",
                "messages posted to Slack",
                &self.replies_posted,
            ),
            (
                "anima_replies_undeliverable_total",
                "replies Slack refused",
                &self.replies_undeliverable,
            ),
            (
                "anima_turns_panicked_total",
                "turns that panicked (caught; the message is tried again)",
                &self.turns_panicked,
            ),
            (
                "anima_messages_failed_total",
                "messages answered with the apology after every attempt failed",
                &self.messages_failed,
            ),
        ];
        for (name, help, c) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}.\n# TYPE {name} counter\n{name} {}",
                get(c)
            );
        }
        let _ = writeln!(
            out,
            "# HELP anima_turns_in_flight Turns being processed.\n# TYPE anima_turns_in_flight gauge\nanima_turns_in_flight {}",
            get(&self.turns_in_flight)
        );
        self.overhead.render(
            &mut out,
            "anima_reply_overhead_seconds",
            "Event accepted to reply posted, less model time",
        );
        let _ = writeln!(
            out,
            "# HELP anima_slack_connected Whether Slack is connected.\n# TYPE anima_slack_connected gauge\nanima_slack_connected {}",
            u8::from(self.slack_connected.load(Ordering::Relaxed))
        );
        out
    }
}

/// Refused requests: counted, and logged at warn at most once a minute per route.
#[derive(Debug, Default)]
pub struct Refusals {
    count: AtomicU64,
    last_warned: Mutex<Vec<(&'static str, Instant)>>,
}

impl Refusals {
    pub fn refuse(&self, route: &'static str, why: &str) {
        self.count.fetch_add(1, Ordering::Relaxed);
        let mut last = self.last_warned.lock().unwrap_or_else(|e| e.into_inner());
        let due = match last.iter_mut().find(|(r, _)| *r == route) {
            Some((_, at)) if at.elapsed() < Duration::from_secs(60) => false,
            Some((_, at)) => {
                *at = Instant::now();
                true
            }
            None => {
                last.push((route, Instant::now()));
                true
            }
        };
        if due {
            warn!(
                route,
                why, "request refused (more refusals within a minute are logged at debug)"
            );
        } else {
            debug!(route, why, "request refused");
        }
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

/// Upper bounds of the histogram buckets, in microseconds.
const BUCKETS_US: [u64; 14] = [
    250, 500, 1_000, 2_000, 3_000, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 1_000_000,
    5_000_000, 30_000_000,
];

/// A Prometheus histogram of durations.
#[derive(Debug, Default)]
pub struct Histogram {
    buckets: [AtomicU64; 14],
    sum_us: AtomicU64,
    count: AtomicU64,
}

impl Histogram {
    pub fn observe(&self, us: u64) {
        if let Some(i) = BUCKETS_US.iter().position(|b| us <= *b) {
            self.buckets[i].fetch_add(1, Ordering::Relaxed);
        }
        self.sum_us.fetch_add(us, Ordering::Relaxed);
        self.count.fetch_add(1, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}.\n# TYPE {name} histogram");
        let mut cumulative = 0;
        for (bound, n) in BUCKETS_US.iter().zip(&self.buckets) {
            cumulative += n.load(Ordering::Relaxed);
            let _ = writeln!(
                out,
                "{name}_bucket{{le=\"{}\"}} {cumulative}",
                *bound as f64 / 1e6
            );
        }
        let count = self.count.load(Ordering::Relaxed);
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}");
        let _ = writeln!(
            out,
            "{name}_sum {}",
            self.sum_us.load(Ordering::Relaxed) as f64 / 1e6
        );
        let _ = writeln!(out, "{name}_count {count}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = Metrics::default();
        Metrics::inc(&m.replies_posted);
        Metrics::inc(&m.replies_posted);
        let text = m.render();
        assert!(text
            .contains("# TYPE anima_replies_posted_total counter\nanima_replies_posted_total 2\n"));
        assert!(text.contains("anima_slack_connected 0"));
        m.overhead.observe(800);
        m.overhead.observe(4_000);
        let text = m.render();
        assert!(
            text.contains("anima_reply_overhead_seconds_bucket{le=\"0.0005\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("anima_reply_overhead_seconds_bucket{le=\"0.001\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("anima_reply_overhead_seconds_bucket{le=\"0.005\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("anima_reply_overhead_seconds_count 2\n"),
            "{text}"
        );
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.rsplit_once(' ').unwrap();
            let bare = name.split('{').next().unwrap();
            assert!(
                bare.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{line}"
            );
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }
}
