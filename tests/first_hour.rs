//! Issue 14, the first hour: `check` tells every problem at once, the soul travels with the
//! binary, `anima init` writes it out, and the output stays quiet and honest.

mod support;

use support::*;

/// Five mistakes of five kinds: one run of `check` reports them all, in file order, each
/// with its line, key, the value found and what is expected; `chat` refuses with the same.
#[test]
fn check_reports_five_mistakes_at_once_in_file_order() {
    let home = Home::new("auto", "", "");
    let cfg = std::fs::read_to_string(home.config()).unwrap();
    // The Home config ends inside [llm]; the mistakes follow it.
    let start = cfg.lines().count();
    std::fs::write(
        home.config(),
        format!(
            "{cfg}modle = \"claude\"\nmax_tokens = \"lots\"\n\n[pipline]\nmemory_window = 20\n\n[slack]\nmode = \"sockets\"\nallowed_users = \"U123\"\n"
        ),
    )
    .unwrap();
    let r = home.run(&["check"], "");
    assert_eq!(r.status, 2, "{}{}", r.stdout, r.stderr);
    let problems: Vec<&str> = r
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("problem: "))
        .collect();
    let at = |n: usize| format!("anima.toml:{}:", start + n);
    let want = [
        format!("{} in [llm]: unknown key `modle`; did you mean `model`?", at(1)),
        format!("{} key `llm.max_tokens`: found \"lots\", expected a whole number ≥ 1", at(2)),
        format!("{} in [pipline]: unknown section; did you mean [pipeline]?", at(4)),
        format!("{} key `slack.mode`: found \"sockets\", expected one of \"socket\", \"events\"; did you mean \"socket\"?", at(8)),
        format!("{} key `slack.allowed_users`: found \"U123\", expected a list of texts in quotes, such as [\"C0123ABCD\"]", at(9)),
    ];
    assert_eq!(problems.len(), 5, "{}", r.stdout);
    for (got, want) in problems.iter().zip(&want) {
        assert!(got.ends_with(want.as_str()), "got  {got}\nwant {want}");
    }
    assert!(r.stderr.contains("check found 5 problems"), "{}", r.stderr);

    let r = home.run(&["chat"], "hi\n");
    assert_eq!(r.status, 2);
    for w in &want {
        assert!(r.stderr.contains(w.as_str()), "{w}\n{}", r.stderr);
    }
}
