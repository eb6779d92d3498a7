//! The idle-timer perception: a thread the soul took part in has been quiet for
//! `[processes] proactive_idle_minutes`; the `proactive` process decides, with two mental
//! queries in one call, whether there is an open thread of thought worth one follow-up and
//! whether the person has closed the conversation.
//!
//! Every entry of a proactive turn is marked `proactive`, and a thread whose last entry is so
//! marked is not quiet in the sense that matters: at most one attempt, and so at most one
//! unanswered follow-up, per quiet spell. A new user message starts a new spell.

use tracing::{info, warn};

use super::apply::Outcome;
use super::{facts_for, run_prompt, take, Engine, EngineError, RunInput};
use crate::memory::{EntryType, NewEntry, TurnRecord};
use crate::parse::ReplySource;
use crate::process::{self, ThreadProcess, PROACTIVE};

/// Asked on every proactive turn: is a follow-up worth it?
pub const FOLLOW_UP_QUESTION: &str =
    "Is there an open thread of thought worth one short follow-up?";
/// Asked on every proactive turn: did the person close the conversation?
pub const CLOSED_QUESTION: &str =
    "Has the person closed this conversation (said goodbye, or that they are done)?";

impl Engine {
    /// Threads quiet for `proactive_idle_minutes` at `now_ms` (a clock the caller controls).
    pub async fn quiet_threads(&self, now_ms: i64) -> Result<Vec<String>, EngineError> {
        let since = now_ms - self.config.proactive_idle_minutes as i64 * 60_000;
        let store = self.store.clone();
        let rows = tokio::task::spawn_blocking(move || store.quiet_threads(since)).await??;
        Ok(rows.into_iter().map(|(t, _)| t).collect())
    }

    /// Runs the proactive process for a quiet thread. Returns the follow-up to post, if the
    /// soul decided on one; `None` when it did not, when there is no `proactive` process, or
    /// when the model failed (logged; the next quiet spell tries again).
    pub async fn proactive(
        &self,
        thread: &str,
        now_ms: i64,
    ) -> Result<Option<String>, EngineError> {
        let lib = self.library.current();
        let Some(def) = lib.process(PROACTIVE) else {
            return Ok(None);
        };
        let store = self.store.clone();
        let (t, window) = (thread.to_string(), self.config.pipeline.memory_window);
        let ctx = tokio::task::spawn_blocking(move || {
            let (user_id, name, last_at) = store.last_speaker(&t)?;
            store
                .load_turn(&t, &user_id, &name, window)
                .map(|ctx| (ctx, last_at))
        })
        .await??;
        let (ctx, last_at) = ctx;
        let quiet = ((now_ms - last_at).max(0) / 60_000) as u64;
        let history: Vec<_> = if self.provider.keeps_sessions() {
            Vec::new()
        } else {
            ctx.recent.clone()
        };

        let previous = ctx.process.clone().unwrap_or_default();
        let mut state = ThreadProcess {
            current: PROACTIVE.into(),
            previous: Some(previous.current.clone()).filter(|p| !p.is_empty()),
            invocations: if previous.current == PROACTIVE {
                previous.invocations + 1
            } else {
                1
            },
            params: previous.params.clone(),
        };
        let plan = self.plan(def, &ctx);
        let built = run_prompt(&RunInput {
            lib: &lib,
            def,
            state: &state,
            ctx: &ctx,
            soul: &ctx.soul,
            plan: &plan,
            history: &history,
            extra_queries: &[FOLLOW_UP_QUESTION, CLOSED_QUESTION],
            whisper: None,
            message: None,
            quiet_minutes: Some(quiet),
        });
        let run = match self.call(&built, ctx.claude_session.as_deref(), plan).await {
            Ok(run) => run,
            Err((e, _)) => {
                warn!(thread, error = %e, "proactive turn: the model failed");
                return Ok(None);
            }
        };
        let answer = |q: &str| {
            run.cognition
                .mental_queries
                .iter()
                .rev()
                .find(|m| m.question.trim().eq_ignore_ascii_case(q))
                .and_then(|m| m.answer)
        };
        let follow_up = answer(FOLLOW_UP_QUESTION) == Some(true)
            && answer(CLOSED_QUESTION) != Some(true)
            && run.cognition.reply_source == ReplySource::Dialogue;

        let marker = serde_json::json!({ "proactive": true });
        let mut soul = ctx.soul.clone();
        let mut outcome = Outcome::default();
        outcome.apply(&run.plan, &run.cognition, None, &mut soul, &marker);
        if follow_up {
            outcome.say(&run.cognition, &marker);
        } else if outcome.entries.is_empty() {
            outcome.entries.push(
                NewEntry::new(EntryType::MentalQuery, FOLLOW_UP_QUESTION).metadata(
                    serde_json::json!({ "result": answer(FOLLOW_UP_QUESTION), "proactive": true }),
                ),
            );
        }
        info!(thread, quiet_minutes = quiet, follow_up, closed = ?answer(CLOSED_QUESTION), "proactive turn");

        let facts = facts_for(
            &soul,
            &state,
            &run.cognition,
            ctx.thread_turns as u64,
            quiet as f64,
            PROACTIVE,
        );
        let mut transitions = Vec::new();
        if let Some((rule, t)) = process::next(def, &facts) {
            // A proactive turn answers no message, so nothing runs on after it.
            let (mut record, next_state) = take(&lib, PROACTIVE, rule, t);
            record.execute_now = false;
            transitions.push(record);
            state = next_state;
        }
        let record = TurnRecord {
            thread: thread.to_string(),
            user_id: String::new(),
            interaction: ctx.interaction.saturating_sub(1),
            entries: outcome.entries,
            soul_updates: outcome.soul_updates,
            user_model: None,
            injected_user_model: false,
            whisper_id: None,
            claude_session: run.completion.session.clone(),
            usage: vec![self.usage_record(&run)],
            inbox: None,
            process: Some(state),
            transitions,
            proactive: true,
        };
        let store = self.store.clone();
        tokio::task::spawn_blocking(move || store.commit_turn(&record)).await??;
        Ok(follow_up.then_some(run.cognition.reply))
    }
}
