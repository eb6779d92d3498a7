//! The log of gate decisions, each with its inputs, so that the operator can see why the soul
//! spoke or kept silent. The newest `GATE_LOG_KEEP` per soul are kept.
//!
//! Every event is logged, so a row of the table for each would cost every event a page of its
//! own (benches/psyche.rs). The newest decisions live in the soul's state row instead, which the
//! event writes anyway (`state::save_row`), as tab-separated lines; once they reach
//! `RECENT_BYTES` they move into `psyche_gate_log` together, a page or so for a dozen events,
//! with the keys' lines (`super::settle`). Readers take the lines first, then the table (`decisions`). A decision whose
//! person or channel could not be a field of a line (a tab, a line feed, great length) goes to
//! the table at once, after the lines, so the order holds.

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use crate::memory::StoreError;
use crate::psyche::gate::{Decision, GateInputs};
use crate::psyche::{Event, Unit};

use super::state::row_lines;
use super::Place;

/// Gate decisions kept per soul in the table (older ones are deleted as new ones come).
pub const GATE_LOG_KEEP: i64 = 10_000;

/// How long the state row's lines of decisions grow before they move to the table: about
/// twelve decisions. With the state and the keys' lines (`seen::RECENT_BYTES`), the row stays
/// inside one 4 KB page.
pub(super) const RECENT_BYTES: usize = 2_304;
/// The longest person or channel kept in a line.
const LONGEST_FIELD: usize = 64;

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

impl LoggedDecision {
    pub(crate) fn new(event: &Event, place: &Place, d: &Decision) -> LoggedDecision {
        LoggedDecision {
            at: d.situation.now,
            event_kind: event.kind.name().to_string(),
            person: event.person.clone(),
            channel: place.channel.clone(),
            verdict: d.verdict.name().to_string(),
            meaning: d.meaning,
            threshold: d.threshold,
            inputs: d.inputs,
            trivial: d.situation.trivial,
            choice: d.situation.choice,
            listened: d.situation.listened,
        }
    }

    /// The decision as one line of the state row (its line feed included), or `None` when a
    /// field could not be told apart in one. Numbers are written so that they read back
    /// exactly (Rust prints the shortest text that parses to the same `f64`).
    fn line(&self) -> Option<String> {
        let text = |v: &Option<String>| match v {
            None => Some("-".to_string()),
            Some(v) if v.len() <= LONGEST_FIELD && !v.contains(['\t', '\n']) => {
                Some(format!("+{v}"))
            }
            Some(_) => None,
        };
        let i = &self.inputs;
        let flag = |b: bool| if b { "1" } else { "0" };
        Some(format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\n",
            self.at,
            self.event_kind,
            text(&self.person)?,
            text(&self.channel)?,
            self.verdict,
            self.meaning,
            self.threshold,
            i.salience_max.get(),
            i.drive_pressure_max.get(),
            i.arc_hot.get(),
            i.rel_stakes.get(),
            i.energy.get(),
            flag(self.trivial),
            flag(self.choice),
            flag(self.listened),
        ))
    }

    /// A line as `line` wrote it (without its line feed); `None` for any other.
    fn parse(line: &str) -> Option<LoggedDecision> {
        let f: Vec<&str> = line.split('\t').collect();
        let [at, kind, person, channel, verdict, meaning, threshold, sal, drive, arc, stakes, energy, trivial, choice, listened] =
            f[..]
        else {
            return None;
        };
        let text = |v: &str| match v.split_at_checked(1) {
            Some(("-", "")) => Some(None),
            Some(("+", v)) => Some(Some(v.to_string())),
            _ => None,
        };
        let flag = |v: &str| match v {
            "1" => Some(true),
            "0" => Some(false),
            _ => None,
        };
        let unit = |v: &str| v.parse::<f64>().ok().map(Unit::new);
        Some(LoggedDecision {
            at: at.parse().ok()?,
            event_kind: kind.to_string(),
            person: text(person)?,
            channel: text(channel)?,
            verdict: verdict.to_string(),
            meaning: meaning.parse().ok()?,
            threshold: threshold.parse().ok()?,
            inputs: GateInputs {
                salience_max: unit(sal)?,
                drive_pressure_max: unit(drive)?,
                arc_hot: unit(arc)?,
                rel_stakes: unit(stakes)?,
                energy: unit(energy)?,
            },
            trivial: flag(trivial)?,
            choice: flag(choice)?,
            listened: flag(listened)?,
        })
    }
}

/// Logs a decision, in the event's transaction: a line of `lines` (the soul's row, which the
/// caller writes back, moving the lines to the table when they reach `RECENT_BYTES`), or a row
/// of the table.
pub(super) fn log_decision(
    conn: &Connection,
    soul: &str,
    lines: &mut String,
    logged: &LoggedDecision,
) -> Result<(), StoreError> {
    match logged.line() {
        Some(line) => lines.push_str(&line),
        None => {
            move_to_table(conn, soul, lines)?;
            insert(conn, soul, logged)?;
        }
    }
    Ok(())
}

/// The lines into the table, oldest first, and `lines` emptied. A line this build did not write
/// (the row edited by hand) is dropped.
pub(super) fn move_to_table(
    conn: &Connection,
    soul: &str,
    lines: &mut String,
) -> Result<(), StoreError> {
    for logged in row_lines(lines).filter_map(LoggedDecision::parse) {
        insert(conn, soul, &logged)?;
    }
    lines.clear();
    Ok(())
}

/// One decision into the table. Every hundredth id, the table forgets what is older than its
/// last `GATE_LOG_KEEP`.
fn insert(conn: &Connection, soul: &str, l: &LoggedDecision) -> Result<(), StoreError> {
    let i = &l.inputs;
    conn.prepare_cached(
        "INSERT INTO psyche_gate_log (soul, at, event_kind, person, channel, verdict, meaning, threshold,
             salience_max, drive_pressure_max, arc_hot, rel_stakes, energy, trivial, choice, listened)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
    )?
    .execute(params![
        soul,
        l.at,
        l.event_kind,
        l.person,
        l.channel,
        l.verdict,
        l.meaning,
        l.threshold,
        i.salience_max.get(),
        i.drive_pressure_max.get(),
        i.arc_hot.get(),
        i.rel_stakes.get(),
        i.energy.get(),
        l.trivial,
        l.choice,
        l.listened,
    ])?;
    let id = conn.last_insert_rowid();
    if id % 100 == 0 {
        conn.prepare_cached("DELETE FROM psyche_gate_log WHERE soul = ?1 AND id <= ?2")?
            .execute(params![soul, id - GATE_LOG_KEEP])?;
    }
    Ok(())
}

/// The newest decisions of `soul` (of `person`'s events only, if given), newest first: the
/// state row's lines, then the table, read in one snapshot (a daemon moving the lines to the
/// table between two reads would otherwise show them twice to `anima mind`).
pub(crate) fn decisions(
    conn: &Connection,
    soul: &str,
    person: Option<&str>,
    limit: usize,
) -> Result<Vec<LoggedDecision>, StoreError> {
    conn.execute_batch("SAVEPOINT decisions")?;
    let read = read_decisions(conn, soul, person, limit);
    conn.execute_batch("RELEASE decisions")?;
    read
}

fn read_decisions(
    conn: &Connection,
    soul: &str,
    person: Option<&str>,
    limit: usize,
) -> Result<Vec<LoggedDecision>, StoreError> {
    let lines: String = conn
        .prepare_cached("SELECT recent_decisions FROM psyche_substrate WHERE soul = ?1")?
        .query_row([soul], |r| r.get(0))
        .optional()?
        .unwrap_or_default();
    let parsed: Vec<LoggedDecision> = row_lines(&lines)
        .filter_map(LoggedDecision::parse)
        .collect();
    let mut out: Vec<LoggedDecision> = parsed
        .into_iter()
        .rev()
        .filter(|l| person.is_none() || l.person.as_deref() == person)
        .take(limit)
        .collect();
    let mut stmt = conn.prepare_cached(
        "SELECT at, event_kind, person, channel, verdict, meaning, threshold, salience_max, drive_pressure_max,
                arc_hot, rel_stakes, energy, trivial, choice, listened
         FROM psyche_gate_log WHERE soul = ?1 AND (?2 IS NULL OR person = ?2) ORDER BY id DESC LIMIT ?3",
    )?;
    let rows = stmt.query_map(params![soul, person, (limit - out.len()) as i64], |r| {
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
    for row in rows {
        out.push(row?);
    }
    Ok(out)
}
