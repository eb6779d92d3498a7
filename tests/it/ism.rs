//! Implicit semantic machines end to end, with scripted model answers: through `anima chat
//! --json` (max_loops and the guaranteed reply, `done`, an unknown action, a malformed
//! selection, a repeated choice, a hand-over with execute_now, the selection model, speaking
//! and going on, the switch to turn it off), through the engine (what a turn costs the store),
//! and through `anima run` against the fake Slack (a newer message interrupts). Every message
//! gets exactly one reply in every case.

use crate::support;

use std::path::Path;
use std::time::Duration;

use serde_json::{json, Value};
use support::daemon::{home as daemon_home, Daemon};
use support::slack::FakeSlack;
use support::*;

/// An ISM process with one action of each effect, and the processes it may hand over to.
const SOLVE: &str = r#"name = "solve"
kind = "ism"
description = "Solving a problem"
goal = "Understand the problem and help solve it"
playbook = "Think first; answer when ready."
steps = ["external_dialogue", "mental_query"]

[[actions]]
name = "Think"
description = "Think it through"
effect = "think"

[[actions]]
name = "Check"
description = "Ask yourself whether it is clear"
effect = "query"
question = "Is the problem clear?"

[[actions]]
name = "Respond"
description = "Answer the person"
effect = "respond"

[[actions]]
name = "Note"
description = "Say something and keep going"
effect = "respond"
continue = true

[[actions]]
name = "Escalate"
description = "Hand over to the expert"
effect = "transition"
to = "expert"
execute_now = true
params = { escalated = true }

[[actions]]
name = "Finish"
description = "The goal is met"
effect = "done"
"#;

fn processes(dir: &Path) {
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    write("solve.toml", SOLVE);
    write(
        "main.toml",
        "name = \"main\"\nsteps = [\"external_dialogue\"]\n",
    );
    write(
        "expert.toml",
        "name = \"expert\"\nsteps = [\"external_dialogue\"]\n",
    );
}

/// A home whose threads start in `solve`, with `extra` config after `[llm]`.
fn home(model: &FakeModel, extra: &str) -> Home {
    let home = Home::new(
        "anthropic",
        &model.url(),
        &format!("model = \"big-model\"\n\n[processes]\ninitial = \"solve\"\n{extra}"),
    );
    let dir = home.dir.path().join("processes");
    std::fs::create_dir_all(&dir).unwrap();
    processes(&dir);
    let cfg = std::fs::read_to_string(home.config()).unwrap();
    let cfg = cfg.replacen(
        "[paths]\n",
        &format!("[paths]\nprocesses_dir = \"{}\"\n", dir.display()),
        1,
    );
    std::fs::write(home.config(), cfg).unwrap();
    home
}

fn select(actions: &[&str], why: &str) -> String {
    let actions: String = actions
        .iter()
        .map(|a| format!("<action>{a}</action>"))
        .collect();
    format!("<action_selection>\n<reasoning>{why}</reasoning>\n{actions}\n</action_selection>")
}

fn thought(text: &str) -> String {
    format!("<internal_monologue verb=\"pondered\">{text}</internal_monologue>")
}

fn said(text: &str) -> String {
    format!("<external_dialogue verb=\"explained\">{text}</external_dialogue>")
}

/// Runs `chat --json` over `lines`: one JSON object per turn.
fn chat(home: &Home, lines: &[&str], extra_args: &[&str]) -> (Vec<Value>, String) {
    let mut args = vec!["chat", "--json", "--user", "Ada"];
    args.extend_from_slice(extra_args);
    let r = home.run(&args, &(lines.join("\n") + "\n"));
    assert_eq!(r.status, 0, "{}", r.stderr);
    let turns: Vec<Value> = r
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        turns.len(),
        lines.len(),
        "one reply per message: {}",
        r.stdout
    );
    for t in &turns {
        assert!(
            !t["reply"].as_str().unwrap().trim().is_empty(),
            "every reply says something: {t}"
        );
    }
    (turns, r.stderr)
}

fn turn_texts(model: &FakeModel) -> Vec<String> {
    model.requests().iter().map(|q| q.turn_text()).collect()
}

#[test]
fn max_loops_ends_the_loop_with_the_guaranteed_reply_and_the_log_carries_over() {
    let model = FakeModel::start();
    model
        .reply(&select(&["Think"], "Look at it first."))
        .reply(&thought("The loader leaks handles."))
        .reply(&select(&["Check"], "Is it clear now?"))
        .reply("<mental_query question=\"Is the problem clear?\">true</mental_query>")
        .reply(&said("The loader leaks handles: close them in drop."));
    let home = home(&model, "\n[ism]\nmax_loops = 2\n");
    let (turns, stderr) = chat(&home, &["My loader crashes."], &["--show-thoughts"]);
    let t = &turns[0];
    assert_eq!(t["reply"], "The loader leaks handles: close them in drop.");
    assert_eq!(t["iterations"], 2);
    assert_eq!(
        t["model_calls"], 5,
        "2 selections, 2 effects, 1 closing answer"
    );
    assert_eq!(t["process"], "solve");

    let texts = turn_texts(&model);
    assert!(
        texts[0].contains("<implicit_machine iteration=\"1\" of=\"2\">"),
        "{}",
        texts[0]
    );
    assert!(
        texts[0].contains("- Think: Think it through"),
        "{}",
        texts[0]
    );
    assert!(texts[0].contains("<action_selection>"), "{}", texts[0]);
    // The second selection sees what the first chose and what it produced.
    assert!(
        texts[2].contains(
            "Iteration 1: chose Think. Why: Look at it first.\n  Think → The loader leaks handles."
        ),
        "{}",
        texts[2]
    );
    assert!(
        texts[3].contains("question=\"Is the problem clear?\""),
        "{}",
        texts[3]
    );
    assert!(
        texts[4].contains("The loop has ended without an answer"),
        "{}",
        texts[4]
    );
    assert!(
        stderr.contains("[iteration 1] Think — Look at it first."),
        "{stderr}"
    );
    assert!(
        stderr.contains("    Check → Is the problem clear? true"),
        "{stderr}"
    );

    // Each iteration is in working memory, the ending on the last.
    let entries = wait(home.store().thread_entries("terminal")).unwrap();
    let its: Vec<&anima::memory::Entry> = entries
        .iter()
        .filter(|e| e.entry_type == anima::memory::EntryType::ActionSelection)
        .collect();
    assert_eq!(its.len(), 2);
    assert_eq!(its[0].metadata["chosen"], json!(["Think"]));
    assert_eq!(its[1].metadata["ending"], "max_loops");
    let shown = home.run(&["processes", "show", "terminal"], "");
    assert!(
        shown
            .stdout
            .contains("solve #2: Check — Is it clear now? [ended: max_loops]"),
        "{}",
        shown.stdout
    );
}

#[test]
fn done_an_unknown_action_prose_and_no_known_action_each_end_with_one_reply() {
    let model = FakeModel::start();
    model
        // 1: the seed's DONE word → the closing answer
        .reply(&select(&["DONE"], "Nothing to do."))
        .reply(&said("All set."))
        // 2: an unknown name is skipped, the known one runs
        .reply(&select(
            &["Research", "Respond"],
            "Look it up, then answer.",
        ))
        .reply(&said("Here it is."))
        // 3: prose instead of a selection → the closing answer
        .reply("I think I will simply answer the question now.")
        .reply(&said("Prose, then an answer."))
        // 4: a selection naming no known action → the closing answer
        .reply(&select(&["Dance"], "Why not."))
        .reply(&said("No dancing."))
        // 5: the done action
        .reply(&select(&["Finish"], "Done."))
        .reply(&said("Finished."));
    let home = home(&model, "");
    let (turns, stderr) = chat(
        &home,
        &["one", "two", "three", "four", "five"],
        &["--show-thoughts"],
    );
    let replies: Vec<&str> = turns.iter().map(|t| t["reply"].as_str().unwrap()).collect();
    assert_eq!(
        replies,
        [
            "All set.",
            "Here it is.",
            "Prose, then an answer.",
            "No dancing.",
            "Finished."
        ]
    );
    for t in &turns {
        assert_eq!(t["model_calls"], 2, "{t}");
        assert_eq!(t["iterations"], 1, "{t}");
    }
    assert!(
        stderr.contains("[iteration 1] Respond (skipped, not actions: Research)"),
        "{stderr}"
    );
    let endings: Vec<Value> = wait(home.store().thread_entries("terminal"))
        .unwrap()
        .iter()
        .filter(|e| e.entry_type == anima::memory::EntryType::ActionSelection)
        .map(|e| e.metadata["ending"].clone())
        .collect();
    assert_eq!(
        endings,
        [
            json!("done"),
            json!("responded"),
            json!("unparsable"),
            json!("nothing_known"),
            json!("done")
        ]
    );
}

#[test]
fn the_same_action_chosen_three_times_in_a_row_ends_the_loop() {
    let model = FakeModel::start();
    model
        .reply(&select(&["Think"], "a"))
        .reply(&thought("first"))
        .reply(&select(&["Think"], "b"))
        .reply(&thought("second"))
        .reply(&select(&["Think"], "c"))
        .reply(&said("Enough thinking."));
    let home = home(&model, "");
    let (turns, _) = chat(&home, &["Loop forever?"], &[]);
    assert_eq!(turns[0]["reply"], "Enough thinking.");
    assert_eq!(turns[0]["iterations"], 3);
    assert_eq!(turns[0]["model_calls"], 6, "the third Think does not run");
}

#[test]
fn speaking_and_going_on_makes_one_reply_of_everything_said() {
    let model = FakeModel::start();
    model
        .reply(&select(&["Note", "Think"], "Say hi, then think."))
        .reply(&said("One moment."))
        .reply(&thought("It is the cache."))
        .reply(&select(&["Respond"], "Ready."))
        .reply(&said("It is the cache."));
    let home = home(&model, "");
    let (turns, _) = chat(&home, &["Why is it slow?"], &[]);
    assert_eq!(turns[0]["reply"], "One moment.\n\nIt is the cache.");
    assert_eq!(turns[0]["model_calls"], 5);
    // Said once, as one reply in the history.
    let said: Vec<String> = wait(home.store().thread_entries("terminal"))
        .unwrap()
        .into_iter()
        .filter(|e| e.entry_type == anima::memory::EntryType::ExternalDialog)
        .map(|e| e.content)
        .collect();
    assert_eq!(said, ["One moment.\n\nIt is the cache."]);
}

#[test]
fn a_transition_action_with_execute_now_hands_over_at_once() {
    let model = FakeModel::start();
    model
        .reply(&select(&["Think", "Escalate"], "This needs the expert."))
        .reply(&thought("Deep problem."))
        .reply(&said("Expert here."));
    let home = home(&model, "");
    let (turns, _) = chat(&home, &["Kernel panic in my driver."], &[]);
    let t = &turns[0];
    assert_eq!(t["reply"], "Expert here.");
    assert_eq!(t["ran"], json!(["solve", "expert"]));
    assert_eq!(t["process"], "expert");
    assert_eq!(t["model_calls"], 3);
    let texts = turn_texts(&model);
    assert!(texts[2].contains("escalated = true"), "{}", texts[2]);
    let shown = home.run(&["processes", "show", "terminal"], "");
    assert!(
        shown
            .stdout
            .contains("solve → expert (action Escalate, execute_now)"),
        "{}",
        shown.stdout
    );
    let list = home.run(&["processes", "list"], "");
    for line in [
        "kind: ism, up to 5 ([ism] max_loops) iterations",
        "goal: Understand the problem and help solve it",
        "action Check (query \"Is the problem clear?\"): Ask yourself whether it is clear",
        "action Note (respond, then continue): Say something and keep going",
        "action Escalate (transition to expert, execute_now): Hand over to the expert",
        "answering steps: external_dialogue, mental_query",
    ] {
        assert!(list.stdout.contains(line), "{line}: {}", list.stdout);
    }
    let graph = home.run(&["processes", "graph"], "");
    assert!(
        graph
            .stdout
            .contains("solve -. \"action Escalate [execute_now]\" .-> expert"),
        "{}",
        graph.stdout
    );
}

#[test]
fn the_selection_model_answers_only_the_selections() {
    let model = FakeModel::start();
    model
        .reply(&select(&["Think"], "a"))
        .reply(&thought("t"))
        .reply(&select(&["Respond"], "b"))
        .reply(&said("Done."));
    let home = home(&model, "\n[ism]\nselection_model = \"small-model\"\n");
    chat(&home, &["Which model?"], &[]);
    let models: Vec<String> = model
        .requests()
        .iter()
        .map(|q| q.body["model"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        models,
        ["small-model", "big-model", "small-model", "big-model"]
    );
}

#[test]
fn with_ism_off_an_ism_process_runs_as_a_fixed_one() {
    let model = FakeModel::start();
    model.reply(&said("One call."));
    let home = home(&model, "\n[ism]\nenabled = false\n");
    let (turns, _) = chat(&home, &["Hi"], &[]);
    assert_eq!(turns[0]["reply"], "One call.");
    assert_eq!(turns[0]["model_calls"], 1);
    assert_eq!(turns[0]["iterations"], 0);
    assert!(!turn_texts(&model)[0].contains("<implicit_machine"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_five_iteration_turn_costs_no_more_write_transactions_than_iterations_plus_one() {
    let model = FakeModel::start();
    for i in 0..5 {
        let action = if i % 2 == 0 { "Think" } else { "Check" };
        model.reply(&select(&[action], "step"));
        model.reply(&if i % 2 == 0 {
            thought("more")
        } else {
            "<mental_query question=\"Is the problem clear?\">false</mental_query>".to_string()
        });
    }
    model.reply(&said("Here is where I got to."));
    let home = home(&model, "");
    let engine = engine(&model, &home);
    let store = engine.store().clone();
    let before = store.write_transactions();
    let out = engine
        .perceive(&anima::engine::Perception::Message(
            anima::engine::Message {
                thread: "t1".into(),
                user_id: "U1".into(),
                display_name: "Ada".into(),
                text: "Help?".into(),
                attachments: Vec::new(),
                source: None,
                inbox_id: None,
                claim: None,
                newer: None,
                speech: None,
            },
        ))
        .await
        .unwrap();
    let writes = store.write_transactions() - before;
    assert_eq!(out.iterations, 5);
    assert_eq!(out.model_calls, 11);
    assert_eq!(out.reply, "Here is where I got to.");
    assert!(
        writes <= u64::from(out.iterations) + 1,
        "{writes} write transactions for {} iterations",
        out.iterations
    );
    println!("a 5-iteration turn: {writes} write transactions");
}

/// `anima run` on a home whose threads start in `solve`, connected to the fake Slack.
fn ism_daemon(model: &FakeModel, slack: &FakeSlack) -> (Home, Daemon) {
    let home = daemon_home(model, slack, "socket", "");
    let dir = home.dir.path().join("processes");
    std::fs::create_dir_all(&dir).unwrap();
    processes(&dir);
    let cfg = std::fs::read_to_string(home.config()).unwrap();
    let cfg = cfg.replacen(
        "[paths]\n",
        &format!("[paths]\nprocesses_dir = \"{}\"\n", dir.display()),
        1,
    ) + "\n[processes]\ninitial = \"solve\"\n";
    std::fs::write(home.config(), cfg).unwrap();
    let d = Daemon::start(&home);
    slack.wait_connected_or(|| d.log());
    (home, d)
}

/// Waits until the model has been asked `n` times (the first turn is under way).
fn asked(model: &FakeModel, n: usize) {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while model.asked().len() < n {
        assert!(
            std::time::Instant::now() < deadline,
            "the model was not asked"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Waits until the daemon acknowledged these envelopes (it stored their messages first),
/// then opens the gate.
fn accepted(slack: &FakeSlack, envelopes: &[String], gate: Gate) {
    slack.wait(15, "the acknowledgements", |s| {
        let acks = s.acks();
        envelopes.iter().all(|e| acks.contains(e))
    });
    gate.open();
}

/// A direct message from U1.
fn dm(ts: &str, text: &str) -> Value {
    json!({"type":"message","channel":"D1","user":"U1","text":text,"ts":ts,"event_ts":ts,"channel_type":"im"})
}

/// A newer message interrupts the loop: the first message gets no reply of its own, its
/// thoughts stay in working memory and reach the second's loop, which answers once.
#[test]
fn in_the_daemon_a_newer_message_interrupts_and_is_answered_with_that_context() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let gate = Gate::default();
    model
        // The first message: its selection waits until the second is in, then a thought.
        .push(Script::Gated(
            gate.clone(),
            select(&["Think"], "Look first."),
        ))
        .reply(&thought("The build uses the wrong linker."))
        // The second message (which interrupted the first before its second iteration).
        .reply(&select(&["Respond"], "Answer both."))
        .reply(&said("Both: the linker is wrong, and yes, it is on Linux."))
        // A third, after the answer: the loop runs normally and says it.
        .reply(&select(&["Note", "Respond"], "Say it twice."))
        .reply(&said("First part."))
        .reply(&said("Second part."));
    let (home, d) = ism_daemon(&model, &slack);
    slack.send_event(dm("1700000000.000100", "My build fails."), "Ev1", 0);
    // While the first selection is under way.
    asked(&model, 1);
    let second = slack.send_event(dm("1700000000.000200", "It is on Linux."), "Ev2", 0);
    accepted(&slack, &[second], gate);
    slack.wait(15, "the answer", |s| !s.posts().is_empty());
    d.wait_log("ism loop ended", 5);
    std::thread::sleep(Duration::from_millis(500));
    let posts = slack.posts();
    assert_eq!(posts.len(), 1, "one reply for the two: {posts:?}");
    assert_eq!(
        posts[0].text,
        "Both: the linker is wrong, and yes, it is on Linux."
    );
    let texts = turn_texts(&model);
    assert_eq!(texts.len(), 4, "the first loop stopped after one iteration");
    assert!(
        texts[2].contains("it interrupted you there")
            && texts[2].contains("Think → The build uses the wrong linker."),
        "the second loop sees the first's thoughts: {}",
        texts[2]
    );
    // Both messages are done in the inbox.
    let store = home.store();
    for id in [1, 2] {
        let item = wait(store.inbox_item(id)).unwrap().unwrap();
        assert_eq!(item.status, anima::memory::InboxStatus::Done, "{id}");
    }

    let (status, metrics) = support::daemon::http("GET", &d.url("/metrics"), &[], "");
    assert_eq!(status, 200);
    assert!(
        metrics.contains("anima_ism_loops_total{ending=\"interrupted\"} 1")
            && metrics.contains("anima_ism_loops_total{ending=\"responded\"} 1")
            && metrics.contains("anima_ism_iterations_total 2"),
        "{metrics}"
    );

    // A later message in the same conversation is answered as usual, in order.
    slack.send_event(dm("1700000000.000300", "Thanks!"), "Ev3", 0);
    slack.wait(15, "the second answer", |s| s.posts().len() >= 2);
    std::thread::sleep(Duration::from_millis(500));
    let posts = slack.posts();
    assert_eq!(posts.len(), 2, "{posts:?}");
    assert_eq!(posts[1].text, "First part.\n\nSecond part.");
}

/// Only a message that comes after this one in the conversation's order (Slack's ts)
/// interrupts it: an older one that Slack delivers late (a retry, events out of order) is
/// answered after it, as any message, and takes nothing from it.
#[test]
fn in_the_daemon_an_older_message_delivered_late_does_not_interrupt() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let gate = Gate::default();
    model
        // The newer message, first in: its first selection waits until the older is in.
        .push(Script::Gated(
            gate.clone(),
            select(&["Think"], "Look first."),
        ))
        .reply(&thought("It is the linker."))
        .reply(&select(&["Respond"], "Ready."))
        .reply(&said("The linker is wrong."))
        // The older message, delivered late, answered after it.
        .reply(&select(&["Respond"], "Answer it."))
        .reply(&said("And yes, Linux."));
    let (_home, d) = ism_daemon(&model, &slack);
    slack.send_event(dm("1700000000.000200", "My build fails."), "Ev2", 0);
    asked(&model, 1);
    let older = slack.send_event(dm("1700000000.000100", "It is on Linux."), "Ev1", 0);
    accepted(&slack, &[older], gate);
    slack.wait(15, "both answers", |s| s.posts().len() >= 2);
    std::thread::sleep(Duration::from_millis(500));
    let posts: Vec<String> = slack.posts().into_iter().map(|p| p.text).collect();
    assert_eq!(posts, ["The linker is wrong.", "And yes, Linux."]);
    let (_, metrics) = support::daemon::http("GET", &d.url("/metrics"), &[], "");
    assert!(
        !metrics.contains("anima_ism_loops_total{ending=\"interrupted\"}"),
        "{metrics}"
    );
}

/// Two messages waiting, accepted in the reverse of their order: the older is interrupted
/// by the newer (it waits behind it), and the newer, though accepted first, is answered:
/// the one accepted after it is done by then, not newer.
#[test]
fn in_the_daemon_messages_waiting_out_of_order_get_one_answer() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let gate = Gate::default();
    model
        // The first message's selection waits until the other two are in.
        .push(Script::Gated(
            gate.clone(),
            select(&["Think"], "Look first."),
        ))
        .reply(&thought("It is the linker."))
        // The newest message answers all three.
        .reply(&select(&["Respond"], "Answer all."))
        .reply(&said("All three: the linker."));
    let (home, _d) = ism_daemon(&model, &slack);
    slack.send_event(dm("1700000000.000100", "My build fails."), "Ev1", 0);
    asked(&model, 1);
    let newest = slack.send_event(dm("1700000000.000300", "Any idea?"), "Ev3", 0);
    accepted(&slack, std::slice::from_ref(&newest), Gate::default());
    let middle = slack.send_event(dm("1700000000.000200", "It is on Linux."), "Ev2", 0);
    accepted(&slack, &[middle], gate);
    slack.wait(15, "the answer", |s| !s.posts().is_empty());
    std::thread::sleep(Duration::from_millis(1000));
    let posts: Vec<String> = slack.posts().into_iter().map(|p| p.text).collect();
    assert_eq!(posts, ["All three: the linker."]);
    let store = home.store();
    for id in [1, 2, 3] {
        let item = wait(store.inbox_item(id)).unwrap().unwrap();
        assert_eq!(item.status, anima::memory::InboxStatus::Done, "{id}");
    }
    assert_eq!(
        wait(store.inbox_item(2)).unwrap().unwrap().reply.as_deref(),
        Some("All three: the linker."),
        "the newest message, accepted second, is the one answered"
    );
}

#[test]
fn a_model_failure_mid_loop_answers_with_the_apology_once_and_counts_its_calls() {
    let model = FakeModel::start();
    model
        .reply(&select(&["Think"], "Look first."))
        .reply(&thought("Half a thought."));
    // The second selection fails on every attempt (max_retries = 2).
    for _ in 0..3 {
        model.push(Script::Status(500, Vec::new(), "{}".into()));
    }
    model
        .reply(&select(&["Respond"], "Now."))
        .reply(&said("Here I am again."));
    let home = home(&model, "");
    let (turns, _) = chat(&home, &["Help?", "Still there?"], &[]);
    assert_eq!(turns[0]["reply"], anima::engine::PROVIDER_DOWN_REPLY);
    assert!(turns[0]["error"].is_string());
    assert_eq!(turns[0]["model_calls"], 3, "two answered, one failed");
    assert_eq!(turns[1]["reply"], "Here I am again.");
    // The failed turn's message stays in memory; nothing of its loop was committed.
    let entries = wait(home.store().thread_entries("terminal")).unwrap();
    let texts: Vec<&str> = entries.iter().map(|e| e.content.as_str()).collect();
    assert!(texts.contains(&"Help?"), "{texts:?}");
    assert!(!texts.contains(&"Half a thought."), "{texts:?}");
}

/// A confused model's selection block in place of an answer: its reasoning is the soul's
/// private working, never a reply.
fn confused(secret: &str) -> String {
    select(&["Respond"], &format!("The plan, privately: {secret}"))
}

/// Nothing of a selection block ever reaches a reply.
fn assert_no_internal_block(reply: &str, secret: &str) {
    for word in ["action_selection", "reasoning", "<action>", secret] {
        assert!(!reply.contains(word), "{word} in the reply: {reply}");
    }
}

/// A closing answer without a dialogue is asked for once more; a second one without a
/// dialogue gives the short apology. An answering action without a dialogue says nothing.
#[test]
fn a_closing_answer_without_a_dialogue_is_asked_again_then_apologised_for() {
    let secret = "tell them the cache is haunted";
    let model = FakeModel::start();
    model
        // 1: the closing answer is a selection block; asked once more, it answers.
        .reply(&select(&["Finish"], "Done."))
        .reply(&confused(secret))
        .reply(&said("The cache is stale: clear it."))
        // 2: twice a selection block: the apology.
        .reply(&select(&["Finish"], "Done."))
        .reply(&confused(secret))
        .reply(&confused(secret))
        // 3: the respond action answers with a selection block: nothing of it is said,
        // and the closing answer speaks.
        .reply(&select(&["Respond"], "Answer."))
        .reply(&confused(secret))
        .reply(&said("Here is the answer."));
    let home = home(&model, "");
    let (turns, _) = chat(&home, &["one", "two", "three"], &[]);
    let replies: Vec<&str> = turns.iter().map(|t| t["reply"].as_str().unwrap()).collect();
    assert_eq!(
        replies,
        [
            "The cache is stale: clear it.",
            anima::parse::EMPTY_REPLY_APOLOGY,
            "Here is the answer."
        ]
    );
    let calls: Vec<&Value> = turns.iter().map(|t| &t["model_calls"]).collect();
    assert_eq!(calls, [&json!(3), &json!(3), &json!(3)]);
    assert!(
        turn_texts(&model)[2].contains("The loop has ended without an answer"),
        "asked once more as a closing answer"
    );
    // Nothing of the blocks is in what the soul said, in memory or in a reply.
    let said: Vec<String> = wait(home.store().thread_entries("terminal"))
        .unwrap()
        .into_iter()
        .filter(|e| e.entry_type == anima::memory::EntryType::ExternalDialog)
        .map(|e| e.content)
        .collect();
    assert_eq!(said, replies);
    for reply in &said {
        assert_no_internal_block(reply, secret);
    }
}

/// In Slack: a loop whose closing answers are selection blocks posts the apology, once, and
/// nothing of the blocks.
#[test]
fn in_the_daemon_a_selection_block_is_never_posted() {
    let secret = "the person seems gullible";
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model
        .reply(&select(&["Finish"], "Done."))
        .reply(&confused(secret))
        .reply(&confused(secret));
    let (_home, d) = ism_daemon(&model, &slack);
    slack.send_event(dm("1700000000.000100", "Is my cache haunted?"), "Ev1", 0);
    slack.wait(15, "the answer", |s| !s.posts().is_empty());
    d.wait_log("ism loop ended", 5);
    std::thread::sleep(Duration::from_millis(500));
    let posts = slack.posts();
    assert_eq!(posts.len(), 1, "one reply: {posts:?}");
    assert_eq!(posts[0].text, anima::parse::EMPTY_REPLY_APOLOGY);
    assert_no_internal_block(&posts[0].text, secret);
    assert_eq!(model.requests().len(), 3);
}
