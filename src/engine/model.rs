//! The model stage: a built prompt as the provider's request, one call with retries, timed,
//! parsed; what it cost.

use std::time::Instant;

use tracing::{debug, info};

use super::Engine;
use crate::llm::{self, ChatRequest, Completion, LlmError, Message, Role};
use crate::memory::UsageRecord;
use crate::parse::{parse_response, Cognition};
use crate::prompt::{self, TurnPlan};

/// One process run's result.
pub(super) struct Run {
    pub cognition: Cognition,
    pub plan: TurnPlan,
    pub completion: Completion,
    pub latency_us: u64,
}

impl Engine {
    /// One model call with retries, parsed. On failure: the error and the time it took.
    pub(super) async fn call(
        &self,
        built: &prompt::Prompt,
        session: Option<&str>,
        plan: TurnPlan,
        model: Option<&str>,
    ) -> Result<Run, (LlmError, u64)> {
        let history = messages(&built.history);
        let request = ChatRequest {
            system: &built.system,
            history: &history,
            user: &built.user,
            max_tokens: self.config.llm.max_tokens,
            session,
            model,
        };
        let started = Instant::now();
        let result = llm::retry::with_retries(self.config.llm.max_retries, || {
            self.provider.complete(request, None)
        })
        .await;
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
        let cognition = parse_response(&completion.text, self.config.pipeline.max_response_chars);
        Ok(Run {
            cognition,
            plan,
            completion,
            latency_us,
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
