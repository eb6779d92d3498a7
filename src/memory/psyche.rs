//! The psychology substrate in SQLite: the soul's state, relationships, episodic memories
//! (with an FTS5 index for retrieval candidates), biographical facts, intentions and the log of
//! gate decisions with their inputs.
//!
//! Owns the SQL only: every number is computed by `psyche`'s pure functions. Applying one event
//! is one write transaction that reads the state, runs `psyche::update::apply` and
//! `psyche::gate::decide`, and writes everything back, so two events never interleave.

use std::collections::BTreeMap;

use rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;

use super::{Store, StoreError};
use crate::psyche::classify::{Fact, FactKind};
use crate::psyche::gate::{self, Decision, GateInputs, GateRules, Situation};
use crate::psyche::mapping::{self, Applied, IntentionUpdate, StanceShift};
use crate::psyche::packet::{Input, Packet, Present};
use crate::psyche::state::Horizon;
use crate::psyche::text::words;
use crate::psyche::update::{apply, Effects};
use crate::psyche::{Event, Intention, Memory, Psyche, Relationship, Signed, Substrate, Unit};

/// Gate decisions kept per soul (older ones are deleted as new ones come).
pub const GATE_LOG_KEEP: i64 = 10_000;
/// Candidates fetched for retrieval: by full-text match, by recency and by salience, each.
const CANDIDATES: usize = 20;

/// Where an event happened, for the gate and its log.
#[derive(Debug, Clone, Default)]
pub struct Place {
    pub channel: Option<String>,
    /// Whether the soul may speak unasked here (`[autonomy] channels`).
    pub listened: bool,
}

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

fn load_substrate(
    conn: &Connection,
    soul: &str,
    psyche: &Psyche,
    now: i64,
) -> Result<Substrate, StoreError> {
    let json: Option<String> = conn
        .prepare_cached("SELECT state FROM psyche_substrate WHERE soul = ?1")?
        .query_row([soul], |r| r.get(0))
        .optional()?;
    // A row this build cannot read (hand-edited, older shape) starts the soul afresh.
    Ok(json
        .and_then(|j| serde_json::from_str::<Stored>(&j).ok())
        .map_or_else(|| Substrate::new(psyche, now), Stored::into_substrate))
}

fn save_substrate(conn: &Connection, soul: &str, s: &Substrate) -> Result<(), StoreError> {
    let json = serde_json::to_string(&Stored::from(s)).expect("a substrate serialises");
    conn.prepare_cached(
        "INSERT INTO psyche_substrate (soul, state, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT (soul) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
    )?
    .execute(params![soul, json, s.updated_at])?;
    Ok(())
}

fn load_relationship(
    conn: &Connection,
    soul: &str,
    person: &str,
) -> Result<Option<Relationship>, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT warmth, trust, tension, comfort, volatility, exchanges, last_seen
             FROM psyche_relationships WHERE soul = ?1 AND person = ?2",
        )?
        .query_row([soul, person], relationship_row)
        .optional()?)
}

fn relationship_row(r: &rusqlite::Row) -> rusqlite::Result<Relationship> {
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

fn save_relationship(
    conn: &Connection,
    soul: &str,
    person: &str,
    r: &Relationship,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO psyche_relationships
         (soul, person, warmth, trust, tension, comfort, volatility, exchanges, last_seen)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
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
        r.last_seen
    ])?;
    Ok(())
}

fn facts_of(conn: &Connection, soul: &str, person: &str) -> Result<Vec<Fact>, StoreError> {
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

fn intentions(conn: &Connection, soul: &str) -> Result<Vec<Intention>, StoreError> {
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

fn memory_rows(
    conn: &Connection,
    sql: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<Memory>, StoreError> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(args, |r| {
        Ok(Memory {
            id: r.get(0)?,
            text: r.get(1)?,
            importance: Unit::new(r.get(2)?),
            salience: Unit::new(r.get(3)?),
            at: r.get(4)?,
            people: r
                .get::<_, Option<String>>(5)?
                .map(|p| p.split('\u{1f}').map(str::to_string).collect())
                .unwrap_or_default(),
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

const MEMORY_COLUMNS: &str = "m.id, m.text, m.importance, m.salience, m.at,
     (SELECT group_concat(person, char(31)) FROM psyche_memory_people p WHERE p.memory = m.id)";

/// Words the full-text query may use: at most this many, the rarest first.
const QUERY_TERMS: usize = 4;
/// A word held by more memories than this says little about which ones matter; leaving it out
/// keeps the index's work bounded as memories accumulate.
const COMMON_WORD_DOCS: i64 = 100;

/// Words of the query counted against the index, the longest first (long words are the rare
/// ones, as a rule).
const COUNTED_TERMS: usize = 5;

/// The query's words, each quoted so that nothing in it is FTS5 syntax: the longest
/// `COUNTED_TERMS`, in a fixed order.
fn fts_terms(text: &str) -> Vec<String> {
    let mut w = words(text);
    w.sort_by(|a, b| b.chars().count().cmp(&a.chars().count()).then(a.cmp(b)));
    w.dedup();
    w.into_iter()
        .take(COUNTED_TERMS)
        .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect()
}

/// An FTS5 query for the rarer words of `text` (any of them), or `None` when no word helps.
fn fts_query(conn: &Connection, text: &str) -> Result<Option<String>, StoreError> {
    let mut counted: Vec<(i64, String)> = Vec::new();
    // How many memories hold the word, counted no further than the limit: the work per word
    // stays bounded however common it is.
    let mut stmt = conn.prepare_cached(
        "SELECT count(*) FROM (SELECT 1 FROM psyche_memories_fts WHERE psyche_memories_fts MATCH ?1 LIMIT ?2)",
    )?;
    for quoted in fts_terms(text) {
        let docs: i64 = stmt.query_row(params![quoted, COMMON_WORD_DOCS + 1], |r| r.get(0))?;
        if docs <= COMMON_WORD_DOCS {
            counted.push((docs, quoted));
        }
    }
    counted.sort();
    let terms: Vec<String> = counted
        .into_iter()
        .take(QUERY_TERMS)
        .map(|(_, t)| t)
        .collect();
    Ok((!terms.is_empty()).then(|| terms.join(" OR ")))
}

/// Candidates for retrieval: the best full-text matches, the newest, the most salient.
fn candidates(conn: &Connection, soul: &str, query: &str) -> Result<Vec<Memory>, StoreError> {
    let mut out: Vec<Memory> = Vec::new();
    if let Some(q) = fts_query(conn, query)? {
        out = memory_rows(
            conn,
            &format!(
                "SELECT {MEMORY_COLUMNS} FROM psyche_memories_fts f CROSS JOIN psyche_memories m ON m.id = f.rowid
                 WHERE psyche_memories_fts MATCH ?1 AND m.soul = ?2 ORDER BY f.rank LIMIT ?3"
            ),
            params![q, soul, CANDIDATES as i64],
        )?;
    }
    for order in ["at", "salience"] {
        let more = memory_rows(
            conn,
            &format!("SELECT {MEMORY_COLUMNS} FROM psyche_memories m WHERE m.soul = ?1 ORDER BY m.{order} DESC, m.id DESC LIMIT ?2"),
            params![soul, CANDIDATES as i64],
        )?;
        for m in more {
            if !out.iter().any(|x| x.id == m.id) {
                out.push(m);
            }
        }
    }
    Ok(out)
}

fn log_decision(
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

/// Writes what an event did (its memory, salience, facts, relationship, state).
fn write_effects(
    conn: &Connection,
    soul: &str,
    fx: &Effects,
    substrate: &Substrate,
) -> Result<(), StoreError> {
    save_substrate(conn, soul, substrate)?;
    if let Some((person, r)) = &fx.relationship {
        save_relationship(conn, soul, person, r)?;
        for f in &fx.classification.facts {
            conn.prepare_cached(
                "INSERT OR REPLACE INTO psyche_facts (soul, person, kind, value, at) VALUES (?1, ?2, ?3, ?4, ?5)",
            )?
            .execute(params![soul, person, f.kind.name(), f.value, substrate.updated_at])?;
        }
    }
    // The memory most recently shared with the author grows more salient when they come
    // back: one row (each row more costs a page of the table and of the salience index in
    // every event's transaction; benches/psyche.rs).
    if let Some((person, boost)) = &fx.salience_boost {
        conn.prepare_cached(
            "UPDATE psyche_memories SET salience = min(1.0, salience + ?1)
             WHERE id IN (SELECT memory FROM psyche_memory_people WHERE person = ?2 ORDER BY memory DESC LIMIT 1)
               AND +soul = ?3",
        )?
        .execute(params![boost.get(), person, soul])?;
    }
    if let Some(m) = &fx.memory {
        conn.prepare_cached(
            "INSERT INTO psyche_memories (soul, text, importance, salience, at) VALUES (?1, ?2, ?3, ?4, ?5)",
        )?
        .execute(params![soul, m.text, m.importance.get(), m.salience.get(), m.at])?;
        let id = conn.last_insert_rowid();
        for p in &m.people {
            conn.prepare_cached(
                "INSERT OR IGNORE INTO psyche_memory_people (person, memory) VALUES (?1, ?2)",
            )?
            .execute(params![p, id])?;
        }
    }
    Ok(())
}

/// One event in an open write transaction: read, update, decide, write, log.
fn event_in(
    tx: &Connection,
    soul: &str,
    psyche: &Psyche,
    rules: &GateRules,
    event: &Event,
    place: &Place,
) -> Result<(Effects, Decision), StoreError> {
    let state = load_substrate(tx, soul, psyche, event.at)?;
    let rel = match &event.person {
        Some(p) => load_relationship(tx, soul, p)?,
        None => None,
    };
    let fx = apply(&state, rel.as_ref(), event, psyche);
    let d = gate::decide(
        fx.gate,
        Situation {
            kind: event.kind,
            trivial: fx.classification.trivial,
            choice: fx.choice,
            listened: place.listened,
            last_unasked_at: state.last_unasked_at,
            now: fx.substrate.updated_at,
        },
        rules,
    );
    let mut after = fx.substrate.clone();
    if d.verdict == gate::Verdict::Speak {
        after.last_unasked_at = Some(after.updated_at);
    }
    write_effects(tx, soul, &fx, &after)?;
    log_decision(tx, soul, event, place, &d)?;
    Ok((
        Effects {
            substrate: after,
            ..fx
        },
        d,
    ))
}

impl Store {
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
        self.write(|tx| event_in(tx, soul, psyche, rules, event, place))
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
            let new = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO psyche_seen (soul, key, at) VALUES (?1, ?2, ?3)",
                )?
                .execute(params![soul, key, event.at])?;
            if new == 0 {
                return Ok(None);
            }
            event_in(tx, soul, psyche, rules, event, place).map(Some)
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
        let substrate = load_substrate(&conn, soul, psyche, now)?;
        let mut rels = Vec::new();
        let mut facts = Vec::new();
        for (id, _) in people {
            rels.push(load_relationship(&conn, soul, id)?);
            facts.push(facts_of(&conn, soul, id)?);
        }
        let present: Vec<Present> = people
            .iter()
            .enumerate()
            .map(|(i, (id, name))| Present {
                id,
                name,
                relationship: rels[i].as_ref(),
                facts: &facts[i],
            })
            .collect();
        // What happened before now: the memory the current message just became is not recalled.
        let mut memories = candidates(&conn, soul, query)?;
        memories.retain(|m| m.at < now);
        let intentions = intentions(&conn, soul)?;
        Ok(Packet::build(&Input {
            substrate: &substrate,
            psyche,
            people: &present,
            query,
            memories: &memories,
            intentions: &intentions,
            now,
        }))
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
            let state = load_substrate(tx, soul, psyche, now)?;
            let mut rels = BTreeMap::new();
            for s in shifts {
                let who = s.target.trim();
                if let Some(r) = load_relationship(tx, soul, who)? {
                    rels.insert(who.to_string(), r);
                }
            }
            let before = intentions(tx, soul)?;
            let Applied {
                substrate,
                relationships,
                intentions,
                applied,
            } = mapping::apply(&state, &rels, &before, shifts, updates, psyche, now);
            save_substrate(tx, soul, &substrate)?;
            for (who, r) in &relationships {
                save_relationship(tx, soul, who, r)?;
            }
            tx.prepare_cached("DELETE FROM psyche_intentions WHERE soul = ?1")?
                .execute([soul])?;
            for i in &intentions {
                tx.prepare_cached(
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
            Ok(applied)
        })
    }

    /// The substrate in numbers, for the operator: everything, or one person's part.
    pub fn psyche_mind(
        &self,
        soul: &str,
        psyche: &Psyche,
        person: Option<&str>,
        now: i64,
    ) -> Result<Mind, StoreError> {
        let conn = self.conn();
        let substrate = load_substrate(&conn, soul, psyche, now)?;
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
            let f = facts_of(&conn, soul, who)?;
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
            &conn,
            &format!(
                "SELECT {MEMORY_COLUMNS} FROM psyche_memories m WHERE m.soul = ?1
                 AND (?2 IS NULL OR m.id IN (SELECT memory FROM psyche_memory_people WHERE person = ?2))
                 ORDER BY m.at DESC, m.id DESC LIMIT 10"
            ),
            params![soul, person],
        )?;
        let decisions = decisions(&conn, soul, person, 10)?;
        Ok(Mind {
            substrate,
            relationships,
            facts,
            intentions: intentions(&conn, soul)?,
            memories,
            recent_memories,
            decisions,
        })
    }

    /// The newest gate decisions, newest first.
    pub fn psyche_decisions(
        &self,
        soul: &str,
        limit: usize,
    ) -> Result<Vec<LoggedDecision>, StoreError> {
        decisions(&self.conn(), soul, None, limit)
    }
}

fn decisions(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::psyche::gate::{Silence, Verdict};
    use crate::psyche::EventKind;

    fn store() -> (tempfile::TempDir, Store) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("anima.db")).unwrap();
        (dir, store)
    }

    fn said(kind: EventKind, who: &str, text: &str, at: i64) -> Event {
        Event {
            kind,
            person: Some(who.into()),
            text: text.into(),
            at,
        }
    }

    #[test]
    fn an_event_is_one_transaction_that_writes_state_relationship_memory_facts_and_the_log() {
        let (_d, s) = store();
        let p = Psyche::shipped();
        let before = s.write_transactions();
        let (fx, d) = s
            .psyche_event(
                "Wren",
                &p,
                &GateRules::default(),
                &said(
                    EventKind::Addressed,
                    "U1",
                    "I'm a nurse in Lyon and I'm worried about the test",
                    1_000,
                ),
                &Place::default(),
            )
            .unwrap();
        assert_eq!(s.write_transactions(), before + 1, "one write transaction");
        assert_eq!(d.verdict, Verdict::Answer);
        assert!(fx.memory.is_some());
        let mind = s.psyche_mind("Wren", &p, None, 2_000).unwrap();
        assert_eq!(mind.substrate, fx.substrate);
        assert_eq!(mind.relationships["U1"].exchanges, 1);
        assert_eq!(mind.facts["U1"][0].value, "nurse in Lyon");
        assert_eq!(mind.memories, 1);
        assert_eq!(mind.recent_memories[0].people, vec!["U1".to_string()]);
        assert_eq!(mind.decisions[0].verdict, "answer");
        assert_eq!(mind.decisions[0].inputs, d.inputs, "logged with its inputs");
        // Another soul in the same home is another substrate.
        assert_eq!(s.psyche_mind("Kit", &p, None, 2_000).unwrap().memories, 0);
    }

    #[test]
    fn an_event_with_a_key_is_applied_once() {
        let (_d, s) = store();
        let p = Psyche::shipped();
        let e = said(
            EventKind::Addressed,
            "U1",
            "thanks, you are a great friend",
            1_000,
        );
        let once = |at: i64| {
            s.psyche_event_once(
                "Wren",
                &p,
                &GateRules::default(),
                &Event { at, ..e.clone() },
                &Place::default(),
                "inbox:7",
            )
            .unwrap()
        };
        assert!(once(1_000).is_some());
        assert!(once(5_000).is_none(), "a retry of the same message");
        let mind = s.psyche_mind("Wren", &p, None, 9_000).unwrap();
        assert_eq!(mind.relationships["U1"].exchanges, 1);
        assert_eq!(mind.decisions.len(), 1);
    }

    #[test]
    fn the_store_replays_like_the_pure_update_and_keeps_the_cooldown() {
        let (_d, s) = store();
        let p = Psyche::shipped();
        let rules = GateRules::default();
        let listened = Place {
            channel: Some("C1".into()),
            listened: true,
        };
        let lines = [
            "This refactor is stupid, you broke the compiler build AGAIN!",
            "Don't you DARE call my code stupid, your test suite is useless!",
            "I hate this design, it is a failure and you refuse to listen",
        ];
        let mut verdicts = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            let who = if i % 2 == 0 { "U1" } else { "U2" };
            let (_, d) = s
                .psyche_event(
                    "Wren",
                    &p,
                    &rules,
                    &said(EventKind::Overheard, who, l, (i as i64 + 1) * 20_000),
                    &listened,
                )
                .unwrap();
            verdicts.push(d.verdict);
        }
        assert_eq!(
            verdicts.iter().filter(|v| **v == Verdict::Speak).count(),
            1,
            "{verdicts:?}"
        );
        assert_eq!(
            verdicts.last(),
            Some(&Verdict::Silent(Silence::Cooldown)),
            "{verdicts:?}"
        );
        let (_, d) = s
            .psyche_event(
                "Wren",
                &p,
                &rules,
                &said(
                    EventKind::Overheard,
                    "U1",
                    "you refuse to listen to the compiler",
                    90_000,
                ),
                &Place::default(),
            )
            .unwrap();
        assert_eq!(d.verdict, Verdict::Silent(Silence::NotListened));
    }

    #[test]
    fn the_packet_recalls_the_matching_memory_and_says_no_number() {
        let (_d, s) = store();
        let p = Psyche::shipped();
        let rules = GateRules::default();
        for (i, text) in [
            "I'm worried the borrow checker hates my refactor",
            "Please help me, I feel lonely tonight",
            "Can you help me plan the garden party?",
        ]
        .iter()
        .enumerate()
        {
            s.psyche_event(
                "Wren",
                &p,
                &rules,
                &said(EventKind::Addressed, "U1", text, i as i64 * 1000),
                &Place::default(),
            )
            .unwrap();
        }
        let packet = s
            .psyche_packet(
                "Wren",
                &p,
                &[("U1".into(), "Zoé".into())],
                "the borrow checker again",
                10_000,
            )
            .unwrap();
        let text = packet.render(&|q| format!("«{q}»"));
        let first = text
            .lines()
            .find(|l| l.starts_with("You remember"))
            .unwrap();
        assert!(first.contains("borrow checker"), "{text}");
        assert!(text.contains("«Zoé»"), "{text}");
        assert!(!text.chars().any(|c| c.is_ascii_digit()), "{text}");
    }

    #[test]
    fn post_cognition_goes_through_the_table_and_persists() {
        let (_d, s) = store();
        let p = Psyche::shipped();
        s.psyche_event(
            "Wren",
            &p,
            &GateRules::default(),
            &said(EventKind::Addressed, "U1", "hello", 0),
            &Place::default(),
        )
        .unwrap();
        let before = s
            .psyche_mind("Wren", &p, Some("U1"), 0)
            .unwrap()
            .relationships["U1"]
            .clone();
        let applied = s
            .psyche_post_cognition(
                "Wren",
                &p,
                &[StanceShift {
                    target: "U1".into(),
                    description: "benefit of the doubt".into(),
                }],
                &[IntentionUpdate {
                    operation: "create".into(),
                    kind: "be_gentle".into(),
                    target: Some("U1".into()),
                    horizon: "short".into(),
                    description: "priority 1.0".into(),
                }],
                10,
            )
            .unwrap();
        assert_eq!(applied.len(), 2, "{applied:?}");
        let mind = s.psyche_mind("Wren", &p, Some("U1"), 10).unwrap();
        let after = &mind.relationships["U1"];
        assert!((after.trust.get() - before.trust.get() - 0.05).abs() < 1e-9);
        assert_eq!(mind.intentions.len(), 1);
        assert_eq!(
            mind.intentions[0].priority,
            p.intentions["be_gentle"].priority
        );
    }

    #[test]
    fn a_full_text_query_is_only_words_and_leaves_out_common_ones() {
        let (_d, s) = store();
        let conn = s.conn();
        assert_eq!(
            fts_query(&conn, "a \"b\" OR c*").unwrap(),
            Some("\"a\" OR \"b\" OR \"c\" OR \"or\"".into())
        );
        assert_eq!(fts_query(&conn, "🦀 !!").unwrap(), None);
        for i in 0..=COMMON_WORD_DOCS {
            conn.execute(
                "INSERT INTO psyche_memories (soul, text, importance, salience, at) VALUES ('W', ?1, 0.5, 0.5, 0)",
                [format!("the day {i}")],
            )
            .unwrap();
        }
        assert_eq!(
            fts_query(&conn, "the garden").unwrap(),
            Some("\"garden\"".into()),
            "`the` is in every memory"
        );
    }
}
