//! Which steps this turn asks for, and whether the user model goes in: the gates.
//!
//! Pure functions of the turn's counts (a [`GateInput`]); the rules are those of
//! INTERFACE.md ("Counting", "Steps honoured"). No I/O.

use crate::steps::Step;

/// What this turn will ask of the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TurnPlan {
    /// The steps requested, in the process's order.
    pub steps: Vec<Step>,
    /// The user model is in the prompt.
    pub inject_user_model: bool,
    /// Why it is in (or not), for the log.
    pub user_model_reason: &'static str,
}

impl TurnPlan {
    pub fn requests(&self, step: Step) -> bool {
        self.steps.contains(&step)
    }
}

/// The numbers the gates read.
#[derive(Debug, Clone, Copy)]
pub struct Gates {
    pub soul_state_interval: u64,
    pub user_model_interval: u64,
}

/// What the gates know of this turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GateInput {
    /// This turn's interaction number.
    pub interaction: u64,
    /// Completed turns in this thread before this one.
    pub thread_turns: i64,
    /// The answer the previous turn in this thread gave to its user-model check, when it
    /// gave one.
    pub last_user_model_check: Option<bool>,
    /// The user's completed turns, all threads.
    pub user_turns: i64,
    /// `user_turns` when the user model was last in a prompt.
    pub injected_at_turn: Option<i64>,
}

/// Plans a turn.
///
/// * The soul-state steps are asked on turns whose interaction number is a multiple of
///   `soul_state_interval` (3, 6, 9 …).
/// * The user model goes in on the thread's first turn, after a turn in this thread whose
///   `user_model_check` said true (Samantha-Dreams; the turn just before, not an older one),
///   and whenever the user has had `user_model_interval` turns since it was last in.
/// * `user_model_update` is asked only when the model is in the prompt: an update replaces
///   the whole model, and a model that cannot see the current one would erase it.
pub fn plan(process_steps: &[Step], turn: &GateInput, gates: Gates) -> TurnPlan {
    let (inject_user_model, user_model_reason) = user_model_gate(turn, gates.user_model_interval);
    let soul_state_due = turn.interaction.is_multiple_of(gates.soul_state_interval);
    let steps = process_steps
        .iter()
        .copied()
        .filter(|s| match s {
            Step::SoulStateCheck | Step::SoulStateUpdate => soul_state_due,
            Step::UserModelUpdate => inject_user_model,
            _ => true,
        })
        .collect();
    TurnPlan {
        steps,
        inject_user_model,
        user_model_reason,
    }
}

fn user_model_gate(turn: &GateInput, interval: u64) -> (bool, &'static str) {
    if turn.thread_turns == 0 {
        return (true, "first turn in this thread");
    }
    if turn.last_user_model_check == Some(true) {
        return (true, "the last user-model check said true");
    }
    // Counting this turn: injected on turn 1 with an interval of 5 → in again on turn 6.
    let since = turn.user_turns + 1 - turn.injected_at_turn.unwrap_or(0);
    if since >= interval as i64 {
        return (true, "user-model interval reached");
    }
    (false, "not needed this turn")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::library::MAIN_STEPS as MAIN;
    const GATES: Gates = Gates {
        soul_state_interval: 3,
        user_model_interval: 5,
    };

    /// The user's `turns` and `injected_at_turn`, on a thread's second turn, no check yet.
    fn turn(interaction: u64, user_turns: i64, injected: Option<i64>) -> GateInput {
        GateInput {
            interaction,
            thread_turns: 1,
            last_user_model_check: None,
            user_turns,
            injected_at_turn: injected,
        }
    }

    #[test]
    fn soul_state_steps_come_every_third_interaction() {
        let asked: Vec<u64> = (1..=9)
            .filter(|n| plan(&MAIN, &turn(*n, 1, Some(1)), GATES).requests(Step::SoulStateCheck))
            .collect();
        assert_eq!(asked, vec![3, 6, 9]);
        let p = plan(&MAIN, &turn(6, 1, Some(1)), GATES);
        assert!(p.requests(Step::SoulStateUpdate));
    }

    #[test]
    fn the_user_model_goes_in_on_a_threads_first_turn() {
        let first = GateInput {
            thread_turns: 0,
            ..turn(7, 3, Some(3))
        };
        let p = plan(&MAIN, &first, GATES);
        assert!(p.inject_user_model);
        assert!(p.requests(Step::UserModelUpdate));
    }

    #[test]
    fn then_only_after_a_true_check_or_the_interval() {
        let checked = |answer| GateInput {
            last_user_model_check: answer,
            ..turn(3, 2, Some(1))
        };
        let p = plan(&MAIN, &checked(Some(false)), GATES);
        assert!(!p.inject_user_model);
        assert!(
            p.requests(Step::UserModelCheck),
            "the check is always asked"
        );
        assert!(
            !p.requests(Step::UserModelUpdate),
            "no update without the model in view"
        );
        assert!(plan(&MAIN, &checked(Some(true)), GATES).inject_user_model);
        assert!(!plan(&MAIN, &checked(None), GATES).inject_user_model);
    }

    #[test]
    fn a_multi_turn_sequence_follows_the_interval() {
        // The user's turns 1..=12 in one thread, every check false: in on 1, then every 5.
        let mut injected_at = None;
        let mut injected = Vec::new();
        for n in 1..=12i64 {
            let t = GateInput {
                interaction: n as u64,
                thread_turns: n - 1,
                last_user_model_check: Some(false),
                user_turns: n - 1,
                injected_at_turn: injected_at,
            };
            if plan(&MAIN, &t, GATES).inject_user_model {
                injected.push(n);
                injected_at = Some(n);
            }
        }
        assert_eq!(injected, vec![1, 6, 11]);
    }
}
