//! The soul's own state, its relationships (with what they keep of the memories shared with
//! the person, `memories::Shared`), the facts people stated and its intentions: the rows
//! `psyche::update` and `psyche::mapping` read and write whole. SQL only; no number is computed
//! here.

use std::collections::BTreeMap;

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use super::memories::Shared;
use crate::memory::StoreError;
use crate::psyche::classify::{Fact, FactKind};
use crate::psyche::state::Horizon;
use crate::psyche::{Intention, Psyche, Relationship, Signed, Substrate, Unit};

/// The substrate as stored: every float as its IEEE-754 bits, so that a round trip through
/// JSON is exact (serde_json's default float parsing may be off by one unit in the last place,
/// which would make the stored state drift from a replay).
#[derive(Serialize, serde::Deserialize)]
struct Stored {
    drives: [u64; 5],
    baseline_shift: [u64; 5],
    valence: u64,
    arousal: u64,
    arcs: BTreeMap<String, u64>,
    energy: u64,
    updated_at: i64,
    last_unasked_at: Option<i64>,
    patterns: BTreeMap<String, u32>,
}

impl Stored {
    fn from(s: &Substrate) -> Stored {
        Stored {
            drives: s.drives.map(|d| d.get().to_bits()),
            baseline_shift: s.baseline_shift.map(|d| d.get().to_bits()),
            valence: s.valence.get().to_bits(),
            arousal: s.arousal.get().to_bits(),
            arcs: s
                .arcs
                .iter()
                .map(|(k, v)| (k.clone(), v.get().to_bits()))
                .collect(),
            energy: s.energy.get().to_bits(),
            updated_at: s.updated_at,
            last_unasked_at: s.last_unasked_at,
            patterns: s.patterns.clone(),
        }
    }

    fn into_substrate(self) -> Substrate {
        let unit = |b: u64| Unit::new(f64::from_bits(b));
        let signed = |b: u64| Signed::new(f64::from_bits(b));
        Substrate {
            drives: self.drives.map(unit),
            baseline_shift: self.baseline_shift.map(signed),
            valence: signed(self.valence),
            arousal: unit(self.arousal),
            arcs: self.arcs.into_iter().map(|(k, v)| (k, unit(v))).collect(),
            energy: unit(self.energy),
            updated_at: self.updated_at,
            last_unasked_at: self.last_unasked_at,
            patterns: self.patterns,
        }
    }
}

pub(super) fn load_substrate(
    conn: &Connection,
    soul: &str,
    psyche: &Psyche,
    now: i64,
) -> Result<Substrate, StoreError> {
    let json: Option<String> = conn
        .prepare_cached("SELECT state FROM psyche_substrate WHERE soul = ?1")?
        .query_row([soul], |r| r.get(0))
        .optional()?;
    Ok(substrate_of(&json.unwrap_or_default(), psyche, now))
}

/// The state as stored; a row this build cannot read (hand-edited, older shape) starts the
/// soul afresh. (Every backend stores the same JSON.)
pub(crate) fn substrate_of(json: &str, psyche: &Psyche, now: i64) -> Substrate {
    serde_json::from_str::<Stored>(json)
        .map_or_else(|_| Substrate::new(psyche, now), Stored::into_substrate)
}

/// The state as `substrate_of` reads it back exactly (every backend stores this JSON).
pub(crate) fn stored_json(s: &Substrate) -> String {
    serde_json::to_string(&Stored::from(s)).expect("a substrate serialises")
}

/// The soul's row as an event reads and writes it, once each: its state, and the lines of
/// its latest events' keys (`seen`) and gate decisions (`gate_log`).
pub(super) struct Row {
    pub(super) substrate: Substrate,
    pub(super) keys: String,
    pub(super) decisions: String,
}

pub(super) fn load_row(
    conn: &Connection,
    soul: &str,
    psyche: &Psyche,
    now: i64,
) -> Result<Row, StoreError> {
    let row: Option<(String, String, String)> = conn
        .prepare_cached(
            "SELECT state, recent_keys, recent_decisions FROM psyche_substrate WHERE soul = ?1",
        )?
        .query_row([soul], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .optional()?;
    let (json, keys, decisions) = row.unwrap_or_default();
    Ok(Row {
        substrate: substrate_of(&json, psyche, now),
        keys,
        decisions,
    })
}

/// The lines of one of the row's lists (the keys, the decisions), each without its line feed.
/// Split at line feeds only: `str::lines` would take a last `\r` for part of the line's end,
/// and a key may end in one.
pub(super) fn row_lines(list: &str) -> std::str::SplitTerminator<'_, char> {
    list.split_terminator('\n')
}

/// Writes the soul's row whole, as an event leaves it.
pub(super) fn save_row(conn: &Connection, soul: &str, row: &Row) -> Result<(), StoreError> {
    let s = &row.substrate;
    let json = serde_json::to_string(&Stored::from(s)).expect("a substrate serialises");
    conn.prepare_cached(
        "INSERT INTO psyche_substrate (soul, state, updated_at, recent_keys, recent_decisions)
         VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT (soul) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at,
             recent_keys = excluded.recent_keys, recent_decisions = excluded.recent_decisions",
    )?
    .execute(params![soul, json, s.updated_at, row.keys, row.decisions])?;
    Ok(())
}

/// Writes the soul's state, leaving the rest of its row as it is.
pub(super) fn save_substrate(
    conn: &Connection,
    soul: &str,
    s: &Substrate,
) -> Result<(), StoreError> {
    let json = serde_json::to_string(&Stored::from(s)).expect("a substrate serialises");
    conn.prepare_cached(
        "INSERT INTO psyche_substrate (soul, state, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (soul) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
    )?
    .execute(params![soul, json, s.updated_at])?;
    Ok(())
}

pub(super) fn load_relationship(
    conn: &Connection,
    soul: &str,
    person: &str,
) -> Result<Option<Relationship>, StoreError> {
    Ok(load_relationship_row(conn, soul, person)?.map(|(r, _)| r))
}

/// A relationship and what its row keeps of the memories shared with the person, for a
/// transaction that writes the row back.
pub(super) fn load_relationship_row(
    conn: &Connection,
    soul: &str,
    person: &str,
) -> Result<Option<(Relationship, Shared)>, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT warmth, trust, tension, comfort, volatility, exchanges, last_seen,
                    last_memory, last_salience, boost_memory, boost
             FROM psyche_relationships WHERE soul = ?1 AND person = ?2",
        )?
        .query_row([soul, person], |r| {
            let pair = |id: Option<i64>, x: f64| id.map(|id| (id, x));
            let shared = Shared {
                last: pair(r.get(7)?, r.get(8)?),
                owed: pair(r.get(9)?, r.get(10)?),
            };
            Ok((relationship_row(r)?, shared))
        })
        .optional()?)
}

pub(super) fn relationship_row(r: &rusqlite::Row) -> rusqlite::Result<Relationship> {
    Ok(Relationship {
        warmth: Signed::new(r.get(0)?),
        trust: Signed::new(r.get(1)?),
        tension: Unit::new(r.get(2)?),
        comfort: Unit::new(r.get(3)?),
        volatility: Unit::new(r.get(4)?),
        exchanges: r.get::<_, i64>(5)?.clamp(0, u32::MAX as i64) as u32,
        last_seen: r.get(6)?,
    })
}

/// Writes a relationship's row whole: its numbers and what it keeps of the memories shared.
pub(super) fn save_relationship(
    conn: &Connection,
    soul: &str,
    person: &str,
    r: &Relationship,
    shared: &Shared,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO psyche_relationships
         (soul, person, warmth, trust, tension, comfort, volatility, exchanges, last_seen,
          last_memory, last_salience, boost_memory, boost)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
    )?
    .execute(params![
        soul,
        person,
        r.warmth.get(),
        r.trust.get(),
        r.tension.get(),
        r.comfort.get(),
        r.volatility.get(),
        r.exchanges as i64,
        r.last_seen,
        shared.last.map(|(id, _)| id),
        shared.last.map_or(0.0, |(_, s)| s),
        shared.owed.map(|(id, _)| id),
        shared.owed.map_or(0.0, |(_, b)| b),
    ])?;
    Ok(())
}

pub(super) fn facts_of(
    conn: &Connection,
    soul: &str,
    person: &str,
) -> Result<Vec<Fact>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT kind, value FROM psyche_facts WHERE soul = ?1 AND person = ?2 ORDER BY kind",
    )?;
    let rows = stmt.query_map([soul, person], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (kind, value) = row?;
        if let Some(kind) = FactKind::from_name(&kind) {
            out.push(Fact { kind, value });
        }
    }
    Ok(out)
}

pub(super) fn intentions(conn: &Connection, soul: &str) -> Result<Vec<Intention>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT kind, target, horizon, priority, created_at, expires_at
         FROM psyche_intentions WHERE soul = ?1 ORDER BY priority DESC, id",
    )?;
    let rows = stmt.query_map([soul], |r| {
        Ok(Intention {
            kind: r.get(0)?,
            target: r.get(1)?,
            horizon: Horizon::from_name(&r.get::<_, String>(2)?).unwrap_or(Horizon::Short),
            priority: Unit::new(r.get(3)?),
            created_at: r.get(4)?,
            expires_at: r.get(5)?,
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A fact a person stated about themselves; the latest of each kind wins.
pub(super) fn save_fact(
    conn: &Connection,
    soul: &str,
    person: &str,
    fact: &Fact,
    at: i64,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO psyche_facts (soul, person, kind, value, at) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![soul, person, fact.kind.name(), fact.value, at])?;
    Ok(())
}

/// Replaces the soul's intentions with `all`.
pub(super) fn save_intentions(
    conn: &Connection,
    soul: &str,
    all: &[Intention],
) -> Result<(), StoreError> {
    conn.prepare_cached("DELETE FROM psyche_intentions WHERE soul = ?1")?
        .execute([soul])?;
    for i in all {
        conn.prepare_cached(
            "INSERT INTO psyche_intentions (soul, kind, target, horizon, priority, created_at, expires_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?
        .execute(params![
            soul,
            i.kind,
            i.target,
            i.horizon.name(),
            i.priority.get(),
            i.created_at,
            i.expires_at
        ])?;
    }
    Ok(())
}
