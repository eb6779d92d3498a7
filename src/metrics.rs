//! The daemon's metrics, in Prometheus text format for `GET /metrics` (through the
//! prometheus-client crate). Names follow Prometheus conventions (`anima_` prefix, `_total`,
//! `_seconds`); labels are bounded (process names, outcomes, Slack methods and error codes,
//! never a thread or a user).
//!
//! Counters and histograms only; nothing here blocks a turn.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use tracing::{debug, warn};

/// How long a failure keeps `/healthz` saying "degraded".
const DEGRADED_FOR_MS: i64 = 15 * 60 * 1000;

/// Bucket bounds (seconds) for anima's own overheads: sub-millisecond to seconds.
const FAST_BUCKETS: [f64; 14] = [
    0.00025, 0.0005, 0.001, 0.002, 0.003, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0,
];
/// Bucket bounds (seconds) for model calls.
const MODEL_BUCKETS: [f64; 12] = [
    0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TurnLabels {
    pub process: String,
    /// `completed`, `model_failed`, `followed_up`, `stayed_quiet`.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ModelLabels {
    pub provider: &'static str,
    /// `ok` or `error`.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TokenLabels {
    /// `input`, `output`, `cache_read`, `cache_write`.
    pub kind: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SlackErrorLabels {
    pub method: &'static str,
    pub code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct MethodLabels {
    pub method: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TransitionLabels {
    pub from: String,
    pub to: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndingLabels {
    pub ending: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReplyLabels {
    /// `whole` (chat.postMessage) or `streamed`.
    pub mode: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct FeedbackLabels {
    /// `good` or `bad`.
    pub value: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolCallLabels {
    pub server: String,
    pub tool: String,
    /// `ok`, `tool_error`, `refused`, `invalid`, `unknown`, `unavailable`, `timeout`, `failed`.
    pub outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ToolLabels {
    pub server: String,
    pub tool: String,
}

/// Bucket bounds (seconds) for tool calls.
const TOOL_BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0, 5.0, 30.0, 120.0,
];

fn tool_histogram() -> Histogram {
    Histogram::new(TOOL_BUCKETS.iter().copied())
}

/// The registry as a table: each line declares a field of [`Metrics`] and, for a
/// registered metric, its name under `anima_` and its help, in the order `/metrics` lists
/// them. The struct and its `Default` (which registers every line) are written from it.
macro_rules! metrics_table {
    (
        registered { $( $(#[$doc:meta])* $vis:vis $field:ident: $ty:ty = $make:expr
            => $name:literal, $help:literal; )* }
        unregistered { $( $(#[$udoc:meta])* $uvis:vis $ufield:ident: $uty:ty = $umake:expr; )* }
    ) => {
        pub struct Metrics {
            registry: Registry,
            $( $(#[$doc])* $vis $field: $ty, )*
            /// HTTP requests refused for a bad signature or token (`anima_http_refused`,
            /// registered after the table).
            pub refusals: Refusals,
            $( $(#[$udoc])* $uvis $ufield: $uty, )*
        }

        impl Default for Metrics {
            fn default() -> Self {
                let mut registry = Registry::with_prefix("anima");
                $(
                    let $field: $ty = $make;
                    registry.register($name, $help, $field.clone());
                )*
                let refusals = Refusals {
                    count: Counter::default(),
                    last_warned: Mutex::default(),
                };
                registry.register(
                    "http_refused",
                    "HTTP requests refused for a bad signature or token",
                    refusals.count.clone(),
                );
                Metrics {
                    registry,
                    refusals,
                    $( $field, )*
                    $( $ufield: $umake, )*
                }
            }
        }
    };
}

metrics_table! {
    registered {
        pub events_received: Counter = Counter::default()
            => "slack_events_received", "Slack events received";
        pub events_accepted: Counter = Counter::default()
            => "slack_events_accepted", "Slack messages written to the inbox";
        pub events_duplicate: Counter = Counter::default()
            => "slack_events_duplicate", "Slack retries and twins dropped";
        pub events_ignored: Counter = Counter::default()
            => "slack_events_ignored", "Slack events anima does not answer";
        pub events_malformed: Counter = Counter::default()
            => "slack_events_malformed", "Slack payloads that could not be read";
        pub turns_completed: Counter = Counter::default()
            => "turns_completed", "Turns whose model call succeeded";
        pub turns_failed: Counter = Counter::default()
            => "turns_failed", "Turns answered with the apology";
        /// Turns the person stopped (the stop button).
        pub turns_stopped: Counter = Counter::default()
            => "turns_stopped", "Turns the person stopped";
        /// Turns by process and outcome.
        pub turns: Family<TurnLabels, Counter> = Family::default()
            => "turns", "Turns by process and outcome";
        pub replies_posted: Counter = Counter::default()
            => "replies_posted", "Messages posted to Slack (parts)";
        pub replies: Family<ReplyLabels, Counter> = Family::default()
            => "replies", "Replies delivered, whole or streamed";
        pub replies_undeliverable: Counter = Counter::default()
            => "replies_undeliverable", "Replies Slack refused";
        /// Feedback clicks on the soul's replies, recorded, by value.
        pub feedback: Family<FeedbackLabels, Counter> = Family::default()
            => "feedback", "Feedback clicks on the soul's replies, by value";
        pub turns_in_flight: Gauge = Gauge::default()
            => "turns_in_flight", "Turns being processed";
        /// Turns that panicked (caught; the message is tried again).
        pub turns_panicked: Counter = Counter::default()
            => "turns_panicked", "Turns that panicked (caught; the message is tried again)";
        /// Messages given up after every attempt and answered with the apology.
        pub messages_failed: Counter = Counter::default()
            => "messages_failed", "Messages answered with the apology after every attempt failed";
        /// (event accepted → reply posted) minus model time.
        pub overhead: Histogram = Histogram::new(FAST_BUCKETS)
            => "reply_overhead_seconds", "Event accepted to reply posted, less model time";
        pub model_calls: Family<ModelLabels, Counter> = Family::default()
            => "model_calls", "Model calls by provider and outcome";
        pub model_seconds: Histogram = Histogram::new(MODEL_BUCKETS)
            => "model_call_seconds", "Model call latency, retries included";
        /// A turn's own time, model calls excluded.
        pub engine_seconds: Histogram = Histogram::new(FAST_BUCKETS)
            => "engine_turn_seconds", "A turn's own time, model calls excluded";
        pub tokens: Family<TokenLabels, Counter> = Family::default()
            => "model_tokens", "Tokens by kind: input, output, cache_read, cache_write";
        cache_hit_ratio: Gauge<f64, AtomicU64> = Gauge::default()
            => "prompt_cache_hit_ratio",
               "Prompt tokens read from the provider's cache, of all prompt tokens";
        pub transitions: Family<TransitionLabels, Counter> = Family::default()
            => "process_transitions", "Process transitions taken";
        /// ISM loops by how they ended, and their iterations.
        pub ism_loops: Family<EndingLabels, Counter> = Family::default()
            => "ism_loops", "Implicit semantic machine loops by how they ended";
        /// MCP tool calls by server, tool and outcome, and their latency (those sent).
        pub tool_calls: Family<ToolCallLabels, Counter> = Family::default()
            => "tool_calls", "MCP tool calls by server, tool and outcome";
        pub tool_seconds: Family<ToolLabels, Histogram, fn() -> Histogram> =
            Family::new_with_constructor(tool_histogram)
            => "tool_call_seconds", "MCP tool calls' latency, for the calls sent";
        /// The cognitive states' own model calls (wakeup, consent, journal), and those that
        /// failed or timed out; not in `model_calls`, which counts the turns' calls.
        pub state_calls: Counter = Counter::default()
            => "state_calls",
               "Model calls of the cognitive states (wakeup, shutdown consent, journal)";
        pub state_calls_failed: Counter = Counter::default()
            => "state_calls_failed", "Cognitive-state model calls that failed or timed out";
        /// Shutdowns the soul objected to (they went ahead).
        pub shutdown_objections: Counter = Counter::default()
            => "shutdown_objections", "Shutdowns the soul objected to (each went ahead)";
        /// Wakeups that failed three times (the soul works degraded).
        pub wakeups_degraded: Counter = Counter::default()
            => "wakeups_degraded",
               "Wakeups that failed three times: the soul entered WORK degraded";
        pub ism_iterations: Counter = Counter::default()
            => "ism_iterations",
               "Implicit semantic machine iterations (one selection call each)";
        pub traces_dropped: Counter = Counter::default()
            => "traces_dropped", "Turns' traces dropped because the trace writer's queue was full";
        pub slack_errors: Family<SlackErrorLabels, Counter> = Family::default()
            => "slack_api_errors", "Slack Web API errors by method and code";
        pub slack_rate_limited: Family<MethodLabels, Counter> = Family::default()
            => "slack_rate_limited", "Slack Web API 429s by method";
        inbox_depth: Gauge = Gauge::default()
            => "inbox_depth", "Messages accepted and not yet answered";
        store_write_errors: Counter = Counter::default()
            => "store_write_errors", "Writes that failed because the store could not write";
        store_writable: Gauge = Gauge::default()
            => "store_writable", "Whether the store's last write succeeded";
        connected: Gauge = Gauge::default()
            => "slack_connected", "Whether Slack is connected";
    }
    unregistered {
        pub slack_connected: AtomicBool = AtomicBool::new(false);
        /// Unix ms of the last panic or give-up (0: none).
        last_failure_ms: AtomicI64 = AtomicI64::new(0);
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

/// What only the store knows, sampled when the metrics are rendered.
#[derive(Debug, Clone, Copy, Default)]
pub struct StoreSample {
    pub write_errors: u64,
    pub writable: bool,
    pub inbox_depth: u64,
}

impl Metrics {
    pub fn inc(counter: &Counter) {
        counter.inc();
    }

    pub fn note_panic(&self) {
        self.turns_panicked.inc();
        self.last_failure_ms
            .store(crate::memory::now_ms(), Ordering::Relaxed);
    }

    pub fn note_given_up(&self) {
        self.messages_failed.inc();
        self.last_failure_ms
            .store(crate::memory::now_ms(), Ordering::Relaxed);
    }

    /// One model call: its outcome, latency and tokens.
    pub fn model_call(
        &self,
        provider: &'static str,
        ok: bool,
        latency: Duration,
        tokens: [u64; 4],
    ) {
        let outcome = if ok { "ok" } else { "error" };
        self.model_calls
            .get_or_create(&ModelLabels { provider, outcome })
            .inc();
        self.model_seconds.observe(latency.as_secs_f64());
        for (kind, n) in ["input", "output", "cache_read", "cache_write"]
            .into_iter()
            .zip(tokens)
        {
            self.tokens.get_or_create(&TokenLabels { kind }).inc_by(n);
        }
    }

    /// One ISM loop ended.
    pub fn ism_loop(&self, ending: &'static str, iterations: u32) {
        self.ism_loops.get_or_create(&EndingLabels { ending }).inc();
        self.ism_iterations.inc_by(iterations as u64);
    }

    /// One tool call: its outcome, and its latency when it was sent.
    pub fn tool_call(&self, server: &str, tool: &str, outcome: &'static str, sent: bool, ms: u64) {
        self.tool_calls
            .get_or_create(&ToolCallLabels {
                server: server.to_string(),
                tool: tool.to_string(),
                outcome,
            })
            .inc();
        if sent {
            self.tool_seconds
                .get_or_create(&ToolLabels {
                    server: server.to_string(),
                    tool: tool.to_string(),
                })
                .observe(ms as f64 / 1000.0);
        }
    }

    /// Why the daemon is degraded: a turn panicked or a message was given up recently.
    pub fn degraded(&self, now_ms: i64) -> Option<String> {
        let last = self.last_failure_ms.load(Ordering::Relaxed);
        (last > 0 && now_ms - last < DEGRADED_FOR_MS).then(|| {
            format!(
                "degraded: {} turn(s) panicked and {} message(s) were answered with an apology after every attempt failed; the last {} s ago (see the log)",
                self.turns_panicked.get(),
                self.messages_failed.get(),
                (now_ms - last) / 1000
            )
        })
    }

    /// The whole text, with what the store knows sampled now.
    pub fn render(&self, store: StoreSample) -> String {
        self.store_write_errors
            .inner()
            .store(store.write_errors, Ordering::Relaxed);
        self.store_writable.set(i64::from(store.writable));
        self.inbox_depth.set(store.inbox_depth as i64);
        self.connected
            .set(i64::from(self.slack_connected.load(Ordering::Relaxed)));
        let tokens = |kind| self.tokens.get_or_create(&TokenLabels { kind }).get() as f64;
        let prompt = tokens("input") + tokens("cache_read") + tokens("cache_write");
        self.cache_hit_ratio.set(if prompt > 0.0 {
            tokens("cache_read") / prompt
        } else {
            0.0
        });
        let mut out = String::with_capacity(8 * 1024);
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.push_str("# metrics could not be encoded\n");
        }
        out
    }
}

/// Refused requests: counted, and logged at warn at most once a minute per route.
#[derive(Debug)]
pub struct Refusals {
    count: Counter,
    last_warned: Mutex<Vec<(&'static str, Instant)>>,
}

impl Refusals {
    pub fn refuse(&self, route: &'static str, why: &str) {
        self.count.inc();
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
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text_with_bounded_labels() {
        let m = Metrics::default();
        m.replies_posted.inc();
        m.replies_posted.inc();
        m.overhead.observe(0.0008);
        m.overhead.observe(0.004);
        m.model_call(
            "anthropic",
            true,
            Duration::from_millis(300),
            [100, 20, 900, 0],
        );
        m.turns
            .get_or_create(&TurnLabels {
                process: "main".into(),
                outcome: "completed",
            })
            .inc();
        let text = m.render(StoreSample {
            write_errors: 2,
            writable: true,
            inbox_depth: 3,
        });
        assert!(text.contains("anima_replies_posted_total 2\n"), "{text}");
        assert!(text.contains("anima_slack_connected 0\n"), "{text}");
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
        assert!(
            text.contains("anima_turns_total{process=\"main\",outcome=\"completed\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("anima_model_tokens_total{kind=\"cache_read\"} 900\n"),
            "{text}"
        );
        assert!(
            text.contains("anima_prompt_cache_hit_ratio 0.9\n"),
            "{text}"
        );
        assert!(
            text.contains("anima_store_write_errors_total 2\n"),
            "{text}"
        );
        assert!(text.contains("anima_inbox_depth 3\n"), "{text}");
        m.tool_call("kb", "lookup", "ok", true, 3);
        m.tool_call("kb", "delete", "refused", false, 0);
        let text = m.render(StoreSample {
            write_errors: 2,
            writable: true,
            inbox_depth: 3,
        });
        assert!(
            text.contains(
                "anima_tool_calls_total{server=\"kb\",tool=\"lookup\",outcome=\"ok\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "anima_tool_calls_total{server=\"kb\",tool=\"delete\",outcome=\"refused\"} 1\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("anima_tool_call_seconds_count{server=\"kb\",tool=\"lookup\"} 1\n"),
            "{text}"
        );
        assert!(
            !text.contains("anima_tool_call_seconds_count{server=\"kb\",tool=\"delete\"}"),
            "a call never sent has no latency: {text}"
        );
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.rsplit_once(' ').unwrap();
            let bare = name.split('{').next().unwrap();
            assert!(bare.starts_with("anima_"), "{line}");
            assert!(
                bare.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{line}"
            );
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }
}
