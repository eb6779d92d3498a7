//! The one turn pipeline, for every kind of perception: `begin` (record the message, take
//! its number, claim a whisper, read the context) → `chain` (the thread's process, run after
//! run: plan → prompt → model → parse → apply → step) → `commit` (the turn in one
//! transaction, then the export of changed user models to git).
//!
//! What differs between kinds is the `Policy` (counted or not, whisper or not, chaining or
//! not, extra questions) and the stage `begin`; everything else is shared.

use super::begin::{begin, leave_rest};
use super::perception::Perception;
use super::psyche::psyche_turn;
use super::{Engine, EngineError, TurnOutcome};

impl Engine {
    pub(super) async fn run(&self, p: &Perception) -> Result<TurnOutcome, EngineError> {
        let started = std::time::Instant::now();
        let lib = self.library.current();
        let store = self.store.as_ref();
        let keeps_sessions = self.provider.keeps_sessions();
        let mut begun = begin(store, &self.config, keeps_sessions, p, &lib).await?;
        if matches!(p, Perception::Message(_)) {
            leave_rest(store, &mut begun.ctx).await?;
        }
        let packet = match p {
            Perception::Message(m) => psyche_turn(store, &self.config.autonomy, m, &lib).await,
            Perception::Quiet(_) => None,
        };
        match self.caller().chain(p, &begun, &lib, packet.as_ref()).await {
            Ok(chained) => self.commit(p, &begun, &lib, chained, started).await,
            Err(f) => {
                let spent = (f.model_us, f.calls);
                self.failed(p, &begun, f.process, f.ran, f.error, spent)
                    .await
            }
        }
    }
}
