//! `soul/psyche.toml`: the substrate's constants, read and checked.
//!
//! Owns the file format and every problem it can have, each located by file and line: syntax,
//! unknown keys, unknown or missing drives, missing fields, values out of range, stances naming
//! an unknown drive. The raw serde shape is turned into a `Psyche` whose values are in range by
//! construction. Pure: the caller reads the file (`soul::load_psyche`).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::raw::{Checker, Raw};
use super::value::{Signed, Unit};
use crate::toml_file::{Problem, TomlFile};

/// The file's name in the soul folder.
pub const FILE: &str = "psyche.toml";

/// The shipped `soul/psyche.toml`, compiled in: the built-in soul's substrate.
pub const SHIPPED_PSYCHE: &str = include_str!("../../soul/psyche.toml");

/// The five drives, and only these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Drive {
    Relatedness,
    Autonomy,
    Competence,
    Novelty,
    Safety,
}

impl Drive {
    pub const ALL: [Drive; 5] = [
        Drive::Relatedness,
        Drive::Autonomy,
        Drive::Competence,
        Drive::Novelty,
        Drive::Safety,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Drive::Relatedness => "relatedness",
            Drive::Autonomy => "autonomy",
            Drive::Competence => "competence",
            Drive::Novelty => "novelty",
            Drive::Safety => "safety",
        }
    }

    pub fn from_name(name: &str) -> Option<Drive> {
        Self::ALL.into_iter().find(|d| d.name() == name)
    }

    pub fn index(self) -> usize {
        self as usize
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct DriveDef {
    pub sensitivity: Unit,
    pub baseline: Unit,
    pub drift: Unit,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MoodDef {
    pub valence_gain: Unit,
    pub valence_decay: Unit,
    pub arousal_gain: Unit,
    pub arousal_rest: Unit,
    pub arousal_decay: Unit,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RelationshipDef {
    pub volatility: Unit,
    pub rate: Unit,
    pub quiet_after_hours: f64,
    pub quiet_drift: Unit,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EnergyDef {
    pub baseline: Unit,
    pub cost: Unit,
    pub recovery: Unit,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryDef {
    pub episodic_threshold: Unit,
    pub salience_boost: Unit,
    /// Hours without an exchange after which a person's next event is a return (their last
    /// memory grows more salient).
    pub return_after_hours: f64,
    pub recency_half_life_hours: f64,
    pub top_k: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DriftDef {
    pub pattern_repeats: u32,
    pub pattern_step: Unit,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ArcDef {
    pub topic: String,
    /// Lower-cased keywords; a keyword of several words matches as a phrase.
    pub keywords: Vec<String>,
    pub intensity: Unit,
    /// Intensity lost per hour.
    pub decay: Unit,
    /// How far a matching event pushes the intensity toward 1 (a fraction of the gap).
    pub reinforce: Unit,
}

/// One row of the stance table: the changes a stance makes, each at most `MAX_STEP`.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct StanceDef {
    pub warmth: Signed,
    pub trust: Signed,
    pub tension: Signed,
    pub comfort: Signed,
    pub drive: Option<Drive>,
    pub drive_effect: Signed,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct IntentionDef {
    pub priority: Unit,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntentionRules {
    pub boost: Unit,
    pub lower: Unit,
    pub short_hours: f64,
    pub medium_hours: f64,
    pub long_hours: f64,
}

/// A checked psyche file.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Psyche {
    /// Indexed by `Drive::index`.
    pub drives: [DriveDef; 5],
    pub mood: MoodDef,
    pub relationship: RelationshipDef,
    pub energy: EnergyDef,
    pub memory: MemoryDef,
    pub drift: DriftDef,
    pub arcs: Vec<ArcDef>,
    pub stances: BTreeMap<String, StanceDef>,
    pub intentions: BTreeMap<String, IntentionDef>,
    pub intention_rules: IntentionRules,
    /// Where it came from.
    pub file: String,
}

/// The largest change one stance may make to any value: one answer never remakes the soul.
pub const MAX_STEP: f64 = 0.2;

/// `[memory] return_after_hours` when a file predates it: a person's first message after an
/// hour without one is a return.
pub const RETURN_AFTER_HOURS: f64 = 1.0;

impl Psyche {
    /// The shipped file, from the binary.
    pub fn shipped() -> Psyche {
        parse(SHIPPED_PSYCHE, &Path::new("(built in)").join(FILE))
            .expect("the shipped psyche.toml is valid (tested)")
    }

    pub fn drive(&self, d: Drive) -> &DriveDef {
        &self.drives[d.index()]
    }
}

/// A key's name: lower-case words joined by `_` (the vocabulary the model is shown).
fn is_key_name(name: &str) -> bool {
    !name.is_empty() && name.chars().all(|c| c.is_ascii_lowercase() || c == '_')
}

/// Checks a psyche file's text; `path` names it in problems.
pub fn parse(text: &str, path: &Path) -> Result<Psyche, Vec<Problem>> {
    let file = path.display().to_string();
    let toml_file = TomlFile::new(&file, text);
    let raw: Raw = toml_file.read()?;
    let mut c = Checker {
        file: toml_file,
        problems: Vec::new(),
    };

    let mut drives: [Option<DriveDef>; 5] = [None; 5];
    let drives_at = raw.drives.span().start;
    for (name, d) in raw.drives.get_ref() {
        let Some(drive) = Drive::from_name(name.get_ref()) else {
            c.problem(
                name.span().start,
                "drives",
                format!(
                    "unknown drive \"{}\"; the drives are exactly {}",
                    name.get_ref(),
                    Drive::ALL.map(|d| format!("\"{}\"", d.name())).join(", ")
                ),
            );
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
                drives_at,
                "drives",
                format!("the drive \"{}\" is missing: add [drives.{}] with sensitivity, baseline and drift", d.name(), d.name()),
            );
        }
    }

    let m = &raw.mood;
    let mood = MoodDef {
        valence_gain: c.unit(&m.valence_gain, "mood.valence_gain"),
        valence_decay: c.unit(&m.valence_decay, "mood.valence_decay"),
        arousal_gain: c.unit(&m.arousal_gain, "mood.arousal_gain"),
        arousal_rest: c.unit(&m.arousal_rest, "mood.arousal_rest"),
        arousal_decay: c.unit(&m.arousal_decay, "mood.arousal_decay"),
    };
    let r = &raw.relationship;
    let relationship = RelationshipDef {
        volatility: c.unit(&r.volatility, "relationship.volatility"),
        rate: c.unit(&r.rate, "relationship.rate"),
        quiet_after_hours: c.hours(&r.quiet_after_hours, "relationship.quiet_after_hours"),
        quiet_drift: c.unit(&r.quiet_drift, "relationship.quiet_drift"),
    };
    let e = &raw.energy;
    let energy = EnergyDef {
        baseline: c.unit(&e.baseline, "energy.baseline"),
        cost: c.unit(&e.cost, "energy.cost"),
        recovery: c.unit(&e.recovery, "energy.recovery"),
    };
    let mm = &raw.memory;
    let memory = MemoryDef {
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
    };
    let drift = DriftDef {
        pattern_repeats: c.whole(
            &raw.drift.pattern_repeats,
            "drift.pattern_repeats",
            3.0,
            1000.0,
        ) as u32,
        pattern_step: Unit::new(c.range(&raw.drift.pattern_step, "drift.pattern_step", 0.0, 0.05)),
    };

    let mut arcs = Vec::new();
    for a in &raw.arcs {
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
        arcs.push(ArcDef {
            topic,
            keywords,
            intensity: c.unit(&a.intensity, "arcs.intensity"),
            decay: c.unit(&a.decay, "arcs.decay"),
            reinforce: a
                .reinforce
                .as_ref()
                .map_or(Unit::new(0.25), |n| c.unit(n, "arcs.reinforce")),
        });
    }

    let mut stances = BTreeMap::new();
    for (name, s) in &raw.stances {
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
        let drive = match &s.drive {
            None => None,
            Some(d) => match Drive::from_name(d.get_ref()) {
                Some(d) => Some(d),
                None => {
                    c.problem(
                        d.span().start,
                        &key("drive"),
                        format!(
                            "unknown drive \"{}\"; the drives are exactly {}",
                            d.get_ref(),
                            Drive::ALL.map(|d| format!("\"{}\"", d.name())).join(", ")
                        ),
                    );
                    None
                }
            },
        };
        if s.drive_effect.is_some() && s.drive.is_none() {
            c.problem(
                name.span().start,
                &key("drive_effect"),
                "a `drive_effect` needs a `drive` to act on".into(),
            );
        }
        stances.insert(
            name.get_ref().clone(),
            StanceDef {
                warmth: c.step(&s.warmth, &key("warmth")),
                trust: c.step(&s.trust, &key("trust")),
                tension: c.step(&s.tension, &key("tension")),
                comfort: c.step(&s.comfort, &key("comfort")),
                drive,
                drive_effect: c.step(&s.drive_effect, &key("drive_effect")),
            },
        );
    }

    let mut intentions = BTreeMap::new();
    for (name, i) in &raw.intentions {
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
        intentions.insert(name.get_ref().clone(), IntentionDef { priority });
    }
    let ir = &raw.intention_rules;
    let intention_rules = IntentionRules {
        boost: c.unit(&ir.boost, "intention_rules.boost"),
        lower: c.unit(&ir.lower, "intention_rules.lower"),
        short_hours: c.hours(&ir.short_hours, "intention_rules.short_hours"),
        medium_hours: c.hours(&ir.medium_hours, "intention_rules.medium_hours"),
        long_hours: c.hours(&ir.long_hours, "intention_rules.long_hours"),
    };

    if !c.problems.is_empty() {
        let mut problems = c.problems;
        problems.sort_by_key(|p| p.line);
        return Err(problems);
    }
    Ok(Psyche {
        drives: drives.map(|d| d.expect("every drive checked above")),
        mood,
        relationship,
        energy,
        memory,
        drift,
        arcs,
        stances,
        intentions,
        intention_rules,
        file,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors(text: &str) -> String {
        parse(text, Path::new("soul/psyche.toml"))
            .unwrap_err()
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn the_shipped_file_is_valid_and_has_the_five_drives() {
        let p = Psyche::shipped();
        assert_eq!(p.drives.len(), 5);
        assert!(!p.arcs.is_empty() && !p.stances.is_empty() && !p.intentions.is_empty());
        assert_eq!(p.memory.top_k, 4);
    }

    #[test]
    fn an_unknown_drive_is_named_with_its_line() {
        let text = SHIPPED_PSYCHE.replace("[drives.novelty]", "[drives.curiosity]");
        let line = text.lines().position(|l| l.contains("curiosity")).unwrap() + 1;
        let err = errors(&text);
        assert!(err.contains(&format!("soul/psyche.toml:{line}")), "{err}");
        assert!(err.contains("unknown drive \"curiosity\""), "{err}");
        assert!(err.contains("\"novelty\" is missing"), "{err}");
    }

    #[test]
    fn a_value_out_of_range_is_named_with_its_line_and_key() {
        let text = SHIPPED_PSYCHE.replacen("sensitivity = 0.3\n", "sensitivity = 1.5\n", 1);
        let line = text.lines().position(|l| l.contains("1.5")).unwrap() + 1;
        let err = errors(&text);
        assert!(
            err.contains(&format!(":{line}: key `drives.autonomy.sensitivity`")),
            "{err}"
        );
        assert!(err.contains("found 1.5"), "{err}");
    }

    #[test]
    fn a_missing_field_and_an_unknown_key_are_refused_with_a_line() {
        let text = SHIPPED_PSYCHE.replacen("drift = 0.05\n", "", 1);
        let err = errors(&text);
        assert!(err.contains("missing field `drift`"), "{err}");
        assert!(err.contains("soul/psyche.toml:"), "{err}");
        let text = SHIPPED_PSYCHE.replacen("[mood]\n", "[mood]\nvalance_gain = 0.1\n", 1);
        let err = errors(&text);
        assert!(err.contains("unknown field `valance_gain`"), "{err}");
        let line = text.lines().position(|l| l.contains("valance")).unwrap() + 1;
        assert!(err.contains(&format!(":{line}:")), "{err}");
    }

    #[test]
    fn a_file_from_before_return_after_hours_reads_with_its_default_and_a_bad_one_is_refused() {
        let older = SHIPPED_PSYCHE.replacen("return_after_hours = 1.0\n", "", 1);
        assert_ne!(older, SHIPPED_PSYCHE);
        let p = parse(&older, Path::new("p")).unwrap();
        assert_eq!(p.memory.return_after_hours, RETURN_AFTER_HOURS);
        let text = SHIPPED_PSYCHE.replacen("return_after_hours = 1.0", "return_after_hours = 6", 1);
        assert_eq!(
            parse(&text, Path::new("p"))
                .unwrap()
                .memory
                .return_after_hours,
            6.0
        );
        let text =
            SHIPPED_PSYCHE.replacen("return_after_hours = 1.0", "return_after_hours = -2", 1);
        let err = errors(&text);
        assert!(err.contains("memory.return_after_hours"), "{err}");
        let line = text
            .lines()
            .position(|l| l.starts_with("return_after_hours"))
            .unwrap()
            + 1;
        assert!(err.contains(&format!(":{line}:")), "{err}");
    }

    #[test]
    fn a_stance_step_is_small_and_its_drive_known() {
        let text = SHIPPED_PSYCHE.replacen("trust = 0.05\n", "trust = 0.5\n", 1);
        assert!(errors(&text).contains("stances.benefit_of_the_doubt.trust"));
        let text = SHIPPED_PSYCHE.replacen("drive = \"safety\"", "drive = \"fear\"", 1);
        assert!(errors(&text).contains("unknown drive \"fear\""));
        let text = SHIPPED_PSYCHE.replacen("pattern_repeats = 5", "pattern_repeats = 1", 1);
        assert!(
            errors(&text).contains("drift.pattern_repeats"),
            "one answer never drifts"
        );
    }

    #[test]
    fn whole_numbers_may_be_written_without_a_point() {
        let text = SHIPPED_PSYCHE.replacen("quiet_after_hours = 72.0", "quiet_after_hours = 72", 1);
        assert_eq!(
            parse(&text, Path::new("p"))
                .unwrap()
                .relationship
                .quiet_after_hours,
            72.0
        );
        let text = SHIPPED_PSYCHE.replacen("top_k = 4", "top_k = 2.5", 1);
        assert!(errors(&text).contains("whole number"));
    }
}
