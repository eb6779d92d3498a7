//! The model stage: a built prompt as the provider's request (with the answer's grammar or
//! schema when the server takes one), one call with retries, timed, parsed (an answer asked
//! for in its JSON form read, and streamed, into the same values as a tagged one); what it
//! cost.

use std::time::Instant;

use tracing::{debug, info};

use super::tracer::{Sent, Tracer};
use super::{Engine, Speech};
use crate::config::Config;
use crate::llm::{self, ChatRequest, Completion, Constraint, LlmError, Message, Role};
use crate::memory::UsageRecord;
use crate::metrics::Metrics;
use crate::parse::{parse_json_response, parse_response, Cognition, DialogueStream, Passed};
use crate::prompt::{self, TurnPlan};

/// What the calling stages (chain, run, model, tool) need of the engine, and nothing else:
/// the configuration, the provider, the answers' shapes, the counters, the tool servers and
/// the turn's tracer. Borrowed, so building one per turn costs nothing; no store is reachable
/// from here (the calls decide, the commit writes).
#[derive(Clone, Copy)]
pub(super) struct Caller<'a> {
    pub config: &'a Config,
    pub provider: &'a dyn llm::Provider,
    pub shapes: &'a prompt::shape::Cache,
    pub metrics: Option<&'a Metrics>,
    pub tools: Option<&'a crate::tools::Tools>,
    /// Where the calls, their answers and what the stages decide are told.
    pub tracer: &'a Tracer<'a>,
    /// The images shared with this turn's message, fitted to the provider (a call about
    /// the message carries them; none outside a message).
    pub images: &'a [crate::llm::image::Image],
}

impl Engine {
    /// The calling stages' view of this engine, telling `tracer`.
    pub(super) fn caller<'a>(&'a self, tracer: &'a Tracer<'a>) -> Caller<'a> {
        Caller {
            config: &self.config,
            provider: self.provider.as_ref(),
            shapes: &self.shapes,
            metrics: self.metrics.as_deref(),
            tools: self.tools.as_deref(),
            tracer,
            images: &[],
        }
    }
}

impl Caller<'_> {
    /// One model call outside any conversation (see [`Engine::state_call`]).
    pub(super) async fn state_call(
        &self,
        call: &crate::states::calls::Call,
        timeout: std::time::Duration,
    ) -> Result<String, String> {
        let constraint = self
            .provider
            .structured()
            .map(|form| self.constraint(call.shape.clone(), form));
        let request = crate::llm::ChatRequest {
            system: &call.system,
            history: &[],
            user: &call.user,
            max_tokens: self.config.llm.max_tokens,
            session: None,
            model: None,
            constraint: constraint.as_ref(),
            images: &[],
        };
        let started = std::time::Instant::now();
        self.tracer.sent(call.kind, Sent::State(call));
        let result = tokio::time::timeout(timeout, self.provider.complete(request, None)).await;
        let latency = started.elapsed();
        let result = result.unwrap_or_else(|_| {
            Err(LlmError::Timeout {
                provider: self.provider.name(),
                secs: timeout.as_secs(),
            })
        });
        let us = latency.as_micros() as u64;
        let answered = result.as_ref().map(|c| (c, us)).map_err(|e| (e, us));
        let model = self.provider.model();
        (self.tracer).answered(call.kind, Sent::State(call), model, answered);
        let json = matches!(constraint, Some(crate::llm::Constraint::JsonSchema(_)));
        let (ok, out) = match result {
            // The readers take tags: an answer in its JSON form is written as them.
            Ok(c) if json => (
                true,
                Ok(crate::parse::json_as_tags(&c.text).unwrap_or(c.text)),
            ),
            Ok(c) => (true, Ok(c.text)),
            // The call's own bound (the provider's is longer, or it would have said so).
            Err(LlmError::Timeout { .. }) if latency >= timeout => (
                false,
                Err(format!("no answer within {} s", timeout.as_secs_f32())),
            ),
            Err(e) => (false, Err(e.to_string())),
        };
        if let Some(m) = self.metrics {
            m.state_calls.inc();
            if !ok {
                m.state_calls_failed.inc();
            }
        }
        tracing::info!(
            kind = call.kind,
            ok,
            latency_ms = latency.as_millis() as u64,
            "state call"
        );
        out
    }

    /// The constraint for a call of `shape` in the form the server takes, its texts bounded
    /// so that the longest answer fits `[llm] max_tokens`; built once per shape.
    pub(super) fn constraint(&self, shape: prompt::shape::Shape, form: llm::Form) -> Constraint {
        use crate::prompt::shape::{Built, Form};
        let form = match form {
            llm::Form::Gbnf => Form::Gbnf,
            llm::Form::JsonSchema => Form::JsonSchema,
        };
        match self.shapes.get(shape, form, self.config.llm.max_tokens) {
            Built::Gbnf(g) => Constraint::Gbnf(g),
            Built::JsonSchema(s) => Constraint::JsonSchema(s),
        }
    }
}

/// One process run's result.
pub(super) struct Run {
    pub cognition: Cognition,
    pub plan: TurnPlan,
    pub completion: Completion,
    pub latency_us: u64,
    /// What was shown of the dialogue while it was written.
    pub shown: String,
}

/// A call whose dialogue may be shown as it is written.
pub(super) struct Streaming<'a> {
    pub speech: &'a Speech,
    /// Given the answer so far when its dialogue opens: whether that dialogue will stand (no
    /// execute_now rule can hand the message to another process).
    pub stands: &'a (dyn Fn(&str) -> bool + Sync),
}

/// Sent before each attempt of a call: a retry starts a new answer.
const ATTEMPT: &str = "\u{0}attempt";

/// Deltas → the filter → the speech, for one call.
struct Pump<'a> {
    stream: &'a Streaming<'a>,
    filter: DialogueStream,
    /// Still passing text on: the dialogue will stand and no retry began after text showed.
    live: bool,
    attempts: u32,
    shown: String,
}

impl Pump<'_> {
    fn take(&mut self, delta: &str) {
        if delta == ATTEMPT {
            self.attempts += 1;
            if self.attempts > 1 {
                if self.shown.is_empty() {
                    self.filter = self.filter.restart();
                } else {
                    // The retried answer may say something else: what showed is corrected
                    // when the turn ends.
                    self.live = false;
                }
            }
            return;
        }
        let passed = self.filter.push(delta);
        self.pass(passed);
    }

    fn pass(&mut self, passed: Passed) {
        if passed.opened && self.live {
            self.live = (self.stream.stands)(self.filter.raw());
            if !self.live {
                debug!("not streamed: an execute_now rule may hand this message on");
            }
        }
        if self.live && !passed.text.is_empty() {
            self.stream.speech.say(&passed.text);
            self.shown.push_str(&passed.text);
        }
    }
}

impl Caller<'_> {
    /// One model call with retries, parsed (in the JSON form when `constraint` is a schema).
    /// On failure: the error and the time it took.
    pub(super) async fn call(
        &self,
        built: &prompt::Prompt,
        session: Option<&str>,
        plan: TurnPlan,
        model: Option<&str>,
        stream: Option<&Streaming<'_>>,
        constraint: Option<&Constraint>,
    ) -> Result<Run, (LlmError, u64)> {
        let json = matches!(constraint, Some(Constraint::JsonSchema(_)));
        let history = messages(&built.history);
        let request = ChatRequest {
            system: &built.system,
            history: &history,
            user: &built.user,
            max_tokens: self.config.llm.max_tokens,
            session,
            model,
            constraint,
            images: self.images,
        };
        let started = Instant::now();
        let max_chars = self.config.pipeline.max_response_chars;
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let deltas = stream.map(|_| &tx);
        let call = llm::retry::with_retries(self.config.llm.max_retries, || {
            if let Some(tx) = deltas {
                let _ = tx.send(ATTEMPT.to_string());
            }
            self.provider.complete(request, deltas)
        });
        let mut pump = stream.map(|stream| Pump {
            stream,
            filter: if json {
                DialogueStream::json(max_chars)
            } else {
                DialogueStream::new(max_chars)
            },
            live: true,
            attempts: 0,
            shown: String::new(),
        });
        let result = match pump.as_mut() {
            None => call.await,
            Some(pump) => {
                tokio::pin!(call);
                let result = loop {
                    tokio::select! {
                        biased;
                        Some(delta) = rx.recv() => pump.take(&delta),
                        result = &mut call => break result,
                    }
                };
                while let Ok(delta) = rx.try_recv() {
                    pump.take(&delta);
                }
                let rest = pump.filter.finish();
                pump.pass(rest);
                result
            }
        };
        let shown = pump.map(|p| p.shown).unwrap_or_default();
        let latency_us = started.elapsed().as_micros() as u64;
        let completion = result.map_err(|e| (e, latency_us))?;
        info!(
            model = %completion.model,
            input_tokens = completion.usage.input_tokens,
            output_tokens = completion.usage.output_tokens,
            cache_read = completion.usage.cache_read_tokens,
            cache_write = completion.usage.cache_creation_tokens,
            latency_ms = latency_us / 1000,
            stop_reason = completion.stop_reason.as_deref().unwrap_or(""),
            "model answered"
        );
        debug!(raw = %completion.text, "model output");
        let cognition = if json {
            parse_json_response(&completion.text, max_chars)
        } else {
            parse_response(&completion.text, max_chars)
        };
        Ok(Run {
            cognition,
            plan,
            completion,
            latency_us,
            shown,
        })
    }

    pub(super) fn usage_record(&self, run: &Run) -> UsageRecord {
        UsageRecord {
            provider: self.provider.name().to_string(),
            model: run.completion.model.clone(),
            input_tokens: run.completion.usage.input_tokens,
            output_tokens: run.completion.usage.output_tokens,
            cache_creation_tokens: run.completion.usage.cache_creation_tokens,
            cache_read_tokens: run.completion.usage.cache_read_tokens,
            latency_ms: run.latency_us / 1000,
            stop_reason: run.completion.stop_reason.clone(),
        }
    }
}

/// The prompt's history in the provider's terms.
fn messages(history: &[prompt::HistoryMessage]) -> Vec<Message<'_>> {
    history
        .iter()
        .map(|m| Message {
            role: match m.role {
                prompt::Role::User => Role::User,
                prompt::Role::Assistant => Role::Assistant,
            },
            text: &m.text,
        })
        .collect()
}

impl Caller<'_> {
    /// Counts a model call: outcome, latency, tokens.
    pub(super) fn count_call(&self, called: &Result<super::model::Run, (LlmError, u64)>) {
        let Some(m) = &self.metrics else { return };
        let provider = self.provider.name();
        match called {
            Ok(run) => {
                let u = &run.completion.usage;
                m.model_call(
                    provider,
                    true,
                    std::time::Duration::from_micros(run.latency_us),
                    [
                        u.input_tokens,
                        u.output_tokens,
                        u.cache_read_tokens,
                        u.cache_creation_tokens,
                    ],
                );
            }
            Err((_, latency_us)) => m.model_call(
                provider,
                false,
                std::time::Duration::from_micros(*latency_us),
                [0; 4],
            ),
        }
    }
}
