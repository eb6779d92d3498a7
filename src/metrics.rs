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

pub struct Metrics {
    registry: Registry,
    pub events_received: Counter,
    pub events_accepted: Counter,
    pub events_duplicate: Counter,
    pub events_ignored: Counter,
    pub events_malformed: Counter,
    pub turns_completed: Counter,
    pub turns_failed: Counter,
    /// Turns the person stopped (the stop button).
    pub turns_stopped: Counter,
    /// Turns by process and outcome.
    pub turns: Family<TurnLabels, Counter>,
    pub replies_posted: Counter,
    pub replies: Family<ReplyLabels, Counter>,
    pub replies_undeliverable: Counter,
    /// Feedback clicks on the soul's replies, recorded, by value.
    pub feedback: Family<FeedbackLabels, Counter>,
    pub turns_in_flight: Gauge,
    /// Turns that panicked (caught; the message is tried again).
    pub turns_panicked: Counter,
    /// Messages given up after every attempt and answered with the apology.
    pub messages_failed: Counter,
    /// (event accepted → reply posted) minus model time.
    pub overhead: Histogram,
    pub model_calls: Family<ModelLabels, Counter>,
    pub model_seconds: Histogram,
    /// A turn's own time, model calls excluded.
    pub engine_seconds: Histogram,
    pub tokens: Family<TokenLabels, Counter>,
    cache_hit_ratio: Gauge<f64, std::sync::atomic::AtomicU64>,
    pub transitions: Family<TransitionLabels, Counter>,
    /// ISM loops by how they ended, and their iterations.
    pub ism_loops: Family<EndingLabels, Counter>,
    pub ism_iterations: Counter,
    /// MCP tool calls by server, tool and outcome, and their latency (those sent).
    pub tool_calls: Family<ToolCallLabels, Counter>,
    pub tool_seconds: Family<ToolLabels, Histogram, fn() -> Histogram>,
    /// The cognitive states' own model calls (wakeup, consent, journal), and those that
    /// failed or timed out; not in `model_calls`, which counts the turns' calls.
    pub state_calls: Counter,
    pub state_calls_failed: Counter,
    /// Shutdowns the soul objected to (they went ahead).
    pub shutdown_objections: Counter,
    /// Wakeups that failed three times (the soul works degraded).
    pub wakeups_degraded: Counter,
    pub slack_errors: Family<SlackErrorLabels, Counter>,
    pub slack_rate_limited: Family<MethodLabels, Counter>,
    inbox_depth: Gauge,
    store_write_errors: Counter,
    store_writable: Gauge,
    connected: Gauge,
    /// HTTP requests refused for a bad signature or token.
    pub refusals: Refusals,
    pub slack_connected: AtomicBool,
    /// Unix ms of the last panic or give-up (0: none).
    last_failure_ms: AtomicI64,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        let mut r = Registry::with_prefix("anima");
        let counter = |r: &mut Registry, name: &str, help: &str| {
            let c = Counter::default();
            r.register(name, help, c.clone());
            c
        };
        let histogram = |r: &mut Registry, name: &str, help: &str, buckets: &[f64]| {
            let h = Histogram::new(buckets.iter().copied());
            r.register(name, help, h.clone());
            h
        };
        let events_received = counter(&mut r, "slack_events_received", "Slack events received");
        let events_accepted = counter(
            &mut r,
            "slack_events_accepted",
            "Slack messages written to the inbox",
        );
        let events_duplicate = counter(
            &mut r,
            "slack_events_duplicate",
            "Slack retries and twins dropped",
        );
        let events_ignored = counter(
            &mut r,
            "slack_events_ignored",
            "Slack events anima does not answer",
        );
        let events_malformed = counter(
            &mut r,
            "slack_events_malformed",
            "Slack payloads that could not be read",
        );
        let turns_completed = counter(
            &mut r,
            "turns_completed",
            "Turns whose model call succeeded",
        );
        let turns_failed = counter(&mut r, "turns_failed", "Turns answered with the apology");
        let turns_stopped = counter(&mut r, "turns_stopped", "Turns the person stopped");
        let turns = Family::<TurnLabels, Counter>::default();
        r.register("turns", "Turns by process and outcome", turns.clone());
        let replies_posted = counter(&mut r, "replies_posted", "Messages posted to Slack (parts)");
        let replies = Family::<ReplyLabels, Counter>::default();
        r.register(
            "replies",
            "Replies delivered, whole or streamed",
            replies.clone(),
        );
        let replies_undeliverable =
            counter(&mut r, "replies_undeliverable", "Replies Slack refused");
        let feedback = Family::<FeedbackLabels, Counter>::default();
        r.register(
            "feedback",
            "Feedback clicks on the soul's replies, by value",
            feedback.clone(),
        );
        let turns_in_flight = Gauge::default();
        r.register(
            "turns_in_flight",
            "Turns being processed",
            turns_in_flight.clone(),
        );
        let turns_panicked = counter(
            &mut r,
            "turns_panicked",
            "Turns that panicked (caught; the message is tried again)",
        );
        let messages_failed = counter(
            &mut r,
            "messages_failed",
            "Messages answered with the apology after every attempt failed",
        );
        let overhead = histogram(
            &mut r,
            "reply_overhead_seconds",
            "Event accepted to reply posted, less model time",
            &FAST_BUCKETS,
        );
        let model_calls = Family::<ModelLabels, Counter>::default();
        r.register(
            "model_calls",
            "Model calls by provider and outcome",
            model_calls.clone(),
        );
        let model_seconds = histogram(
            &mut r,
            "model_call_seconds",
            "Model call latency, retries included",
            &MODEL_BUCKETS,
        );
        let engine_seconds = histogram(
            &mut r,
            "engine_turn_seconds",
            "A turn's own time, model calls excluded",
            &FAST_BUCKETS,
        );
        let tokens = Family::<TokenLabels, Counter>::default();
        r.register(
            "model_tokens",
            "Tokens by kind: input, output, cache_read, cache_write",
            tokens.clone(),
        );
        let cache_hit_ratio = Gauge::<f64, AtomicU64>::default();
        r.register(
            "prompt_cache_hit_ratio",
            "Prompt tokens read from the provider's cache, of all prompt tokens",
            cache_hit_ratio.clone(),
        );
        let transitions = Family::<TransitionLabels, Counter>::default();
        r.register(
            "process_transitions",
            "Process transitions taken",
            transitions.clone(),
        );
        let ism_loops = Family::<EndingLabels, Counter>::default();
        r.register(
            "ism_loops",
            "Implicit semantic machine loops by how they ended",
            ism_loops.clone(),
        );
        let tool_calls = Family::<ToolCallLabels, Counter>::default();
        r.register(
            "tool_calls",
            "MCP tool calls by server, tool and outcome",
            tool_calls.clone(),
        );
        let tool_seconds = Family::<ToolLabels, Histogram, fn() -> Histogram>::new_with_constructor(
            tool_histogram,
        );
        r.register(
            "tool_call_seconds",
            "MCP tool calls' latency, for the calls sent",
            tool_seconds.clone(),
        );
        let state_calls = counter(
            &mut r,
            "state_calls",
            "Model calls of the cognitive states (wakeup, shutdown consent, journal)",
        );
        let state_calls_failed = counter(
            &mut r,
            "state_calls_failed",
            "Cognitive-state model calls that failed or timed out",
        );
        let shutdown_objections = counter(
            &mut r,
            "shutdown_objections",
            "Shutdowns the soul objected to (each went ahead)",
        );
        let wakeups_degraded = counter(
            &mut r,
            "wakeups_degraded",
            "Wakeups that failed three times: the soul entered WORK degraded",
        );
        let ism_iterations = counter(
            &mut r,
            "ism_iterations",
            "Implicit semantic machine iterations (one selection call each)",
        );
        let slack_errors = Family::<SlackErrorLabels, Counter>::default();
        r.register(
            "slack_api_errors",
            "Slack Web API errors by method and code",
            slack_errors.clone(),
        );
        let slack_rate_limited = Family::<MethodLabels, Counter>::default();
        r.register(
            "slack_rate_limited",
            "Slack Web API 429s by method",
            slack_rate_limited.clone(),
        );
        let inbox_depth = Gauge::default();
        r.register(
            "inbox_depth",
            "Messages accepted and not yet answered",
            inbox_depth.clone(),
        );
        let store_write_errors = counter(
            &mut r,
            "store_write_errors",
            "Writes that failed because the store could not write",
        );
        let store_writable = Gauge::default();
        r.register(
            "store_writable",
            "Whether the store's last write succeeded",
            store_writable.clone(),
        );
        let refused = counter(
            &mut r,
            "http_refused",
            "HTTP requests refused for a bad signature or token",
        );
        let connected = Gauge::default();
        r.register(
            "slack_connected",
            "Whether Slack is connected",
            connected.clone(),
        );
        Metrics {
            registry: r,
            events_received,
            events_accepted,
            events_duplicate,
            events_ignored,
            events_malformed,
            turns_completed,
            turns_failed,
            turns_stopped,
            turns,
            replies_posted,
            replies,
            replies_undeliverable,
            feedback,
            turns_in_flight,
            turns_panicked,
            messages_failed,
            overhead,
            model_calls,
            model_seconds,
            engine_seconds,
            tokens,
            cache_hit_ratio,
            transitions,
            ism_loops,
            ism_iterations,
            tool_calls,
            tool_seconds,
            state_calls,
            state_calls_failed,
            shutdown_objections,
            wakeups_degraded,
            slack_errors,
            slack_rate_limited,
            inbox_depth,
            store_write_errors,
            store_writable,
            connected,
            refusals: Refusals {
                count: refused,
                last_warned: Mutex::default(),
            },
            slack_connected: AtomicBool::new(false),
            last_failure_ms: AtomicI64::new(0),
        }
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
