//! The results of every run, gathered per eval, and their forms: the table a person reads,
//! the `--json` object, JUnit XML for CI, and the comparison with a saved baseline. Pure:
//! the caller writes them where they go.

use serde::{Deserialize, Serialize};

use super::expect::cut;
use super::run::Failed;

/// One eval's results over its runs (the `--json` shape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvalResult {
    pub name: String,
    pub file: String,
    pub runs: usize,
    pub passed: usize,
    pub pass_rate: f64,
    pub threshold: f64,
    pub ok: bool,
    pub failures: Vec<RunFailure>,
}

/// A failed expectation of one run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFailure {
    /// From 1.
    pub run: usize,
    pub turn: usize,
    pub expectation: String,
    pub got: String,
}

/// Every eval's results (the `--json` object; a baseline is one saved).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub evals: Vec<EvalResult>,
    /// Evals that met their threshold.
    pub passed: usize,
    /// Evals that fell short.
    pub failed: usize,
}

impl EvalResult {
    /// The result of `runs` (each run's failures, in run order).
    pub fn new(name: &str, file: &str, threshold: f64, runs: Vec<Vec<Failed>>) -> EvalResult {
        let passed = runs.iter().filter(|f| f.is_empty()).count();
        let pass_rate = if runs.is_empty() {
            0.0
        } else {
            passed as f64 / runs.len() as f64
        };
        let failures = runs
            .iter()
            .enumerate()
            .flat_map(|(i, fails)| {
                fails.iter().map(move |f| RunFailure {
                    run: i + 1,
                    turn: f.turn,
                    expectation: f.expectation.clone(),
                    got: f.got.clone(),
                })
            })
            .collect();
        EvalResult {
            name: name.to_string(),
            file: file.to_string(),
            runs: runs.len(),
            passed,
            pass_rate,
            threshold,
            // A share compared with a little room, so 2/3 meets a threshold written 0.6667.
            ok: !runs.is_empty() && pass_rate + 1e-9 >= threshold,
            failures,
        }
    }
}

impl Report {
    pub fn new(evals: Vec<EvalResult>) -> Report {
        let passed = evals.iter().filter(|e| e.ok).count();
        let failed = evals.len() - passed;
        Report {
            evals,
            passed,
            failed,
        }
    }

    /// The table: each eval's runs, pass rate and threshold, then each failed expectation
    /// with what came instead, then the count.
    pub fn table(&self) -> String {
        let width = self
            .evals
            .iter()
            .map(|e| e.name.chars().count())
            .max()
            .unwrap_or(4)
            .max(4);
        let mut out = format!(
            "{:<width$}  {:>6}  {:>5}  {:>9}\n",
            "eval", "passed", "rate", "threshold"
        );
        for e in &self.evals {
            out += &format!(
                "{:<width$}  {:>6}  {:>5}  {:>9}  {}\n",
                e.name,
                format!("{}/{}", e.passed, e.runs),
                percent(e.pass_rate),
                percent(e.threshold),
                if e.ok { "ok" } else { "FELL SHORT" }
            );
        }
        for e in self.evals.iter().filter(|e| !e.failures.is_empty()) {
            out += &format!("\n{} ({}):\n", e.name, e.file);
            for f in &e.failures {
                out += &format!(
                    "  run {}, turn {}: {}\n    got {}\n",
                    f.run,
                    f.turn,
                    f.expectation,
                    cut(&f.got, 400)
                );
            }
        }
        out += &format!(
            "\n{} met {}, {} fell short.\n",
            super::plural(self.passed, "eval"),
            if self.passed == 1 {
                "its threshold"
            } else {
                "their thresholds"
            },
            self.failed
        );
        out
    }

    /// The report as JUnit XML: a test case per eval, failed when it fell short, each failed
    /// expectation in its failure's text.
    pub fn junit(&self) -> String {
        use quick_xml::events::{BytesDecl, BytesEnd, BytesStart, BytesText, Event};
        let mut w = quick_xml::Writer::new_with_indent(Vec::new(), b' ', 2);
        let count = self.evals.len().to_string();
        let failed = self.failed.to_string();
        let mut write = |e: Event| w.write_event(e).expect("writing into memory");
        write(Event::Decl(BytesDecl::new("1.0", Some("UTF-8"), None)));
        let mut suites = BytesStart::new("testsuites");
        suites.push_attribute(("name", "anima eval"));
        suites.push_attribute(("tests", count.as_str()));
        suites.push_attribute(("failures", failed.as_str()));
        write(Event::Start(suites));
        let mut suite = BytesStart::new("testsuite");
        suite.push_attribute(("name", "anima eval"));
        suite.push_attribute(("tests", count.as_str()));
        suite.push_attribute(("failures", failed.as_str()));
        suite.push_attribute(("errors", "0"));
        write(Event::Start(suite));
        for e in &self.evals {
            let mut case = BytesStart::new("testcase");
            case.push_attribute(("name", e.name.as_str()));
            case.push_attribute(("classname", e.file.as_str()));
            if e.ok {
                write(Event::Empty(case));
                continue;
            }
            write(Event::Start(case));
            let mut failure = BytesStart::new("failure");
            let message = format!(
                "{} of {} runs passed ({}), below the threshold {}",
                e.passed,
                e.runs,
                percent(e.pass_rate),
                percent(e.threshold)
            );
            failure.push_attribute(("message", message.as_str()));
            failure.push_attribute(("type", "threshold"));
            write(Event::Start(failure));
            let text: Vec<String> = e
                .failures
                .iter()
                .map(|f| {
                    format!(
                        "run {}, turn {}: {}: got {}",
                        f.run, f.turn, f.expectation, f.got
                    )
                })
                .collect();
            write(Event::Text(BytesText::new(&text.join("\n"))));
            write(Event::End(BytesEnd::new("failure")));
            write(Event::End(BytesEnd::new("testcase")));
        }
        write(Event::End(BytesEnd::new("testsuite")));
        write(Event::End(BytesEnd::new("testsuites")));
        let mut xml = String::from_utf8(w.into_inner()).expect("the writer writes UTF-8");
        xml.push('\n');
        xml
    }

    /// Each eval's pass rate in `baseline` and now, and what got better or worse.
    pub fn compare(&self, baseline: &Report, name: &str) -> String {
        let mut out = format!("Compared with the baseline {name}:\n");
        let (mut better, mut worse) = (0, 0);
        for e in &self.evals {
            let then = baseline.evals.iter().find(|b| b.name == e.name);
            let line = match then {
                None => format!("  {}: new, {} now\n", e.name, percent(e.pass_rate)),
                Some(b) => {
                    let change = if e.pass_rate > b.pass_rate + 1e-9 {
                        better += 1;
                        "better"
                    } else if e.pass_rate + 1e-9 < b.pass_rate {
                        worse += 1;
                        "WORSE"
                    } else {
                        "same"
                    };
                    format!(
                        "  {}: {} then, {} now: {change}\n",
                        e.name,
                        percent(b.pass_rate),
                        percent(e.pass_rate)
                    )
                }
            };
            out += &line;
        }
        for b in &baseline.evals {
            if !self.evals.iter().any(|e| e.name == b.name) {
                out += &format!("  {}: {} then, not run now\n", b.name, percent(b.pass_rate));
            }
        }
        out += &format!("{better} better, {worse} worse.\n");
        out
    }
}

fn percent(share: f64) -> String {
    format!("{:.0}%", share * 100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fail(turn: usize, what: &str) -> Failed {
        Failed {
            turn,
            expectation: what.into(),
            got: "«Ça» <b>&".into(),
        }
    }

    fn report() -> Report {
        Report::new(vec![
            EvalResult::new(
                "remembers",
                "evals/r.toml",
                1.0,
                vec![vec![], vec![fail(2, "reply_matches = \"x\"")]],
            ),
            EvalResult::new(
                "voice",
                "evals/v.toml",
                0.5,
                vec![vec![], vec![fail(1, "judge = \"?\"")]],
            ),
        ])
    }

    #[test]
    fn pass_rates_and_thresholds() {
        let r = report();
        assert_eq!(
            (r.evals[0].passed, r.evals[0].runs, r.evals[0].ok),
            (1, 2, false)
        );
        assert_eq!((r.evals[1].pass_rate, r.evals[1].ok), (0.5, true));
        assert_eq!((r.passed, r.failed), (1, 1));
        assert_eq!(r.evals[0].failures[0].run, 2);
        let thirds = EvalResult::new("t", "f", 0.6667, vec![vec![], vec![], vec![fail(1, "x")]]);
        assert!(!thirds.ok, "2/3 is below 0.6667");
        assert!(EvalResult::new("t", "f", 0.66, vec![vec![], vec![], vec![fail(1, "x")]]).ok);
        assert!(
            !EvalResult::new("t", "f", 0.0, vec![]).ok,
            "no runs prove nothing"
        );
    }

    #[test]
    fn the_table_names_each_failure_and_what_came() {
        let t = report().table();
        assert!(t.contains("remembers     1/2    50%       100%  FELL SHORT\nvoice         1/2    50%        50%  ok\n"), "{t}");
        assert!(
            t.contains("run 2, turn 2: reply_matches = \"x\"\n    got «Ça» <b>&"),
            "{t}"
        );
        assert!(
            t.ends_with("1 eval met its threshold, 1 fell short.\n"),
            "{t}"
        );
    }

    #[test]
    fn the_comparison_says_what_moved() {
        let then = report();
        let mut now = report();
        now.evals[0] = EvalResult::new("remembers", "evals/r.toml", 1.0, vec![vec![], vec![]]);
        now.evals[1] = EvalResult::new("new one", "evals/n.toml", 1.0, vec![vec![]]);
        let c = now.compare(&then, "before");
        assert!(c.contains("remembers: 50% then, 100% now: better"), "{c}");
        assert!(c.contains("new one: new, 100% now"), "{c}");
        assert!(c.contains("voice: 50% then, not run now"), "{c}");
        assert!(c.ends_with("1 better, 0 worse.\n"), "{c}");
    }

    #[test]
    fn the_json_round_trips() {
        let r = report();
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Report>(&text).unwrap(), r);
    }
}
