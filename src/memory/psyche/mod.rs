//! The psychology substrate in SQLite: the soul's state, relationships, episodic memories
//! (with an FTS5 index for retrieval candidates), biographical facts, intentions and the log of
//! gate decisions with their inputs.
//!
//! Owns the SQL only: every number is computed by `psyche`'s pure functions, and what an
//! event, post-cognition and a packet do with them by `rule`, which PostgreSQL runs too.
//! Applying one event is one write transaction that reads the soul's row and the author's
//! relationship, runs `rule::event` (update, gate) and carries out the writes it asks for
//! (`EventRows`), so two events never interleave.
//!
//! The face (`faces::Psychology`) is `sqlite::psychology`'s, which composes the steps here in
//! its transactions: the soul's row read (`soul_row`), a key looked up and marked
//! (`applied_before`, `mark_applied`), an event applied (`event_in`), the row written back
//! (`settle`), what the packet and post-cognition read (`packet_read`, `cognition_read`), the
//! operator's view (`read_mind`) and the decisions (`decisions`). Here: those steps. `rule`
//! holds the rules both backends run; `state` the substrate, relationships, facts and
//! intentions; `seen` the keys of the events applied; `memories` the episodic memories and
//! retrieval's candidates; `gate_log` the decisions; `mind` the operator's view.

mod gate_log;
mod memories;
mod mind;
pub(crate) mod rule;
mod seen;
mod state;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use rusqlite::Connection;

use super::StoreError;
use crate::psyche::classify::Fact;
use crate::psyche::gate::{Decision, GateRules};
use crate::psyche::mapping::StanceShift;
use crate::psyche::update::{Effects, NewMemory};
use crate::psyche::{Event, Intention, Psyche, Relationship, Substrate, Unit};
pub(crate) use gate_log::decisions;
use gate_log::log_decision;
pub use gate_log::{LoggedDecision, GATE_LOG_KEEP};
use memories::{candidates, Shared};
pub(crate) use memories::{counted_terms, CANDIDATES, COMMON_WORD_DOCS, QUERY_TERMS};
pub(crate) use mind::read_mind;
pub use mind::Mind;
use state::{
    facts_of, intentions, load_relationship, load_relationship_row, load_row, load_substrate,
    save_fact, save_intentions, save_relationship, save_row, save_substrate, Row,
};
pub(crate) use state::{stored_json, substrate_of};

/// How long the key of an applied event is kept: a message whose turn is retried later than
/// this (a home stopped for a month with a turn half done) would move the substrate again.
pub const SEEN_KEEP_MS: i64 = 30 * 24 * 3_600_000;

/// The psyche's share of a dream's upkeep, in its transaction: the boosts of salience waiting
/// on relationship rows are written to their memories, the keys of events applied before
/// `now - SEEN_KEEP_MS` are forgotten (one is kept for every message, reaction and tick), and
/// the full-text index's segments are merged into one (every event that makes a memory adds a
/// segment, and every lookup probes them all). The keys forgotten.
pub(crate) fn upkeep(tx: &Connection, now: i64) -> Result<i64, StoreError> {
    memories::write_waiting(tx)?;
    let forgotten = seen::forget_before(tx, now.saturating_sub(SEEN_KEEP_MS))?;
    tx.execute_batch("INSERT INTO psyche_memories_fts (psyche_memories_fts) VALUES ('optimize')")?;
    Ok(forgotten)
}

/// Everything the psyche keeps inline, written out to its tables for every soul (what events
/// and a dream's upkeep do in time): the boosts of salience waiting on relationship rows into
/// their memories, and the lines of the latest keys and gate decisions into `psyche_seen` and
/// `psyche_gate_log`. The psyche means the same before and after; a copy to another store
/// reads the tables.
pub(crate) fn write_out(tx: &Connection) -> Result<(), StoreError> {
    memories::write_waiting(tx)?;
    let rows: Vec<(String, String, String)> = tx
        .prepare("SELECT soul, recent_keys, recent_decisions FROM psyche_substrate")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
        .collect::<Result<_, _>>()?;
    for (soul, mut keys, mut decisions) in rows {
        gate_log::move_to_table(tx, &soul, &mut decisions)?;
        seen::move_to_table(tx, &soul, &mut keys)?;
        tx.execute(
            "UPDATE psyche_substrate SET recent_keys = '', recent_decisions = '' WHERE soul = ?1",
            [&soul],
        )?;
    }
    Ok(())
}

/// The soul's row as an event reads it in its write transaction: the state, and the lines of
/// its latest keys and decisions, which the event's writes extend.
pub(crate) struct SoulRow(Row);

/// The soul's row, read in an event's write transaction (a soul without one starts from
/// `psyche` at `at`).
pub(crate) fn soul_row(
    tx: &Connection,
    soul: &str,
    psyche: &Psyche,
    at: i64,
) -> Result<SoulRow, StoreError> {
    Ok(SoulRow(load_row(tx, soul, psyche, at)?))
}

/// Whether an event keyed `key` was applied to `soul` already.
pub(crate) fn applied_before(
    tx: &Connection,
    soul: &str,
    row: &SoulRow,
    key: &str,
) -> Result<bool, StoreError> {
    seen::holds(tx, soul, &row.0.keys, key)
}

/// Marks `key` as applied to `soul` (a line of the row, or a row of `psyche_seen`).
pub(crate) fn mark_applied(
    tx: &Connection,
    soul: &str,
    row: &mut SoulRow,
    key: &str,
    at: i64,
) -> Result<(), StoreError> {
    seen::add(tx, soul, &mut row.0.keys, key, at)
}

/// Writes the soul's row as an event leaves it, its lines settled: once the keys' or the
/// decisions' lines reach their budget, both move to their tables, so that one event in a
/// dozen writes those pages and the others write only the row and the relationship.
pub(crate) fn settle(tx: &Connection, soul: &str, row: SoulRow) -> Result<(), StoreError> {
    let mut row = row.0;
    if row.keys.len() >= seen::RECENT_BYTES || row.decisions.len() >= gate_log::RECENT_BYTES {
        gate_log::move_to_table(tx, soul, &mut row.decisions)?;
        seen::move_to_table(tx, soul, &mut row.keys)?;
    }
    save_row(tx, soul, &row)
}

/// Where an event happened, for the gate and its log.
#[derive(Debug, Clone, Default)]
pub struct Place {
    pub channel: Option<String>,
    /// Whether the soul may speak unasked here (`[autonomy] channels`).
    pub listened: bool,
}

/// An event's writes on SQLite, as `rule::event` asks for them, in its write transaction.
/// The soul's row, which the caller writes back, takes the decision's line (`decisions`) and
/// the new state (`state`); `shared` is what the author's relationship row keeps of the
/// memories shared with them, carried from the boost through the new memory to the row.
struct EventRows<'a> {
    tx: &'a Connection,
    soul: &'a str,
    decisions: &'a mut String,
    state: Option<Substrate>,
    shared: Shared,
}

impl rule::EventWrites for EventRows<'_> {
    fn boost(&mut self, _person: &str, boost: Unit) -> Result<(), StoreError> {
        self.shared = memories::boost(self.tx, self.soul, boost, self.shared)?;
        Ok(())
    }

    fn memory(&mut self, m: &NewMemory, shared_with: Option<&str>) -> Result<(), StoreError> {
        let id = memories::insert(self.tx, self.soul, m)?;
        if shared_with.is_some() {
            self.shared = memories::made(self.tx, self.shared, id, m.salience.get())?;
        }
        Ok(())
    }

    fn relationship(&mut self, person: &str, r: &Relationship) -> Result<(), StoreError> {
        save_relationship(self.tx, self.soul, person, r, &self.shared)
    }

    fn facts(&mut self, person: &str, facts: &[Fact], at: i64) -> Result<(), StoreError> {
        for f in facts {
            save_fact(self.tx, self.soul, person, f, at)?;
        }
        Ok(())
    }

    fn log(&mut self, logged: LoggedDecision) -> Result<(), StoreError> {
        log_decision(self.tx, self.soul, self.decisions, &logged)
    }

    fn state(&mut self, substrate: &Substrate) -> Result<(), StoreError> {
        self.state = Some(substrate.clone());
        Ok(())
    }
}

/// One event in an open write transaction, from the soul's row as read in it: the author's
/// relationship read, then `rule::event` (update, gate) and the writes it asks for. `row`
/// leaves with the new state and the decision; the caller writes it (`settle`).
pub(crate) fn event_in(
    tx: &Connection,
    soul: &str,
    psyche: &Psyche,
    rules: &GateRules,
    event: &Event,
    place: &Place,
    row: &mut SoulRow,
) -> Result<(Effects, Decision), StoreError> {
    let row = &mut row.0;
    let rel = match &event.person {
        Some(p) => load_relationship_row(tx, soul, p)?,
        None => None,
    };
    let (rel, shared) = rel.unzip();
    let mut writes = EventRows {
        tx,
        soul,
        decisions: &mut row.decisions,
        state: None,
        shared: shared.unwrap_or_default(),
    };
    let applied = rule::event(
        &row.substrate,
        rel.as_ref(),
        event,
        place,
        psyche,
        rules,
        &mut writes,
    )?;
    if let Some(state) = writes.state {
        row.substrate = state;
    }
    Ok(applied)
}

/// Post-cognition's writes on SQLite: each relationship row keeps what it kept of the
/// memories shared (`shared`, as read).
pub(crate) struct CognitionRows<'a> {
    tx: &'a Connection,
    soul: &'a str,
    shared: BTreeMap<String, Shared>,
}

impl rule::CognitionWrites for CognitionRows<'_> {
    fn state(&mut self, substrate: &Substrate) -> Result<(), StoreError> {
        save_substrate(self.tx, self.soul, substrate)
    }

    fn relationship(&mut self, person: &str, r: &Relationship) -> Result<(), StoreError> {
        let w = self.shared.get(person).copied().unwrap_or_default();
        save_relationship(self.tx, self.soul, person, r, &w)
    }

    fn intentions(&mut self, all: Vec<Intention>) -> Result<(), StoreError> {
        save_intentions(self.tx, self.soul, &all)
    }
}

/// What the packet reads, in one read on `conn`: the soul's state at `now`, the relationships
/// and facts of the people present (id, name), retrieval's candidates for `query`, the
/// intentions.
pub(crate) fn packet_read(
    conn: &Connection,
    soul: &str,
    psyche: &Psyche,
    people: &[(String, String)],
    query: &str,
    now: i64,
) -> Result<rule::PacketRead, StoreError> {
    let mut relationships = BTreeMap::new();
    let mut facts = BTreeMap::new();
    for (id, _) in people {
        if let Some(r) = load_relationship(conn, soul, id)? {
            relationships.insert(id.clone(), r);
        }
        facts.insert(id.clone(), facts_of(conn, soul, id)?);
    }
    Ok(rule::PacketRead {
        substrate: load_substrate(conn, soul, psyche, now)?,
        relationships,
        facts,
        memories: candidates(conn, soul, query)?,
        intentions: intentions(conn, soul)?,
    })
}

/// What post-cognition reads in its write transaction (the state at `now`, the relationships
/// the shifts name, the intentions), and the writes that carry out its decisions there.
pub(crate) fn cognition_read<'a>(
    tx: &'a Connection,
    soul: &'a str,
    psyche: &Psyche,
    shifts: &[StanceShift],
    now: i64,
) -> Result<(rule::CognitionRead, CognitionRows<'a>), StoreError> {
    let substrate = load_substrate(tx, soul, psyche, now)?;
    let mut relationships = BTreeMap::new();
    let mut shared = BTreeMap::new();
    for who in rule::shifted(shifts) {
        if let Some((r, w)) = load_relationship_row(tx, soul, who)? {
            relationships.insert(who.to_string(), r);
            shared.insert(who.to_string(), w);
        }
    }
    let read = rule::CognitionRead {
        substrate,
        relationships,
        intentions: intentions(tx, soul)?,
    };
    Ok((read, CognitionRows { tx, soul, shared }))
}
