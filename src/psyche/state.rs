//! The substrate's values: the soul's own state, a relationship per person, episodic memories
//! and intentions, and the events that move them. Every number is a `Unit` or a `Signed`, so a
//! value out of range cannot be built.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::def::{Drive, Psyche};
use super::value::{Signed, Unit};

/// The soul's own state (one per soul).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Substrate {
    /// Pressure of each drive, indexed by `Drive::index`.
    pub drives: [Unit; 5],
    /// How far each drive's baseline has drifted from the file's, by long-term rule only.
    pub baseline_shift: [Signed; 5],
    pub valence: Signed,
    pub arousal: Unit,
    /// Intensity of each arc, by topic.
    pub arcs: BTreeMap<String, Unit>,
    pub energy: Unit,
    /// When the last event was applied (ms); rates apply over the time since.
    pub updated_at: i64,
    /// When the soul last spoke unasked (ms), for the cooldown.
    pub last_unasked_at: Option<i64>,
    /// How often each stance has been taken since it last shifted a baseline.
    pub patterns: BTreeMap<String, u32>,
}

impl Substrate {
    /// A soul at rest: drives at their baselines, neutral mood, arcs at their starting intensity.
    pub fn new(psyche: &Psyche, now: i64) -> Substrate {
        Substrate {
            drives: Drive::ALL.map(|d| psyche.drive(d).baseline),
            baseline_shift: [Signed::ZERO; 5],
            valence: Signed::ZERO,
            arousal: psyche.mood.arousal_rest,
            arcs: psyche
                .arcs
                .iter()
                .map(|a| (a.topic.clone(), a.intensity))
                .collect(),
            energy: psyche.energy.baseline,
            updated_at: now,
            last_unasked_at: None,
            patterns: BTreeMap::new(),
        }
    }

    pub fn drive(&self, d: Drive) -> Unit {
        self.drives[d.index()]
    }

    /// A drive's baseline as the file gives it, moved by its long-term drift.
    pub fn baseline(&self, psyche: &Psyche, d: Drive) -> Unit {
        Unit::new(psyche.drive(d).baseline.get() + self.baseline_shift[d.index()].get())
    }

    /// An arc's intensity (0 for a topic the file no longer has).
    pub fn arc(&self, topic: &str) -> Unit {
        self.arcs.get(topic).copied().unwrap_or(Unit::ZERO)
    }
}

/// The soul's relationship with one person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Relationship {
    pub warmth: Signed,
    pub trust: Signed,
    pub tension: Unit,
    pub comfort: Unit,
    pub volatility: Unit,
    /// Events from this person so far.
    pub exchanges: u32,
    /// The last event from this person (ms); `None` for someone new.
    pub last_seen: Option<i64>,
}

impl Relationship {
    pub fn new(psyche: &Psyche) -> Relationship {
        Relationship {
            warmth: Signed::ZERO,
            trust: Signed::ZERO,
            tension: Unit::ZERO,
            comfort: Unit::ZERO,
            volatility: psyche.relationship.volatility,
            exchanges: 0,
            last_seen: None,
        }
    }

    /// What is at stake with this person: the largest of |warmth|, |trust| and tension.
    pub fn stakes(&self) -> f64 {
        self.warmth
            .get()
            .abs()
            .max(self.trust.get().abs())
            .max(self.tension.get())
    }
}

/// What reached the daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A message addressed to the soul (mention, DM, a thread it is in): owed a reply.
    Addressed,
    /// A message in a channel the soul listens to that does not address it.
    Overheard,
    /// A reaction to one of the soul's messages.
    Reaction,
    /// A person joined a channel the soul is in.
    Joined,
    /// The periodic tick: time passes, and the soul may come back to where it could speak
    /// unasked (the last message it overheard there, which is the tick's text).
    Tick,
}

impl EventKind {
    pub fn name(self) -> &'static str {
        match self {
            EventKind::Addressed => "addressed",
            EventKind::Overheard => "overheard",
            EventKind::Reaction => "reaction",
            EventKind::Joined => "joined",
            EventKind::Tick => "tick",
        }
    }
}

/// One world event, as the substrate sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub kind: EventKind,
    /// Who caused it (a Slack user id); `None` for a tick.
    pub person: Option<String>,
    /// What was said (a reaction's emoji name; for a tick, the last message overheard where
    /// the soul may speak, or empty: it moves nothing, and only its topics make the tick
    /// salient).
    pub text: String,
    /// When (ms).
    pub at: i64,
}

/// An episodic memory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub id: i64,
    /// What happened, in the person's words (untrusted text).
    pub text: String,
    pub importance: Unit,
    pub salience: Unit,
    pub at: i64,
    pub people: Vec<String>,
}

/// How long an intention lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Horizon {
    Short,
    Medium,
    Long,
}

impl Horizon {
    pub fn name(self) -> &'static str {
        match self {
            Horizon::Short => "short",
            Horizon::Medium => "medium",
            Horizon::Long => "long",
        }
    }

    pub fn from_name(name: &str) -> Option<Horizon> {
        match name.trim().to_lowercase().as_str() {
            "short" => Some(Horizon::Short),
            "medium" => Some(Horizon::Medium),
            "long" => Some(Horizon::Long),
            _ => None,
        }
    }

    pub fn hours(self, psyche: &Psyche) -> f64 {
        let r = &psyche.intention_rules;
        match self {
            Horizon::Short => r.short_hours,
            Horizon::Medium => r.medium_hours,
            Horizon::Long => r.long_hours,
        }
    }
}

/// Something the soul means to do: a controlled type, about someone or something.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Intention {
    /// A key of `[intentions]` in psyche.toml.
    pub kind: String,
    /// A person's id or a topic (untrusted text), or nothing.
    pub target: Option<String>,
    pub horizon: Horizon,
    pub priority: Unit,
    pub created_at: i64,
    pub expires_at: i64,
}
