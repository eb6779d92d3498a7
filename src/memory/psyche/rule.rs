//! The psyche's store rules, written once for every backend: what one event writes (read →
//! apply → gate → write), what post-cognition writes, and a turn's packet from what was read.
//!
//! No I/O here. Each backend reads what a rule needs in its own transaction (SQLite under its
//! write lock, PostgreSQL under the soul row's `FOR UPDATE`), calls the rule, and carries out
//! what it decided through a small trait of writes (`EventWrites`, `CognitionWrites`), in the
//! order the rule calls them; SQLite runs each write as it comes, PostgreSQL gathers them into
//! the statements it sends with the COMMIT. The numbers are `psyche`'s pure functions'; how a
//! backend stores a row (SQLite's inline lines and waiting boosts, PostgreSQL's pipelines) is
//! the backend's own.

use std::collections::BTreeMap;

use crate::memory::StoreError;
use crate::psyche::classify::Fact;
use crate::psyche::gate::{self, Decision, GateRules, Situation};
use crate::psyche::mapping::{self, Applied, IntentionUpdate, StanceShift};
use crate::psyche::packet::{Input, Packet, Present};
use crate::psyche::update::{apply, Effects, NewMemory};
use crate::psyche::{Event, Intention, Memory, Psyche, Relationship, Substrate, Unit};

use super::{LoggedDecision, Place};

type Result<T> = std::result::Result<T, StoreError>;

/// The rows one event writes, in the order `event` calls them. A backend either writes each
/// at once or gathers them for the event's last round trip; every call comes before the
/// transaction commits.
pub(crate) trait EventWrites {
    /// The author is back after a quiet spell: the memory last shared with them grows `boost`
    /// more salient (up to 1). Called before the event's own memory is made.
    fn boost(&mut self, person: &str, boost: Unit) -> Result<()>;
    /// A new episodic memory with the people in it; `shared_with` is the author when they
    /// are among them (it becomes the memory last shared with them).
    fn memory(&mut self, memory: &NewMemory, shared_with: Option<&str>) -> Result<()>;
    /// The author's relationship row, whole.
    fn relationship(&mut self, person: &str, relationship: &Relationship) -> Result<()>;
    /// The facts the author stated (never empty), at `at`; the latest of each kind wins.
    fn facts(&mut self, person: &str, facts: &[Fact], at: i64) -> Result<()>;
    /// The gate's decision with its inputs.
    fn log(&mut self, logged: LoggedDecision) -> Result<()>;
    /// The soul's state as the event leaves it (the cooldown started on a `Speak`).
    fn state(&mut self, substrate: &Substrate) -> Result<()>;
}

/// One event, from what its transaction read under the soul's lock (`substrate`, and the
/// author's `relationship` if they have one): the update, the gate's decision, and the writes
/// through `w`. A `Speak` starts the cooldown. The effects (with the state as written) and
/// the decision.
pub(crate) fn event(
    substrate: &Substrate,
    relationship: Option<&Relationship>,
    event: &Event,
    place: &Place,
    psyche: &Psyche,
    rules: &GateRules,
    w: &mut impl EventWrites,
) -> Result<(Effects, Decision)> {
    let mut fx = apply(substrate, relationship, event, psyche);
    let d = gate::decide(
        fx.gate,
        Situation {
            kind: event.kind,
            trivial: fx.classification.trivial,
            choice: fx.choice,
            listened: place.listened,
            last_unasked_at: substrate.last_unasked_at,
            now: fx.substrate.updated_at,
        },
        rules,
    );
    if d.verdict == gate::Verdict::Speak {
        fx.substrate.last_unasked_at = Some(fx.substrate.updated_at);
    }
    write_effects(&fx, w)?;
    w.log(LoggedDecision::new(event, place, &d))?;
    w.state(&fx.substrate)?;
    Ok((fx, d))
}

/// What an event did besides the soul's row: its memory, and with an author, the boost they
/// earned (before the memory: it goes to the one they left behind), their relationship and
/// the facts they stated.
fn write_effects(fx: &Effects, w: &mut impl EventWrites) -> Result<()> {
    let Some((person, r)) = &fx.relationship else {
        if let Some(m) = &fx.memory {
            w.memory(m, None)?;
        }
        return Ok(());
    };
    if let Some((_, boost)) = fx.salience_boost.as_ref().filter(|(who, _)| who == person) {
        w.boost(person, *boost)?;
    }
    if let Some(m) = &fx.memory {
        let shared = m.people.contains(person).then_some(person.as_str());
        w.memory(m, shared)?;
    }
    w.relationship(person, r)?;
    let facts = &fx.classification.facts;
    if !facts.is_empty() {
        w.facts(person, facts, fx.substrate.updated_at)?;
    }
    Ok(())
}

/// The rows post-cognition writes, in the order `post_cognition` calls them.
pub(crate) trait CognitionWrites {
    /// The soul's state (its row's other columns as they are).
    fn state(&mut self, substrate: &Substrate) -> Result<()>;
    /// A relationship the model's stance shifted, whole.
    fn relationship(&mut self, person: &str, relationship: &Relationship) -> Result<()>;
    /// The soul's intentions, all of them, replacing the stored ones.
    fn intentions(&mut self, all: Vec<Intention>) -> Result<()>;
}

/// The people whose relationships post-cognition reads: each shift's target, trimmed.
pub(crate) fn shifted(shifts: &[StanceShift]) -> Vec<&str> {
    shifts.iter().map(|s| s.target.trim()).collect()
}

/// What post-cognition read under the soul's lock.
pub(crate) struct CognitionRead {
    pub(crate) substrate: Substrate,
    /// The relationships with the people `shifted` names, by person (those the soul has).
    pub(crate) relationships: BTreeMap<String, Relationship>,
    /// The soul's intentions before the model's updates.
    pub(crate) intentions: Vec<Intention>,
}

/// The model's stance shifts and intention updates, applied through `psyche::mapping` to what
/// was read, and written through `w`. What was applied, in words.
pub(crate) fn post_cognition(
    read: &CognitionRead,
    shifts: &[StanceShift],
    updates: &[IntentionUpdate],
    psyche: &Psyche,
    now: i64,
    w: &mut impl CognitionWrites,
) -> Result<Vec<String>> {
    let Applied {
        substrate,
        relationships,
        intentions,
        applied,
    } = mapping::apply(
        &read.substrate,
        &read.relationships,
        &read.intentions,
        shifts,
        updates,
        psyche,
        now,
    );
    w.state(&substrate)?;
    for (who, r) in &relationships {
        w.relationship(who, r)?;
    }
    w.intentions(intentions)?;
    Ok(applied)
}

/// What a turn's packet is made from, as read (in one snapshot where the backend has one).
pub(crate) struct PacketRead {
    pub(crate) substrate: Substrate,
    /// The relationships with the people present, by person (those the soul has).
    pub(crate) relationships: BTreeMap<String, Relationship>,
    /// The facts the people present stated, by person, each person's ordered by kind.
    pub(crate) facts: BTreeMap<String, Vec<Fact>>,
    /// Retrieval's candidates (`memories::candidates`).
    pub(crate) memories: Vec<Memory>,
    pub(crate) intentions: Vec<Intention>,
}

/// The context packet for a turn: the state in words, the people present (id, name), the
/// top-K memories for `query` among those made before `now` (the memory the current message
/// just became is not recalled).
pub(crate) fn packet(
    mut read: PacketRead,
    psyche: &Psyche,
    people: &[(String, String)],
    query: &str,
    now: i64,
) -> Packet {
    read.memories.retain(|m| m.at < now);
    let present: Vec<Present> = people
        .iter()
        .map(|(id, name)| Present {
            id,
            name,
            relationship: read.relationships.get(id),
            facts: read.facts.get(id).map_or(&[][..], Vec::as_slice),
        })
        .collect();
    Packet::build(&Input {
        substrate: &read.substrate,
        psyche,
        people: &present,
        query,
        memories: &read.memories,
        intentions: &read.intentions,
        now,
    })
}

#[cfg(test)]
#[path = "rule_tests.rs"]
mod tests;
