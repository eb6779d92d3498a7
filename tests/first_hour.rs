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

/// What `cargo install --path .` gives, checked cheaply: the binary copied out of the build
/// tree and run from another folder, whose anima.toml names no soul or processes folder,
/// answers with the shipped soul and processes compiled into it, and says so once.
/// (`cargo install` itself is not run here: it rebuilds the crate in release, far too slow
/// for CI.)
#[test]
fn an_installed_binary_answers_with_the_shipped_soul_from_any_folder() {
    let model = FakeModel::start();
    model.reply(&answer("Hello from the installed binary."));
    let bin = tempfile::tempdir().unwrap();
    let anima = bin.path().join("anima");
    std::fs::copy(env!("CARGO_BIN_EXE_anima"), &anima).unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(
        elsewhere.path().join("anima.toml"),
        format!(
            "[paths]\nhome = \"data\"\n\n[llm]\nprovider = \"anthropic\"\nbase_url = \"{}\"\n",
            model.url()
        ),
    )
    .unwrap();

    let mut cmd = std::process::Command::new(&anima);
    cmd.arg("chat")
        .current_dir(elsewhere.path())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", elsewhere.path())
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let r = run(cmd, "hi\n");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(replies(&r.stdout), ["Hello from the installed binary."]);
    assert_eq!(
        r.stderr.matches("the soul built into anima").count(),
        1,
        "said once: {}",
        r.stderr
    );
    assert!(r.stderr.contains("Talking to Wren"), "{}", r.stderr);

    let prompt = model.requests()[0].prompt_text();
    assert!(
        prompt.contains(include_str!("../soul/soul.md")),
        "the shipped soul.md reaches the model verbatim"
    );
    assert!(
        prompt.contains("This is the first message of a new conversation"),
        "the shipped greeting process runs the first turn"
    );
    assert!(elsewhere.path().join("data/anima.db").exists());
}

/// `anima init DIR` writes the soul, processes and a config with absolute paths; `check`
/// passes on it from any folder, an edit to the written soul reaches the model, and a second
/// `init` refuses to overwrite without --force.
#[test]
fn init_writes_an_editable_soul_that_check_passes() {
    let model = FakeModel::start();
    let home = Home::new("auto", "", "");
    let target = home.dir.path().join("my anima");
    let r = home.run(&["init", target.to_str().unwrap()], "");
    assert_eq!(r.status, 0, "{}", r.stderr);
    let config = target.join("anima.toml");
    assert!(
        r.stdout.contains(&config.display().to_string()),
        "{}",
        r.stdout
    );
    for f in [
        "soul/soul.md",
        "soul/skills.md",
        "processes/main.toml",
        "processes/greeting.toml",
    ] {
        assert!(target.join(f).is_file(), "{f}");
    }

    let cfg = config.to_str().unwrap();
    let r = home.run(&["check", "--config", cfg], "");
    assert_eq!(r.status, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("no problems found"), "{}", r.stdout);
    assert!(!r.stdout.contains("warning: soul"), "{}", r.stdout);
    assert!(!r.stdout.contains("warning: processes"), "{}", r.stdout);
    assert!(
        r.stdout.contains(&format!(
            "processes: {}",
            target.join("processes").display()
        )),
        "{}",
        r.stdout
    );

    // The written soul is the one in force.
    let soul = target.join("soul/soul.md");
    let text = std::fs::read_to_string(&soul).unwrap();
    std::fs::write(
        &soul,
        text.replace("# Wren", "# Wren\n\nLikes lighthouses."),
    )
    .unwrap();
    let with_model = format!("{cfg}.model.toml");
    std::fs::write(
        &with_model,
        std::fs::read_to_string(&config).unwrap().replacen(
            "# [llm]",
            &format!("[llm]\nbase_url = \"{}\"\n", model.url()),
            1,
        ),
    )
    .unwrap();
    let r = home.run(&["chat", "--config", &with_model], "hi\n");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(model.requests()[0]
        .prompt_text()
        .contains("Likes lighthouses."));
    assert!(!r.stderr.contains("built into"), "{}", r.stderr);

    // No overwriting without --force; the edit survives.
    let r = home.run(&["init", target.to_str().unwrap()], "");
    assert_eq!(r.status, 1, "{}", r.stderr);
    assert!(r.stderr.contains("--force"), "{}", r.stderr);
    assert!(r.stderr.contains("soul/soul.md"), "{}", r.stderr);
    assert!(std::fs::read_to_string(&soul)
        .unwrap()
        .contains("lighthouses"));
    let r = home.run(&["init", "--force", target.to_str().unwrap()], "");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(!std::fs::read_to_string(&soul)
        .unwrap()
        .contains("lighthouses"));
}

fn bare(home: &Home, args: &[&str], stdin: &str) -> Run {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_anima"));
    cmd.arg("--config")
        .arg(home.config())
        .args(args)
        .env_clear()
        .env("PATH", home.dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    run(cmd, stdin)
}

/// `check` resolves the provider as `chat` does: with none usable it fails with the very
/// paragraph `chat` prints; with one it names provider, model and why; a base_url that does
/// not answer is a problem; a missing processes folder is a warning, not "ok".
#[test]
fn check_tells_whether_chat_can_work() {
    let home = Home::new("auto", "", "");
    let chat = bare(&home, &["chat"], "hi\n");
    assert_eq!(chat.status, 2);
    let paragraph = chat
        .stderr
        .trim()
        .strip_prefix("anima: ")
        .unwrap()
        .to_string();
    let check = bare(&home, &["check"], "");
    assert_eq!(check.status, 2, "{}", check.stdout);
    assert!(
        check.stdout.contains(&format!("problem: {paragraph}\n")),
        "{paragraph}\n{}",
        check.stdout
    );

    let model = FakeModel::start();
    let home = Home::new("openai", &format!("{}/v1", model.url()), "");
    let r = home.run(&["check"], "");
    assert_eq!(r.status, 0, "{}", r.stdout);
    assert!(
        r.stdout.contains("ok: provider: openai (smollm2:135m)"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("warning: processes:") && r.stdout.contains("greeting, main"),
        "names the processes in force: {}",
        r.stdout
    );
    assert!(!r.stdout.contains("ok: processes"), "{}", r.stdout);

    let home = Home::new("anthropic", "http://127.0.0.1:9", "");
    let r = home.run(&["check"], "");
    assert_eq!(r.status, 2, "{}", r.stdout);
    assert!(
        r.stdout
            .contains("key `llm.base_url`: http://127.0.0.1:9 does not answer"),
        "{}",
        r.stdout
    );
}

/// A model outage is one line on stderr per failed turn (not one per retry and again at the
/// end); the provider and model are said once at start, even when piped.
#[test]
fn an_outage_is_reported_once_per_turn() {
    let model = FakeModel::start();
    for _ in 0..3 {
        model.push(Script::Status(
            503,
            vec![("retry-after-ms", "10".into())],
            "{\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}".into(),
        ));
    }
    model.reply(&answer("Back again."));
    let home = Home::new("anthropic", &model.url(), "");
    let r = home.run(&["chat"], "first\nsecond\n");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(
        replies(&r.stdout),
        [anima::engine::PROVIDER_DOWN_REPLY, "Back again."]
    );
    let lines: Vec<&str> = r.stderr.lines().collect();
    assert_eq!(lines.len(), 2, "{}", r.stderr);
    assert!(
        lines[0].starts_with("Talking to Wren through anthropic ("),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].starts_with("anima: model error:") && lines[1].contains("503"),
        "{}",
        lines[1]
    );
}

/// `users` and `processes show` only read: on a fresh home they create no database, and
/// "not found" exits 1 (2 is for bad usage or configuration).
#[test]
fn read_only_commands_create_nothing_and_not_found_exits_1() {
    let home = Home::new("auto", "", "");
    let r = home.run(&["users", "list"], "");
    assert_eq!((r.status, r.stdout.as_str()), (0, "no users yet\n"));
    for args in [
        &["users", "show", "Ada"][..],
        &["users", "log", "Ada"][..],
        &["processes", "show", "terminal"][..],
    ] {
        let r = home.run(args, "");
        assert_eq!(r.status, 1, "{args:?}: {}", r.stderr);
    }
    assert!(!home.data().exists(), "no database, no folder");

    let model = FakeModel::start();
    model.reply(&answer("Hi."));
    let home = Home::new("anthropic", &model.url(), "");
    assert_eq!(home.run(&["chat", "--user", "Ada"], "hi\n").status, 0);
    let r = home.run(&["users", "list"], "");
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", r.stdout);
    assert!(
        lines[0].starts_with("SLUG") && lines[0].contains("TURNS"),
        "{}",
        lines[0]
    );
    assert!(lines[1].starts_with("ada "), "{}", lines[1]);
    let r = home.run(&["users", "show", "Ada"], "");
    assert_eq!(r.stdout.trim(), "Ada has no user model yet (1 turn so far)");
}
