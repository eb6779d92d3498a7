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
//! Here: an event, the packet and post-cognition, each as one transaction or read. `rule`
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

use super::{SqliteStore, StoreError};
use crate::psyche::classify::Fact;
use crate::psyche::gate::{Decision, GateRules};
use crate::psyche::mapping::{IntentionUpdate, StanceShift};
use crate::psyche::packet::Packet;
use crate::psyche::update::{Effects, NewMemory};
use crate::psyche::{Event, Intention, Psyche, Relationship, Substrate, Unit};
use gate_log::log_decision;
pub use gate_log::{LoggedDecision, GATE_LOG_KEEP};
use memories::{candidates, Shared};
pub(crate) use memories::{counted_terms, CANDIDATES, COMMON_WORD_DOCS, QUERY_TERMS};
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

/// The soul's row as an event leaves it, its lines settled: once the keys' or the decisions'
/// lines reach their budget, both move to their tables, so that one event in a dozen writes
/// those pages and the others write only the row and the relationship.
fn settle(tx: &Connection, soul: &str, row: &mut Row) -> Result<(), StoreError> {
    if row.keys.len() >= seen::RECENT_BYTES || row.decisions.len() >= gate_log::RECENT_BYTES {
        gate_log::move_to_table(tx, soul, &mut row.decisions)?;
        seen::move_to_table(tx, soul, &mut row.keys)?;
    }
    save_row(tx, soul, row)
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
/// relationship read, then `rule::event`. `row` leaves with the new state and the decision;
/// the caller writes it.
fn event_in(
    tx: &Connection,
    soul: &str,
    psyche: &Psyche,
    rules: &GateRules,
    event: &Event,
    place: &Place,
    row: &mut Row,
) -> Result<(Effects, Decision), StoreError> {
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
struct CognitionRows<'a> {
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

impl SqliteStore {
    /// Applies one event to `soul`'s substrate and decides whether it deserves cognition, in
    /// one write transaction; the decision is logged with its inputs. A `Speak` starts the
    /// cooldown.
    pub fn psyche_event(
        &self,
        soul: &str,
        psyche: &Psyche,
        rules: &GateRules,
        event: &Event,
        place: &Place,
    ) -> Result<(Effects, Decision), StoreError> {
        self.write(|tx| {
            let mut row = load_row(tx, soul, psyche, event.at)?;
            let applied = event_in(tx, soul, psyche, rules, event, place, &mut row)?;
            settle(tx, soul, &mut row)?;
            Ok(applied)
        })
    }

    /// `psyche_event` for an event that may come again (a message whose turn is retried):
    /// applied the first time `key` is seen for this soul, and `None` every time after, so a
    /// retry does not move the substrate twice.
    pub fn psyche_event_once(
        &self,
        soul: &str,
        psyche: &Psyche,
        rules: &GateRules,
        event: &Event,
        place: &Place,
        key: &str,
    ) -> Result<Option<(Effects, Decision)>, StoreError> {
        self.write(|tx| {
            let mut row = load_row(tx, soul, psyche, event.at)?;
            if seen::holds(tx, soul, &row.keys, key)? {
                return Ok(None);
            }
            let applied = event_in(tx, soul, psyche, rules, event, place, &mut row)?;
            seen::add(tx, soul, &mut row.keys, key, event.at)?;
            settle(tx, soul, &mut row)?;
            Ok(Some(applied))
        })
    }

    /// The context packet for a turn: the state in words, the people present (id, name), the
    /// top-K memories for `query`.
    pub fn psyche_packet(
        &self,
        soul: &str,
        psyche: &Psyche,
        people: &[(String, String)],
        query: &str,
        now: i64,
    ) -> Result<Packet, StoreError> {
        let conn = self.conn();
        let mut relationships = BTreeMap::new();
        let mut facts = BTreeMap::new();
        for (id, _) in people {
            if let Some(r) = load_relationship(&conn, soul, id)? {
                relationships.insert(id.clone(), r);
            }
            facts.insert(id.clone(), facts_of(&conn, soul, id)?);
        }
        let read = rule::PacketRead {
            substrate: load_substrate(&conn, soul, psyche, now)?,
            relationships,
            facts,
            memories: candidates(&conn, soul, query)?,
            intentions: intentions(&conn, soul)?,
        };
        Ok(rule::packet(read, psyche, people, query, now))
    }

    /// Applies the model's stance shifts and intention updates through the table, in one
    /// write transaction.
    pub fn psyche_post_cognition(
        &self,
        soul: &str,
        psyche: &Psyche,
        shifts: &[StanceShift],
        updates: &[IntentionUpdate],
        now: i64,
    ) -> Result<Vec<String>, StoreError> {
        self.write(|tx| {
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
            let mut writes = CognitionRows { tx, soul, shared };
            rule::post_cognition(&read, shifts, updates, psyche, now, &mut writes)
        })
    }
}
