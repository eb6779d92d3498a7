//! The whole substrate in numbers, for the operator (`anima mind`): never for a prompt.

use std::collections::BTreeMap;

use rusqlite::{params, Connection};
use serde::Serialize;

use super::gate_log::{decisions, LoggedDecision};
use super::memories::{memory_rows, MEMORY_COLUMNS};
use super::state::{facts_of, intentions, load_substrate, relationship_row};
use crate::memory::StoreError;
use crate::psyche::classify::Fact;
use crate::psyche::{Intention, Memory, Psyche, Relationship, Substrate};

/// The whole substrate, in numbers, for the operator (`anima mind`).
#[derive(Debug, Clone, Serialize)]
pub struct Mind {
    pub substrate: Substrate,
    pub relationships: BTreeMap<String, Relationship>,
    pub facts: BTreeMap<String, Vec<Fact>>,
    pub intentions: Vec<Intention>,
    pub memories: i64,
    pub recent_memories: Vec<Memory>,
    pub decisions: Vec<LoggedDecision>,
}

/// The substrate in numbers, for the operator: everything, or one person's part; one read on
/// `conn`.
pub(crate) fn read_mind(
    conn: &Connection,
    soul: &str,
    psyche: &Psyche,
    person: Option<&str>,
    now: i64,
) -> Result<Mind, StoreError> {
    let substrate = load_substrate(conn, soul, psyche, now)?;
    let mut relationships = BTreeMap::new();
    {
        let mut stmt = conn.prepare_cached(
            "SELECT warmth, trust, tension, comfort, volatility, exchanges, last_seen, person
             FROM psyche_relationships WHERE soul = ?1 AND (?2 IS NULL OR person = ?2)
             ORDER BY last_seen DESC LIMIT 50",
        )?;
        let rows = stmt.query_map(params![soul, person], |r| {
            Ok((r.get::<_, String>(7)?, relationship_row(r)?))
        })?;
        for row in rows {
            let (who, r) = row?;
            relationships.insert(who, r);
        }
    }
    let mut facts = BTreeMap::new();
    for who in relationships.keys() {
        let f = facts_of(conn, soul, who)?;
        if !f.is_empty() {
            facts.insert(who.clone(), f);
        }
    }
    let memories: i64 = conn.query_row(
        "SELECT count(*) FROM psyche_memories WHERE soul = ?1",
        [soul],
        |r| r.get(0),
    )?;
    let recent_memories = memory_rows(
        conn,
        &format!(
            "SELECT {MEMORY_COLUMNS} FROM psyche_memories m WHERE m.soul = ?1
             AND (?2 IS NULL OR m.id IN (SELECT memory FROM psyche_memory_people WHERE person = ?2))
             ORDER BY m.at DESC, m.id DESC LIMIT 10"
        ),
        params![soul, person],
    )?;
    let decisions = decisions(conn, soul, person, 10)?;
    Ok(Mind {
        substrate,
        relationships,
        facts,
        intentions: intentions(conn, soul)?,
        memories,
        recent_memories,
        decisions,
    })
}
