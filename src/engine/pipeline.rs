//! The one turn pipeline, for every kind of perception: `begin` (record the message, take
//! its number, claim a whisper, read the context) → `chain` (the thread's process, run after
//! run: plan → prompt → model → parse → apply → step) → `commit` (the turn in one
//! transaction, then the export of changed user models to git) → the turn's trace queued for
//! the trace writer (written off the turn's path, in batches; see `tracer::writer`).
//!
//! What differs between kinds is the `Policy` (counted or not, whisper or not, chaining or
//! not, extra questions) and the stage `begin`; everything else is shared.

use super::begin::{begin, leave_rest};
use super::perception::Perception;
use super::psyche::psyche_turn;
use super::tracer::Tracer;
use super::{Engine, EngineError, TurnOutcome};
use crate::memory::TraceRow;
use crate::metrics::Metrics;
use crate::window::Kind;

impl Engine {
    /// Runs `p` as the turn whose trace is `trace`.
    pub(super) async fn run(
        &self,
        p: &Perception,
        trace: &str,
    ) -> Result<TurnOutcome, EngineError> {
        let started = std::time::Instant::now();
        let (kind, stimulus) = match p {
            Perception::Message(m) => (Kind::Message, m.text.as_str()),
            Perception::Quiet(_) => (Kind::Thought, "a quiet conversation"),
        };
        let tracer = Tracer::new(&self.hub, trace, kind, p.thread(), self.keeps_traces());
        tracer.stimulus(stimulus);
        let lib = self.library.current();
        let store = self.store.as_ref();
        let keeps_sessions = self.provider.keeps_sessions();
        // The files shared with a message, read before it is recorded: a crash mid-download
        // leaves the message to be answered (once) by the next attempt.
        let shared = match p {
            Perception::Message(m) => self.read_shared(m).await,
            Perception::Quiet(_) => Default::default(),
        };
        let mut begun = begin(store, &self.config, keeps_sessions, p, &lib, shared).await?;
        begun.onboard = self.onboard(p, &begun.ctx, &lib);
        // The daimons are asked while the message goes into the psyche (see `daimons`).
        let context = self.daimon_context(p, &begun);
        let heard = self.hear_daimons(context, lib.soul.name(), &tracer);
        let before = async {
            if matches!(p, Perception::Message(_)) {
                leave_rest(store, &mut begun.ctx, &tracer).await?;
            }
            Ok::<_, EngineError>(match p {
                Perception::Message(m) => {
                    psyche_turn(store, &self.config.autonomy, m, &lib, &tracer).await
                }
                Perception::Quiet(_) => None,
            })
        };
        let (packet, heard) = tokio::join!(before, heard);
        let packet = packet?;
        begun.heard = heard;
        let caller = super::model::Caller {
            images: &begun.shared.images,
            ..self.caller(&tracer)
        };
        let dossiers = match p {
            Perception::Message(m) => Some(
                self.dossiers
                    .turn(
                        store,
                        &m.text,
                        (&m.user_id, &m.display_name),
                        lib.soul.name(),
                        &begun.history,
                    )
                    .await,
            ),
            Perception::Quiet(_) => None,
        };
        let chained = caller
            .chain(p, &begun, &lib, packet.as_ref(), dossiers.as_ref())
            .await;
        match chained {
            Ok(chained) => {
                let answer = chained
                    .last
                    .last
                    .as_ref()
                    .map(|r| r.completion.text.clone());
                let outcome = self
                    .commit(p, &begun, &lib, chained, started, tracer)
                    .await?;
                if let (Perception::Message(m), Some(answer)) = (p, &answer) {
                    self.keep_notes(&begun, &m.text, answer).await;
                }
                if let (Perception::Message(m), Some(turn), Some(answer)) = (p, &dossiers, answer) {
                    let speaker = (m.user_id.as_str(), m.display_name.as_str());
                    self.dossiers
                        .keep(store, &self.models, turn, &answer, speaker)
                        .await;
                }
                Ok(outcome)
            }
            Err(f) => self.failed(p, &begun, f, tracer).await,
        }
    }

    /// Whether this engine keeps its turns' traces (`[inspect] keep_turns` above 0).
    pub(super) fn keeps_traces(&self) -> bool {
        self.config.inspect.keep_turns > 0
    }

    /// Keeps a finished trace: queued for the trace writer, never written on the turn's
    /// path. A full queue drops it (counted in `anima_traces_dropped_total`); one that cannot
    /// be written is logged by the writer. A trace never fails or slows a turn.
    pub(super) async fn keep_trace(&self, row: Option<TraceRow>) {
        let Some(row) = row else { return };
        if self.traces.push(row) == super::Queued::Dropped {
            if let Some(m) = &self.metrics {
                Metrics::inc(&m.traces_dropped);
            }
        }
    }
}
