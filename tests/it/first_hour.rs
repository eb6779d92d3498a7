//! Issue 14, the first hour: `check` tells every problem at once, the soul travels with the
//! binary, `anima init` writes it out, and the output stays quiet and honest.

use crate::support;

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
        prompt.contains(include_str!("../../soul/soul.md")),
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

/// Slack's tokens, given to `anima check` or `anima run`.
fn slack_tokens(bot: &str, app: &str) -> [(&'static str, String); 2] {
    [
        ("SLACK_BOT_TOKEN", bot.to_string()),
        ("SLACK_APP_TOKEN", app.to_string()),
    ]
}

/// `check` with these tokens in the environment.
fn check_with(home: &Home, args: &[&str], tokens: &[(&str, String)]) -> Run {
    let env: Vec<(&str, &str)> = tokens.iter().map(|(k, v)| (*k, v.as_str())).collect();
    home.run_env(args, "", &env)
}

/// `anima check` asks Slack about each token (auth.test, apps.connections.open): one it
/// refuses is a problem naming the variable and what to do; `--offline` asks nothing; a Slack
/// that cannot be reached is a warning.
#[test]
fn check_asks_slack_about_each_token_and_names_the_one_it_refuses() {
    use support::slack::{FakeSlack, APP_TOKEN, BOT_TOKEN};
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let home = support::daemon::home(&model, &slack, "socket", "");
    let tokens = slack_tokens(BOT_TOKEN, APP_TOKEN);
    let r = check_with(&home, &["check"], &tokens);
    assert_eq!(r.status, 0, "{}{}", r.stdout, r.stderr);
    for var in ["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"] {
        assert!(
            r.stdout
                .contains(&format!("ok: slack: Slack takes {var}\n")),
            "{}",
            r.stdout
        );
    }

    slack.refuse("auth.test", "invalid_auth");
    let r = check_with(&home, &["check"], &tokens);
    assert_eq!(r.status, 2, "{}", r.stdout);
    assert!(
        r.stdout.contains("problem: slack: Slack refuses SLACK_BOT_TOKEN (invalid_auth from auth.test): it is not a token Slack knows")
            && r.stdout.contains("OAuth & Permissions"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("ok: slack: Slack takes SLACK_APP_TOKEN"));

    slack.accept("auth.test");
    slack.refuse("apps.connections.open", "token_revoked");
    let r = check_with(&home, &["check"], &tokens);
    assert_eq!(r.status, 2, "{}", r.stdout);
    assert!(
        r.stdout.contains("problem: slack: Slack refuses SLACK_APP_TOKEN (token_revoked from apps.connections.open): it was revoked"),
        "{}",
        r.stdout
    );

    let calls = slack.methods().len();
    let r = check_with(&home, &["check", "--offline"], &tokens);
    assert_eq!(r.status, 0, "{}", r.stdout);
    assert_eq!(slack.methods().len(), calls, "--offline asks Slack nothing");

    slack.up.store(false, std::sync::atomic::Ordering::SeqCst);
    let r = check_with(&home, &["check"], &tokens);
    assert_eq!(r.status, 0, "unreachable is not a problem: {}", r.stdout);
    assert!(
        r.stdout
            .contains("warning: slack: SLACK_BOT_TOKEN not checked: Slack could not be asked"),
        "{}",
        r.stdout
    );
}

/// A token of the wrong kind is told by its prefix, before any call: swapped tokens, an app
/// token as the bot's, quotes around a token. `check` names each as a problem; `run` exits 2
/// with the same words.
#[test]
fn a_token_of_the_wrong_kind_is_named_before_slack_is_asked() {
    use support::slack::{FakeSlack, APP_TOKEN, BOT_TOKEN};
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let home = support::daemon::home(&model, &slack, "socket", "");
    let swapped = slack_tokens(APP_TOKEN, BOT_TOKEN);
    let r = check_with(&home, &["check"], &swapped);
    assert_eq!(r.status, 2, "{}", r.stdout);
    assert!(
        r.stdout
            .contains("problem: slack: SLACK_BOT_TOKEN and SLACK_APP_TOKEN are swapped"),
        "{}",
        r.stdout
    );
    let quoted = slack_tokens(&format!("\"{BOT_TOKEN}\""), APP_TOKEN);
    let r = check_with(&home, &["check"], &quoted);
    assert_eq!(r.status, 2, "{}", r.stdout);
    assert!(
        r.stdout
            .contains("problem: slack: SLACK_BOT_TOKEN has quotes around it: remove them"),
        "{}",
        r.stdout
    );
    let app_as_bot = slack_tokens(APP_TOKEN, APP_TOKEN);
    let r = check_with(&home, &["check"], &app_as_bot);
    assert!(
        r.stdout.contains(
            "problem: slack: SLACK_BOT_TOKEN holds an app-level token (xapp-…): it takes the Bot User OAuth Token"
        ),
        "{}",
        r.stdout
    );
    assert!(slack.methods().is_empty(), "{:?}", slack.methods());

    let mut d = support::daemon::Daemon::spawn(
        &home,
        &[
            ("SLACK_BOT_TOKEN", APP_TOKEN),
            ("SLACK_APP_TOKEN", BOT_TOKEN),
        ],
    );
    assert_eq!(d.wait_exit(30), 2, "{}", d.log());
    assert!(d.log().contains("are swapped"), "{}", d.log());
}

/// `anima run` exits 2 with one paragraph naming the variable when Slack refuses a token at
/// start (auth.test for the bot token, apps.connections.open for the app token), and never
/// calls a refusal "unreachable".
#[test]
fn run_exits_2_naming_the_token_slack_refuses_at_start() {
    use support::slack::FakeSlack;
    for (method, var) in [
        ("auth.test", "SLACK_BOT_TOKEN"),
        ("apps.connections.open", "SLACK_APP_TOKEN"),
    ] {
        let (model, slack) = (FakeModel::start(), FakeSlack::start());
        let home = support::daemon::home(&model, &slack, "socket", "");
        slack.refuse(method, "invalid_auth");
        let mut d = support::daemon::Daemon::spawn(&home, &[]);
        assert_eq!(d.wait_exit(30), 2, "{method}: {}", d.log());
        let log = d.log();
        assert!(
            log.contains(&format!(
                "anima: Slack refuses {var} (invalid_auth from {method})"
            )),
            "{log}"
        );
        assert!(!log.contains("unreachable"), "{log}");
        assert_eq!(slack.sockets(), 0, "{method}: no connection opened");
    }
}

/// A Socket Mode connection Slack will not open now is a WARN line of anima's own with
/// Slack's error code, at the default log level; anima goes on trying and connects once
/// Slack opens it.
#[test]
fn socket_mode_errors_are_warnings_with_slacks_code_at_the_default_level() {
    use support::slack::FakeSlack;
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let home = support::daemon::home(&model, &slack, "socket", "");
    slack.refuse("apps.connections.open", "internal_error");
    let d = support::daemon::Daemon::spawn(&home, &[("ANIMA_LOG", "")]);
    let line = d.wait_log("internal_error", 20);
    assert!(
        line.contains("WARN") && line.contains("Socket Mode"),
        "{line}"
    );
    slack.accept("apps.connections.open");
    slack.wait_connected_or(|| d.log());
}

/// A token revoked while anima runs: an ERROR line naming the variable, `/healthz` 503 naming
/// it, and the reply waits in the inbox until Slack takes the token again; then it is posted,
/// once.
#[test]
fn a_token_revoked_while_running_is_said_and_the_reply_waits_for_it() {
    use serde_json::json;
    use support::slack::FakeSlack;
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    let home = support::daemon::home(&model, &slack, "socket", "");
    let d = support::daemon::Daemon::start_env(&home, &[]);
    slack.wait_connected_or(|| d.log());
    slack.refuse_bot_token("token_revoked");
    let dm = json!({"type":"message","channel":"D1","user":"U1","text":"still there?",
                    "ts":"1700000000.000100","channel_type":"im"});
    slack.send_event(dm, "Ev1", 0);
    let line = d.wait_log("Slack refuses SLACK_BOT_TOKEN (token_revoked", 20);
    assert!(line.contains("ERROR"), "{line}");
    let (status, body) = support::daemon::http("GET", &d.url("/healthz"), &[], "");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("SLACK_BOT_TOKEN"), "{body}");
    assert!(slack.posts().is_empty());
    slack.accept_bot_token();
    slack.wait(90, "the reply, once Slack takes the token", |s| {
        !s.posts().is_empty()
    });
    std::thread::sleep(std::time::Duration::from_secs(1));
    let posts = slack.posts();
    assert_eq!(posts.len(), 1, "{posts:#?}");
    assert_eq!(posts[0].text, "echo: still there?");
    let (status, body) = support::daemon::http("GET", &d.url("/healthz"), &[], "");
    assert_eq!(status, 200, "{body}");
}

#[test]
fn an_app_token_revoked_while_connected_is_said_within_the_check_interval() {
    use support::slack::FakeSlack;
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    let home = support::daemon::home(&model, &slack, "socket", "app_token_check_secs = 1");
    let d = support::daemon::Daemon::start_env(&home, &[]);
    slack.wait_connected_or(|| d.log());
    // The connections stay open (slack-morphism would only meet the refusal at its next
    // reconnection, and say nothing of it): the daemon's own check finds it.
    slack.refuse("apps.connections.open", "token_revoked");
    let line = d.wait_log("Slack refuses SLACK_APP_TOKEN (token_revoked", 20);
    assert!(line.contains("ERROR"), "{line}");
    let (status, body) = support::daemon::http("GET", &d.url("/healthz"), &[], "");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("SLACK_APP_TOKEN"), "{body}");
    slack.accept("apps.connections.open");
    d.wait_log("Slack takes SLACK_APP_TOKEN again", 20);
    let (status, body) = support::daemon::http("GET", &d.url("/healthz"), &[], "");
    assert_eq!(status, 200, "{body}");
}
