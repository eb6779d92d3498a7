//! The substrate as single words for a mental process's rules (issue 12, point 7): `mood`,
//! `energy`, `relationship` (with the person spoken with) and `leaning` (how the personality
//! leans right now). The same bands as the packet's sentences, so a rule and the prompt never
//! disagree; words only, like everything else that leaves this module.

use super::packet::{activation, energy_word, mood_words};
use super::state::{Relationship, Substrate};

/// What a process rule may read of the soul's inner life (empty words: not known).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Words {
    /// miserable, low, even, content or happy.
    pub mood: &'static str,
    /// exhausted, tired, steady or energetic.
    pub energy: &'static str,
    /// With the person spoken with: new (never talked), cold, cool, neutral, warm or fond.
    pub relationship: &'static str,
    /// guarded, spent, wary, playful, open, restless, driven or usual.
    pub leaning: &'static str,
}

impl Words {
    /// The words rules read (and the names they read them by).
    pub const NAMES: [&'static str; 4] = ["mood", "energy", "relationship", "leaning"];

    /// The words for `substrate`, with `person` the relationship with the one spoken with
    /// (`None`: someone new).
    pub fn of(substrate: &Substrate, person: Option<&Relationship>) -> Words {
        let person = person.filter(|r| r.exchanges > 0);
        let leaning = activation(substrate, &[person]);
        Words {
            mood: mood_words(substrate.valence.get(), substrate.arousal.get()).0,
            energy: match energy_word(substrate.energy.get()) {
                "full of energy" => "energetic",
                word => word,
            },
            relationship: person.map_or("new", |r| match r.warmth.get() {
                w if w <= -0.5 => "cold",
                w if w < -0.15 => "cool",
                w if w < 0.15 => "neutral",
                w if w < 0.5 => "warm",
                _ => "fond",
            }),
            leaning: match leaning.split(':').next().unwrap_or(leaning) {
                "your usual self" => "usual",
                word => word,
            },
        }
    }

    /// The word read by `name` (one of [`Words::NAMES`]).
    pub fn get(&self, name: &str) -> Option<&'static str> {
        match name {
            "mood" => Some(self.mood),
            "energy" => Some(self.energy),
            "relationship" => Some(self.relationship),
            "leaning" => Some(self.leaning),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::psyche::{Psyche, Signed, Unit};

    #[test]
    fn rules_read_the_same_bands_as_the_prompt_in_one_word_each() {
        let p = Psyche::shipped();
        let rest = Substrate::new(&p, 0);
        let w = Words::of(&rest, None);
        assert_eq!(
            (w.mood, w.energy, w.relationship, w.leaning),
            ("even", "energetic", "new", "usual")
        );
        let mut low = rest.clone();
        low.valence = Signed::new(-0.7);
        low.energy = Unit::new(0.1);
        let mut friend = Relationship::new(&p);
        friend.exchanges = 12;
        friend.warmth = Signed::new(0.7);
        friend.comfort = Unit::new(0.8);
        let w = Words::of(&low, Some(&friend));
        assert_eq!(
            (w.mood, w.energy, w.relationship, w.leaning),
            ("miserable", "exhausted", "fond", "spent")
        );
        for name in Words::NAMES {
            let word = w.get(name).unwrap();
            assert!(!word.is_empty() && !word.contains(' '), "{name}: {word}");
        }
        assert_eq!(w.get("trust"), None);
        // Someone met but never spoken with again is still new.
        assert_eq!(
            Words::of(&rest, Some(&Relationship::new(&p))).relationship,
            "new"
        );
    }
}
