//! `psyche.toml` exactly as written: the serde shape (every field required but those added
//! after homes had their files, which have defaults; unknown keys refused; each value with its
//! span) and the checker that reads values in range and records each problem with its line.
//! `def` turns it into a `Psyche`. Pure.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

use super::def::MAX_STEP;
use super::value::{Signed, Unit};
use crate::toml_file::{Problem, TomlFile};

/// A number as TOML writes it: `1` and `1.0` alike.
#[derive(Debug, Clone, Copy)]
pub(super) struct Num(pub(super) f64);

impl<'de> Deserialize<'de> for Num {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Num;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a number")
            }
            fn visit_f64<E>(self, v: f64) -> Result<Num, E> {
                Ok(Num(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Num, E> {
                Ok(Num(v as f64))
            }
        }
        d.deserialize_any(V)
    }
}

pub(super) type N = Spanned<Num>;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Raw {
    pub(super) drives: Spanned<BTreeMap<Spanned<String>, RawDrive>>,
    pub(super) mood: RawMood,
    pub(super) relationship: RawRelationship,
    pub(super) energy: RawEnergy,
    pub(super) memory: RawMemory,
    pub(super) drift: RawDrift,
    #[serde(default)]
    pub(super) arcs: Vec<RawArc>,
    #[serde(default)]
    pub(super) stances: BTreeMap<Spanned<String>, RawStance>,
    #[serde(default)]
    pub(super) intentions: BTreeMap<Spanned<String>, RawIntention>,
    pub(super) intention_rules: RawIntentionRules,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDrive {
    pub(super) sensitivity: N,
    pub(super) baseline: N,
    pub(super) drift: N,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMood {
    pub(super) valence_gain: N,
    pub(super) valence_decay: N,
    pub(super) arousal_gain: N,
    pub(super) arousal_rest: N,
    pub(super) arousal_decay: N,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRelationship {
    pub(super) volatility: N,
    pub(super) rate: N,
    pub(super) quiet_after_hours: N,
    pub(super) quiet_drift: N,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEnergy {
    pub(super) baseline: N,
    pub(super) cost: N,
    pub(super) recovery: N,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMemory {
    pub(super) episodic_threshold: N,
    pub(super) salience_boost: N,
    /// Added after homes had their files: absent, `def::RETURN_AFTER_HOURS`.
    #[serde(default)]
    pub(super) return_after_hours: Option<N>,
    pub(super) recency_half_life_hours: N,
    pub(super) top_k: N,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawDrift {
    pub(super) pattern_repeats: N,
    pub(super) pattern_step: N,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawArc {
    pub(super) topic: Spanned<String>,
    pub(super) keywords: Vec<Spanned<String>>,
    pub(super) intensity: N,
    pub(super) decay: N,
    pub(super) reinforce: Option<N>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawStance {
    pub(super) warmth: Option<N>,
    pub(super) trust: Option<N>,
    pub(super) tension: Option<N>,
    pub(super) comfort: Option<N>,
    pub(super) drive: Option<Spanned<String>>,
    pub(super) drive_effect: Option<N>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawIntention {
    pub(super) priority: N,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawIntentionRules {
    pub(super) boost: N,
    pub(super) lower: N,
    pub(super) short_hours: N,
    pub(super) medium_hours: N,
    pub(super) long_hours: N,
}

/// Collects problems while reading values in range.
pub(super) struct Checker<'a> {
    pub(super) file: TomlFile<'a>,
    pub(super) problems: Vec<Problem>,
}

impl Checker<'_> {
    pub(super) fn problem(&mut self, offset: usize, key: &str, message: String) {
        let line = self.file.line(offset);
        self.problems.push(self.file.problem(line, key, message));
    }

    pub(super) fn range(&mut self, n: &N, key: &str, min: f64, max: f64) -> f64 {
        let v = n.get_ref().0;
        if !(min..=max).contains(&v) {
            self.problem(
                n.span().start,
                key,
                format!("found {v}, expected a number from {min} to {max}"),
            );
            return min.max(0.0).min(max);
        }
        v
    }

    pub(super) fn unit(&mut self, n: &N, key: &str) -> Unit {
        Unit::new(self.range(n, key, 0.0, 1.0))
    }

    pub(super) fn step(&mut self, n: &Option<N>, key: &str) -> Signed {
        n.as_ref().map_or(Signed::ZERO, |n| {
            Signed::new(self.range(n, key, -MAX_STEP, MAX_STEP))
        })
    }

    pub(super) fn hours(&mut self, n: &N, key: &str) -> f64 {
        self.range(n, key, 0.0, 24.0 * 365.0 * 10.0)
    }

    pub(super) fn whole(&mut self, n: &N, key: &str, min: f64, max: f64) -> f64 {
        let v = self.range(n, key, min, max);
        if v.fract() != 0.0 {
            self.problem(
                n.span().start,
                key,
                format!("found {v}, expected a whole number"),
            );
        }
        v.trunc()
    }
}
