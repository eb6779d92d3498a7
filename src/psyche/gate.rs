//! Meaningfulness and eligibility (sections 3.3–3.4): whether an event the soul was not
//! addressed in deserves cognition. Every decision is a value that carries its inputs, so the
//! store can record why the soul spoke or kept quiet.
//!
//! `M = w1·salience_max + w2·drive_pressure_max + w3·arc_hot + w4·rel_stakes − w5·(1 − energy)`;
//! an unaddressed event is eligible only when M ≥ threshold, it is not trivial, the cooldown
//! has elapsed, and a real choice exists (and autonomy is on, in a listened-to channel). An
//! addressed message is owed a reply: the gate decides nothing about it.

use serde::{Deserialize, Serialize};

use super::state::EventKind;
use super::value::Unit;

/// The gate's settings (`[autonomy]` in the config).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateRules {
    pub enabled: bool,
    /// Weights of salience, drive pressure, arc heat, relationship stakes, fatigue; each ≥ 0.
    pub weights: [f64; 5],
    pub threshold: f64,
    pub cooldown_ms: i64,
}

impl Default for GateRules {
    fn default() -> Self {
        GateRules {
            enabled: true,
            weights: [0.25, 0.25, 0.25, 0.15, 0.10],
            threshold: 0.4,
            cooldown_ms: 300_000,
        }
    }
}

/// The numbers the gate weighs.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct GateInputs {
    pub salience_max: Unit,
    pub drive_pressure_max: Unit,
    pub arc_hot: Unit,
    pub rel_stakes: Unit,
    pub energy: Unit,
}

impl GateInputs {
    /// Meaningfulness M under these weights.
    pub fn meaning(&self, w: &[f64; 5]) -> f64 {
        w[0] * self.salience_max.get()
            + w[1] * self.drive_pressure_max.get()
            + w[2] * self.arc_hot.get()
            + w[3] * self.rel_stakes.get()
            - w[4] * (1.0 - self.energy.get())
    }
}

/// Why an unaddressed event gets no cognition (the first reason that holds, in this order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Silence {
    Disabled,
    NotListened,
    Trivial,
    NoChoice,
    BelowThreshold,
    Cooldown,
}

impl Silence {
    pub fn name(self) -> &'static str {
        match self {
            Silence::Disabled => "disabled",
            Silence::NotListened => "not_listened",
            Silence::Trivial => "trivial",
            Silence::NoChoice => "no_choice",
            Silence::BelowThreshold => "below_threshold",
            Silence::Cooldown => "cooldown",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "verdict", content = "reason")]
pub enum Verdict {
    /// Addressed: owed a reply, whatever M is.
    Answer,
    /// Unaddressed and eligible: the soul may speak.
    Speak,
    Silent(Silence),
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Answer => "answer",
            Verdict::Speak => "speak",
            Verdict::Silent(s) => s.name(),
        }
    }

    /// Whether cognition runs.
    pub fn thinks(self) -> bool {
        !matches!(self, Verdict::Silent(_))
    }
}

/// What the gate knows beyond the numbers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Situation {
    pub kind: EventKind,
    pub trivial: bool,
    pub choice: bool,
    /// Whether the event happened where the soul may speak unasked.
    pub listened: bool,
    /// When the soul last spoke unasked (ms).
    pub last_unasked_at: Option<i64>,
    pub now: i64,
}

/// One decision, with everything it was made from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    pub inputs: GateInputs,
    pub situation: Situation,
    pub meaning: f64,
    pub threshold: f64,
    pub verdict: Verdict,
}

/// Decides.
pub fn decide(inputs: GateInputs, situation: Situation, rules: &GateRules) -> Decision {
    let meaning = inputs.meaning(&rules.weights);
    let cooled = situation
        .last_unasked_at
        .is_none_or(|t| situation.now.saturating_sub(t) >= rules.cooldown_ms);
    let verdict = if situation.kind == EventKind::Addressed {
        Verdict::Answer
    } else if !rules.enabled {
        Verdict::Silent(Silence::Disabled)
    } else if !situation.listened {
        Verdict::Silent(Silence::NotListened)
    } else if situation.trivial {
        Verdict::Silent(Silence::Trivial)
    } else if !situation.choice {
        Verdict::Silent(Silence::NoChoice)
    } else if meaning < rules.threshold || meaning.is_nan() {
        Verdict::Silent(Silence::BelowThreshold)
    } else if !cooled {
        Verdict::Silent(Silence::Cooldown)
    } else {
        Verdict::Speak
    };
    Decision {
        inputs,
        situation,
        meaning,
        threshold: rules.threshold,
        verdict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hot() -> GateInputs {
        GateInputs {
            salience_max: Unit::ONE,
            drive_pressure_max: Unit::new(0.8),
            arc_hot: Unit::new(0.7),
            rel_stakes: Unit::new(0.5),
            energy: Unit::ONE,
        }
    }

    fn situation(kind: EventKind) -> Situation {
        Situation {
            kind,
            trivial: false,
            choice: true,
            listened: true,
            last_unasked_at: None,
            now: 1_000_000,
        }
    }

    #[test]
    fn m_is_the_weighted_sum_minus_fatigue() {
        let i = GateInputs {
            energy: Unit::new(0.5),
            ..hot()
        };
        let m = i.meaning(&GateRules::default().weights);
        assert!(
            (m - (0.25 + 0.2 + 0.175 + 0.075 - 0.05)).abs() < 1e-12,
            "{m}"
        );
    }

    #[test]
    fn each_condition_alone_silences() {
        let r = GateRules::default();
        assert_eq!(
            decide(hot(), situation(EventKind::Overheard), &r).verdict,
            Verdict::Speak
        );
        let mut s = situation(EventKind::Overheard);
        s.trivial = true;
        assert_eq!(
            decide(hot(), s, &r).verdict,
            Verdict::Silent(Silence::Trivial)
        );
        let mut s = situation(EventKind::Overheard);
        s.choice = false;
        assert_eq!(
            decide(hot(), s, &r).verdict,
            Verdict::Silent(Silence::NoChoice)
        );
        let mut s = situation(EventKind::Overheard);
        s.last_unasked_at = Some(s.now - 299_999);
        assert_eq!(
            decide(hot(), s, &r).verdict,
            Verdict::Silent(Silence::Cooldown)
        );
        s.last_unasked_at = Some(s.now - 300_000);
        assert_eq!(decide(hot(), s, &r).verdict, Verdict::Speak);
        let mut s = situation(EventKind::Overheard);
        s.listened = false;
        assert_eq!(
            decide(hot(), s, &r).verdict,
            Verdict::Silent(Silence::NotListened)
        );
        let cold = GateInputs::default();
        assert_eq!(
            decide(cold, situation(EventKind::Overheard), &r).verdict,
            Verdict::Silent(Silence::BelowThreshold)
        );
        let off = GateRules {
            enabled: false,
            ..r
        };
        assert_eq!(
            decide(hot(), situation(EventKind::Overheard), &off).verdict,
            Verdict::Silent(Silence::Disabled)
        );
    }

    #[test]
    fn an_addressed_message_is_always_answered() {
        let mut s = situation(EventKind::Addressed);
        s.trivial = true;
        s.listened = false;
        s.last_unasked_at = Some(s.now);
        let d = decide(GateInputs::default(), s, &GateRules::default());
        assert_eq!(d.verdict, Verdict::Answer);
    }
}
