//! Mental processes end to end: the shipped graph driven by scripted model outputs through
//! `anima chat`, execute_now chains and their bound, params, counters and previous process in
//! rules, the fallback for an unknown process, `anima check` on broken files, the commands,
//! and proactive follow-ups under a controlled clock.

use crate::support;

use std::path::Path;

use anima::engine::{Message, Perception, Quiet};
use serde_json::Value;
use support::*;

const SHIPPED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/processes");

/// A home whose processes come from `dir`.
fn home_with(model: &FakeModel, dir: &Path, extra: &str) -> Home {
    let home = Home::new("anthropic", &model.url(), extra);
    let cfg = std::fs::read_to_string(home.config()).unwrap();
    let cfg = cfg.replacen(
        "[paths]\n",
        &format!("[paths]\nprocesses_dir = \"{}\"\n", dir.display()),
        1,
    );
    std::fs::write(home.config(), cfg).unwrap();
    home
}

fn turns(r: &Run) -> Vec<Value> {
    r.stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn said(text: &str) -> String {
    format!("<internal_monologue>thinking</internal_monologue><external_dialogue>{text}</external_dialogue>")
}

#[test]
fn the_shipped_graph_under_scripted_answers() {
    let model = FakeModel::start();
    model
        // 1 greeting → main
        .reply(&said("Hello Tom, I'm Wren."))
        // 2 main, nothing special: stays
        .reply(&format!("{}<mental_query question=\"Is the user angry?\">false</mental_query>", said("Sure.")))
        // 3 main, soul-state check due: frustrated → frustrated
        .reply(&format!("{}<mental_query question=\"Is the user angry?\">false</mental_query><soul_state_check>true</soul_state_check><soul_state_update>emotionalState: frustrated</soul_state_update>", said("Again?")))
        // 4, 5 frustrated: stays
        .reply(&said("As I said."))
        .reply(&said("Yes."))
        // 6 frustrated, check due: focused with a task → deep_work
        .reply(&format!("{}<soul_state_check>true</soul_state_check><soul_state_update>emotionalState: focused\ncurrentTask: port the loader</soul_state_update>", said("Let's work.")))
        // 7 deep_work: the task is done → main
        .reply(&format!("{}<mental_query question=\"Is the task done?\">true</mental_query>", said("Done.")))
        // 8 main: the user is angry → deescalation at once (two calls)
        .reply(&format!("{}<mental_query question=\"Is the user angry?\">true</mental_query>", said("superseded")))
        .reply(&format!("{}<mental_query question=\"Is the user still upset?\">true</mental_query>", said("I hear you.")))
        // 9 deescalation: calmer → main
        .reply(&format!("{}<mental_query question=\"Is the user still upset?\">false</mental_query>", said("Glad we sorted it.")));
    let home = home_with(&model, Path::new(SHIPPED), "");
    let input: String = (1..=9).map(|i| format!("message {i}\n")).collect();
    let r = home.run(&["chat", "--json", "--user", "Tom"], &input);
    assert_eq!(r.status, 0, "{}", r.stderr);
    let t = turns(&r);
    let processes: Vec<&str> = t.iter().map(|t| t["process"].as_str().unwrap()).collect();
    assert_eq!(
        processes,
        [
            "main",
            "main",
            "frustrated",
            "frustrated",
            "frustrated",
            "deep_work",
            "main",
            "deescalation",
            "main"
        ]
    );
    let ran: Vec<Vec<&str>> = t
        .iter()
        .map(|t| {
            t["ran"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_str().unwrap())
                .collect()
        })
        .collect();
    assert_eq!(ran[0], ["greeting"]);
    assert_eq!(
        ran[7],
        ["main", "deescalation"],
        "execute_now ran the target on the same message"
    );
    assert_eq!(
        t[7]["reply"], "I hear you.",
        "the chain's last process answers; one reply"
    );

    let reqs = model.requests();
    assert_eq!(reqs.len(), 10);
    assert!(reqs[0].turn_text().contains("<process name=\"greeting\">"));
    assert!(
        !reqs[0].turn_text().contains("<soul_state_check>"),
        "greeting: no soul-state check"
    );
    assert!(
        reqs[3]
            .turn_text()
            .contains("Keep responses to 1-2 sentences."),
        "frustrated's override"
    );
    assert!(
        !reqs[6].turn_text().contains("<user_model_check>"),
        "deep_work skips the user model"
    );
    let deesc = reqs[8].turn_text();
    assert!(
        deesc.contains("Parameters: wasProvoked = true"),
        "params reach the next prompt: {deesc}"
    );
    assert!(deesc.contains("the mode before it: main"));
    assert!(deesc.contains("Is the user still upset?"));

    let show = home.run(&["processes", "show", "terminal"], "");
    assert_eq!(show.status, 0, "{}", show.stderr);
    assert!(show.stdout.contains("process:     main"), "{}", show.stdout);
    for line in [
        "greeting → main (rule 0)",
        "main → frustrated (rule 1)",
        "frustrated → deep_work (rule 1)",
        "deep_work → main (rule 0)",
        "main → deescalation (rule 0, execute_now)",
        "deescalation → main (rule 0)",
    ] {
        assert!(show.stdout.contains(line), "{line}: {}", show.stdout);
    }
    let entries = wait(home.store().thread_entries("terminal")).unwrap();
    assert!(
        !entries.iter().any(|e| e.content == "superseded"),
        "a superseded dialogue is never said"
    );
}

fn write(dir: &Path, name: &str, text: &str) {
    std::fs::write(dir.join(format!("{name}.toml")), text).unwrap();
}

#[test]
fn an_execute_now_cycle_is_bounded_by_max_chain() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "main", "name = \"main\"\nsteps = [\"external_dialogue\"]\n[[transitions]]\nto = \"ping\"\nexecute_now = true\n");
    write(d, "ping", "name = \"ping\"\nsteps = [\"external_dialogue\"]\n[[transitions]]\nto = \"pong\"\nexecute_now = true\n");
    write(d, "pong", "name = \"pong\"\nsteps = [\"external_dialogue\"]\n[[transitions]]\nto = \"ping\"\nexecute_now = true\n");
    let model = FakeModel::start();
    model.echo();
    let home = home_with(&model, d, "\n[processes]\nmax_chain = 3\n");
    let r = home.run_env(&["chat", "--json"], "go\n", &[("ANIMA_LOG", "anima=warn")]);
    assert_eq!(r.status, 0, "{}", r.stderr);
    let t = turns(&r);
    assert_eq!(
        t[0]["ran"],
        serde_json::json!(["main", "ping", "pong", "ping"])
    );
    assert_eq!(
        model.requests().len(),
        4,
        "one run and three execute_now hand-overs"
    );
    assert!(r.stderr.contains("chain bound reached"), "{}", r.stderr);
    assert_eq!(
        t[0]["process"], "pong",
        "the next message runs the pending target"
    );

    let check = home.run(&["check"], "");
    assert_eq!(check.status, 2);
    assert!(
        check.stdout.contains("execute_now rules form a cycle"),
        "{}",
        check.stdout
    );
}

#[test]
fn counters_previous_params_and_the_unknown_process_fallback() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "main", "name = \"main\"\nsteps = [\"external_dialogue\"]\n[[transitions]]\nto = \"study\"\nwhen = 'turns >= 2'\nparams = { topic = \"minoan\" }\n");
    write(d, "study", "name = \"study\"\nsteps = [\"external_dialogue\"]\n[[transitions]]\nto = \"ghost\"\nwhen = 'invocations >= 2 and previous == \"main\" and params.topic == \"minoan\"'\n");
    let model = FakeModel::start();
    model.echo();
    let home = home_with(&model, d, "");
    let r = home.run(&["chat", "--json"], "one\ntwo\nthree\nfour\n");
    assert_eq!(r.status, 0, "{}", r.stderr);
    let processes: Vec<String> = turns(&r)
        .iter()
        .map(|t| t["process"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        processes,
        ["main", "study", "study", "main"],
        "{}",
        r.stderr
    );
    let reqs = model.requests();
    assert!(reqs[2]
        .turn_text()
        .contains("Run 1 of this mode in this conversation; the mode before it: main."));
    assert!(reqs[3].turn_text().contains("Run 2 of this mode"));
    assert!(reqs[3].turn_text().contains("topic = \"minoan\""));
    let history = wait(home.store().transitions("terminal")).unwrap();
    let last = &history.last().unwrap().record;
    assert_eq!(
        (last.from.as_str(), last.to.as_str()),
        ("study", "main"),
        "ghost → main"
    );

    let check = home.run(&["check"], "");
    assert_eq!(check.status, 2);
    assert!(
        check
            .stdout
            .contains("study.toml:4: key `transitions[0].to`: names a missing process `ghost`"),
        "{}",
        check.stdout
    );
}

#[test]
fn check_and_the_commands_report_broken_process_files_with_their_lines() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "main",
        "name = \"main\"\nsteps = [\"external_dialogue\"]\n",
    );
    write(d, "broken", "name = \"broken\"\nsteps = [\"external_dialogue\", \"telepathy\"]\n[[transitions]]\nto = \"main\"\nwhen = 'turns >'\n");
    let model = FakeModel::start();
    let home = home_with(&model, d, "");
    let r = home.run(&["check"], "");
    assert_eq!(r.status, 2);
    assert!(
        r.stdout
            .contains("broken.toml:2: key `steps`: unknown step `telepathy`"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("broken.toml:5: key `transitions[0].when`"),
        "{}",
        r.stdout
    );
    let list = home.run(&["processes", "list"], "");
    assert_eq!(list.status, 2);
    assert!(list.stdout.contains("main"));
    let graph = home.run(&["processes", "graph", "--format", "dot"], "");
    assert!(
        graph.stdout.starts_with("digraph processes {"),
        "{}",
        graph.stdout
    );
}

fn proactive_answer(open: bool, closed: bool) -> String {
    format!(
        "<internal_monologue>hm</internal_monologue><mental_query question=\"{}\">{open}</mental_query><mental_query question=\"{}\">{closed}</mental_query><external_dialogue>Did the loader port work out?</external_dialogue>",
        anima::engine::FOLLOW_UP_QUESTION,
        anima::engine::CLOSED_QUESTION
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn proactive_follow_ups_under_a_controlled_clock() {
    let model = FakeModel::start();
    let home = home_with(
        &model,
        Path::new(SHIPPED),
        "\n[processes]\nproactive_idle_minutes = 240\n",
    );
    let engine = engine(&model, &home);
    let person = |thread: &str, text: &str| {
        Perception::Message(Message {
            thread: thread.into(),
            user_id: "U1".into(),
            display_name: "Tom".into(),
            text: text.into(),
            attachments: Vec::new(),
            source: None,
            inbox_id: None,
            claim: None,
            newer: None,
            speech: None,
        })
    };
    // What a quiet spell makes the soul say, if anything.
    let follow_up = |thread: &str, now_ms: i64| {
        let p = Perception::Quiet(Quiet {
            thread: thread.into(),
            now_ms,
            claim: None,
        });
        let engine = &engine;
        async move {
            let o = engine.perceive(&p).await.unwrap();
            o.said.then_some(o.reply)
        }
    };
    model
        .reply(&said("I'll look at the loader."))
        .reply(&said("Bye!"));
    engine
        .perceive(&person("A", "can you check the loader?"))
        .await
        .unwrap();
    engine.perceive(&person("B", "thanks, bye")).await.unwrap();
    let now = anima::memory::now_ms();
    let minute = 60_000;

    assert!(
        engine
            .quiet_threads(now + 239 * minute)
            .await
            .unwrap()
            .is_empty(),
        "not quiet long enough"
    );
    let mut quiet = engine.quiet_threads(now + 241 * minute).await.unwrap();
    quiet.sort();
    assert_eq!(quiet, ["A", "B"]);

    model.reply(&proactive_answer(true, false));
    let follow = follow_up("A", now + 241 * minute).await;
    assert_eq!(follow.as_deref(), Some("Did the loader port work out?"));
    let prompt = model.requests().last().unwrap().turn_text();
    assert!(
        prompt.contains("<quiet>\nNobody has written in this conversation for 241 minutes"),
        "{prompt}"
    );
    assert!(prompt.contains(anima::engine::FOLLOW_UP_QUESTION));

    model.reply(&proactive_answer(true, true));
    assert_eq!(
        follow_up("B", now + 241 * minute).await,
        None,
        "never in a closed thread"
    );

    // At most one unanswered follow-up: neither thread is quiet in that sense any more.
    assert!(engine
        .quiet_threads(now + 600 * minute)
        .await
        .unwrap()
        .is_empty());
    let entries = engine.store().thread_entries("A").await.unwrap();
    let last = entries.last().unwrap();
    assert_eq!(last.content, "Did the loader port work out?");
    assert_eq!(last.metadata["proactive"], true);
    assert_eq!(
        engine.store().interactions().await.unwrap(),
        2,
        "a proactive turn is not an interaction"
    );

    // The person answers: the thread can be quiet again later.
    model.reply(&said("Great."));
    engine
        .perceive(&person("A", "it worked, thanks"))
        .await
        .unwrap();
    let later = anima::memory::now_ms() + 241 * minute;
    assert_eq!(engine.quiet_threads(later).await.unwrap(), ["A"]);
    model.reply(&proactive_answer(false, false));
    assert_eq!(
        follow_up("A", later).await,
        None,
        "nothing open: no follow-up"
    );
    assert!(
        engine
            .quiet_threads(later + 600 * minute)
            .await
            .unwrap()
            .is_empty(),
        "one attempt per quiet spell"
    );

    // A model that fails on a quiet spell: that was the spell's attempt (an outage does not
    // bring a call for every quiet thread at every scan).
    model.reply(&said("Good."));
    engine
        .perceive(&person("B", "one more thing"))
        .await
        .unwrap();
    let spell = anima::memory::now_ms() + 241 * minute;
    assert_eq!(engine.quiet_threads(spell).await.unwrap(), ["B"]);
    for _ in 0..3 {
        model.push(Script::Status(500, Vec::new(), "{}".into()));
    }
    assert_eq!(follow_up("B", spell).await, None);
    assert!(
        engine
            .quiet_threads(spell + minute)
            .await
            .unwrap()
            .is_empty(),
        "the failed attempt counts"
    );
}

// `anima check` checks every name (issue 34, point 3).

#[test]
fn check_says_what_a_misspelt_initial_process_meant() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "main",
        "name = \"main\"\nsteps = [\"external_dialogue\"]\n",
    );
    write(
        d,
        "greeting",
        "name = \"greeting\"\nsteps = [\"external_dialogue\"]\n",
    );
    let model = FakeModel::start();
    let home = home_with(&model, d, "\n[processes]\ninitial = \"greting\"\n");
    let r = home.run(&["check"], "");
    assert_eq!(r.status, 2, "{}", r.stdout);
    let problem = r
        .stdout
        .lines()
        .find(|l| l.contains("processes.initial"))
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(problem.contains("anima.toml:"), "{problem}");
    assert!(problem.contains("no process `greting`"), "{problem}");
    assert!(problem.contains("did you mean `greeting`?"), "{problem}");

    // Against the shipped processes when the folder does not exist.
    let home = Home::new(
        "anthropic",
        &model.url(),
        "\n[processes]\ninitial = \"problem-solving\"\n",
    );
    let r = home.run(&["check"], "");
    assert_eq!(r.status, 2, "{}", r.stdout);
    assert!(
        r.stdout.contains("did you mean `problem_solving`?"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_target_that_is_nearly_a_process_says_which() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "main", "name = \"main\"\nsteps = [\"external_dialogue\"]\n[[transitions]]\nto = \"deep_wrok\"\nwhen = 'turns > 2'\n");
    write(
        d,
        "deep_work",
        "name = \"deep_work\"\nsteps = [\"external_dialogue\"]\n",
    );
    let model = FakeModel::start();
    let home = home_with(&model, d, "");
    let r = home.run(&["check"], "");
    assert_eq!(r.status, 2, "{}", r.stdout);
    assert!(
        r.stdout
            .contains("names a missing process `deep_wrok` (did you mean `deep_work`?"),
        "{}",
        r.stdout
    );
    // Follow-ups after a quiet spell run the `proactive` process: without it they never come.
    assert!(
        r.stdout
            .contains("warning: processes: no `proactive` process in"),
        "{}",
        r.stdout
    );
}

#[test]
fn a_broken_process_file_two_others_name_is_one_problem() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let to_study =
        "steps = [\"external_dialogue\"]\n[[transitions]]\nto = \"study\"\nwhen = 'turns > 2'\n";
    write(d, "main", &format!("name = \"main\"\n{to_study}"));
    write(d, "greeting", &format!("name = \"greeting\"\n{to_study}"));
    write(
        d,
        "study",
        "name = \"study\"\nsteps = [\"external_dialogue\", \"telepathy\"]\n",
    );
    let model = FakeModel::start();
    let home = home_with(&model, d, "");
    let r = home.run(&["check"], "");
    assert_eq!(r.status, 2, "{}", r.stdout);
    let problems: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("problem:"))
        .collect();
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(problems[0].contains("study.toml:2"), "{}", problems[0]);
    assert!(
        r.stdout.contains("check found 1 problem") || r.stderr.contains("check found 1 problem"),
        "{}{}",
        r.stdout,
        r.stderr
    );
}
