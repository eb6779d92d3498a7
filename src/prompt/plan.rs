//! Which steps this turn asks for, and whether the user model goes in: the gates.
//!
//! Pure functions of the turn's context; the rules are those of INTERFACE.md ("Counting",
//! "Steps honoured"). No I/O.

use crate::memory::{Entry, EntryType, UserRecord};
use crate::steps::{Step, USER_MODEL_CHECK};

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

/// Plans a turn.
///
/// * The soul-state steps are asked on turns whose interaction number is a multiple of
///   `soul_state_interval` (3, 6, 9 …).
/// * The user model goes in on the thread's first turn, after a turn in this thread whose
///   `user_model_check` said true (Samantha-Dreams), and whenever the user has had
///   `user_model_interval` turns since it was last in.
/// * `user_model_update` is asked only when the model is in the prompt: an update replaces
///   the whole model, and a model that cannot see the current one would erase it.
pub fn plan(
    process_steps: &[Step],
    interaction: u64,
    thread_turns: i64,
    recent: &[Entry],
    user: &UserRecord,
    gates: Gates,
) -> TurnPlan {
    let (inject_user_model, user_model_reason) =
        user_model_gate(thread_turns, recent, user, gates.user_model_interval);
    let soul_state_due = interaction.is_multiple_of(gates.soul_state_interval);
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

fn user_model_gate(
    thread_turns: i64,
    recent: &[Entry],
    user: &UserRecord,
    interval: u64,
) -> (bool, &'static str) {
    if thread_turns == 0 {
        return (true, "first turn in this thread");
    }
    let last_check = recent
        .iter()
        .rev()
        .find(|e| e.entry_type == EntryType::MentalQuery && e.content == USER_MODEL_CHECK);
    if last_check.and_then(Entry::result) == Some(true) {
        return (true, "the last user-model check said true");
    }
    // Counting this turn: injected on turn 1 with an interval of 5 → in again on turn 6.
    let since = user.turns + 1 - user.injected_at_turn.unwrap_or(0);
    if since >= interval as i64 {
        return (true, "user-model interval reached");
    }
    (false, "not needed this turn")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::NewEntry;
    use crate::process::library::MAIN_STEPS as MAIN;
    const GATES: Gates = Gates {
        soul_state_interval: 3,
        user_model_interval: 5,
    };

    fn check(result: bool) -> Entry {
        let e = NewEntry::new(EntryType::MentalQuery, USER_MODEL_CHECK)
            .metadata(serde_json::json!({ "result": result }));
        Entry {
            id: 1,
            thread: "t".into(),
            entry_type: e.entry_type,
            content: e.content,
            verb: None,
            user_id: None,
            metadata: e.metadata,
            created_at: 0,
        }
    }

    fn user(turns: i64, injected: Option<i64>) -> UserRecord {
        UserRecord {
            turns,
            injected_at_turn: injected,
            ..UserRecord::new("U1", "Tom")
        }
    }

    #[test]
    fn soul_state_steps_come_every_third_interaction() {
        let asked: Vec<u64> = (1..=9)
            .filter(|n| {
                plan(&MAIN, *n, 1, &[], &user(1, Some(1)), GATES).requests(Step::SoulStateCheck)
            })
            .collect();
        assert_eq!(asked, vec![3, 6, 9]);
        let p = plan(&MAIN, 6, 1, &[], &user(1, Some(1)), GATES);
        assert!(p.requests(Step::SoulStateUpdate));
    }

    #[test]
    fn the_user_model_goes_in_on_a_threads_first_turn() {
        let p = plan(&MAIN, 7, 0, &[], &user(3, Some(3)), GATES);
        assert!(p.inject_user_model);
        assert!(p.requests(Step::UserModelUpdate));
    }

    #[test]
    fn then_only_after_a_true_check_or_the_interval() {
        let u = user(2, Some(1));
        let p = plan(&MAIN, 3, 1, &[check(false)], &u, GATES);
        assert!(!p.inject_user_model);
        assert!(
            p.requests(Step::UserModelCheck),
            "the check is always asked"
        );
        assert!(
            !p.requests(Step::UserModelUpdate),
            "no update without the model in view"
        );
        let p = plan(&MAIN, 3, 1, &[check(false), check(true)], &u, GATES);
        assert!(p.inject_user_model);
        let p = plan(&MAIN, 3, 1, &[check(true), check(false)], &u, GATES);
        assert!(!p.inject_user_model, "the last check decides");
    }

    #[test]
    fn a_multi_turn_sequence_follows_the_interval() {
        // The user's turns 1..=12 in one thread, every check false: in on 1, then every 5.
        let mut u = user(0, None);
        let mut injected = Vec::new();
        for turn in 1..=12i64 {
            let p = plan(&MAIN, turn as u64, turn - 1, &[check(false)], &u, GATES);
            if p.inject_user_model {
                injected.push(turn);
                u.injected_at_turn = Some(turn);
            }
            u.turns = turn;
        }
        assert_eq!(injected, vec![1, 6, 11]);
    }
}
