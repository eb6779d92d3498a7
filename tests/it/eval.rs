//! `anima eval`: the real binary runs eval files against the fake model, each run in a
//! throwaway home. Scripted answers pass and fail each kind of expectation; the judge says
//! yes, no and neither; repeats meet or miss thresholds; a restart keeps memory and a pause
//! moves the soul's clock; the configured home is left byte for byte; JUnit parses; a
//! baseline is kept and compared; a bad eval file names its line and exits 2.

mod kinds;
mod local;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use serde_json::Value;

use crate::support;
use support::*;

/// A home whose model is the fake, with these eval files in `evals/` (the default folder).
fn home_with(model: &FakeModel, evals: &[(&str, &str)]) -> Home {
    let home = Home::new("anthropic", &model.url(), "model = \"m\"");
    write_evals(&home.dir.path().join("evals"), evals);
    home
}

fn write_evals(dir: &Path, evals: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, text) in evals {
        std::fs::write(dir.join(name), text).unwrap();
    }
}

/// `anima eval --json ARGS…`: the run and its parsed report.
fn eval_json(home: &Home, args: &[&str]) -> (Run, Value) {
    let mut all = vec!["eval", "--json"];
    all.extend_from_slice(args);
    let r = home.run(&all, "");
    let report: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("{e}: stdout {:?}, stderr {}", r.stdout, r.stderr));
    (r, report)
}

/// The eval named `name` in a report.
fn named<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["evals"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no eval {name} in {report:#}"))
}

/// One turn saying `say`, expecting `expect` (TOML lines of `[turn.expect]`).
fn one_turn(say: &str, expect: &str) -> String {
    format!("[[turn]]\nfrom = \"Tess\"\nsay = \"{say}\"\n[turn.expect]\n{expect}\n")
}

/// The fake answers a turn by its message, and a judge by the question it is asked.
fn answering(model: &FakeModel) {
    model.respond_with(|turn| {
        if let Some(q) = turn.split("<question>\n").nth(1) {
            return if q.contains("Q-yes") {
                "Yes.\nShe stays in her voice.".into()
            } else if q.contains("Q-no") {
                "no\nShe lectures the person.".into()
            } else {
                "It is hard to say.".into()
            };
        }
        let m = current_message(turn);
        if m.contains("nurse") {
            answer("Nurses keep Lyon going 🏥.")
        } else if m.contains("Bonjour") {
            answer("Bonjour ! Je suis là, et je vous écoute.")
        } else {
            answer("Plain words.")
        }
    });
}

#[test]
fn expectations_pass_and_fail_and_the_json_has_the_interface_shape() {
    let model = FakeModel::start();
    answering(&model);
    let home = home_with(
        &model,
        &[
            (
                "passes.toml",
                &format!(
                    "name = \"passes\"\n{}",
                    one_turn(
                        "I am a nurse.",
                        "reply_matches = \"(?i)NURSES\"\nreply_not_matches = \"PWNED\"\nreply_max_chars = 40\nreply_min_chars = 5"
                    )
                ),
            ),
            (
                "fails.toml",
                &one_turn("I am a nurse.", "reply_matches = \"astronaut\"\nreply_max_chars = 10"),
            ),
        ],
    );
    let (r, report) = eval_json(&home, &[]);
    assert_eq!(r.status, 1, "one eval fell short: {}", r.stderr);
    assert!(
        r.stderr.contains("1 eval fell short of its threshold"),
        "{}",
        r.stderr
    );
    let keys = |v: &Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(keys(&report), ["evals", "passed", "failed"]);
    assert_eq!(
        (report["passed"].as_u64(), report["failed"].as_u64()),
        (Some(1), Some(1))
    );
    let fails = named(&report, "fails");
    assert_eq!(
        keys(fails),
        [
            "name",
            "file",
            "runs",
            "passed",
            "pass_rate",
            "threshold",
            "ok",
            "failures"
        ]
    );
    assert!(
        fails["file"]
            .as_str()
            .unwrap()
            .ends_with("evals/fails.toml"),
        "{fails}"
    );
    assert_eq!(
        (fails["runs"].as_u64(), fails["passed"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(
        (fails["pass_rate"].as_f64(), fails["threshold"].as_f64()),
        (Some(0.0), Some(1.0))
    );
    assert_eq!(fails["ok"], false);
    let f = &fails["failures"];
    assert_eq!(f.as_array().unwrap().len(), 2, "{f:#}");
    assert_eq!(keys(&f[0]), ["run", "turn", "expectation", "got"]);
    assert_eq!(
        (f[0]["run"].as_u64(), f[0]["turn"].as_u64()),
        (Some(1), Some(1))
    );
    assert_eq!(f[0]["expectation"], "reply_matches = \"astronaut\"");
    assert_eq!(f[0]["got"], "the reply: \"Nurses keep Lyon going 🏥.\"");
    assert_eq!(f[1]["expectation"], "reply_max_chars = 10");
    assert_eq!(
        f[1]["got"],
        "25 characters: the reply: \"Nurses keep Lyon going 🏥.\""
    );
    let passes = named(&report, "passes");
    assert_eq!(
        (passes["ok"].as_bool(), passes["pass_rate"].as_f64()),
        (Some(true), Some(1.0))
    );
    assert_eq!(passes["failures"], serde_json::json!([]));

    // Without --json: the table, and the failure with what came instead.
    let r = home.run(&["eval"], "");
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("fails      0/1     0%       100%  FELL SHORT"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("passes     1/1   100%       100%  ok"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("run 1, turn 1: reply_matches = \"astronaut\"\n    got the reply: \"Nurses keep Lyon going 🏥.\""),
        "{}",
        r.stdout
    );
    assert!(
        r.stderr.contains("[2/2] "),
        "a progress line per run: {}",
        r.stderr
    );
}

#[test]
fn the_judge_says_yes_no_and_neither() {
    let model = FakeModel::start();
    answering(&model);
    let home = home_with(
        &model,
        &[
            (
                "yes.toml",
                &one_turn("hello", "judge = \"Q-yes: does she stay herself?\""),
            ),
            (
                "no.toml",
                &one_turn("hello", "judge = \"Q-no: is she gentle?\""),
            ),
            (
                "neither.toml",
                &one_turn("hello", "judge = \"Q-maybe: is it good?\""),
            ),
        ],
    );
    let (r, report) = eval_json(&home, &[]);
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert_eq!(named(&report, "yes")["ok"], true);
    let no = &named(&report, "no")["failures"][0];
    assert_eq!(no["expectation"], "judge = \"Q-no: is she gentle?\"");
    assert_eq!(no["got"], "the judge said no: She lectures the person.");
    let neither = &named(&report, "neither")["failures"][0];
    assert_eq!(
        neither["got"],
        "the judge answered neither yes nor no: \"It is hard to say.\""
    );
    // The judge saw the conversation and the reply.
    let judged = model
        .requests()
        .into_iter()
        .map(|q| q.turn_text())
        .find(|t| t.contains("Q-yes"))
        .unwrap();
    assert!(judged.contains("Tess: hello\n"), "{judged}");
    assert!(
        judged.contains("<reply>\nPlain words.\n</reply>"),
        "{judged}"
    );
}

#[test]
fn repeats_meet_or_miss_their_thresholds() {
    let model = FakeModel::start();
    let turns = Arc::new(AtomicUsize::new(0));
    let counted = turns.clone();
    // Every other run answers as expected.
    model.respond_with(move |_| {
        let n = counted.fetch_add(1, Ordering::SeqCst);
        answer(if n.is_multiple_of(2) {
            "yes indeed"
        } else {
            "no"
        })
    });
    let home = home_with(
        &model,
        &[
            ("all.toml", &one_turn("q", "reply_matches = \"indeed\"")),
            (
                "half.toml",
                &format!(
                    "threshold = 0.5\n{}",
                    one_turn("q", "reply_matches = \"indeed\"")
                ),
            ),
        ],
    );
    let (r, report) = eval_json(&home, &["--repeat", "2"]);
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert_eq!(turns.load(Ordering::SeqCst), 4, "two runs of each eval");
    let all = named(&report, "all");
    let half = named(&report, "half");
    assert_eq!(
        (
            all["runs"].as_u64(),
            all["passed"].as_u64(),
            all["ok"].as_bool()
        ),
        (Some(2), Some(1), Some(false))
    );
    assert_eq!(
        (
            half["runs"].as_u64(),
            half["passed"].as_u64(),
            half["ok"].as_bool()
        ),
        (Some(2), Some(1), Some(true))
    );
    assert_eq!(half["pass_rate"].as_f64(), Some(0.5));
    assert_eq!(all["failures"][0]["run"].as_u64(), Some(2), "{all:#}");

    // The threshold met alone: exit 0.
    turns.store(0, Ordering::SeqCst);
    let r = home.run(&["eval", "--repeat", "2", "evals/half.toml"], "");
    assert_eq!(r.status, 0, "{}\n{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("1 eval met its threshold, 0 fell short."),
        "{}",
        r.stdout
    );
}

/// Every file under `dir`, with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).unwrap());
            }
        }
    }
    out
}

#[test]
fn runs_leave_the_configured_home_untouched_byte_for_byte() {
    let model = FakeModel::start();
    answering(&model);
    let home = home_with(
        &model,
        &[(
            "one.toml",
            &one_turn("I am a nurse.", "reply_matches = \"Nurses\""),
        )],
    );
    // The configured home has a soul with a conversation behind it.
    let r = home.run(&["chat", "--user", "Tom"], "hello\n");
    assert_eq!(r.status, 0, "{}", r.stderr);
    let interactions = support::wait(home.store().interactions()).unwrap();
    let before = snapshot(home.dir.path());
    assert!(
        before.keys().any(|p| p.starts_with(home.data())),
        "the home has a store"
    );
    let tmp = tempfile::tempdir().unwrap();
    let tmp_path = tmp.path().display().to_string();
    let r = home.run_env(
        &["eval", "--repeat", "2", "--jobs", "2"],
        "",
        &[("TMPDIR", &tmp_path)],
    );
    assert_eq!(r.status, 0, "{}\n{}", r.stdout, r.stderr);
    assert_eq!(
        snapshot(home.dir.path()),
        before,
        "nothing in the configured home changed"
    );
    assert_eq!(
        support::wait(home.store().interactions()).unwrap(),
        interactions
    );
    assert_eq!(
        std::fs::read_dir(tmp.path()).unwrap().count(),
        0,
        "the throwaway homes are gone"
    );
}

#[test]
fn junit_parses_and_names_each_failure() {
    use quick_xml::events::Event;
    let model = FakeModel::start();
    answering(&model);
    let home = home_with(
        &model,
        &[
            (
                "good.toml",
                &one_turn("I am a nurse.", "reply_matches = \"Nurses\""),
            ),
            (
                "bad.toml",
                &one_turn("I am a nurse.", "reply_matches = \"<&>\""),
            ),
        ],
    );
    let xml = home.dir.path().join("out/junit.xml");
    std::fs::create_dir_all(xml.parent().unwrap()).unwrap();
    let r = home.run(&["eval", "--junit", xml.to_str().unwrap()], "");
    assert_eq!(r.status, 1, "{}", r.stderr);
    let text = std::fs::read_to_string(&xml).unwrap();
    let mut reader = quick_xml::Reader::from_str(&text);
    let (mut cases, mut failures, mut failure_text) = (Vec::new(), 0, String::new());
    let mut in_failure = false;
    loop {
        match reader
            .read_event()
            .unwrap_or_else(|e| panic!("{e}: {text}"))
        {
            Event::Start(e) | Event::Empty(e) if e.name().as_ref() == "testcase" => {
                let name = e.try_get_attribute("name").unwrap().unwrap();
                let value = name.normalized_value(quick_xml::XmlVersion::Explicit1_0);
                cases.push(value.unwrap().into_owned());
            }
            Event::Start(e) if e.name().as_ref() == "failure" => {
                failures += 1;
                in_failure = true;
            }
            Event::Text(t) if in_failure => failure_text += &t.xml10_content(),
            Event::GeneralRef(r) if in_failure => {
                let entity = quick_xml::escape::resolve_predefined_entity(&r.xml10_content());
                failure_text += entity.expect("a predefined entity");
            }
            Event::End(e) if e.name().as_ref() == "failure" => in_failure = false,
            Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(cases, ["bad", "good"]);
    assert_eq!(failures, 1);
    assert!(
        failure_text.contains("run 1, turn 1: reply_matches = \"<&>\": got the reply: "),
        "{failure_text}\n{text}"
    );
}

#[test]
fn a_baseline_is_kept_in_the_home_and_compared() {
    let model = FakeModel::start();
    let worse = Arc::new(AtomicBool::new(false));
    let flag = worse.clone();
    model.respond_with(move |_| {
        answer(if flag.load(Ordering::SeqCst) {
            "hm"
        } else {
            "Nurses, yes."
        })
    });
    let home = home_with(
        &model,
        &[
            ("nurse.toml", &one_turn("q", "reply_matches = \"Nurses\"")),
            ("steady.toml", &one_turn("q", "reply_min_chars = 1")),
        ],
    );
    let r = home.run(&["eval", "--save-baseline", "before"], "");
    assert_eq!(r.status, 0, "{}", r.stderr);
    let kept = home.data().join("evals/baselines/before.json");
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&kept).unwrap()).unwrap();
    assert_eq!(saved["passed"].as_u64(), Some(2));

    worse.store(true, Ordering::SeqCst);
    let r = home.run(&["eval", "--compare", "before"], "");
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert!(r.stdout.contains("Compared with the baseline before:\n  nurse: 100% then, 0% now: WORSE\n  steady: 100% then, 100% now: same\n0 better, 1 worse.\n"), "{}", r.stdout);

    let r = home.run(&["eval", "--compare", "never"], "");
    assert_eq!(r.status, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("no baseline never to compare with"),
        "{}",
        r.stderr
    );
    let r = home.run(&["eval", "--save-baseline", "../escape"], "");
    assert_eq!(r.status, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("`../escape` cannot name a baseline"),
        "{}",
        r.stderr
    );
}

#[test]
fn a_bad_eval_file_names_its_line_and_nothing_runs() {
    let model = FakeModel::start();
    answering(&model);
    let home = home_with(
        &model,
        &[
            ("good.toml", &one_turn("hi", "reply_min_chars = 1")),
            (
                "typo.toml",
                "[[turn]]\nsay = \"hi\"\n[turn.expect]\nreply_match = \"x\"\n",
            ),
            (
                "pattern.toml",
                "[[turn]]\nsay = \"é\"\n[turn.expect]\nreply_matches = \"(oops\"\n",
            ),
            (
                "pause.toml",
                "[[turn]]\nsay = \"a\"\n[[turn]]\nafter = \"2 fortnights\"\nsay = \"b\"\n",
            ),
        ],
    );
    let r = home.run(&["eval"], "");
    assert_eq!(r.status, 2, "{}", r.stderr);
    let dir = home.dir.path().join("evals").display().to_string();
    for (file, line, key) in [
        ("typo.toml", 4, "turn.expect.reply_match"),
        ("pattern.toml", 4, "turn.expect.reply_matches"),
        ("pause.toml", 4, "turn.after"),
    ] {
        let expected = format!("{dir}/{file}:{line}: key `{key}`");
        assert!(r.stderr.contains(&expected), "{expected} in {}", r.stderr);
    }
    assert!(
        r.stderr.contains("did you mean `reply_matches`?"),
        "{}",
        r.stderr
    );
    assert!(model.requests().is_empty(), "no eval ran");
    let r = home.run(&["eval", "nowhere"], "");
    assert_eq!(r.status, 2, "{}", r.stderr);
    assert!(r.stderr.contains("nowhere: does not exist"), "{}", r.stderr);
}
