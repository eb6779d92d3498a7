use super::*;

fn action(name: &str, effect: Effect) -> Action {
    Action {
        name: name.into(),
        description: format!("{name} it"),
        effect,
        line: 1,
    }
}

fn ism(max_loops: Option<u32>) -> Ism {
    Ism {
        goal: "help".into(),
        playbook: "step by step".into(),
        max_loops,
        actions: vec![
            action("Think", Effect::Think),
            action(
                "Check",
                Effect::Query {
                    question: "Is it clear?".into(),
                },
            ),
            action("Respond", Effect::Respond { keep_going: false }),
            action("Note", Effect::Respond { keep_going: true }),
            action(
                "Escalate",
                Effect::Transition {
                    to: "deep_work".into(),
                    params: Default::default(),
                    execute_now: true,
                },
            ),
            action("Finish", Effect::Done),
        ],
    }
}

fn choice(names: &[&str]) -> Option<Choice> {
    Some(Choice {
        actions: names.iter().map(|s| s.to_string()).collect(),
        reasoning: "because".into(),
        ..Choice::default()
    })
}

fn names(d: &Decision) -> Vec<String> {
    d.run.iter().map(|a| a.name.clone()).collect()
}

#[test]
fn max_loops_stops_the_loop_and_defaults_from_config() {
    let spec = ism(None);
    let mut l = Loop::new(&spec, 2);
    assert_eq!(l.max_loops(), 2);
    for _ in 0..2 {
        assert_eq!(l.before_iteration(false), None);
        let d = l.choose(choice(&["Think", "Check"]));
        assert_eq!(d.ending, None);
    }
    assert_eq!(l.before_iteration(false), Some(Ending::MaxLoops));
    let own = ism(Some(7));
    assert_eq!(Loop::new(&own, 2).max_loops(), 7);
    let zero = ism(Some(0));
    assert_eq!(Loop::new(&zero, 2).max_loops(), 1, "at least one iteration");
}

#[test]
fn a_newer_message_interrupts_before_any_iteration() {
    let spec = ism(None);
    let l = Loop::new(&spec, 5);
    assert_eq!(l.before_iteration(true), Some(Ending::Interrupted));
}

#[test]
fn chosen_actions_run_in_order_and_nothing_after_a_final_one() {
    let spec = ism(None);
    let mut l = Loop::new(&spec, 5);
    let d = l.choose(choice(&["Think", "Respond", "Think", "Escalate"]));
    assert_eq!(names(&d), ["Think", "Respond"]);
    assert_eq!(d.ending, None);
    assert_eq!(l.log()[0].chosen, ["Think", "Respond"]);
    assert_eq!(l.log()[0].reasoning, "because");
}

#[test]
fn names_are_matched_loosely_and_unknown_ones_are_skipped_and_kept() {
    let spec = ism(None);
    let mut l = Loop::new(&spec, 5);
    let d = l.choose(choice(&["**think**", "Research", " \"RESPOND\". "]));
    assert_eq!(names(&d), ["Think", "Respond"]);
    assert_eq!(l.log()[0].unknown, ["Research"]);
}

#[test]
fn a_selection_with_no_known_action_or_unreadable_ends_the_loop() {
    let spec = ism(None);
    let mut l = Loop::new(&spec, 5);
    assert_eq!(
        l.choose(choice(&["Research", "Dance"])).ending,
        Some(Ending::NothingKnown)
    );
    assert_eq!(l.choose(None).ending, Some(Ending::Unparsable));
    assert_eq!(l.iterations(), 2, "both iterations are in the log");
}

#[test]
fn the_seeds_done_word_ends_the_loop_when_no_action_has_that_name() {
    let spec = ism(None);
    let mut l = Loop::new(&spec, 5);
    assert_eq!(l.choose(choice(&["DONE"])).ending, Some(Ending::Done));
    let d = l.choose(choice(&["Finish"]));
    assert_eq!(names(&d), ["Finish"]);
    assert_eq!(l.produced(d.run[0], ""), Some(Ending::Done));
}

#[test]
fn the_same_non_final_choice_three_times_in_a_row_ends_the_loop() {
    let spec = ism(None);
    let mut l = Loop::new(&spec, 10);
    assert_eq!(l.choose(choice(&["Think"])).ending, None);
    assert_eq!(l.choose(choice(&["Think"])).ending, None);
    let third = l.choose(choice(&["think"]));
    assert!(third.run.is_empty(), "not run a third time");
    assert_eq!(third.ending, Some(Ending::Repeated("Think".into())));

    // Something else in between breaks the streak.
    let mut l = Loop::new(&spec, 10);
    for names in [["Think"], ["Check"], ["Think"], ["Think"]] {
        assert_eq!(l.choose(choice(&names)).ending, None);
    }
}

#[test]
fn what_ran_is_logged_and_final_effects_end_the_loop() {
    let spec = ism(None);
    let mut l = Loop::new(&spec, 5);
    let d = l.choose(choice(&["Think", "Note", "Escalate"]));
    assert_eq!(l.produced(d.run[0], " a thought "), None);
    assert!(!l.spoke());
    assert_eq!(l.produced(d.run[1], "said hi"), None, "continue = true");
    assert!(l.spoke());
    assert_eq!(
        l.produced(d.run[2], ""),
        Some(Ending::HandedOver("Escalate".into()))
    );
    assert_eq!(
        l.log()[0].produced,
        [
            ("Think".to_string(), "a thought".to_string()),
            ("Note".to_string(), "said hi".to_string()),
            ("Escalate".to_string(), String::new()),
        ]
    );
    let respond = spec.action("Respond").unwrap();
    assert_eq!(l.produced(respond, "bye"), Some(Ending::Responded));
}

#[test]
fn an_ism_knows_whether_it_can_answer() {
    let mut spec = ism(None);
    assert!(spec.can_respond());
    spec.actions
        .retain(|a| !matches!(a.effect, Effect::Respond { .. }));
    assert!(!spec.can_respond());
}

#[test]
fn an_action_runs_at_most_once_per_selection() {
    // A small model stuck repeating itself must not cost a call per repetition.
    let spec = ism(None);
    let mut l = Loop::new(&spec, 5);
    let many: Vec<&str> = ["Think", "Note", "think", "**Note**"]
        .into_iter()
        .cycle()
        .take(400)
        .chain(["Check", "Respond"])
        .collect();
    let d = l.choose(choice(&many));
    assert_eq!(names(&d), ["Think", "Note", "Check", "Respond"]);
    assert_eq!(l.log()[0].chosen, ["Think", "Note", "Check", "Respond"]);
}

#[test]
fn a_run_makes_a_bounded_number_of_calls() {
    // Per iteration: the selection, and one call for each think, query or respond action at
    // most; then the closing answer. Transition and done make no call.
    let spec = ism(Some(4));
    assert_eq!(spec.calls_per_run(9), 4 * (1 + 4) + 1);
    assert_eq!(ism(None).calls_per_run(2), 2 * 5 + 1);
    let mut l = Loop::new(&spec, 9);
    let mut calls = 0u64;
    while l.before_iteration(false).is_none() {
        calls += 1;
        let all: Vec<&str> = spec.actions.iter().map(|a| a.name.as_str()).collect();
        let d = l.choose(choice(&[&all[..], &all[..]].concat()));
        calls += d
            .run
            .iter()
            .filter(|a| !matches!(a.effect, Effect::Transition { .. } | Effect::Done))
            .count() as u64;
        if d.ending.is_some() {
            break;
        }
    }
    assert!(calls < spec.calls_per_run(9), "{calls}");
}

proptest::proptest! {
    #[test]
    fn an_action_is_found_by_its_name_in_any_script(
        name in "[^\\p{C}]{1,12}",
        other in "[^\\p{C}]{1,12}",
    ) {
        let mut spec = ism(None);
        spec.actions[0].name = name.clone();
        let found = spec.action(&name).map(|a| a.name.clone());
        proptest::prop_assert_eq!(found.as_deref(), Some(name.as_str()));
        let _ = spec.action(&other);
        let _ = spec.action(&format!("**{other}**"));
    }
}

#[test]
fn an_iteration_reads_back_from_its_record_and_odd_records_read_as_empty() {
    let it = Iteration {
        number: 2,
        chosen: vec!["Think".into(), "Respond".into()],
        unknown: vec!["Dance ✨".into()],
        reasoning: "Première réflexion, 然后回答".into(),
        produced: vec![("Think".into(), "思考 🦀".into())],
        calls: vec![ToolCall {
            action: "Lookup".into(),
            tool: "kb.lookup".into(),
            arguments: "{\"term\":\"x\"}".into(),
            outcome: "ok".into(),
            ms: 3,
        }],
    };
    assert_eq!(Iteration::from_record(&it.reasoning, &it.record()), it);
    let odd =
        serde_json::json!({ "iteration": -1, "chosen": "Think", "produced": [1, {"action": 2}] });
    let read = Iteration::from_record("", &odd);
    assert_eq!(read.number, 0);
    assert!(read.chosen.is_empty());
    assert_eq!(read.produced, vec![(String::new(), String::new()); 2]);
}

#[test]
fn a_tool_action_goes_on_and_makes_no_model_call() {
    let mut spec = ism(Some(2));
    let before = spec.calls_per_run(5);
    spec.actions.push(action(
        "Lookup",
        Effect::Tool {
            server: "kb".into(),
            tool: "lookup".into(),
        },
    ));
    assert_eq!(
        spec.calls_per_run(5),
        before,
        "a tool call is not a model call"
    );
    assert_eq!(
        spec.tools()
            .map(|(a, s, t)| (a.name.as_str(), s, t))
            .collect::<Vec<_>>(),
        [("Lookup", "kb", "lookup")]
    );
    let mut l = Loop::new(&spec, 5);
    let d = l.choose(choice(&["Lookup", "Respond"]));
    assert_eq!(names(&d), ["Lookup", "Respond"]);
    let lookup = d.run[0];
    assert_eq!(
        l.produced(lookup, "found it"),
        None,
        "a tool result does not end the loop"
    );
}

#[test]
fn arguments_are_found_by_the_actions_name_as_names_are_matched() {
    let c = Choice {
        actions: vec!["Lookup".into()],
        reasoning: String::new(),
        arguments: vec![
            ("**lookup**".into(), "{\"a\": 1}".into()),
            ("Other".into(), "{}".into()),
            ("Lookup".into(), "{\"a\": 2}".into()),
        ],
    };
    assert_eq!(
        c.arguments_for("LOOKUP"),
        Some("{\"a\": 2}"),
        "the last given counts"
    );
    assert_eq!(c.arguments_for("Missing"), None);
}
