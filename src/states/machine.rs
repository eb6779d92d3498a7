//! The cognitive-state machine: which moves a template allows, and why a move is refused.
//!
//! SHUTDOWN → WAKEUP → WORK (SHUTDOWN → WORK when the template disables wakeup); WORK →
//! PLAY, DREAM, SOLITUDE only when the template enables them, and back to WORK always (so a
//! template reloaded while the soul is in a state it now disables never strands it there);
//! any state → SHUTDOWN. Pure: the caller persists a move it allows.

use std::fmt;

use serde::Serialize;

use super::template::Behaviors;

/// The soul's cognitive states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum State {
    Wakeup,
    Work,
    Play,
    Dream,
    Solitude,
    Shutdown,
}

impl State {
    pub const ALL: [State; 6] = [
        State::Wakeup,
        State::Work,
        State::Play,
        State::Dream,
        State::Solitude,
        State::Shutdown,
    ];

    pub fn name(self) -> &'static str {
        match self {
            State::Wakeup => "WAKEUP",
            State::Work => "WORK",
            State::Play => "PLAY",
            State::Dream => "DREAM",
            State::Solitude => "SOLITUDE",
            State::Shutdown => "SHUTDOWN",
        }
    }

    /// A state by name, in any case.
    pub fn from_name(name: &str) -> Option<State> {
        let name = name.trim();
        Self::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(name))
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A move the map does not allow, and why, in words an operator reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    pub from: State,
    pub to: State,
    pub reason: String,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} → {} refused: {}", self.from, self.to, self.reason)
    }
}

/// The moves one template allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Map {
    wakeup: bool,
    play: bool,
    dream: bool,
    solitude: bool,
}

impl Map {
    pub fn new(b: &Behaviors) -> Map {
        Map {
            wakeup: b.wakeup.enabled,
            play: b.play.enabled,
            dream: b.dream.enabled,
            solitude: b.solitude.enabled,
        }
    }

    /// Whether `to` is enabled by the template (WORK and SHUTDOWN always are).
    fn enabled(&self, s: State) -> bool {
        match s {
            State::Wakeup => self.wakeup,
            State::Play => self.play,
            State::Dream => self.dream,
            State::Solitude => self.solitude,
            State::Work | State::Shutdown => true,
        }
    }

    /// The state a start leads to: WAKEUP, or WORK when wakeup is disabled.
    pub fn start(&self) -> State {
        if self.wakeup {
            State::Wakeup
        } else {
            State::Work
        }
    }

    /// Whether `from → to` is allowed; if not, why.
    pub fn check(&self, from: State, to: State) -> Result<(), Refused> {
        use State::*;
        let refuse = |reason: String| Err(Refused { from, to, reason });
        if from == to {
            return refuse(format!("the soul is already in {to}"));
        }
        if !self.enabled(to) {
            return refuse(format!(
                "this template disables {to} ([cognitive_state_behaviors.{}] enabled = false)",
                to.name().to_lowercase()
            ));
        }
        match (from, to) {
            (_, Shutdown) => Ok(()),
            (Shutdown, Wakeup) => Ok(()),
            (Shutdown, Work) if !self.wakeup => Ok(()),
            (Shutdown, Work) => {
                refuse("this template has a wakeup: SHUTDOWN → WAKEUP → WORK".into())
            }
            (Shutdown, _) => refuse(format!(
                "a soul that is shut down starts with {}",
                self.start()
            )),
            (Wakeup | Play | Dream | Solitude, Work) => Ok(()),
            (Work, Play | Dream | Solitude) => Ok(()),
            (Wakeup, _) => refuse("a soul waking up goes to WORK first".into()),
            (_, Wakeup) => refuse("WAKEUP comes only after SHUTDOWN".into()),
            (Play | Dream | Solitude, _) => refuse(format!("{from} leads back to WORK first")),
            (Work, Work) => refuse("the soul is already in WORK".into()),
        }
    }

    /// Every state reachable from `from` in one move, in the order of [`State::ALL`].
    pub fn moves_from(&self, from: State) -> Vec<State> {
        State::ALL
            .into_iter()
            .filter(|to| self.check(from, *to).is_ok())
            .collect()
    }
}
