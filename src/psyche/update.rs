//! The pre-cognition update (sections 3.1–3.2): one event moves the substrate, by rules and
//! the file's constants only. Deterministic: the same state, event and file give the same
//! numbers, always (no clock, no randomness, no hash-order iteration).
//!
//! The order: time passes first (drives drift to their baselines, mood settles, arcs fade,
//! energy recovers, a quiet relationship eases toward neutral), then the event acts (drive
//! effects from its dimensions, mood from the drives' net satisfaction and the event's
//! intensity, arcs it matches, the author's relationship scaled by its volatility, energy
//! spent on its demand), then memory (importance; an episodic memory above the threshold; the
//! memory last shared with the author grows more salient when they come back after a quiet
//! spell; the facts it states).

use serde::{Deserialize, Serialize};

use super::classify::{classify, Classification, Dims};
use super::def::{Drive, Psyche};
use super::gate::GateInputs;
use super::hours_between;
use super::state::{Event, EventKind, Relationship, Substrate};
use super::text::clip;
use super::value::Unit;

/// The longest memory text kept, in characters.
pub const MEMORY_CHARS: usize = 400;

/// An episodic memory to store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewMemory {
    pub text: String,
    pub importance: Unit,
    pub salience: Unit,
    pub at: i64,
    pub people: Vec<String>,
}

/// What one event does: the new values, and what the store must write.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Effects {
    pub substrate: Substrate,
    /// The author and their relationship after the event.
    pub relationship: Option<(String, Relationship)>,
    pub classification: Classification,
    pub importance: Unit,
    pub memory: Option<NewMemory>,
    /// The author, back after a quiet spell: the memory last shared with them grows this much
    /// more salient (the store decides when that is written).
    pub salience_boost: Option<(String, Unit)>,
    /// The numbers the gate weighs.
    pub gate: GateInputs,
    /// Whether the event leaves a real behavioural choice (to answer, to join in, to welcome).
    pub choice: bool,
}

/// The fraction of a gap closed after `hours` at `rate` per hour (compounding).
fn settled(rate: Unit, hours: f64) -> f64 {
    1.0 - (1.0 - rate.get()).powf(hours)
}

/// How much more pressing each drive becomes from an event with these dimensions (negative:
/// the event satisfies it), before the drive's sensitivity scales it. Every event with a person
/// in it is some contact, which eases relatedness a little.
pub fn drive_effects(d: &Dims, c: &Classification, social: bool) -> [f64; 5] {
    let (s, f, a, co, b) = (
        d.support.get(),
        d.safety.get(),
        d.affection.get(),
        d.cooperation.get(),
        d.boundary.get(),
    );
    let mut e = [0.0; 5];
    e[Drive::Relatedness.index()] = -(0.6 * a + 0.4 * s) - if social { 0.1 } else { 0.0 };
    e[Drive::Autonomy.index()] = -(0.8 * b + 0.2 * co);
    e[Drive::Competence.index()] = -(0.6 * s + 0.4 * co);
    e[Drive::Novelty.index()] = if !c.arcs.is_empty() || c.question {
        -0.5
    } else if c.trivial {
        0.1
    } else {
        -0.1
    };
    e[Drive::Safety.index()] = -(0.7 * f + 0.3 * b);
    e.map(|x: f64| x.clamp(-1.0, 1.0))
}

/// Time passing: the part of an update that needs no event.
pub fn settle(state: &Substrate, psyche: &Psyche, now: i64) -> Substrate {
    let mut s = state.clone();
    let dt = hours_between(state.updated_at, now);
    if dt <= 0.0 {
        return s;
    }
    for d in Drive::ALL {
        let baseline = state.baseline(psyche, d).get();
        s.drives[d.index()] =
            s.drives[d.index()].toward(baseline, settled(psyche.drive(d).drift, dt));
    }
    s.valence = s
        .valence
        .toward(0.0, settled(psyche.mood.valence_decay, dt));
    s.arousal = s.arousal.toward(
        psyche.mood.arousal_rest.get(),
        settled(psyche.mood.arousal_decay, dt),
    );
    s.energy = s.energy.toward(
        psyche.energy.baseline.get(),
        settled(psyche.energy.recovery, dt),
    );
    for arc in &psyche.arcs {
        let now_at = s.arc(&arc.topic).nudge(-arc.decay.get() * dt);
        s.arcs.insert(arc.topic.clone(), now_at);
    }
    // Arcs the file no longer lists are forgotten.
    s.arcs
        .retain(|topic, _| psyche.arcs.iter().any(|a| &a.topic == topic));
    s.updated_at = now;
    s
}

/// A relationship after a quiet spell: past `quiet_after_hours` without an exchange it eases
/// toward neutral, tension twice as fast.
pub fn quiet(rel: &Relationship, psyche: &Psyche, now: i64) -> Relationship {
    let mut r = rel.clone();
    let Some(seen) = rel.last_seen else {
        return r;
    };
    let idle = hours_between(seen, now) - psyche.relationship.quiet_after_hours;
    if idle > 0.0 {
        let rate = settled(psyche.relationship.quiet_drift, idle / 24.0);
        r.warmth = r.warmth.toward(0.0, rate);
        r.trust = r.trust.toward(0.0, rate);
        r.comfort = r.comfort.toward(0.0, rate);
        r.tension = r.tension.toward(0.0, (2.0 * rate).min(1.0));
    }
    r
}

/// Applies one event: the substrate and the author's relationship (`None`: someone new) after
/// it, and what the store must write.
pub fn apply(
    state: &Substrate,
    relationship: Option<&Relationship>,
    event: &Event,
    psyche: &Psyche,
) -> Effects {
    let now = event.at.max(state.updated_at);
    // Someone the soul knows, back after a quiet spell: what it last shared with them comes
    // back to mind. Not with every message of a conversation, which would pin that memory at
    // the top within a few lines.
    let returning = relationship
        .and_then(|r| r.last_seen)
        .is_some_and(|seen| hours_between(seen, now) >= psyche.memory.return_after_hours);
    let c = classify_event(event, psyche);
    let s = feel(settle(state, psyche, now), &c, event, psyche);
    let relationship = event.person.as_ref().map(|person| {
        let before =
            relationship.map_or_else(|| Relationship::new(psyche), |r| quiet(r, psyche, now));
        (person.clone(), relate(before, &c.dims, psyche, now))
    });
    let importance = importance(&c, event.kind);
    let memory = episodic(event, importance, psyche, now);
    let salience_boost = event
        .person
        .as_ref()
        .filter(|_| returning && psyche.memory.salience_boost.get() > 0.0)
        .map(|p| (p.clone(), psyche.memory.salience_boost));
    let stakes = relationship.as_ref().map_or(0.0, |(_, r)| r.stakes());
    let gate = gate_inputs(&s, &c, event, psyche, stakes);
    let choice = choice(event, &c, &gate);
    Effects {
        substrate: s,
        relationship,
        classification: c,
        importance,
        memory,
        salience_boost,
        gate,
        choice,
    }
}

/// The event's reading, adjusted by its kind: a tick reads no text and, like a joining, is
/// never trivial; a reaction demands nothing.
fn classify_event(event: &Event, psyche: &Psyche) -> Classification {
    let mut c = match event.kind {
        EventKind::Tick => classify("", psyche),
        _ => classify(&event.text, psyche),
    };
    match event.kind {
        EventKind::Tick => c.trivial = false,
        EventKind::Joined => c.trivial = false,
        EventKind::Reaction => c.demand = Unit::ZERO,
        EventKind::Addressed | EventKind::Overheard => {}
    }
    c
}

/// What the event does to the soul itself: drives and the mood their net satisfaction makes,
/// the arcs it touches, the energy it costs.
fn feel(mut s: Substrate, c: &Classification, event: &Event, psyche: &Psyche) -> Substrate {
    let mut moved = 0.0;
    if event.kind != EventKind::Tick {
        let effects = drive_effects(&c.dims, c, event.person.is_some());
        for d in Drive::ALL {
            let before = s.drives[d.index()];
            s.drives[d.index()] =
                before.nudge(effects[d.index()] * psyche.drive(d).sensitivity.get());
            moved += s.drives[d.index()].get() - before.get();
        }
    }
    s.valence = s.valence.nudge(-moved * psyche.mood.valence_gain.get());
    let intensity = c.dims.intensity().max(c.demand.get());
    s.arousal = s
        .arousal
        .toward(1.0, psyche.mood.arousal_gain.get() * intensity);
    for &i in &c.arcs {
        let arc = &psyche.arcs[i];
        let now_at = s.arc(&arc.topic).toward(1.0, arc.reinforce.get());
        s.arcs.insert(arc.topic.clone(), now_at);
    }
    s.energy = s.energy.nudge(-psyche.energy.cost.get() * c.demand.get());
    s
}

/// The author's relationship after an exchange with these dimensions, scaled by its
/// volatility.
fn relate(mut r: Relationship, d: &Dims, psyche: &Psyche, now: i64) -> Relationship {
    let step = psyche.relationship.rate.get() * r.volatility.get();
    let (sp, f, a, co, b) = (
        d.support.get(),
        d.safety.get(),
        d.affection.get(),
        d.cooperation.get(),
        d.boundary.get(),
    );
    r.warmth = r.warmth.nudge(step * (0.7 * a + 0.3 * sp));
    r.trust = r.trust.nudge(step * (0.6 * co + 0.4 * b));
    r.tension = r.tension.nudge(-step * (0.5 * f + 0.5 * b));
    r.comfort = r.comfort.nudge(step * (0.5 * a + 0.5 * f));
    r.exchanges = r.exchanges.saturating_add(1);
    r.last_seen = Some(now);
    r
}

/// How much the event matters to remember.
fn importance(c: &Classification, kind: EventKind) -> Unit {
    Unit::new(
        0.5 * c.dims.intensity()
            + 0.25 * c.demand.get()
            + if c.arcs.is_empty() { 0.0 } else { 0.3 }
            + if c.facts.is_empty() { 0.0 } else { 0.3 }
            + if kind == EventKind::Addressed {
                0.2
            } else {
                0.0
            },
    )
}

/// The episodic memory a person's words leave when they matter enough.
fn episodic(event: &Event, importance: Unit, psyche: &Psyche, now: i64) -> Option<NewMemory> {
    match &event.person {
        Some(person)
            if importance >= psyche.memory.episodic_threshold
                && !event.text.trim().is_empty()
                && matches!(event.kind, EventKind::Addressed | EventKind::Overheard) =>
        {
            Some(NewMemory {
                text: clip(event.text.trim(), MEMORY_CHARS),
                importance,
                salience: importance,
                at: now,
                people: vec![person.clone()],
            })
        }
        _ => None,
    }
}

/// The numbers the gate weighs, from the substrate after the event.
fn gate_inputs(
    s: &Substrate,
    c: &Classification,
    event: &Event,
    psyche: &Psyche,
    stakes: f64,
) -> GateInputs {
    let heat = |arcs: &[usize]| {
        arcs.iter()
            .map(|&i| s.arc(&psyche.arcs[i].topic).get())
            .fold(0.0, f64::max)
    };
    let salience = match event.kind {
        EventKind::Addressed => 1.0,
        // What the soul would come back to is as salient as the arcs it touches are hot; it
        // was felt when it was heard, so it moves nothing now.
        EventKind::Tick => heat(&classify(&event.text, psyche).arcs),
        _ => c
            .dims
            .intensity()
            .max(heat(&c.arcs))
            .max(0.8 * stakes)
            .max(if c.question { 0.5 } else { 0.0 }),
    };
    GateInputs {
        salience_max: Unit::new(salience),
        drive_pressure_max: Unit::new(s.drives.iter().map(|d| d.get()).fold(0.0, f64::max)),
        arc_hot: Unit::new(s.arcs.values().map(|a| a.get()).fold(0.0, f64::max)),
        rel_stakes: Unit::new(stakes),
        energy: s.energy,
    }
}

/// Whether the event leaves a real behavioural choice.
fn choice(event: &Event, c: &Classification, gate: &GateInputs) -> bool {
    match event.kind {
        EventKind::Addressed | EventKind::Joined => true,
        EventKind::Overheard => {
            !c.trivial && (c.question || !c.arcs.is_empty() || c.dims.intensity() >= 0.3)
        }
        EventKind::Reaction => false,
        // Whether to come back to a conversation, when there is one and something presses.
        EventKind::Tick => {
            !event.text.trim().is_empty()
                && (gate.arc_hot.get() >= 0.6 || gate.drive_pressure_max.get() >= 0.7)
        }
    }
}
