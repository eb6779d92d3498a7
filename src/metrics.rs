//! The daemon's counters, rendered in Prometheus text format for `GET /metrics`.
//!
//! Lock-free counters only; nothing here blocks a turn.

use std::fmt::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

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
    /// Sum and count of (event received → reply posted) minus model time, in microseconds.
    pub overhead_us_sum: AtomicU64,
    pub overhead_count: AtomicU64,
    pub slack_connected: AtomicBool,
}

impl Metrics {
    pub fn inc(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn render(&self) -> String {
        let mut out = String::with_capacity(2048);
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let counters: [(&str, &str, &AtomicU64); 9] = [
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
        let _ = writeln!(
            out,
            "# HELP anima_reply_overhead_seconds Event received to reply posted, less model time.\n# TYPE anima_reply_overhead_seconds summary\nanima_reply_overhead_seconds_sum {}\nanima_reply_overhead_seconds_count {}",
            get(&self.overhead_us_sum) as f64 / 1e6,
            get(&self.overhead_count)
        );
        let _ = writeln!(
            out,
            "# HELP anima_slack_connected Whether Slack is connected.\n# TYPE anima_slack_connected gauge\nanima_slack_connected {}",
            u8::from(self.slack_connected.load(Ordering::Relaxed))
        );
        out
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
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.split_once(' ').unwrap();
            assert!(
                name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{line}"
            );
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }
}
