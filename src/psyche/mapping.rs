//! Post-cognition (sections 5–6): the model's stance shifts and intention updates become
//! numeric changes only through the table in psyche.toml (`[stances]`, `[intentions]`,
//! `[intention_rules]`). The model's text carries no numbers into the state: a stance or an
//! intention type outside the vocabulary is ignored, and free text (descriptions) is never read
//! for amounts.
//!
//! One answer moves any value by at most one table row (each step ≤ 0.2). The soul's stable
//! personality (its drive baselines) moves only by the drift rule: a stance with a `drive`,
//! taken `pattern_repeats` times, shifts that drive's baseline by `pattern_step` in the
//! direction of its `drive_effect`, and its count starts again; the shift never exceeds
//! `MAX_BASELINE_SHIFT` in total.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::def::Psyche;
use super::state::{Horizon, Intention, Relationship, Substrate};
use super::text::clip;
use super::value::{Signed, Unit};

/// How far long-term drift may ever move a drive's baseline from the file's.
pub const MAX_BASELINE_SHIFT: f64 = 0.2;

/// "How I now stand toward someone", as the model wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StanceShift {
    /// A person's id.
    pub target: String,
    /// A stance from the vocabulary (a key of `[stances]`).
    pub description: String,
}

/// An intention update, as the model wrote it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IntentionUpdate {
    /// create | boost | lower | drop
    pub operation: String,
    /// A key of `[intentions]`.
    pub kind: String,
    pub target: Option<String>,
    /// short | medium | long
    pub horizon: String,
    /// Free text: kept for logs, never read for numbers.
    pub description: String,
}

/// The state after post-cognition, and which rows were applied.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    pub substrate: Substrate,
    /// Every relationship passed in, with the changed ones changed (and new targets added).
    pub relationships: BTreeMap<String, Relationship>,
    pub intentions: Vec<Intention>,
    /// What was applied, e.g. `stance open_up → U1`, for the log.
    pub applied: Vec<String>,
}

/// The most intentions kept; the lowest priorities go first.
pub const MAX_INTENTIONS: usize = 32;

/// A vocabulary word as the model may write it: `Open up`, `open-up` → `open_up`.
pub fn vocabulary_key(s: &str) -> String {
    s.trim()
        .to_lowercase()
        .split(|c: char| c.is_whitespace() || c == '-' || c == '_')
        .filter(|w| !w.is_empty())
        .collect::<Vec<_>>()
        .join("_")
}

fn target(t: &Option<String>) -> Option<String> {
    t.as_ref()
        .map(|t| clip(t.trim(), 80))
        .filter(|t| !t.is_empty())
}

/// Applies stance shifts, then intention updates, through the table.
pub fn apply(
    substrate: &Substrate,
    relationships: &BTreeMap<String, Relationship>,
    intentions: &[Intention],
    shifts: &[StanceShift],
    updates: &[IntentionUpdate],
    psyche: &Psyche,
    now: i64,
) -> Applied {
    let mut s = substrate.clone();
    let mut rels = relationships.clone();
    let mut applied = stances(&mut s, &mut rels, shifts, psyche);
    let mut list: Vec<Intention> = intentions
        .iter()
        .filter(|i| i.expires_at > now)
        .cloned()
        .collect();
    for u in updates {
        if let Some(done) = intention(&mut list, u, psyche, now) {
            applied.push(done);
        }
    }
    list.sort_by(|a, b| {
        b.priority
            .get()
            .total_cmp(&a.priority.get())
            .then(a.created_at.cmp(&b.created_at))
            .then(a.kind.cmp(&b.kind))
    });
    list.truncate(MAX_INTENTIONS);
    Applied {
        substrate: s,
        relationships: rels,
        intentions: list,
        applied,
    }
}

/// The stance shifts the table knows, each moving the relationship with its target and, for
/// a stance that acts on a drive, the drive (and, repeated often enough, its baseline).
/// Returns what was applied.
fn stances(
    s: &mut Substrate,
    rels: &mut BTreeMap<String, Relationship>,
    shifts: &[StanceShift],
    psyche: &Psyche,
) -> Vec<String> {
    let mut applied = Vec::new();
    // A pattern counts once per answer: repeating a stance in one answer is not a habit, and
    // one answer never moves the personality.
    let mut counted = std::collections::BTreeSet::new();
    for shift in shifts {
        let key = vocabulary_key(&shift.description);
        let Some(row) = psyche.stances.get(&key) else {
            continue;
        };
        let who = shift.target.trim();
        if who.is_empty() {
            continue;
        }
        let r = rels
            .entry(who.to_string())
            .or_insert_with(|| Relationship::new(psyche));
        r.warmth = r.warmth.nudge(row.warmth.get());
        r.trust = r.trust.nudge(row.trust.get());
        r.tension = r.tension.nudge(row.tension.get());
        r.comfort = r.comfort.nudge(row.comfort.get());
        if let Some(d) = row.drive {
            s.drives[d.index()] = s.drives[d.index()].nudge(row.drive_effect.get());
            let count = s.patterns.entry(key.clone()).or_insert(0);
            if counted.insert(key.clone()) {
                *count += 1;
            }
            if *count >= psyche.drift.pattern_repeats {
                *count = 0;
                let step = psyche.drift.pattern_step.get() * row.drive_effect.get().signum();
                let shifted = (s.baseline_shift[d.index()].get() + step)
                    .clamp(-MAX_BASELINE_SHIFT, MAX_BASELINE_SHIFT);
                s.baseline_shift[d.index()] = Signed::new(shifted);
                applied.push(format!("drift {} baseline", d.name()));
            }
        }
        applied.push(format!("stance {key} → {who}"));
    }
    applied
}

/// One intention update the table knows (create, boost, lower, drop) on the live list; what
/// was applied, or `None` when it named nothing usable.
fn intention(
    list: &mut Vec<Intention>,
    u: &IntentionUpdate,
    psyche: &Psyche,
    now: i64,
) -> Option<String> {
    let rules = &psyche.intention_rules;
    let kind = vocabulary_key(&u.kind);
    let row = psyche.intentions.get(&kind)?;
    let t = target(&u.target);
    let at = list.iter().position(|i| i.kind == kind && i.target == t);
    match (vocabulary_key(&u.operation).as_str(), at) {
        ("create", at) => {
            let horizon = Horizon::from_name(&u.horizon)?;
            let expires_at = now.saturating_add((horizon.hours(psyche) * super::HOUR_MS) as i64);
            match at {
                Some(i) => {
                    let existing = &mut list[i];
                    existing.priority = Unit::new(existing.priority.get().max(row.priority.get()));
                    existing.horizon = horizon;
                    existing.expires_at = existing.expires_at.max(expires_at);
                }
                None => list.push(Intention {
                    kind: kind.clone(),
                    target: t,
                    horizon,
                    priority: row.priority,
                    created_at: now,
                    expires_at,
                }),
            }
        }
        ("boost", Some(i)) => list[i].priority = list[i].priority.nudge(rules.boost.get()),
        ("lower", Some(i)) => {
            list[i].priority = list[i].priority.nudge(-rules.lower.get());
            if list[i].priority.get() <= 0.0 {
                list.remove(i);
            }
        }
        ("drop", Some(i)) => {
            list.remove(i);
        }
        _ => return None,
    }
    Some(format!("intention {} {kind}", vocabulary_key(&u.operation)))
}
