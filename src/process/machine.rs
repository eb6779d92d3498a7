//! The process machine's whole life, as pure functions: where a thread starts a turn (its
//! stored place, the initial process, the fallback to main, or `proactive`), and what happens
//! after each parsed answer (the rule taken, the record of it, the next place, whether the
//! target runs again at once, the chain limit).
//!
//! No I/O and no logging: the engine gathers the facts, logs what `Step` says, and stores the
//! state and records that come back.

use super::{next, Loaded, ProcessDef, ThreadProcess, MAIN, PROACTIVE};
use crate::process::when::Facts;

/// One transition taken.
#[derive(Debug, Clone, PartialEq)]
pub struct TransitionRecord {
    pub from: String,
    pub to: String,
    /// The rule's index in the process file; `None` for a fallback or an action.
    pub rule: Option<usize>,
    /// The ISM action the soul chose that took it (instead of a rule).
    pub action: Option<String>,
    pub execute_now: bool,
    pub params: serde_json::Map<String, serde_json::Value>,
}

/// Where a thread starts a message turn: its stored place; for a new thread, the `initial`
/// process, or main when there is no such process.
pub fn enter(stored: Option<&ThreadProcess>, initial: &str, lib: &Loaded) -> ThreadProcess {
    if let Some(state) = stored {
        return state.clone();
    }
    let current = if lib.process(initial).is_some() {
        initial
    } else {
        MAIN
    };
    ThreadProcess {
        current: current.to_string(),
        ..ThreadProcess::default()
    }
}

/// Where a thread starts a proactive turn: in `proactive`, remembering where it was (its run
/// count goes on when it is already there).
pub fn enter_proactive(stored: Option<&ThreadProcess>) -> ThreadProcess {
    let previous = stored.cloned().unwrap_or_default();
    ThreadProcess {
        current: PROACTIVE.into(),
        previous: Some(previous.current.clone()).filter(|p| !p.is_empty()),
        invocations: if previous.current == PROACTIVE {
            previous.invocations
        } else {
            0
        },
        params: previous.params,
    }
}

/// Starts one run of the thread's process: the definition that runs (main when the stored
/// process no longer exists) and the state with this run counted.
pub fn begin_run<'a>(state: &mut ThreadProcess, lib: &'a Loaded) -> &'a ProcessDef {
    state.invocations += 1;
    lib.process(&state.current).unwrap_or_else(|| lib.main())
}

/// What happens after a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// The thread's place after the run.
    pub state: ThreadProcess,
    /// The transition taken, if a rule matched.
    pub record: Option<TransitionRecord>,
    /// Run the new process at once, on the same perception.
    pub run_again: bool,
    /// A rule named a process that does not exist: `record.to` is main instead.
    pub fell_back_from: Option<String>,
    /// execute_now was cut short: the chain already ran `max_chain` hand-overs (a cycle?).
    pub chain_cut: bool,
}

/// How a perception may chain runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chaining {
    /// execute_now hand-overs already made for this perception.
    pub done: u32,
    pub max: u32,
    /// False for a perception that answers no message (a proactive turn): nothing runs on.
    pub allowed: bool,
}

/// After a run of `def` with the thread at `state`: the first rule whose condition holds on
/// `facts` is taken (a target that does not exist falls back to main), and its target runs
/// again at once on execute_now while the chain allows.
pub fn step(
    def: &ProcessDef,
    state: ThreadProcess,
    facts: &Facts,
    lib: &Loaded,
    chain: Chaining,
) -> Step {
    let Some((rule, t)) = next(def, facts) else {
        return Step {
            state,
            record: None,
            run_again: false,
            fell_back_from: None,
            chain_cut: false,
        };
    };
    let by = By {
        rule: Some(rule),
        action: None,
    };
    take(def, by, &t.to, &t.params, t.execute_now, lib, chain)
}

/// After a run of the ISM process `def` whose soul chose the transition action `action`:
/// the hand-over it names, as a rule's would be (rules are not read then).
pub fn hand_over(
    def: &ProcessDef,
    action: &str,
    to: &str,
    params: &serde_json::Map<String, serde_json::Value>,
    execute_now: bool,
    lib: &Loaded,
    chain: Chaining,
) -> Step {
    let by = By {
        rule: None,
        action: Some(action.to_string()),
    };
    take(def, by, to, params, execute_now, lib, chain)
}

/// What took a transition.
struct By {
    rule: Option<usize>,
    action: Option<String>,
}

fn take(
    def: &ProcessDef,
    by: By,
    to: &str,
    params: &serde_json::Map<String, serde_json::Value>,
    execute_now: bool,
    lib: &Loaded,
    chain: Chaining,
) -> Step {
    let exists = lib.process(to).is_some();
    let target = if exists { to } else { MAIN }.to_string();
    let execute_now = execute_now && chain.allowed;
    let chain_cut = execute_now && chain.done >= chain.max;
    Step {
        state: ThreadProcess {
            current: target.clone(),
            previous: Some(def.name.clone()),
            invocations: 0,
            params: params.clone().into_iter().collect(),
        },
        record: Some(TransitionRecord {
            from: def.name.clone(),
            to: target,
            rule: by.rule,
            action: by.action,
            execute_now,
            params: params.clone(),
        }),
        run_again: execute_now && !chain_cut,
        fell_back_from: (!exists).then(|| to.to_string()),
        chain_cut,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::process::library::builtin_main;
    use crate::process::{Library, Transition};
    use crate::soul::SoulFiles;

    fn def(name: &str, rules: &[(&str, &str, bool)]) -> ProcessDef {
        let mut d = builtin_main();
        d.name = name.into();
        d.transitions = rules
            .iter()
            .map(|(to, when, execute_now)| Transition {
                to: to.to_string(),
                when: crate::process::when::parse(when).unwrap(),
                when_text: when.to_string(),
                execute_now: *execute_now,
                params: serde_json::json!({ "why": name })
                    .as_object()
                    .unwrap()
                    .clone(),
                line: 1,
            })
            .collect();
        d
    }

    fn lib(defs: &[ProcessDef]) -> std::sync::Arc<Loaded> {
        let soul = SoulFiles {
            soul_md: "# Wren".into(),
            skills_md: None,
            play_md: None,
            dir: Default::default(),
        };
        let map: BTreeMap<String, ProcessDef> =
            defs.iter().map(|d| (d.name.clone(), d.clone())).collect();
        Library::fixed(soul, map).current()
    }

    fn at(current: &str, invocations: u64) -> ThreadProcess {
        ThreadProcess {
            current: current.into(),
            invocations,
            ..ThreadProcess::default()
        }
    }

    #[test]
    fn entering_a_thread() {
        let l = lib(&[def("greeting", &[])]);
        let cases: [(Option<ThreadProcess>, &str, &str); 4] = [
            (None, "greeting", "greeting"),
            (None, "nowhere", MAIN),
            (Some(at("deep_work", 3)), "greeting", "deep_work"),
            (Some(at("gone", 1)), "greeting", "gone"),
        ];
        for (stored, initial, want) in cases {
            let s = enter(stored.as_ref(), initial, &l);
            assert_eq!(s.current, want, "{stored:?} {initial}");
        }
        // A stored process that no longer exists runs as main.
        let mut s = at("gone", 1);
        assert_eq!(begin_run(&mut s, &l).name, MAIN);
        assert_eq!(s.invocations, 2);
    }

    #[test]
    fn entering_proactive_remembers_where_the_thread_was() {
        let p = enter_proactive(Some(&at("deep_work", 4)));
        assert_eq!((p.current.as_str(), p.invocations), (PROACTIVE, 0));
        assert_eq!(p.previous.as_deref(), Some("deep_work"));
        let again = enter_proactive(Some(&at(PROACTIVE, 1)));
        assert_eq!(again.invocations, 1, "the run count goes on");
        let fresh = enter_proactive(None);
        assert_eq!(fresh.previous, None);
    }

    #[test]
    fn stepping_after_a_run() {
        let main = def(MAIN, &[("angry", "true", true)]);
        let angry = def("angry", &[("main", "true", false)]);
        let lost = def("lost", &[("nowhere", "true", true)]);
        let quiet = def("quiet", &[("main", "false", true)]);
        let l = lib(&[main.clone(), angry.clone(), lost.clone(), quiet.clone()]);
        let free = Chaining {
            done: 0,
            max: 3,
            allowed: true,
        };
        // (process, chaining) → (to, run again, fell back, chain cut)
        type Case<'a> = (&'a ProcessDef, Chaining, Option<&'a str>, bool, bool, bool);
        let cases: [Case; 6] = [
            (&main, free, Some("angry"), true, false, false),
            (&angry, free, Some("main"), false, false, false),
            (&lost, free, Some(MAIN), true, true, false),
            (&quiet, free, None, false, false, false),
            (
                &main,
                Chaining { done: 3, ..free },
                Some("angry"),
                false,
                false,
                true,
            ),
            (
                &main,
                Chaining {
                    allowed: false,
                    ..free
                },
                Some("angry"),
                false,
                false,
                false,
            ),
        ];
        for (d, chain, to, again, fell, cut) in cases {
            let s = step(d, at(&d.name, 1), &Facts::default(), &l, chain);
            let case = format!("{} {chain:?}", d.name);
            assert_eq!(s.record.as_ref().map(|r| r.to.as_str()), to, "{case}");
            assert_eq!(s.run_again, again, "{case}");
            assert_eq!(s.fell_back_from.is_some(), fell, "{case}");
            assert_eq!(s.chain_cut, cut, "{case}");
            match &s.record {
                Some(r) => {
                    assert_eq!(s.state.current, r.to, "{case}");
                    assert_eq!(s.state.previous.as_deref(), Some(d.name.as_str()));
                    assert_eq!(s.state.invocations, 0);
                    assert_eq!(s.state.params["why"], serde_json::json!(d.name));
                    assert_eq!(r.execute_now, chain.allowed && d.transitions[0].execute_now);
                }
                None => assert_eq!(s.state, at(&d.name, 1), "{case}"),
            }
        }
    }

    #[test]
    fn an_action_hands_over_as_a_rule_would_and_is_named() {
        let main = def(MAIN, &[]);
        let deep = def("deep_work", &[]);
        let l = lib(&[main.clone(), deep]);
        let free = Chaining {
            done: 0,
            max: 3,
            allowed: true,
        };
        let params = serde_json::json!({ "escalated": true })
            .as_object()
            .unwrap()
            .clone();
        let s = hand_over(&main, "Escalate", "deep_work", &params, true, &l, free);
        let r = s.record.as_ref().unwrap();
        assert_eq!(
            (r.to.as_str(), r.rule, r.action.as_deref()),
            ("deep_work", None, Some("Escalate"))
        );
        assert!(s.run_again && r.execute_now);
        assert_eq!(s.state.params["escalated"], serde_json::json!(true));
        // The chain bound and a missing target hold for actions too.
        let cut = hand_over(
            &main,
            "Escalate",
            "deep_work",
            &params,
            true,
            &l,
            Chaining { done: 3, ..free },
        );
        assert!(cut.chain_cut && !cut.run_again);
        let gone = hand_over(&main, "Up", "nowhere", &params, false, &l, free);
        assert_eq!(gone.state.current, MAIN);
        assert_eq!(gone.fell_back_from.as_deref(), Some("nowhere"));
    }
}
