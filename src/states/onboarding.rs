//! The template's `onboarding` behaviour: how the soul meets someone it has no model of. In
//! the person's first turn it is asked to learn their name and what they do, once; for their
//! first `FIRST_TURNS` turns, while it still has no model of them, the model (the blueprint
//! for someone new) stays in view so what they say can seed it through the ordinary
//! user-model update. On by default in direct messages, off in channels.
//!
//! Pure: the engine says whether the conversation is one-to-one and what it knows of the
//! person; this decides, and holds the words.

use serde::{Deserialize, Serialize};

/// The turns (the person's, across conversations) in which a person without a model keeps
/// the blueprint in view.
pub const FIRST_TURNS: i64 = 3;

/// What the soul is asked in a new person's first turn.
pub const WORDS: &str = "This person is new to you: you have no model of them yet. \
Ask their name and what they do, once and naturally, alongside your answer (you will not be reminded). \
What they tell you belongs in your model of them.";

/// `[cognitive_state_behaviors.onboarding]`, checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Onboarding {
    /// In a conversation with the soul alone (a direct message).
    pub direct_messages: bool,
    /// In a conversation others read (a channel's thread).
    pub channels: bool,
    pub rationale: Option<String>,
}

impl Default for Onboarding {
    fn default() -> Self {
        Onboarding {
            direct_messages: true,
            channels: false,
            rationale: None,
        }
    }
}

/// `[cognitive_state_behaviors.onboarding]` as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawOnboarding {
    #[serde(default)]
    direct_messages: Option<bool>,
    #[serde(default)]
    channels: Option<bool>,
    #[serde(default)]
    rationale: Option<String>,
}

impl RawOnboarding {
    pub(super) fn read(self, default: &Onboarding) -> Onboarding {
        Onboarding {
            direct_messages: self.direct_messages.unwrap_or(default.direct_messages),
            channels: self.channels.unwrap_or(default.channels),
            rationale: self
                .rationale
                .map(|r| r.trim().to_string())
                .filter(|r| !r.is_empty()),
        }
    }
}

/// What onboarding asks of one turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Onboard {
    /// Ask the person's name and what they do ([`WORDS`]).
    pub ask: bool,
    /// Keep their (blueprint) model in view, with its update step.
    pub model_in_view: bool,
}

/// The person a turn is with, as onboarding reads them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Newcomer {
    /// The conversation is one-to-one; `None`: not known (nothing is asked).
    pub direct: Option<bool>,
    /// Their completed turns with the soul, all conversations.
    pub turns: i64,
    pub has_model: bool,
}

impl Onboarding {
    /// What this turn with `who` asks: nothing once they have a model, or where the
    /// behaviour is off, or where the kind of conversation is not known.
    pub fn turn(&self, who: Newcomer) -> Onboard {
        let on = match who.direct {
            Some(true) => self.direct_messages,
            Some(false) => self.channels,
            None => false,
        };
        if !on || who.has_model {
            return Onboard::default();
        }
        Onboard {
            ask: who.turns == 0,
            model_in_view: who.turns < FIRST_TURNS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn who(direct: Option<bool>, turns: i64, has_model: bool) -> Newcomer {
        Newcomer {
            direct,
            turns,
            has_model,
        }
    }

    #[test]
    fn a_new_person_in_a_dm_is_asked_once_and_kept_in_view_a_while() {
        let o = Onboarding::default();
        let asked: Vec<Onboard> = (0..4).map(|t| o.turn(who(Some(true), t, false))).collect();
        assert_eq!(
            asked,
            [
                Onboard {
                    ask: true,
                    model_in_view: true
                },
                Onboard {
                    ask: false,
                    model_in_view: true
                },
                Onboard {
                    ask: false,
                    model_in_view: true
                },
                Onboard::default(),
            ]
        );
    }

    #[test]
    fn never_in_a_channel_by_default_nor_with_a_model_nor_where_unknown() {
        let o = Onboarding::default();
        assert_eq!(o.turn(who(Some(false), 0, false)), Onboard::default());
        assert_eq!(o.turn(who(Some(true), 0, true)), Onboard::default());
        assert_eq!(o.turn(who(None, 0, false)), Onboard::default());
        let everywhere = Onboarding {
            channels: true,
            ..o.clone()
        };
        assert!(everywhere.turn(who(Some(false), 0, false)).ask);
        let nowhere = Onboarding {
            direct_messages: false,
            ..o
        };
        assert!(!nowhere.turn(who(Some(true), 0, false)).ask);
    }
}
