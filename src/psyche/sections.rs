//! Each section of `soul/psyche.toml`, from its raw serde shape to its checked definition:
//! one function per section, each noting its problems on the `Checker` (file, line, key) and
//! returning the values in range. Owns no file format (`raw`) and no assembly (`def::parse`);
//! pure.

use std::collections::BTreeMap;

use toml::Spanned;

use super::def::{
    ArcDef, DriftDef, Drive, DriveDef, EnergyDef, IntentionDef, IntentionRules, MemoryDef, MoodDef,
    RelationshipDef, StanceDef, RETURN_AFTER_HOURS,
};
use super::raw::{
    Checker, RawArc, RawDrift, RawDrive, RawEnergy, RawIntention, RawIntentionRules, RawMemory,
    RawMood, RawRelationship, RawStance,
};
use super::value::Unit;

/// A key's name: lower-case words joined by `_` (the vocabulary the model is shown).
fn is_key_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_')
}

/// The problem for a drive name that is not one of the five.
fn unknown_drive(name: &str) -> String {
    format!(
        "unknown drive \"{name}\"; the drives are exactly {}",
        Drive::ALL.map(|d| format!("\"{}\"", d.name())).join(", ")
    )
}

/// `[drives.*]`: each of the five, by index; an unknown one and a missing one are problems.
pub(super) fn drives(
    c: &mut Checker,
    raw: &Spanned<BTreeMap<Spanned<String>, RawDrive>>,
) -> [Option<DriveDef>; 5] {
    let mut drives: [Option<DriveDef>; 5] = [None; 5];
    for (name, d) in raw.get_ref() {
        let Some(drive) = Drive::from_name(name.get_ref()) else {
            c.problem(name.span().start, "drives", unknown_drive(name.get_ref()));
            continue;
        };
        let key = |k: &str| format!("drives.{}.{k}", drive.name());
        drives[drive.index()] = Some(DriveDef {
            sensitivity: c.unit(&d.sensitivity, &key("sensitivity")),
            baseline: c.unit(&d.baseline, &key("baseline")),
            drift: c.unit(&d.drift, &key("drift")),
        });
    }
    for d in Drive::ALL {
        if drives[d.index()].is_none() {
            c.problem(
                raw.span().start,
                "drives",
                format!("the drive \"{}\" is missing: add [drives.{}] with sensitivity, baseline and drift", d.name(), d.name()),
            );
        }
    }
    drives
}

pub(super) fn mood(c: &mut Checker, m: &RawMood) -> MoodDef {
    MoodDef {
        valence_gain: c.unit(&m.valence_gain, "mood.valence_gain"),
        valence_decay: c.unit(&m.valence_decay, "mood.valence_decay"),
        arousal_gain: c.unit(&m.arousal_gain, "mood.arousal_gain"),
        arousal_rest: c.unit(&m.arousal_rest, "mood.arousal_rest"),
        arousal_decay: c.unit(&m.arousal_decay, "mood.arousal_decay"),
    }
}

pub(super) fn relationship(c: &mut Checker, r: &RawRelationship) -> RelationshipDef {
    RelationshipDef {
        volatility: c.unit(&r.volatility, "relationship.volatility"),
        rate: c.unit(&r.rate, "relationship.rate"),
        quiet_after_hours: c.hours(&r.quiet_after_hours, "relationship.quiet_after_hours"),
        quiet_drift: c.unit(&r.quiet_drift, "relationship.quiet_drift"),
    }
}

pub(super) fn energy(c: &mut Checker, e: &RawEnergy) -> EnergyDef {
    EnergyDef {
        baseline: c.unit(&e.baseline, "energy.baseline"),
        cost: c.unit(&e.cost, "energy.cost"),
        recovery: c.unit(&e.recovery, "energy.recovery"),
    }
}

pub(super) fn memory(c: &mut Checker, mm: &RawMemory) -> MemoryDef {
    MemoryDef {
        episodic_threshold: c.unit(&mm.episodic_threshold, "memory.episodic_threshold"),
        salience_boost: c.unit(&mm.salience_boost, "memory.salience_boost"),
        return_after_hours: mm
            .return_after_hours
            .as_ref()
            .map_or(RETURN_AFTER_HOURS, |n| {
                c.hours(n, "memory.return_after_hours")
            }),
        recency_half_life_hours: c.range(
            &mm.recency_half_life_hours,
            "memory.recency_half_life_hours",
            0.1,
            87_600.0,
        ),
        top_k: c.whole(&mm.top_k, "memory.top_k", 0.0, 50.0) as usize,
    }
}

pub(super) fn drift(c: &mut Checker, d: &RawDrift) -> DriftDef {
    DriftDef {
        pattern_repeats: c.whole(&d.pattern_repeats, "drift.pattern_repeats", 3.0, 1000.0) as u32,
        pattern_step: Unit::new(c.range(&d.pattern_step, "drift.pattern_step", 0.0, 0.05)),
    }
}

/// One `[[arcs]]`: a topic and at least one keyword of at least one word.
pub(super) fn arc(c: &mut Checker, a: &RawArc) -> ArcDef {
    let topic = a.topic.get_ref().trim().to_string();
    if topic.is_empty() {
        c.problem(
            a.topic.span().start,
            "arcs.topic",
            "an arc needs a topic: a few words naming the theme".into(),
        );
    }
    let mut keywords = Vec::new();
    for k in &a.keywords {
        let words = super::text::words(k.get_ref());
        if words.is_empty() {
            c.problem(
                k.span().start,
                "arcs.keywords",
                "a keyword needs at least one word".into(),
            );
        } else {
            keywords.push(words.join(" "));
        }
    }
    if a.keywords.is_empty() {
        c.problem(
            a.topic.span().start,
            "arcs.keywords",
            format!("the arc \"{topic}\" needs at least one keyword"),
        );
    }
    ArcDef {
        topic,
        keywords,
        intensity: c.unit(&a.intensity, "arcs.intensity"),
        decay: c.unit(&a.decay, "arcs.decay"),
        reinforce: a
            .reinforce
            .as_ref()
            .map_or(Unit::new(0.25), |n| c.unit(n, "arcs.reinforce")),
    }
}

/// One `[stances.<name>]`: small steps, and a known drive for any drive effect.
pub(super) fn stance(c: &mut Checker, name: &Spanned<String>, s: &RawStance) -> StanceDef {
    let key = |k: &str| format!("stances.{}.{k}", name.get_ref());
    if !is_key_name(name.get_ref()) {
        c.problem(
            name.span().start,
            "stances",
            format!(
                "the stance \"{}\" needs a name of lower-case letters and `_`",
                name.get_ref()
            ),
        );
    }
    let drive = s.drive.as_ref().and_then(|d| {
        let drive = Drive::from_name(d.get_ref());
        if drive.is_none() {
            c.problem(d.span().start, &key("drive"), unknown_drive(d.get_ref()));
        }
        drive
    });
    if s.drive_effect.is_some() && s.drive.is_none() {
        c.problem(
            name.span().start,
            &key("drive_effect"),
            "a `drive_effect` needs a `drive` to act on".into(),
        );
    }
    StanceDef {
        warmth: c.step(&s.warmth, &key("warmth")),
        trust: c.step(&s.trust, &key("trust")),
        tension: c.step(&s.tension, &key("tension")),
        comfort: c.step(&s.comfort, &key("comfort")),
        drive,
        drive_effect: c.step(&s.drive_effect, &key("drive_effect")),
    }
}

/// One `[intentions.<type>]`: a key name and a priority.
pub(super) fn intention(c: &mut Checker, name: &Spanned<String>, i: &RawIntention) -> IntentionDef {
    if !is_key_name(name.get_ref()) {
        c.problem(
            name.span().start,
            "intentions",
            format!(
                "the intention type \"{}\" needs a name of lower-case letters and `_`",
                name.get_ref()
            ),
        );
    }
    let priority = c.unit(
        &i.priority,
        &format!("intentions.{}.priority", name.get_ref()),
    );
    IntentionDef { priority }
}

pub(super) fn intention_rules(c: &mut Checker, ir: &RawIntentionRules) -> IntentionRules {
    IntentionRules {
        boost: c.unit(&ir.boost, "intention_rules.boost"),
        lower: c.unit(&ir.lower, "intention_rules.lower"),
        short_hours: c.hours(&ir.short_hours, "intention_rules.short_hours"),
        medium_hours: c.hours(&ir.medium_hours, "intention_rules.medium_hours"),
        long_hours: c.hours(&ir.long_hours, "intention_rules.long_hours"),
    }
}
