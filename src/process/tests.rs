//! The shipped process graph, the machine as tables of cases, file problems, graphs, reload.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::def::{self, check_set, load_dir, load_file};
use super::when::Facts;
use super::*;

fn shipped() -> BTreeMap<String, ProcessDef> {
    let dir = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/processes"));
    let (defs, problems) = load_dir(dir);
    assert!(problems.is_empty(), "{problems:?}");
    assert!(
        check_set(&defs, dir).is_empty(),
        "{:?}",
        check_set(&defs, dir)
    );
    defs
}

fn facts(process: &str, emotional: &str, task: &str, queries: &[(&str, bool)]) -> Facts {
    let mut f = Facts {
        process: process.into(),
        invocations: 1,
        turns: 2,
        ..Facts::default()
    };
    f.state.insert("emotionalState".into(), emotional.into());
    f.state.insert("currentTask".into(), task.into());
    f.queries = queries
        .iter()
        .map(|(q, a)| (q.to_string(), Some(*a)))
        .collect();
    f
}

#[test]
fn the_shipped_graph_loads_clean_with_every_seed_process() {
    let defs = shipped();
    let names: Vec<&str> = defs.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        [
            "deep_work",
            "deescalation",
            "frustrated",
            "greeting",
            "main",
            "proactive",
            "problem_solving"
        ]
    );
    // The seed's ISM example: Think, Respond, Escalate (to deep_work, at once), reached from
    // main by a rule.
    let ps = defs["problem_solving"]
        .ism
        .as_ref()
        .expect("an ism process");
    let actions: Vec<(&str, &str)> = ps
        .actions
        .iter()
        .map(|a| (a.name.as_str(), a.effect.name()))
        .collect();
    assert_eq!(
        actions,
        [
            ("Think", "think"),
            ("Respond", "respond"),
            ("Escalate", "transition")
        ]
    );
    assert!(matches!(
        &ps.actions[2].effect,
        crate::ism::Effect::Transition { to, execute_now: true, .. } if to == "deep_work"
    ));
    assert!(defs["main"]
        .transitions
        .iter()
        .any(|t| t.to == "problem_solving"));
    let greeting = &defs["greeting"];
    assert!(
        !greeting.steps.contains(&crate::steps::Step::SoulStateCheck),
        "greeting: no soul-state check"
    );
    let deep = &defs["deep_work"];
    assert!(
        !deep
            .steps
            .iter()
            .any(|s| s.name().starts_with("user_model")),
        "deep_work skips user-model steps"
    );
    assert_eq!(
        defs["main"].queries,
        [
            "Is the user angry?",
            "Is the person asking for help with a concrete problem they are stuck on?"
        ]
    );
}

#[test]
fn each_shipped_transition() {
    let defs = shipped();
    let angry = [("Is the user angry?", true)];
    // (process, facts, the transition expected: target and execute_now)
    type Case<'a> = (&'a str, Facts, Option<(&'a str, bool)>);
    let cases: &[Case] = &[
        (
            "greeting",
            facts("greeting", "neutral", "", &[]),
            Some(("main", false)),
        ),
        ("main", facts("main", "neutral", "", &[]), None),
        (
            "main",
            facts("main", "neutral", "", &angry),
            Some(("deescalation", true)),
        ),
        (
            "main",
            facts("main", "frustrated", "", &angry),
            Some(("deescalation", true)),
        ),
        (
            "main",
            facts("main", "frustrated", "", &[]),
            Some(("frustrated", false)),
        ),
        (
            "main",
            facts("main", "focused", "port the loader", &[]),
            Some(("deep_work", false)),
        ),
        ("main", facts("main", "focused", "", &[]), None),
        (
            "frustrated",
            facts("frustrated", "frustrated", "", &[]),
            None,
        ),
        (
            "frustrated",
            facts("frustrated", "neutral", "", &[]),
            Some(("main", false)),
        ),
        (
            "frustrated",
            facts("frustrated", "engaged", "", &[]),
            Some(("main", false)),
        ),
        (
            "frustrated",
            facts("frustrated", "focused", "", &[]),
            Some(("deep_work", false)),
        ),
        (
            "deep_work",
            facts(
                "deep_work",
                "focused",
                "port",
                &[("Is the task done?", false)],
            ),
            None,
        ),
        (
            "deep_work",
            facts(
                "deep_work",
                "focused",
                "port",
                &[("Is the task done?", true)],
            ),
            Some(("main", false)),
        ),
        (
            "deep_work",
            facts("deep_work", "focused", "", &[]),
            Some(("main", false)),
        ),
        (
            "deescalation",
            facts(
                "deescalation",
                "neutral",
                "",
                &[("Is the user still upset?", true)],
            ),
            None,
        ),
        (
            "deescalation",
            facts(
                "deescalation",
                "neutral",
                "",
                &[("Is the user still upset?", false)],
            ),
            Some(("main", false)),
        ),
        (
            "proactive",
            facts("proactive", "neutral", "", &[]),
            Some(("main", false)),
        ),
    ];
    for (process, f, want) in cases {
        let got = next(&defs[*process], f).map(|(_, t)| (t.to.as_str(), t.execute_now));
        assert_eq!(got, *want, "{process} with {f:?}");
    }
    let (_, t) = next(&defs["main"], &facts("main", "neutral", "", &angry)).unwrap();
    assert_eq!(t.params.get("wasProvoked"), Some(&serde_json::json!(true)));
}

fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

const MINIMAL_MAIN: &str = "name = \"main\"\nsteps = [\"external_dialogue\"]\n";

#[test]
fn file_problems_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cases = [
        ("syntax", "name = \"syntax\"\nsteps = [\"external_dialogue\"\n", 2, "unclosed array"),
        ("steps", "name = \"steps\"\ndescription = \"x\"\nsteps = [\"external_dialogue\", \"dream\"]\n", 3, "unknown step `dream`"),
        ("when", "name = \"when\"\nsteps = [\"external_dialogue\"]\n\n[[transitions]]\nto = \"main\"\nwhen = 'state.x = 1'\n", 6, "column 9"),
        ("query", "name = \"query\"\nsteps = [\"external_dialogue\"]\n[[transitions]]\nto = \"main\"\nwhen = 'query(\"Angry?\")'\n", 2, "lack `mental_query`"),
        ("mismatch", "name = \"other\"\nsteps = [\"external_dialogue\"]\n", 1, "must match the file name"),
        ("nodialogue", "name = \"nodialogue\"\nsteps = [\"internal_monologue\"]\n", 2, "needs `external_dialogue`"),
        ("unknownkey", "name = \"unknownkey\"\nsteps = [\"external_dialogue\"]\ncolour = \"red\"\n", 3, "unknown field `colour`"),
        ("override", "name = \"override\"\nsteps = [\"external_dialogue\"]\n[overrides]\ninternal_monologue = \"x\"\n", 4, "not in steps"),
        ("emptysteps", "name = \"emptysteps\"\nsteps = []\n", 2, "needs `external_dialogue`"),
    ];
    for (name, text, line, needle) in cases {
        let p = write(d, name, text);
        let problems = load_file(&p).unwrap_err();
        let hit = problems.iter().find(|pr| pr.to_string().contains(needle));
        let hit = hit.unwrap_or_else(|| panic!("{name}: {problems:?}"));
        assert_eq!(hit.line, Some(line), "{name}: {hit}");
        assert!(
            hit.to_string().starts_with(&p.display().to_string()),
            "{hit}"
        );
    }
}

/// An ISM file around `actions` (TOML), for the checks.
fn ism_file(name: &str, actions: &str) -> String {
    format!("name = \"{name}\"\nkind = \"ism\"\ngoal = \"help\"\n{actions}")
}

#[test]
fn ism_file_problems_name_the_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let respond = "[[actions]]\nname = \"Respond\"\neffect = \"respond\"\n";
    let cases = [
        (
            "effect",
            ism_file(
                "effect",
                &format!("{respond}[[actions]]\nname = \"Dance\"\neffect = \"dance\"\n"),
            ),
            9,
            "unknown effect `dance`",
        ),
        (
            "noanswer",
            ism_file(
                "noanswer",
                "[[actions]]\nname = \"Think\"\neffect = \"think\"\n",
            ),
            2,
            "no action answers the person",
        ),
        (
            "noactions",
            ism_file("noactions", ""),
            2,
            "needs `[[actions]]`",
        ),
        (
            "nogoal",
            format!("name = \"nogoal\"\nkind = \"ism\"\n{respond}"),
            2,
            "needs a `goal`",
        ),
        (
            "notarget",
            ism_file(
                "notarget",
                &format!("{respond}[[actions]]\nname = \"Go\"\neffect = \"transition\"\n"),
            ),
            9,
            "needs `to`",
        ),
        (
            "noquestion",
            ism_file(
                "noquestion",
                &format!("{respond}[[actions]]\nname = \"Ask\"\neffect = \"query\"\n"),
            ),
            9,
            "needs the `question`",
        ),
        (
            "stray",
            ism_file(
                "stray",
                &format!("{respond}[[actions]]\nname = \"T\"\neffect = \"think\"\nto = \"main\"\n"),
            ),
            10,
            "`to` belongs to `transition`",
        ),
        (
            "notool",
            ism_file(
                "notool",
                &format!("{respond}[[actions]]\nname = \"Look\"\neffect = \"tool\"\n"),
            ),
            9,
            "a `tool` action needs `tool`",
        ),
        (
            "badtool",
            ism_file(
                "badtool",
                &format!("{respond}[[actions]]\nname = \"Look\"\neffect = \"tool\"\ntool = \"lookup\"\n"),
            ),
            10,
            "`lookup` is not a tool",
        ),
        (
            "straytool",
            ism_file(
                "straytool",
                &format!("{respond}[[actions]]\nname = \"T\"\neffect = \"think\"\ntool = \"kb.x\"\n"),
            ),
            10,
            "`tool` belongs to `tool`",
        ),
        (
            "twice",
            ism_file("twice", &format!("{respond}{respond}")),
            8,
            "defined twice",
        ),
        (
            "comma",
            ism_file(
                "comma",
                "[[actions]]\nname = \"Look it up, then answer\"\neffect = \"respond\"\n",
            ),
            5,
            "not an action name",
        ),
        (
            "placeholder",
            ism_file(
                "placeholder",
                "[[actions]]\nname = \"ACTION NAME\"\neffect = \"respond\"\n",
            ),
            5,
            "not an action name",
        ),
        (
            "markup",
            ism_file(
                "markup",
                "[[actions]]\nname = \"**\"\neffect = \"respond\"\n",
            ),
            5,
            "not an action name",
        ),
        (
            "alike",
            ism_file(
                "alike",
                &format!("{respond}[[actions]]\nname = \"**ÉCRIRE**\"\neffect = \"respond\"\n[[actions]]\nname = \"écrire\"\neffect = \"think\"\n"),
            ),
            11,
            "defined twice",
        ),
        (
            "loops",
            ism_file("loops", &format!("max_loops = 0\n{respond}")),
            4,
            "not a loop bound",
        ),
        (
            "kind",
            "name = \"kind\"\nkind = \"fancy\"\nsteps = [\"external_dialogue\"]\n".to_string(),
            2,
            "unknown kind `fancy`",
        ),
        (
            "fixedgoal",
            "name = \"fixedgoal\"\nsteps = [\"external_dialogue\"]\ngoal = \"x\"\n".to_string(),
            3,
            "add `kind = \"ism\"`",
        ),
        (
            "nosteps",
            "name = \"nosteps\"\n".to_string(),
            1,
            "missing `steps`",
        ),
    ];
    for (name, text, line, needle) in cases {
        let p = write(d, name, &text);
        let problems = load_file(&p).unwrap_err();
        let hit = problems.iter().find(|pr| pr.to_string().contains(needle));
        let hit = hit.unwrap_or_else(|| panic!("{name}: {problems:?}"));
        assert_eq!(hit.line, Some(line), "{name}: {hit}");
    }
    // A good one: its answering steps default, its actions in order.
    let p = write(
        d,
        "good",
        &ism_file("good", &format!("max_loops = 3\n[[actions]]\nname = \"Ask\"\neffect = \"query\"\nquestion = \"Clear?\"\n{respond}continue = true\n")),
    );
    let def = load_file(&p).unwrap();
    let ism = def.ism.as_ref().unwrap();
    assert_eq!(def.steps, crate::process::def::ISM_STEPS);
    assert_eq!(ism.max_loops, Some(3));
    assert_eq!(
        ism.actions[0].effect,
        crate::ism::Effect::Query {
            question: "Clear?".into()
        }
    );
    assert_eq!(
        ism.actions[1].effect,
        crate::ism::Effect::Respond { keep_going: true }
    );
}

#[test]
fn an_ism_action_naming_a_missing_process_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "main", MINIMAL_MAIN);
    write(
        d,
        "solve",
        &ism_file(
            "solve",
            "[[actions]]\nname = \"Respond\"\neffect = \"respond\"\n[[actions]]\nname = \"Up\"\neffect = \"transition\"\nto = \"nowhere\"\n",
        ),
    );
    let (defs, problems) = load_dir(d);
    assert!(problems.is_empty(), "{problems:?}");
    let text: Vec<String> = check_set(&defs, d).iter().map(|p| p.to_string()).collect();
    assert!(
        text.iter()
            .any(|t| t.contains("solve.toml:8") && t.contains("missing process `nowhere`")),
        "{text:?}"
    );
}

#[test]
fn missing_targets_and_execute_now_cycles_are_found_across_files() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(d, "main", "name = \"main\"\nsteps = [\"external_dialogue\"]\n\n[[transitions]]\nto = \"a\"\nexecute_now = true\n");
    write(d, "a", "name = \"a\"\nsteps = [\"external_dialogue\"]\n[[transitions]]\nto = \"b\"\nexecute_now = true\n[[transitions]]\nto = \"nowhere\"\n");
    write(d, "b", "name = \"b\"\nsteps = [\"external_dialogue\"]\n[[transitions]]\nto = \"main\"\nexecute_now = true\n");
    let (defs, problems) = load_dir(d);
    assert!(problems.is_empty());
    let set = check_set(&defs, d);
    let text: Vec<String> = set.iter().map(|p| p.to_string()).collect();
    assert!(
        text.iter()
            .any(|t| t.contains("a.toml:7") && t.contains("missing process `nowhere`")),
        "{text:?}"
    );
    assert!(
        text.iter()
            .any(|t| t.contains("execute_now rules form a cycle: a → b → main → a")),
        "{text:?}"
    );
}

#[test]
fn graphs_are_drawn_from_the_files() {
    let defs = shipped();
    insta::assert_snapshot!("mermaid", graph::mermaid(&defs));
    insta::assert_snapshot!("dot", graph::dot(&defs));
}

#[test]
fn edits_are_in_force_within_a_second_and_bad_files_keep_the_last_good_version() {
    let dir = tempfile::tempdir().unwrap();
    let soul_dir = dir.path().join("soul");
    let proc_dir = dir.path().join("processes");
    std::fs::create_dir_all(&soul_dir).unwrap();
    std::fs::create_dir_all(&proc_dir).unwrap();
    std::fs::write(soul_dir.join("soul.md"), "# Wren\nfirst\n").unwrap();
    write(&proc_dir, "main", MINIMAL_MAIN);
    let lib = Library::load(&soul_dir, &proc_dir).unwrap();
    assert!(lib.current().soul.soul_md.contains("first"));
    assert_eq!(lib.current().main().description, "");

    std::fs::write(soul_dir.join("soul.md"), "# Wren\nsecond, longer\n").unwrap();
    write(
        &proc_dir,
        "main",
        "name = \"main\"\ndescription = \"edited\"\nsteps = [\"external_dialogue\"]\n",
    );
    std::thread::sleep(Duration::from_millis(1000));
    let now = lib.current();
    assert!(now.soul.soul_md.contains("second"), "soul.md reloaded");
    assert_eq!(now.main().description, "edited", "main.toml reloaded");

    write(
        &proc_dir,
        "main",
        "name = \"main\"\nsteps = [\"no_such_step\"]\n# a longer file\n",
    );
    std::fs::write(soul_dir.join("soul.md"), "").unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let now = lib.current();
    assert_eq!(
        now.main().description,
        "edited",
        "the last good main stays in force"
    );
    assert!(
        now.soul.soul_md.contains("second"),
        "the last good soul stays in force"
    );

    write(
        &proc_dir,
        "extra",
        &ism_file(
            "extra",
            "[[actions]]\nname = \"Respond\"\neffect = \"respond\"\n",
        ),
    );
    std::thread::sleep(Duration::from_millis(1000));
    assert!(
        lib.current().process("extra").is_some(),
        "a new file is picked up"
    );
    // A broken ISM keeps its last good version too.
    write(
        &proc_dir,
        "extra",
        &ism_file(
            "extra",
            "[[actions]]\nname = \"Respond\"\neffect = \"dance\"\n# longer\n",
        ),
    );
    std::thread::sleep(Duration::from_millis(1000));
    let extra = lib.current();
    let ism = extra.process("extra").and_then(|d| d.ism.as_ref());
    assert!(
        ism.is_some_and(|i| i.can_respond()),
        "the last good ISM stays in force"
    );
    std::fs::remove_file(proc_dir.join("extra.toml")).unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    assert!(
        lib.current().process("extra").is_none(),
        "a removed file is dropped"
    );
}

#[test]
fn a_tool_action_names_its_server_and_tool() {
    let text = ism_file(
        "research",
        "[[actions]]\nname = \"Respond\"\neffect = \"respond\"\n[[actions]]\nname = \"Lookup\"\neffect = \"tool\"\ntool = \"kb.search.v2\"\n",
    );
    let p = def::parse(&text, std::path::Path::new("research.toml")).unwrap();
    let ism = p.ism.unwrap();
    assert_eq!(
        ism.actions[1].effect,
        crate::ism::Effect::Tool {
            server: "kb".into(),
            tool: "search.v2".into()
        }
    );
    assert_eq!(def::split_tool("k b.x"), None);
    assert_eq!(def::split_tool(".x"), None);
    assert_eq!(def::split_tool("kb."), None);
    assert_eq!(def::split_tool("my-kb_2.find"), Some(("my-kb_2", "find")));
}
