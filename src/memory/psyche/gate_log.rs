//! The log of gate decisions, each with its inputs, so that the operator can see why the soul
//! spoke or kept silent. The newest `GATE_LOG_KEEP` per soul are kept.

use rusqlite::{params, Connection};
use serde::Serialize;

use crate::memory::{Store, StoreError};
use crate::psyche::gate::{Decision, GateInputs};
use crate::psyche::{Event, Unit};

use super::Place;

/// Gate decisions kept per soul (older ones are deleted as new ones come).
pub const GATE_LOG_KEEP: i64 = 10_000;

/// A gate decision as logged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoggedDecision {
    pub at: i64,
    pub event_kind: String,
    pub person: Option<String>,
    pub channel: Option<String>,
    pub verdict: String,
    pub meaning: f64,
    pub threshold: f64,
    pub inputs: GateInputs,
    pub trivial: bool,
    pub choice: bool,
    pub listened: bool,
}

pub(super) fn log_decision(
    conn: &Connection,
    soul: &str,
    event: &Event,
    place: &Place,
    d: &Decision,
) -> Result<(), StoreError> {
    let i = &d.inputs;
    conn.prepare_cached(
        "INSERT INTO psyche_gate_log (soul, at, event_kind, person, channel, verdict, meaning, threshold,
             salience_max, drive_pressure_max, arc_hot, rel_stakes, energy, trivial, choice, listened)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
    )?
    .execute(params![
        soul,
        d.situation.now,
        event.kind.name(),
        event.person,
        place.channel,
        d.verdict.name(),
        d.meaning,
        d.threshold,
        i.salience_max.get(),
        i.drive_pressure_max.get(),
        i.arc_hot.get(),
        i.rel_stakes.get(),
        i.energy.get(),
        d.situation.trivial,
        d.situation.choice,
        d.situation.listened,
    ])?;
    let id = conn.last_insert_rowid();
    if id % 100 == 0 {
        conn.prepare_cached("DELETE FROM psyche_gate_log WHERE soul = ?1 AND id <= ?2")?
            .execute(params![soul, id - GATE_LOG_KEEP])?;
    }
    Ok(())
}

impl Store {
    /// The newest gate decisions, newest first.
    pub fn psyche_decisions(
        &self,
        soul: &str,
        limit: usize,
    ) -> Result<Vec<LoggedDecision>, StoreError> {
        decisions(&self.conn(), soul, None, limit)
    }
}

pub(super) fn decisions(
    conn: &Connection,
    soul: &str,
    person: Option<&str>,
    limit: usize,
) -> Result<Vec<LoggedDecision>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT at, event_kind, person, channel, verdict, meaning, threshold, salience_max, drive_pressure_max,
                arc_hot, rel_stakes, energy, trivial, choice, listened
         FROM psyche_gate_log WHERE soul = ?1 AND (?2 IS NULL OR person = ?2) ORDER BY id DESC LIMIT ?3",
    )?;
    let rows = stmt.query_map(params![soul, person, limit as i64], |r| {
        Ok(LoggedDecision {
            at: r.get(0)?,
            event_kind: r.get(1)?,
            person: r.get(2)?,
            channel: r.get(3)?,
            verdict: r.get(4)?,
            meaning: r.get(5)?,
            threshold: r.get(6)?,
            inputs: GateInputs {
                salience_max: Unit::new(r.get(7)?),
                drive_pressure_max: Unit::new(r.get(8)?),
                arc_hot: Unit::new(r.get(9)?),
                rel_stakes: Unit::new(r.get(10)?),
                energy: Unit::new(r.get(11)?),
            },
            trivial: r.get(12)?,
            choice: r.get(13)?,
            listened: r.get(14)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}
