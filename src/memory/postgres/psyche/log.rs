//! The log of gate decisions on PostgreSQL: a row per decision with its inputs, in the event's
//! transaction. The newest `GATE_LOG_KEEP` per soul are kept: every hundredth row forgets the
//! soul's rows older than its last `GATE_LOG_KEEP` ids, as on SQLite.

use deadpool_postgres::GenericClient;

use super::{Param, Result};
use crate::memory::psyche::{LoggedDecision, GATE_LOG_KEEP};
use crate::psyche::gate::GateInputs;
use crate::psyche::Unit;

/// Logs one decision, and on every hundredth id prunes the soul's oldest, in one statement.
pub(super) const LOG: &str = "WITH logged AS (
        INSERT INTO psyche_gate_log (soul, at, event_kind, person, channel, verdict, meaning,
            threshold, salience_max, drive_pressure_max, arc_hot, rel_stakes, energy, trivial,
            choice, listened)
        VALUES ($1, anima_at($2), $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)
        RETURNING id)
    DELETE FROM psyche_gate_log g USING logged
    WHERE logged.id % 100 = 0 AND g.soul = $1 AND g.id <= logged.id - $17";

pub(super) fn log_params(soul: &str, l: LoggedDecision) -> Vec<Param> {
    let i = l.inputs;
    vec![
        Box::new(soul.to_string()),
        Box::new(l.at),
        Box::new(l.event_kind),
        Box::new(l.person),
        Box::new(l.channel),
        Box::new(l.verdict),
        Box::new(l.meaning),
        Box::new(l.threshold),
        Box::new(i.salience_max.get()),
        Box::new(i.drive_pressure_max.get()),
        Box::new(i.arc_hot.get()),
        Box::new(i.rel_stakes.get()),
        Box::new(i.energy.get()),
        Box::new(l.trivial),
        Box::new(l.choice),
        Box::new(l.listened),
        Box::new(GATE_LOG_KEEP),
    ]
}

/// The newest decisions of `soul` (of `person`'s events only, if given), newest first.
pub(super) async fn decisions(
    c: &impl GenericClient,
    soul: &str,
    person: Option<&str>,
    limit: usize,
) -> Result<Vec<LoggedDecision>> {
    // One statement with a person and one without: a plan kept for `$2 IS NULL OR person = $2`
    // could use the person's index for neither.
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let whose = if person.is_some() {
        "soul = $1 AND person = $3"
    } else {
        "soul = $1"
    };
    let st = c
        .prepare_cached(&format!(
            "SELECT anima_ms(at), event_kind, person, channel, verdict, meaning, threshold,
                 salience_max, drive_pressure_max, arc_hot, rel_stakes, energy, trivial, choice,
                 listened
             FROM psyche_gate_log WHERE {whose} ORDER BY id DESC LIMIT $2"
        ))
        .await?;
    let rows = match person {
        Some(person) => c.query(&st, &[&soul, &limit, &person]).await?,
        None => c.query(&st, &[&soul, &limit]).await?,
    };
    Ok(rows
        .iter()
        .map(|r| LoggedDecision {
            at: r.get(0),
            event_kind: r.get(1),
            person: r.get(2),
            channel: r.get(3),
            verdict: r.get(4),
            meaning: r.get(5),
            threshold: r.get(6),
            inputs: GateInputs {
                salience_max: Unit::new(r.get(7)),
                drive_pressure_max: Unit::new(r.get(8)),
                arc_hot: Unit::new(r.get(9)),
                rel_stakes: Unit::new(r.get(10)),
                energy: Unit::new(r.get(11)),
            },
            trivial: r.get(12),
            choice: r.get(13),
            listened: r.get(14),
        })
        .collect())
}
