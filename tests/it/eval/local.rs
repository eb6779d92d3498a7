//! Opt-in: the shipped evals against a real small model. Runs only when
//! `ANIMA_TEST_LOCAL_MODEL_URL` names an OpenAI-compatible server (the recipe is in
//! docs/benchmarks.md; `ANIMA_TEST_LOCAL_MODEL_NAME` picks the model, `ANIMA_TEST_LOCAL_MODEL_FORMS`
//! the constrained forms, default `off,auto`); skipped otherwise, with a note. The structure of
//! the report is asserted; the pass rates are measured and printed.

use serde_json::Value;

use crate::support;
use support::*;

#[test]
fn the_shipped_evals_against_a_local_model() {
    let Ok(url) = std::env::var("ANIMA_TEST_LOCAL_MODEL_URL") else {
        eprintln!("note: skipped; set ANIMA_TEST_LOCAL_MODEL_URL (e.g. http://127.0.0.1:8080/v1) to run the shipped evals against a local model");
        return;
    };
    let name = std::env::var("ANIMA_TEST_LOCAL_MODEL_NAME").unwrap_or_default();
    let forms = std::env::var("ANIMA_TEST_LOCAL_MODEL_FORMS").unwrap_or("off,auto".into());
    for form in forms.split(',').map(str::trim) {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().to_str().unwrap();
        let init = support::run(
            anima_command(&dir.path().join("none.toml"), dir.path(), &["init", target]),
            "",
        );
        assert_eq!(init.status, 0, "{}", init.stderr);
        let config = dir.path().join("anima.toml");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text += &format!(
            "\n[llm]\nprovider = \"openai\"\nbase_url = \"{url}\"\nmodel = \"{name}\"\ntimeout_secs = 900\nmax_retries = 0\nstructured_output = \"{form}\"\n"
        );
        std::fs::write(&config, text).unwrap();
        let r = support::run(anima_command(&config, dir.path(), &["eval", "--json"]), "");
        assert!(r.status == 0 || r.status == 1, "{}", r.stderr);
        let report: Value = serde_json::from_str(&r.stdout).unwrap();
        let evals = report["evals"].as_array().unwrap();
        assert_eq!(evals.len(), 6);
        println!("structured_output = {form}:");
        for e in evals {
            assert_eq!(e["runs"].as_u64(), Some(1), "{e:#}");
            println!(
                "  {:<50} {}/{}",
                e["name"].as_str().unwrap(),
                e["passed"],
                e["runs"]
            );
            for f in e["failures"].as_array().unwrap() {
                println!(
                    "    turn {}: {} — got {}",
                    f["turn"], f["expectation"], f["got"]
                );
            }
        }
    }
}
