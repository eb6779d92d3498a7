//! What a model-facing turn leaves for the soul's window, as it happens: the stages append to
//! the turn's `Tracer` (the stimulus, the plan, each call's prompt and answer, the cognition,
//! the decisions, what memory was written, the reply, the errors), which sends each moment to
//! the soul stream (`window::Hub`) and gathers the trace the pipeline keeps after its commit.
//!
//! Costs nothing it need not: a record is built only inside `Hub::emit` (nobody watching,
//! nothing is built), and the trace's body is filled only when `[inspect] keep_turns` keeps
//! traces. Writes nothing: the engine hands the finished trace (`Tracer::finish`) to the trace
//! writer (`writer`), which keeps it through the `Traces` face off the turn's path. Every text here came from a person or the model: readers escape it.

use std::sync::Mutex;
use std::time::Instant;

use serde_json::{json, Value};

use crate::llm::{Completion, LlmError};
use crate::memory::{now_ms, TraceRow};
use crate::parse::Cognition;
use crate::prompt::{self, PromptSection};
use crate::steps::Step;
use crate::window::{
    CognitionStep, Decision, Hub, Kind, ModelCall, Phase, Record, Section, TraceBody, Written,
};

/// The most characters of a text a stream record's one line shows (its data has it whole).
const LINE_CHARS: usize = 300;

/// One turn's trace, gathered as its stages run, and its moments sent to the soul stream.
pub(super) struct Tracer<'h> {
    hub: &'h Hub,
    id: String,
    thread: String,
    /// Whether the trace is kept (`[inspect] keep_turns` above 0); else only the stream
    /// hears of the turn.
    keep: bool,
    body: Mutex<TraceBody>,
    started: Instant,
    /// When the turn began (unix ms).
    at: i64,
}

/// A prompt as it was sent: built by `prompt`, or a state call's two parts.
#[derive(Clone, Copy)]
pub(super) enum Sent<'p> {
    Built(&'p prompt::Prompt),
    State(&'p crate::states::calls::Call),
}

impl<'p> Sent<'p> {
    fn sections(self) -> Vec<PromptSection<'p>> {
        match self {
            Sent::Built(p) => prompt::sections(p),
            Sent::State(c) => {
                let part = |name, text: &'p str, cached| PromptSection {
                    name,
                    text: text.into(),
                    cached,
                };
                vec![
                    part("soul", &c.system, true),
                    part(prompt::sections::HISTORY, "\n\n", false),
                    part("state_call", &c.user, false),
                ]
            }
        }
    }
}

/// How a call came back: its answer and the time it took (µs), or the error.
pub(super) type Answered<'r> = Result<(&'r Completion, u64), (&'r LlmError, u64)>;

/// The columns a finished trace is found by, beyond those the tracer knows.
pub(super) struct Columns {
    pub person: Option<String>,
    pub inbox: Option<i64>,
    pub process: String,
    pub reply: Option<String>,
    /// The processes that ran, in order, and where the thread stood after.
    pub processes: Vec<String>,
}

impl Columns {
    /// A call outside any conversation (a state call, a dream): nobody spoke, nothing said.
    pub fn outside() -> Columns {
        Columns {
            person: None,
            inbox: None,
            process: String::new(),
            reply: None,
            processes: Vec::new(),
        }
    }
}

impl<'h> Tracer<'h> {
    /// The trace `id` of a turn of `kind` in `thread` (empty outside any), kept when `keep`.
    pub fn new(hub: &'h Hub, id: &str, kind: Kind, thread: &str, keep: bool) -> Tracer<'h> {
        Tracer {
            hub,
            id: id.to_string(),
            thread: thread.to_string(),
            keep,
            body: Mutex::new(TraceBody {
                kind,
                ..TraceBody::default()
            }),
            started: Instant::now(),
            at: now_ms(),
        }
    }

    /// Whether anything is done with what the stages tell: kept, or watched.
    fn heard(&self) -> bool {
        self.keep || self.hub.watched()
    }

    fn with_body(&self, f: impl FnOnce(&mut TraceBody)) {
        if self.keep {
            // A stage that panicked while holding it left plain data: take it as it is.
            let mut body = self.body.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut body);
        }
    }

    fn emit(&self, phase: Phase, text: impl FnOnce() -> String, data: impl FnOnce() -> Value) {
        self.hub.emit(|| self.record(phase, text(), data()));
    }

    /// A record of this turn's, happening now.
    fn record(&self, phase: Phase, text: String, data: Value) -> Record {
        Record {
            phase,
            trace: self.id.clone(),
            thread: self.thread.clone(),
            at: now_ms(),
            text,
            data,
        }
    }

    /// What the turn answers: a person's message, a quiet spell, a state call's kind.
    pub fn stimulus(&self, text: &str) {
        self.with_body(|b| b.stimulus = text.to_string());
        self.emit(Phase::Stimulus, || one_line(text), Value::default);
    }

    /// A process run's plan: the process and the steps it asks for.
    pub fn plan(&self, process: &str, steps: &[Step], user_model: bool, why: &str) {
        let names = || steps.iter().map(|s| s.name()).collect::<Vec<_>>();
        self.emit(
            Phase::Plan,
            || format!("{process}: {}", names().join(", ")),
            || json!({ "process": process, "steps": names(), "user_model": user_model, "why": why }),
        );
    }

    /// A call's prompt, about to be sent: its sections' sizes.
    pub fn sent(&self, purpose: &str, sent: Sent) {
        self.hub.emit(|| {
            let s = measured(sent);
            let tokens: u64 = s.iter().map(|s| s.tokens).sum();
            let cached: u64 = s.iter().filter(|s| s.cached).map(|s| s.tokens).sum();
            let text = format!(
                "{purpose}: {} sections, ~{tokens} tokens (~{cached} in the cached part)",
                s.len()
            );
            self.record(
                Phase::Prompt,
                text,
                json!({ "purpose": purpose, "sections": s }),
            )
        });
    }

    /// The images the last call carried: each a section of no text, its tokens estimated as
    /// the provider counts them (see `llm::image::estimated_tokens`).
    pub fn images(&self, images: &[crate::llm::Image]) {
        if images.is_empty() {
            return;
        }
        self.with_body(|b| {
            if let Some(call) = b.calls.last_mut() {
                call.sections.extend(images.iter().map(|i| Section {
                    name: "image".into(),
                    chars: 0,
                    tokens: i.estimated_tokens(),
                    cached: false,
                }));
            }
        });
    }

    /// A call came back (or failed): kept whole in the trace, its cost to the stream.
    pub fn answered(&self, purpose: &str, sent: Sent, model: &str, answered: Answered) {
        self.with_body(|b| {
            let call = model_call(purpose, sent, model, answered, b);
            b.calls.push(call);
        });
        match answered {
            Ok((c, us)) => self.emit(
                Phase::Model,
                || {
                    let u = &c.usage;
                    format!(
                        "{purpose}: {} {} in / {} out, {} cache read, {} ms",
                        c.model,
                        u.input_tokens,
                        u.output_tokens,
                        u.cache_read_tokens,
                        us / 1000
                    )
                },
                || {
                    json!({
                        "purpose": purpose,
                        "model": c.model,
                        "input_tokens": c.usage.input_tokens,
                        "output_tokens": c.usage.output_tokens,
                        "cache_read_tokens": c.usage.cache_read_tokens,
                        "cache_creation_tokens": c.usage.cache_creation_tokens,
                        "latency_ms": us / 1000,
                    })
                },
            ),
            Err((e, _)) => self.error(|| format!("{purpose}: the model failed: {e}")),
        }
    }

    /// What an answer held, step by step.
    pub fn cognition(&self, c: &Cognition) {
        if !self.heard() {
            return;
        }
        let steps = cognition_steps(c);
        for s in &steps {
            self.emit(
                Phase::Cognition,
                || match s.verb.as_str() {
                    "" => format!("{}: {}", s.step, one_line(&s.text)),
                    verb => format!("{} ({verb}): {}", s.step, one_line(&s.text)),
                },
                || json!({ "step": s.step, "verb": s.verb, "text": s.text }),
            );
        }
        self.with_body(|b| b.cognition.extend(steps));
    }

    /// Something the turn decided (`process`, `selection`, `tool`, `gate`, `state`).
    pub fn decision(&self, kind: &str, text: impl FnOnce() -> String) {
        if !self.heard() {
            return;
        }
        let text = text();
        self.emit(
            Phase::Decision,
            || format!("{kind}: {}", one_line(&text)),
            || json!({ "kind": kind, "text": text }),
        );
        self.with_body(|b| {
            b.decisions.push(Decision {
                kind: kind.to_string(),
                text,
            })
        });
    }

    /// Something the turn wrote to memory (`user_model`, `soul_state`, `psyche`, …).
    pub fn memory(&self, what: &str, detail: impl FnOnce() -> String) {
        if !self.heard() {
            return;
        }
        let detail = detail();
        self.emit(
            Phase::Memory,
            || format!("{what}: {}", one_line(&detail)),
            || json!({ "what": what, "detail": detail }),
        );
        self.with_body(|b| {
            b.memory.push(Written {
                what: what.to_string(),
                detail,
            })
        });
    }

    /// What the soul says (the trace keeps it in its row).
    pub fn response(&self, reply: &str) {
        self.emit(
            Phase::Response,
            || one_line(reply),
            || json!({ "reply": reply }),
        );
    }

    /// Something that went wrong.
    pub fn error(&self, text: impl FnOnce() -> String) {
        if !self.heard() {
            return;
        }
        let text = text();
        self.emit(Phase::Error, || one_line(&text), Value::default);
        self.with_body(|b| b.errors.push(text));
    }

    /// The trace as the store keeps it, when traces are kept.
    pub fn finish(self, c: Columns) -> Option<TraceRow> {
        if !self.keep {
            return None;
        }
        let mut body = self.body.into_inner().unwrap_or_else(|p| p.into_inner());
        body.processes = c.processes;
        body.total_ms = self.started.elapsed().as_millis() as u64;
        let pieces = std::mem::take(&mut body.pieces);
        Some(TraceRow {
            trace: self.id,
            kind: body.kind.as_str().to_string(),
            thread: self.thread,
            person: c.person,
            inbox: c.inbox,
            process: c.process,
            at: self.at,
            reply: c.reply,
            body: body.to_json(),
            pieces,
        })
    }
}

/// A prompt's sections, measured.
fn measured(sent: Sent) -> Vec<Section> {
    sent.sections()
        .iter()
        .map(|s| Section::of(s.name, &s.text, s.cached))
        .collect()
}

/// A call as the trace keeps it: the prompt in sections and whole (its cached part one of
/// `body`'s pieces, the same in most traces, so the store keeps it once), the answer, its
/// cost.
fn model_call(
    purpose: &str,
    sent: Sent,
    model: &str,
    answered: Answered,
    body: &mut TraceBody,
) -> ModelCall {
    let sections = sent.sections();
    let cached: usize = (sections.iter())
        .take_while(|s| s.cached)
        .map(|s| s.text.len())
        .sum();
    let whole = prompt::sections::whole(&sections);
    let (prefix, prompt) = if cached > 0 {
        let (head, rest) = whole.split_at(cached);
        (Some(body.piece(head)), rest.to_string())
    } else {
        (None, whole)
    };
    let mut call = ModelCall {
        purpose: purpose.to_string(),
        sections: sections
            .iter()
            .map(|s| Section::of(s.name, &s.text, s.cached))
            .collect(),
        prompt,
        prefix,
        model: model.to_string(),
        ..ModelCall::default()
    };
    match answered {
        Ok((c, us)) => {
            call.raw = c.text.clone();
            call.model = c.model.clone();
            call.input_tokens = c.usage.input_tokens;
            call.output_tokens = c.usage.output_tokens;
            call.cache_read_tokens = c.usage.cache_read_tokens;
            call.cache_creation_tokens = c.usage.cache_creation_tokens;
            call.latency_ms = us / 1000;
        }
        Err((e, us)) => {
            call.error = Some(e.to_string());
            call.latency_ms = us / 1000;
        }
    }
    call
}

/// The steps an answer held, in the order the instructions ask for them.
pub(super) fn cognition_steps(c: &Cognition) -> Vec<CognitionStep> {
    let step = |s: Step, verb: Option<&String>, text: String| CognitionStep {
        step: s.name().to_string(),
        verb: verb.cloned().unwrap_or_default(),
        text,
    };
    let yes_no = |b: bool| if b { "true" } else { "false" }.to_string();
    let mut out = Vec::new();
    if let Some(m) = &c.monologue {
        out.push(step(
            Step::InternalMonologue,
            m.verb.as_ref(),
            m.text.clone(),
        ));
    }
    if let Some(d) = &c.dialogue {
        out.push(step(
            Step::ExternalDialogue,
            d.verb.as_ref(),
            d.text.clone(),
        ));
    }
    for q in &c.mental_queries {
        let answer = q.answer.map_or("(no answer)".to_string(), yes_no);
        let text = format!("{} → {answer}", q.question);
        out.push(step(Step::MentalQuery, None, text));
    }
    if let Some(b) = c.user_model_check {
        out.push(step(Step::UserModelCheck, None, yes_no(b)));
    }
    if let Some(m) = &c.user_model_update {
        out.push(step(Step::UserModelUpdate, None, m.clone()));
    }
    if let Some(note) = &c.model_change_note {
        out.push(CognitionStep {
            step: crate::steps::MODEL_CHANGE_NOTE.to_string(),
            verb: String::new(),
            text: note.clone(),
        });
    }
    if let Some(b) = c.soul_state_check {
        out.push(step(Step::SoulStateCheck, None, yes_no(b)));
    }
    if !c.soul_state_update.is_empty() {
        let lines: Vec<String> = c
            .soul_state_update
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        out.push(step(Step::SoulStateUpdate, None, lines.join("\n")));
    }
    out
}

/// A text on one line, cut to `LINE_CHARS` characters (an ellipsis says it was cut).
pub(super) fn one_line(text: &str) -> String {
    let mut out: String = text
        .chars()
        .take(LINE_CHARS)
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if text.chars().nth(LINE_CHARS).is_some() {
        out.push('…');
    }
    out
}

pub mod writer;

#[cfg(test)]
mod tests;
