//! The expectations on the soul (process, state, user model, language, tools), a restart and
//! a pause, a model that fails mid-eval, runs at once, and the evals `anima init` ships.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::Value;

use super::{eval_json, home_with, named, one_turn, write_evals};
use crate::support;
use support::mcp::{python, said, select};
use support::*;

const ANGRY: &str = "<mental_query question=\"Is the user angry?\">true</mental_query><mental_query question=\"Is the user still upset?\">true</mental_query>";
const TESS: &str = "<user_model_check>true</user_model_check><user_model_update># Tess\n\nA nurse in Lyon, owns a cat called Miso 🐈.</user_model_update><model_change_note>Tess is a nurse.</model_change_note>";

#[test]
fn the_soul_s_process_state_model_and_language() {
    let model = FakeModel::start();
    model.respond_with(|turn| {
        let m = current_message(turn);
        if m.contains("furious") {
            format!("{ANGRY}<external_dialogue>I hear you.</external_dialogue>")
        } else if m.contains("Bonjour") {
            "<external_dialogue>Bonjour ! Je suis là, et je vous écoute.</external_dialogue>".into()
        } else if m.contains("nurse") {
            format!("<external_dialogue>Noted.</external_dialogue>{TESS}")
        } else {
            answer("Plain words.")
        }
    });
    let home = home_with(
        &model,
        &[
            // A thread's first message is the greeting's; the second goes through main.
            (
                "angry.toml",
                &format!(
                    "[[turn]]\nsay = \"hi\"\n{}",
                    one_turn("I am furious!", "process = \"deescalation\"")
                ),
            ),
            (
                "calm.toml",
                &one_turn("hello", "process = \"deescalation\""),
            ),
            (
                "soul.toml",
                &one_turn("hello", "soul_state_matches = \"sardonic\""),
            ),
            ("state.toml", &one_turn("hello", "state = \"dreaming\"")),
            (
                "model.toml",
                &one_turn(
                    "I am a nurse.",
                    "user_model_matches = \"(?i)cat called miso 🐈\"",
                ),
            ),
            (
                "nomodel.toml",
                &one_turn("hello", "user_model_matches = \"nurse\""),
            ),
            (
                "french.toml",
                &one_turn("Bonjour !", "reply_language = \"fr\""),
            ),
            (
                "english.toml",
                &one_turn("hello", "reply_language = \"fr\""),
            ),
        ],
    );
    let (r, report) = eval_json(&home, &["--jobs", "2"]);
    assert_eq!(r.status, 1, "{}", r.stderr);
    let ok = |name: &str| named(&report, name)["ok"].as_bool().unwrap();
    let got = |name: &str| {
        named(&report, name)["failures"][0]["got"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert!(ok("angry"), "{report:#}");
    assert!(ok("model"), "{report:#}");
    assert!(ok("french"), "{report:#}");
    assert!(!ok("calm"));
    assert_eq!(got("calm"), "the thread is in process \"main\"");
    assert!(!ok("state"));
    // `anima chat` never wakes the soul: a new store's soul is shut down.
    assert_eq!(got("state"), "the soul is in state \"SHUTDOWN\"");
    assert!(!ok("nomodel"));
    assert_eq!(
        got("english"),
        "a reply in no language anima can tell: \"Plain words.\""
    );
    assert_eq!(got("nomodel"), "no user model of this person");
    assert!(
        got("soul").contains("emotionalState: neutral"),
        "{}",
        got("soul")
    );
}

#[test]
fn a_restart_keeps_memory_and_a_pause_moves_the_soul_s_clock() {
    let model = FakeModel::start();
    model.respond_with(|turn| {
        if current_message(turn).contains("nurse") {
            format!("<external_dialogue>Noted.</external_dialogue>{TESS}")
        } else {
            answer("Welcome back.")
        }
    });
    let home = home_with(
        &model,
        &[(
            "memory.toml",
            "[[turn]]\nfrom = \"Tess\"\nsay = \"I am a nurse, my cat is Miso.\"\n[[turn]]\nfrom = \"Tess\"\nrestart = true\nafter = \"2h\"\nsay = \"Remember me?\"\n[turn.expect]\nuser_model_matches = \"Miso\"\nprocess = \"welcome_back\"\n[[turn]]\nfrom = \"Tess\"\nsay = \"Still there?\"\n[turn.expect]\nprocess = \"welcome_back\"\n",
        )],
    );
    // A process that a quiet spell of an hour or more leads to.
    write_evals(
        &home.dir.path().join("processes"),
        &[
            (
                "main.toml",
                "name = \"main\"\nsteps = [\"internal_monologue\", \"external_dialogue\", \"user_model_check\", \"user_model_update\"]\n[[transitions]]\nto = \"welcome_back\"\nwhen = 'idle_minutes >= 60'\n",
            ),
            ("welcome_back.toml", "name = \"welcome_back\"\nsteps = [\"external_dialogue\"]\n"),
        ],
    );
    let (r, report) = eval_json(&home, &[]);
    assert_eq!(r.status, 0, "{report:#}\n{}", r.stderr);
    let reqs = model.requests();
    assert_eq!(reqs.len(), 3, "one call a turn");
    assert!(
        reqs[1]
            .prompt_text()
            .contains("I am a nurse, my cat is Miso."),
        "the restarted soul reads the same store"
    );
    assert_eq!(named(&report, "memory")["passed"].as_u64(), Some(1));

    // Without the pause, the same conversation stays in main.
    let text = std::fs::read_to_string(home.dir.path().join("evals/memory.toml")).unwrap();
    std::fs::write(
        home.dir.path().join("evals/memory.toml"),
        text.replace("after = \"2h\"\n", ""),
    )
    .unwrap();
    let (r, report) = eval_json(&home, &[]);
    assert_eq!(r.status, 1, "{}", r.stderr);
    let f = &named(&report, "memory")["failures"][0];
    assert_eq!(
        (f["turn"].as_u64(), f["got"].as_str()),
        (Some(2), Some("the thread is in process \"main\""))
    );
}

#[test]
fn a_model_that_fails_mid_eval_fails_that_run_and_the_others_still_run() {
    let model = FakeModel::start();
    model
        .reply(&answer("First."))
        .push(Script::Status(400, vec![], "{\"type\":\"error\",\"error\":{\"type\":\"invalid_request_error\",\"message\":\"bad\"}}".into()))
        .reply(&answer("Second eval."));
    let home = home_with(
        &model,
        &[
            (
                "a.toml",
                "[[turn]]\nsay = \"one\"\n[[turn]]\nsay = \"two\"\n[[turn]]\nsay = \"three\"\n",
            ),
            ("b.toml", &one_turn("hi", "reply_matches = \"Second\"")),
        ],
    );
    let (r, report) = eval_json(&home, &[]);
    assert_eq!(r.status, 1, "{}", r.stderr);
    let f = &named(&report, "a")["failures"];
    assert_eq!(f.as_array().unwrap().len(), 1, "{f:#}");
    assert_eq!(
        (f[0]["turn"].as_u64(), f[0]["expectation"].as_str()),
        (Some(2), Some("the model answers"))
    );
    assert!(
        f[0]["got"]
            .as_str()
            .unwrap()
            .ends_with("(the run stopped here)"),
        "{f:#}"
    );
    assert_eq!(named(&report, "b")["ok"], true, "{report:#}");
    assert_eq!(model.requests().len(), 3, "turn three was never said");
}

#[test]
fn jobs_run_evals_at_once() {
    let model = FakeModel::start();
    let gate = Gate::default();
    for _ in 0..4 {
        model.push(Script::Gated(gate.clone(), answer("Together.")));
    }
    let evals: Vec<(String, String)> = (1..=4)
        .map(|i| {
            (
                format!("e{i}.toml"),
                one_turn("hi", "reply_matches = \"Together\""),
            )
        })
        .collect();
    let evals: Vec<(&str, &str)> = evals
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let home = home_with(&model, &evals);
    // The answers wait until four runs have asked at once (or 60 s, when they never do).
    let seen = Arc::new(AtomicUsize::new(0));
    let opener = {
        let (model, gate, seen) = (model.clone(), gate.clone(), seen.clone());
        std::thread::spawn(move || {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
            while model.requests().len() < 4 && std::time::Instant::now() < deadline {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            seen.store(model.requests().len(), Ordering::SeqCst);
            gate.open();
        })
    };
    let (r, report) = eval_json(&home, &["--jobs", "4"]);
    opener.join().unwrap();
    assert_eq!(
        seen.load(Ordering::SeqCst),
        4,
        "four runs asked before any was answered"
    );
    assert_eq!(r.status, 0, "{report:#}\n{}", r.stderr);
    assert_eq!(report["passed"].as_u64(), Some(4));
}

#[test]
fn the_shipped_evals_parse_and_run_against_the_fake_model() {
    let model = FakeModel::start();
    let dir = tempfile::tempdir().unwrap();
    let init = support::run(
        anima_command(
            &dir.path().join("none.toml"),
            dir.path(),
            &["init", dir.path().to_str().unwrap()],
        ),
        "",
    );
    assert_eq!(init.status, 0, "{}", init.stderr);
    let config = dir.path().join("anima.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text += &format!(
        "\n[llm]\nprovider = \"anthropic\"\nbase_url = \"{}\"\nmodel = \"m\"\ntimeout_secs = 5\n",
        model.url()
    );
    std::fs::write(&config, text).unwrap();
    let r = support::run(
        anima_command(&config, dir.path(), &["eval", "--json", "--jobs", "2"]),
        "",
    );
    assert_eq!(
        r.status, 1,
        "the fake's default reply meets few expectations: {}",
        r.stderr
    );
    let report: Value = serde_json::from_str(&r.stdout).unwrap();
    let names: Vec<&str> = report["evals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["name"].as_str().unwrap())
        .collect();
    assert_eq!(names.len(), 6, "{names:?}");
    for e in report["evals"].as_array().unwrap() {
        assert_eq!(e["runs"].as_u64(), Some(1), "{e:#}");
        for f in e["failures"].as_array().unwrap() {
            assert_ne!(f["expectation"], "the run completes", "{f:#}");
            assert_ne!(f["expectation"], "the model answers", "{f:#}");
        }
    }
    let remembers = named(&report, "remembers a name and a fact");
    assert_eq!(
        remembers["failures"][0]["turn"].as_u64(),
        Some(15),
        "{remembers:#}"
    );
}

#[test]
fn a_tool_using_ism_is_seen_calling_its_tool() {
    let model = FakeModel::start();
    model
        .reply(&select("Research", Some("{\"term\": \"deploy\"}")))
        .reply(&select("Respond", None))
        .reply(&said("Deploys go out every weekday at 10:00 UTC."));
    let home = Home::new(
        "anthropic",
        &model.url(),
        &format!(
            "model = \"m\"\n\n[processes]\ninitial = \"research\"\n\n[[tools.servers]]\nname = \"kb\"\ncommand = [\"{}\", \"{}/examples/mcp/kb_server.py\"]\ntimeout_secs = 10\n",
            python(),
            env!("CARGO_MANIFEST_DIR")
        ),
    );
    write_evals(
        &home.dir.path().join("processes"),
        &[
            ("main.toml", "name = \"main\"\nsteps = [\"external_dialogue\"]\n"),
            (
                "research.toml",
                "name = \"research\"\nkind = \"ism\"\ngoal = \"Answer from the notes\"\nsteps = [\"external_dialogue\"]\n[[actions]]\nname = \"Research\"\ndescription = \"Search the notes\"\neffect = \"tool\"\ntool = \"kb.lookup\"\n[[actions]]\nname = \"Respond\"\ndescription = \"Answer\"\neffect = \"respond\"\n",
            ),
        ],
    );
    let shipped = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/evals/tools/looks_up_first.toml"
    ))
    .unwrap();
    write_evals(
        &home.dir.path().join("evals"),
        &[
            ("looks.toml", &shipped),
            ("other.toml", &one_turn("x", "tool_called = \"kb.search\"")),
        ],
    );
    let (r, report) = eval_json(&home, &["evals/looks.toml"]);
    assert_eq!(r.status, 0, "{report:#}\n{}", r.stderr);
    model
        .reply(&select("Respond", None))
        .reply(&said("No idea."));
    let (r, report) = eval_json(&home, &["evals/other.toml"]);
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert_eq!(
        named(&report, "other")["failures"][0]["got"],
        "no tool was called"
    );
}
