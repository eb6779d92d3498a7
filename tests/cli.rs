//! The binary's commands and exit codes: configuration errors, provider selection, `check`,
//! and the Claude Code CLI transport (with a fake `claude`).

mod support;

use support::*;

#[test]
fn check_passes_on_a_fresh_home_and_creates_nothing() {
    let home = Home::new("auto", "", "");
    let r = home.run(&["check"], "");
    assert_eq!(r.status, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("no problems found"));
    assert!(!home.data().join("anima.db").exists());
}

#[test]
fn a_broken_config_names_file_key_and_line() {
    let home = Home::new("auto", "", "");
    std::fs::write(
        home.config(),
        "[pipeline]\nmemory_window = 20\nsoul_state_interval = 0\n[llm]\nprovider = \"gpt\"\n",
    )
    .unwrap();
    for args in [&["check"][..], &["chat"][..]] {
        let r = home.run(args, "hi\n");
        assert_eq!(r.status, 2, "{args:?}");
        let all = format!("{}{}", r.stdout, r.stderr);
        assert!(all.contains("anima.toml:5"), "{all}");
        assert!(all.contains("gpt"), "{all}");
        assert!(!all.contains("panicked"));
    }
    std::fs::write(home.config(), "[pipeline]\nsoul_state_interval = 0\n").unwrap();
    let r = home.run(&["check"], "");
    assert_eq!(r.status, 2);
    assert!(
        r.stdout
            .contains("anima.toml:2: key `pipeline.soul_state_interval`: found 0, expected a whole number ≥ 1"),
        "{}",
        r.stdout
    );
}

/// A soul folder that exists but holds no soul.md is an error (a missing folder is the
/// built-in soul: see tests/first_hour.rs).
#[test]
fn an_unreadable_soul_names_its_path() {
    let home = Home::new("anthropic", "http://127.0.0.1:9", "");
    let empty = home.dir.path().join("my-soul");
    std::fs::create_dir(&empty).unwrap();
    let cfg = std::fs::read_to_string(home.config()).unwrap();
    let cfg = cfg.replace(
        concat!(env!("CARGO_MANIFEST_DIR"), "/soul"),
        empty.to_str().unwrap(),
    );
    std::fs::write(home.config(), cfg).unwrap();
    for args in [&["check"][..], &["chat"][..]] {
        let r = home.run(args, "hi\n");
        assert_eq!(r.status, 2);
        let all = format!("{}{}", r.stdout, r.stderr);
        assert!(
            all.contains(&empty.join("soul.md").display().to_string()),
            "{all}"
        );
    }
}

#[test]
fn nothing_usable_prints_what_to_set_and_exits_2() {
    let home = Home::new("auto", "", "");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_anima"));
    cmd.args(["--config", home.config().to_str().unwrap(), "chat"])
        .env_clear()
        .env("PATH", home.dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let r = run(cmd, "hi\n");
    assert_eq!(r.status, 2);
    for what in [
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "base_url",
        "Ollama",
        "claude",
    ] {
        assert!(r.stderr.contains(what), "{what}: {}", r.stderr);
    }
    assert_eq!(r.stderr.trim().lines().count(), 1, "one paragraph");
    assert!(r.stdout.is_empty());
}

#[test]
fn an_explicit_provider_without_its_key_is_a_usage_error() {
    let home = Home::new("anthropic", "", "");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_anima"));
    cmd.args(["--config", home.config().to_str().unwrap(), "check"])
        .env_clear()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdin(std::process::Stdio::piped());
    database_env(&mut cmd, home.dir.path());
    let r = run(cmd, "");
    assert_eq!(r.status, 2);
    assert!(r.stdout.contains("ANTHROPIC_API_KEY"), "{}", r.stdout);
}

#[test]
fn a_database_from_a_newer_anima_is_refused() {
    if skipped_on_postgres(
        "SQLite's user_version; tests/postgres.rs refuses a newer PostgreSQL schema",
    ) {
        return;
    }
    let home = Home::new("anthropic", "http://127.0.0.1:9", "");
    std::fs::create_dir_all(home.data()).unwrap();
    let conn = rusqlite::Connection::open(home.data().join("anima.db")).unwrap();
    conn.pragma_update(None, "user_version", 99).unwrap();
    drop(conn);
    let r = home.run(&["check"], "");
    assert_eq!(r.status, 2);
    assert!(r.stdout.contains("schema version 99"), "{}", r.stdout);
    let r = home.run(&["chat"], "hi\n");
    assert_eq!(r.status, 2);
    assert!(r.stderr.contains("newer than this anima"), "{}", r.stderr);
}

#[test]
fn the_config_flag_works_after_the_subcommand_and_via_the_environment() {
    let home = Home::new("auto", "", "");
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_anima"));
    cmd.args(["check", "--config", home.config().to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdin(std::process::Stdio::piped());
    database_env(&mut cmd, home.dir.path());
    let r = run(cmd, "");
    assert!(
        r.stdout
            .contains(&format!("{} is valid", home.config().display())),
        "{}",
        r.stdout
    );
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_anima"));
    cmd.arg("check")
        .env("ANIMA_CONFIG", home.config())
        .current_dir("/")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .stdin(std::process::Stdio::piped());
    database_env(&mut cmd, home.dir.path());
    let r = run(cmd, "");
    assert!(
        r.stdout
            .contains(&format!("{} is valid", home.config().display())),
        "{}",
        r.stdout
    );
}

/// A fake `claude`: records its arguments and stdin per call, answers like `claude -p
/// --output-format json`, and forgets sessions listed in `forgotten`.
fn fake_claude(dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("claude");
    script(
        &path,
        r#"#!/bin/bash
log="$(dirname "$0")/calls"
n=$(( $(ls "$log" 2>/dev/null | wc -l) / 2 + 1 ))
mkdir -p "$log"
printf '%s\n' "$@" > "$log/$n.args"
cat > "$log/$n.stdin"
pwd >> "$log/$n.args"
session=""
while [ $# -gt 0 ]; do
  case "$1" in
    --session-id|--resume) mode="$1"; session="$2"; shift ;;
  esac
  shift
done
if [ "$mode" = "--resume" ] && grep -qx "$session" "$(dirname "$0")/forgotten" 2>/dev/null; then
  echo "No conversation found with session ID: $session" >&2
  exit 1
fi
if grep -q "QUOTA" "$log/$n.stdin"; then
  printf '{"type":"result","subtype":"success","is_error":true,"result":"Claude AI usage limit reached","session_id":"%s"}\n' "$session"
  exit 1
fi
printf '{"type":"result","subtype":"success","is_error":false,"result":"<internal_monologue>cli %s</internal_monologue><external_dialogue verb=\\"said\\">Reply %s</external_dialogue>","session_id":"%s","total_cost_usd":0.01,"usage":{"input_tokens":5,"output_tokens":7,"cache_read_input_tokens":3},"num_turns":1,"duration_ms":12}\n' "$n" "$n" "$session"
"#,
    );
    path
}

#[test]
fn claude_cli_sessions_carry_the_soul_only_in_the_first_message() {
    let bin = tempfile::tempdir().unwrap();
    let claude = fake_claude(bin.path());
    let home = Home::new(
        "claude-cli",
        "",
        &format!("claude_cli_path = \"{}\"", claude.display()),
    );
    let r = home.run(&["chat", "--user", "Tom"], "first\nsecond\n");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(replies(&r.stdout), vec!["Reply 1", "Reply 2"]);

    let calls = bin.path().join("calls");
    let args1 = std::fs::read_to_string(calls.join("1.args")).unwrap();
    let args2 = std::fs::read_to_string(calls.join("2.args")).unwrap();
    let a1: Vec<&str> = args1.lines().collect();
    let a2: Vec<&str> = args2.lines().collect();
    assert_eq!(&a1[..4], ["-p", "--output-format", "json", "--session-id"]);
    let session = a1[4];
    assert!(uuid::Uuid::parse_str(session).is_ok(), "a UUID: {session}");
    assert_eq!(
        &a2[..5],
        ["-p", "--output-format", "json", "--resume", session]
    );
    assert!(!args2.contains("--session-id"), "never both");
    assert_eq!(a1.last(), a2.last(), "always the same working directory");

    let stdin1 = std::fs::read_to_string(calls.join("1.stdin")).unwrap();
    let stdin2 = std::fs::read_to_string(calls.join("2.stdin")).unwrap();
    assert!(stdin1.starts_with("<soul>\n# Wren"));
    assert!(
        !stdin2.contains("<soul>"),
        "the session already has the soul"
    );
    assert!(stdin2.contains("Tom: second"));
    assert!(
        !stdin2.contains("Tom: first"),
        "no history: the CLI keeps it"
    );

    // The CLI forgets the session: a new one starts, with the soul again.
    std::fs::write(bin.path().join("forgotten"), format!("{session}\n")).unwrap();
    let r = home.run(&["chat", "--user", "Tom"], "third\n");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(replies(&r.stdout), vec!["Reply 4"]);
    let args4 = std::fs::read_to_string(calls.join("4.args")).unwrap();
    assert!(args4.contains("--session-id") && !args4.contains(session));
    assert!(std::fs::read_to_string(calls.join("4.stdin"))
        .unwrap()
        .starts_with("<soul>"));
    let stored = wait(home.store().claude_session("terminal"))
        .unwrap()
        .unwrap();
    assert_ne!(stored, session);

    // A quota error (is_error with subtype success, exit 1) is an error, not a reply.
    let r = home.run(&["chat"], "QUOTA please\n");
    assert_eq!(replies(&r.stdout), vec![anima::engine::PROVIDER_DOWN_REPLY]);
    assert!(r.stderr.contains("usage limit"), "{}", r.stderr);
}

/// `anima slack manifest`: the Slack app for this soul, YAML by default and JSON with
/// `--json` (the same manifest), Socket Mode unless `--events-url` names where Slack posts.
#[test]
fn slack_manifest_prints_the_app_in_yaml_or_json_for_either_door() {
    let home = Home::new("auto", "", "");
    let yaml = home.run(&["slack", "manifest"], "");
    assert_eq!(yaml.status, 0, "{}", yaml.stderr);
    assert!(
        yaml.stdout.contains("  socket_mode_enabled: true\n"),
        "{}",
        yaml.stdout
    );
    assert!(
        yaml.stdout.contains("    display_name: \"Wren\"\n"),
        "{}",
        yaml.stdout
    );
    let json = home.run(&["slack", "manifest", "--json"], "");
    assert_eq!(json.status, 0, "{}", json.stderr);
    let m: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let from_yaml: serde_json::Value = serde_yaml_ng::from_str(&yaml.stdout).unwrap();
    assert_eq!(from_yaml, m, "the YAML and the JSON are one manifest");
    for key in [
        "display_information",
        "features",
        "oauth_config",
        "settings",
    ] {
        assert!(m.get(key).is_some(), "{key} missing: {m}");
    }
    let strings = |v: &serde_json::Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_string())
            .collect()
    };
    let scopes = strings(&m["oauth_config"]["scopes"]["bot"]);
    for scope in [
        "chat:write",
        "app_mentions:read",
        "im:history",
        "assistant:write",
    ] {
        assert!(scopes.iter().any(|s| s == scope), "{scope}: {scopes:?}");
    }
    let events = strings(&m["settings"]["event_subscriptions"]["bot_events"]);
    for event in [
        "app_mention",
        "message.im",
        "message.channels",
        "agent_session_stopped",
    ] {
        assert!(events.iter().any(|e| e == event), "{event}: {events:?}");
    }
    assert_eq!(m["settings"]["socket_mode_enabled"], true);
    assert_eq!(m["settings"]["interactivity"]["is_enabled"], true);
    assert!(m["settings"]["event_subscriptions"]
        .get("request_url")
        .is_none());
    assert!(m["features"]["agent_view"]["suggested_prompts"].is_array());

    let url = "https://x.example/slack/events";
    let r = home.run(&["slack", "manifest", "--json", "--events-url", url], "");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(r.stderr, "", "a URL ending in /slack/events needs no note");
    let m: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(m["settings"]["socket_mode_enabled"], false);
    assert_eq!(m["settings"]["event_subscriptions"]["request_url"], url);
    assert_eq!(m["settings"]["interactivity"]["request_url"], url);

    for bad in [
        "ftp://x.example/slack/events",
        "x.example/slack/events",
        "https://",
    ] {
        let r = home.run(&["slack", "manifest", "--events-url", bad], "");
        assert_eq!(r.status, 2, "{bad}: {}", r.stderr);
        assert_eq!(r.stdout, "");
        assert!(r.stderr.contains("--events-url"), "{}", r.stderr);
        assert!(r.stderr.contains("http:// or https://"), "{}", r.stderr);
        assert!(!r.stderr.contains("panicked"));
    }
}

// ------------------------------------------------------------------------ anima users forget

/// Every object of the git repository at `root` read whole, and every file under its `.git`.
fn everything_in_git(root: &std::path::Path) -> String {
    let repo = git2::Repository::open(root).unwrap();
    let odb = repo.odb().unwrap();
    let mut all = String::new();
    odb.foreach(|oid| {
        all.push_str(&String::from_utf8_lossy(odb.read(*oid).unwrap().data()));
        true
    })
    .unwrap();
    let mut dirs = vec![repo.path().to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else {
                all.push_str(&String::from_utf8_lossy(&std::fs::read(path).unwrap()));
            }
        }
    }
    all
}

fn model_turn(name: &str, model: &str, note: &str) -> String {
    format!("<external_dialogue>ok</external_dialogue><user_model_check>true</user_model_check><user_model_update># {name}\n{model}</user_model_update><model_change_note>{note}</model_change_note>")
}

#[test]
fn a_forgotten_person_leaves_the_store_and_with_purge_history_every_commit() {
    let model = FakeModel::start();
    model
        .reply(&model_turn(
            "Ada",
            "Bakes quince tarts.",
            "Ada bakes quince",
        ))
        .reply(&model_turn("Ada", "Quince tarts, Sundays.", "On Sundays"))
        .reply(&model_turn("Tom", "Sails.", "Tom sails"))
        .reply(&model_turn("Eve", "Hides.", "Eve hides"));
    let home = Home::new("anthropic", &model.url(), "");
    let chat = |user: &str, lines: &str| {
        let thread = format!("with {user}");
        let r = home.run(&["chat", "--user", user, "--thread", &thread], lines);
        assert_eq!(r.status, 0, "{}", r.stderr);
    };
    chat("Ada Lovelace", "my quince recipe\nevery Sunday\n");
    chat("Tom", "I sail\n");
    chat("../../\"Eve\"/..", "who am I\n");
    let repo = home.data().join("memory");
    assert!(repo.join("users/ada-lovelace.md").exists());
    assert!(everything_in_git(&repo).contains("quince"));

    // No terminal to ask on, and no --yes: refused, nothing forgotten.
    let r = home.run(&["users", "forget", "Ada Lovelace"], "yes\n");
    assert_eq!(r.status, 2, "{}", r.stderr);
    assert!(r.stderr.contains("pass --yes"), "{}", r.stderr);
    assert!(repo.join("users/ada-lovelace.md").exists());
    // Someone unknown, however named, is no one: exit 1, as `users show`.
    for name in [
        "nobody",
        "../../etc/passwd",
        "\"ada\"",
        "users/tom",
        "..",
        "/",
    ] {
        let r = home.run(&["users", "forget", name, "--yes"], "");
        assert_eq!(r.status, 1, "{name}: {}", r.stderr);
        assert!(r.stderr.contains("no user named"), "{}", r.stderr);
    }

    let r = home.run(
        &[
            "users",
            "forget",
            "Ada Lovelace",
            "--purge-history",
            "--yes",
        ],
        "",
    );
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .contains("Forgot Ada Lovelace (terminal:ada-lovelace)"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("user model: 2 versions"), "{}", r.stdout);
    assert!(
        r.stdout.contains("1 conversation only theirs"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("history rewritten"), "{}", r.stdout);
    assert!(!repo.join("users/ada-lovelace.md").exists());
    let all = everything_in_git(&repo);
    for word in ["quince", "Sundays", "ada-lovelace"] {
        assert!(!all.contains(word), "{word:?} is still in the repository");
    }
    let users = home.run(&["users", "list"], "");
    assert!(!users.stdout.contains("ada"), "{}", users.stdout);
    assert!(users.stdout.contains("tom"), "{}", users.stdout);
    let log = home.run(&["users", "log", "Tom"], "");
    assert!(log.stdout.contains("Tom sails"), "{}", log.stdout);

    // Without --purge-history the file leaves the working tree in a commit of its own; its
    // history stays. A person named with quotes, slashes and `..` is their file, no other.
    let r = home.run(&["users", "forget", "../../\"Eve\"/..", "--yes"], "");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(!repo.join("users/eve.md").exists());
    assert!(repo.join("users/tom.md").exists());
    let git = git2::Repository::open(&repo).unwrap();
    let head = git.head().unwrap().peel_to_commit().unwrap();
    assert_eq!(head.message().ok(), Some("forget terminal:eve\n"));
    let before = head.parent(0).unwrap().tree().unwrap();
    assert!(before
        .get_path(std::path::Path::new("users/eve.md"))
        .is_ok());
    // Their history can be rewritten later: the store has forgotten them, the repository not.
    assert!(everything_in_git(&repo).contains("Hides"));
    let r = home.run(&["users", "forget", "eve", "--purge-history"], "");
    assert_eq!(r.status, 2, "asked first: {}", r.stderr);
    let r = home.run(&["users", "forget", "eve", "--purge-history", "--yes"], "");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(r.stdout.contains("history rewritten"), "{}", r.stdout);
    let all = everything_in_git(&repo);
    assert!(
        !all.contains("Hides") && !all.contains("eve.md"),
        "gone from history"
    );
    assert!(all.contains("Tom sails"), "the others' history stays");
    let r = home.run(&["users", "forget", "eve", "--purge-history", "--yes"], "");
    assert_eq!(r.status, 1, "no one left: {}", r.stderr);
}

/// `anima ARGS…` on a pseudo-terminal (util-linux `script`), `typed` on its input.
fn on_a_terminal(home: &Home, args: &str, typed: &str) -> Run {
    let inner = anima_command(&home.config(), home.dir.path(), &[]);
    let mut cmd = std::process::Command::new("script");
    cmd.env_clear();
    for (k, v) in inner.get_envs() {
        if let Some(v) = v {
            cmd.env(k, v);
        }
    }
    let line = format!(
        "{} --config {} {args}",
        env!("CARGO_BIN_EXE_anima"),
        home.config().display()
    );
    cmd.args(["-qec", &line, "/dev/null"])
        .current_dir(home.dir.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    run(cmd, typed)
}

#[test]
fn forgetting_asks_on_the_terminal_and_goes_on_only_for_the_name_or_yes() {
    let model = FakeModel::start();
    model.reply(&model_turn("Ada", "Counts.", "Ada counts"));
    let home = Home::new("anthropic", &model.url(), "");
    let r = home.run(&["chat", "--user", "Ada"], "one two three\n");
    assert_eq!(r.status, 0, "{}", r.stderr);

    let r = on_a_terminal(&home, "users forget Ada", "no\n");
    assert_eq!(r.status, 1, "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("Type their name or `yes`"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("not confirmed"), "{}", r.stdout);
    assert!(home.data().join("memory/users/ada.md").exists());

    let r = on_a_terminal(&home, "users forget Ada", "Ada\n");
    assert_eq!(r.status, 0, "{}{}", r.stdout, r.stderr);
    assert!(r.stdout.contains("Forgot Ada"), "{}", r.stdout);
    assert!(!home.data().join("memory/users/ada.md").exists());
}
