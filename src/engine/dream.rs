//! Carries a dream out: the move to DREAM (through WORK from PLAY or SOLITUDE; none when the
//! soul is shut down, i.e. no daemon runs), then thread by thread and batch by batch a
//! bounded consolidation call and its commit, the user models it refreshed committed to git,
//! the upkeep, the report stored, and the move back to WORK.
//!
//! Yields: after each batch it reads the state again, and when a message has moved the soul
//! out of DREAM (the turn does that as it begins, without waiting for the dream) it stops
//! there; the next dream resumes what is left. Decides nothing about what is due or how the
//! call reads: that is `states::dream`.

use serde::Serialize;
use serde_json::json;
use tracing::{info, warn};

use super::tracer::Tracer;
use super::Engine;
use crate::memory::dream::Upkeep;
use crate::memory::{move_state, now_ms, NewMove, Quiet, StoreError};
use crate::states::{Map, State};
use crate::window::Kind;

/// What a dream did, as stored and printed.
#[derive(Debug, Clone, Default, Serialize)]
pub struct DreamReport {
    pub id: i64,
    pub cause: String,
    /// The states it moved through (`WORK → DREAM → WORK`), or that it stayed SHUTDOWN.
    pub states: String,
    /// Threads with a backlog, and those consolidated (in part or whole).
    pub threads: usize,
    pub threads_consolidated: usize,
    pub entries_summarised: u64,
    pub entries_pruned: u64,
    pub episodes: u64,
    /// User ids whose model was refreshed.
    pub models_refreshed: Vec<String>,
    pub model_calls: u32,
    pub failed_calls: u32,
    /// It stopped for a message (or a shutdown) and left work for the next dream.
    pub yielded: bool,
    /// Entries still waiting for a dream when it ended.
    pub backlog_left: u64,
    pub errors: Vec<String>,
    pub upkeep: Option<Upkeep>,
    /// What the upkeep could not do, in words.
    pub upkeep_note: Option<String>,
    pub started_ms: i64,
    pub took_ms: i64,
    /// No backlog left, nothing failed, not yielded.
    pub complete: bool,
}

/// Why no dream ran.
#[derive(Debug, thiserror::Error)]
pub enum DreamError {
    /// The template disables DREAM.
    #[error("{0}")]
    Disabled(String),
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Engine {
    /// One dream now, for `cause` (`anima dream`, the schedule). Refused when the template
    /// disables DREAM or the soul is waking up or already dreaming. `quiet: Some(newest)`
    /// (the schedule): refused too when someone wrote since the newest message was `newest`,
    /// checked in each move's transaction, so a message whose turn began before the move is
    /// not answered by a soul that goes on dreaming (one that begins after it moves the soul
    /// back to WORK, and the dream yields).
    pub async fn dream(
        &self,
        cause: &str,
        quiet: Option<Quiet>,
    ) -> Result<DreamReport, DreamError> {
        let started = now_ms();
        let behaviors = self.library.current().template.behaviors.clone();
        if !behaviors.dream.enabled {
            return Err(DreamError::Disabled(
                "this template disables DREAM ([cognitive_state_behaviors.dream] enabled = false)"
                    .into(),
            ));
        }
        let map = Map::new(&behaviors);
        // Held while this dream runs: a DREAM state whose lock is free was left by a dreamer
        // that died (Ctrl-C or SIGKILL on `anima dream`), not by one still dreaming.
        let Some(dreaming) = self.store.hold_dream().await? else {
            return Err(DreamError::Refused(
                "another dream is running; try again once it ends".into(),
            ));
        };
        let id = uuid::Uuid::new_v4().simple().to_string();
        let tracer = Tracer::new(&self.hub, &id, Kind::Dream, "", self.keeps_traces());
        tracer.stimulus(cause);
        let (from, dreaming_in) = self.enter_dream(&map, cause, quiet, &tracer).await?;
        let cause_owned = cause.to_string();
        let id = self.store.begin_dream(&cause_owned).await?;
        let mut r = DreamReport {
            id,
            cause: cause.to_string(),
            started_ms: started,
            states: match dreaming_in {
                State::Dream if from == State::Work => "WORK → DREAM → WORK".into(),
                State::Dream => format!("{from} → WORK → DREAM → WORK"),
                _ => "stayed SHUTDOWN (no daemon runs)".into(),
            },
            ..Default::default()
        };
        let lib = &self.library;
        let consolidation = super::consolidate::Dreaming {
            dreams: self.store.as_ref(),
            states: self.store.as_ref(),
            caller: self.caller(&tracer),
            library: lib,
            dreaming_in,
            hold: &dreaming,
        };
        consolidation.all(&mut r).await;
        if let Err(e) = self.export_pending_models().await {
            r.errors.push(e.to_string());
        }
        self.upkeep(&mut r).await;
        trace_dreamt(&tracer, &r);
        r.complete = !r.yielded && r.errors.is_empty() && r.backlog_left == 0;
        r.took_ms = now_ms() - started;
        let report = serde_json::to_value(&r).unwrap_or_default();
        let complete = r.complete;
        if let Err(e) = self.store.finish_dream(id, complete, &report).await {
            warn!(error = %e, "the dream's report was not stored");
        }
        if dreaming_in == State::Dream {
            let summary = format!(
                "the dream {}: {} thread(s), {} entries summarised, {} pruned",
                if r.yielded { "yielded" } else { "ended" },
                r.threads_consolidated,
                r.entries_summarised,
                r.entries_pruned
            );
            // Only from DREAM: a message or a shutdown may have moved the soul already.
            let _ = self
                .move_state(&map, State::Dream, State::Work, summary, None, &tracer)
                .await;
        }
        self.keep_trace(tracer.finish(super::tracer::Columns::outside()))
            .await;
        info!(
            id,
            yielded = r.yielded,
            threads = r.threads,
            summarised = r.entries_summarised,
            pruned = r.entries_pruned,
            calls = r.model_calls,
            took_ms = r.took_ms,
            "dream"
        );
        Ok(r)
    }

    /// The moves into the state the soul dreams in: from WORK to DREAM (through WORK from
    /// PLAY or SOLITUDE; out of a DREAM a killed dreamer left first); none when the soul is
    /// shut down. The state it was in, and the one it dreams in.
    async fn enter_dream(
        &self,
        map: &Map,
        cause: &str,
        quiet: Option<Quiet>,
        tracer: &Tracer<'_>,
    ) -> Result<(State, State), DreamError> {
        let now = self.store.cognitive_state().await?;
        let mut from = State::from_name(&now.state).unwrap_or(State::Shutdown);
        if from == State::Dream {
            self.move_state(
                map,
                State::Dream,
                State::Work,
                "the last dream ended without a word (its process was killed)".into(),
                None,
                tracer,
            )
            .await?;
            from = State::Work;
        }
        let dreaming_in = match from {
            State::Shutdown => State::Shutdown,
            State::Wakeup | State::Dream => {
                return Err(DreamError::Refused(format!(
                    "the soul is in {from}; try again once it works"
                )))
            }
            State::Play | State::Solitude => {
                let to_work = format!("to dream: {cause}");
                self.move_state(map, from, State::Work, to_work, quiet, tracer)
                    .await?;
                self.move_state(map, State::Work, State::Dream, cause.into(), quiet, tracer)
                    .await?;
                State::Dream
            }
            State::Work => {
                self.move_state(map, State::Work, State::Dream, cause.into(), quiet, tracer)
                    .await?;
                State::Dream
            }
        };
        Ok((from, dreaming_in))
    }

    /// The store's upkeep after a dream that did not yield, and what it could not do.
    async fn upkeep(&self, r: &mut DreamReport) {
        if r.yielded {
            r.upkeep_note = Some("skipped: the dream yielded".into());
        } else {
            match self.store.upkeep().await {
                Ok(u) => {
                    if !u.vacuumed {
                        r.upkeep_note = Some(format!(
                            "no incremental vacuum: the database's auto_vacuum is {} (only a database created in INCREMENTAL mode, i.e. a home made by anima with migration 9 or later, can give pages back without a full VACUUM)",
                            u.auto_vacuum
                        ));
                    }
                    r.upkeep = Some(u);
                }
                Err(e) => r.upkeep_note = Some(format!("failed: {e}")),
            }
        }
    }

    /// Moves `from → to` if the soul is still in `from` and the map allows it.
    async fn move_state(
        &self,
        map: &Map,
        from: State,
        to: State,
        cause: String,
        quiet: Option<Quiet>,
        tracer: &Tracer<'_>,
    ) -> Result<(), DreamError> {
        let map = map.clone();
        let busy = quiet.map(|q| (q, "someone wrote meanwhile".to_string()));
        let moved = move_state(self.store.as_ref(), busy, move |row| {
            let now = State::from_name(&row.state).unwrap_or(State::Shutdown);
            if now != from {
                return Err(format!("the soul is in {now} now, not {from}"));
            }
            map.check(from, to).map_err(|r| r.to_string())?;
            Ok(NewMove {
                to: to.name().into(),
                cause,
                detail: json!({ "by": "dream" }),
                degraded: false,
            })
        })
        .await?;
        match moved {
            Ok(m) => {
                info!(from = %m.from, to = %m.to, cause = %m.cause, "cognitive state moved");
                tracer.decision("state", || format!("{} → {} ({})", m.from, m.to, m.cause));
                Ok(())
            }
            Err(why) => Err(DreamError::Refused(why)),
        }
    }
}

/// Tells the dream's trace what it wrote and what went wrong.
fn trace_dreamt(tracer: &Tracer, r: &DreamReport) {
    if r.threads_consolidated > 0 {
        tracer.memory("summary", || {
            format!(
                "{} thread(s): {} entries summarised, {} pruned, {} episode(s) kept",
                r.threads_consolidated, r.entries_summarised, r.entries_pruned, r.episodes
            )
        });
    }
    for user in &r.models_refreshed {
        tracer.memory("user_model", || format!("{user}: refreshed by the dream"));
    }
    for e in &r.errors {
        tracer.error(|| e.clone());
    }
}
