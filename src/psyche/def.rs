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
use super::sections;
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

/// Checks a psyche file's text; `path` names it in problems.
pub fn parse(text: &str, path: &Path) -> Result<Psyche, Vec<Problem>> {
    let file = path.display().to_string();
    let toml_file = TomlFile::new(&file, text);
    let raw: Raw = toml_file.read()?;
    let mut c = Checker {
        file: toml_file,
        problems: Vec::new(),
    };
    let drives = sections::drives(&mut c, &raw.drives);
    let mood = sections::mood(&mut c, &raw.mood);
    let relationship = sections::relationship(&mut c, &raw.relationship);
    let energy = sections::energy(&mut c, &raw.energy);
    let memory = sections::memory(&mut c, &raw.memory);
    let drift = sections::drift(&mut c, &raw.drift);
    let arcs = raw.arcs.iter().map(|a| sections::arc(&mut c, a)).collect();
    let stances = (raw.stances.iter())
        .map(|(name, s)| (name.get_ref().clone(), sections::stance(&mut c, name, s)))
        .collect();
    let intentions = (raw.intentions.iter())
        .map(|(name, i)| (name.get_ref().clone(), sections::intention(&mut c, name, i)))
        .collect();
    let intention_rules = sections::intention_rules(&mut c, &raw.intention_rules);

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
