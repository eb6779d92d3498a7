//! The binary's commands and exit codes: configuration errors, provider selection, `check`,
//! and the Claude Code CLI transport (with a fake `claude`).

use crate::support;

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
/// built-in soul: see tests/it/first_hour.rs).
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

/// The README's set-up: `anima init`, then `export ANIMA_CONFIG=…`. With no provider usable,
/// the paragraph names that file as the place for `[llm] base_url`; with no file read at all,
/// it says so.
#[test]
fn nothing_usable_names_the_config_file_to_set_base_url_in() {
    let home = Home::new("auto", "", "");
    let config = home.config().canonicalize().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let bare = |config: Option<&std::path::Path>| {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_anima"));
        cmd.arg("chat")
            .current_dir(elsewhere.path())
            .env_clear()
            .env("PATH", home.dir.path())
            .env("HOME", home.dir.path())
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        if let Some(c) = config {
            cmd.env("ANIMA_CONFIG", c);
        }
        run(cmd, "hi\n")
    };
    let r = bare(Some(&config));
    assert_eq!(r.status, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("[llm] base_url in {} for", config.display())),
        "{}",
        r.stderr
    );
    let r = bare(None);
    assert_eq!(r.status, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("[llm] base_url in a config file (no configuration file was read"),
        "{}",
        r.stderr
    );
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
        "SQLite's user_version; tests/it/postgres.rs refuses a newer PostgreSQL schema",
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

/// `anima slack manifest --minimal`: the same app without the inner life's scopes and
/// events.
#[test]
fn slack_manifest_minimal_leaves_out_the_inner_lifes_scopes() {
    let home = Home::new("auto", "", "");
    let full = home.run(&["slack", "manifest", "--json"], "");
    let minimal = home.run(&["slack", "manifest", "--json", "--minimal"], "");
    assert_eq!(minimal.status, 0, "{}", minimal.stderr);
    let full: serde_json::Value = serde_json::from_str(&full.stdout).unwrap();
    let minimal: serde_json::Value = serde_json::from_str(&minimal.stdout).unwrap();
    let list = |m: &serde_json::Value, pointer: &str| -> Vec<String> {
        m.pointer(pointer)
            .unwrap()
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    let scopes = "/oauth_config/scopes/bot";
    let gone: Vec<String> = list(&full, scopes)
        .into_iter()
        .filter(|s| !list(&minimal, scopes).contains(s))
        .collect();
    assert_eq!(gone, ["channels:read", "groups:read", "reactions:read"]);
    let events = list(&minimal, "/settings/event_subscriptions/bot_events");
    assert!(events.contains(&"app_mention".to_string()), "{events:?}");
    assert!(
        !events.contains(&"reaction_added".to_string()),
        "{events:?}"
    );
    assert!(
        !events.contains(&"member_joined_channel".to_string()),
        "{events:?}"
    );
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

// Readable errors (issue 34, point 2): no Rust debug dump reaches a person, and an error about
// the configuration names the file it was read from, or says none was and where anima looked.

/// The marks of a Rust debug dump in a message meant for a person.
fn assert_words(what: &str, text: &str) {
    for dump in ["Some(", "ConnectError {", "Error {", "Custom {"] {
        assert!(!text.contains(dump), "{what}: `{dump}` in\n{text}");
    }
}

#[test]
fn a_model_host_that_does_not_resolve_is_said_in_words() {
    let home = Home::new("anthropic", "http://nonexistent.invalid", "");
    let check = home.run(&["check"], "");
    assert_eq!(check.status, 2, "{}{}", check.stdout, check.stderr);
    let problem = check
        .stdout
        .lines()
        .find(|l| l.contains("llm.base_url"))
        .unwrap_or_else(|| panic!("{}", check.stdout));
    assert!(problem.contains("anima.toml:"), "{problem}");
    assert_words("check", &check.stdout);
    let chat = home.run(&["chat"], "hello\n");
    assert!(
        chat.stderr.contains("nonexistent.invalid"),
        "{}",
        chat.stderr
    );
    assert_words("chat", &chat.stderr);
}

#[test]
fn a_slack_host_that_does_not_resolve_is_said_in_words() {
    let model = FakeModel::start();
    let home = Home::new(
        "anthropic",
        &model.url(),
        "\n[slack]\napi_base_url = \"http://nonexistent.invalid/api\"\n\n[http]\nlisten = \"127.0.0.1:0\"\n",
    );
    let mut cmd = anima_command(&home.config(), home.dir.path(), &["run"]);
    cmd.env("SLACK_BOT_TOKEN", support::slack::BOT_TOKEN)
        .env("SLACK_APP_TOKEN", support::slack::APP_TOKEN);
    let mut child = spawn(&mut cmd);
    let stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in stderr.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = String::new();
    let line = loop {
        match rx.recv_timeout(std::time::Duration::from_secs(30)) {
            Ok(l) if l.contains("Slack is unreachable") => break l,
            Ok(l) => seen += &format!("{l}\n"),
            Err(e) => {
                let _ = child.kill();
                panic!("no word of Slack ({e}):\n{seen}");
            }
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(line.contains("cannot reach Slack"), "{line}");
    assert_words("run", &line);
}

#[test]
fn show_thoughts_says_its_answers_in_words() {
    let model = FakeModel::start();
    model.reply("<mental_query question=\"Is the user angry?\">false</mental_query><external_dialogue>Calm.</external_dialogue><soul_state_check>true</soul_state_check><soul_state_update>emotionalState: calm</soul_state_update>");
    let home = Home::new("anthropic", &model.url(), "");
    let r = home.run(&["chat", "--show-thoughts"], "hello\n");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("[mental query] Is the user angry? → no"),
        "{}",
        r.stderr
    );
    assert_words("--show-thoughts", &r.stderr);
}

#[test]
fn a_provider_error_names_the_config_file_or_where_anima_looked() {
    let home = Home::new("anthropic", "", "");
    let mut cmd = anima_command(&home.config(), home.dir.path(), &["chat"]);
    cmd.env_remove("ANTHROPIC_API_KEY");
    let r = run(cmd, "hi\n");
    assert_eq!(r.status, 2, "{}", r.stderr);
    let file = home.config().display().to_string();
    assert!(r.stderr.contains(&file), "{file}: {}", r.stderr);
    assert!(r.stderr.contains("ANTHROPIC_API_KEY"), "{}", r.stderr);

    // No file: none was read, and the message says where anima looked.
    let empty = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_anima"));
    cmd.args(["check"])
        .current_dir(empty.path())
        .env_clear()
        .env("PATH", empty.path())
        .env("HOME", empty.path())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let r = run(cmd, "");
    assert_eq!(r.status, 2, "{}{}", r.stdout, r.stderr);
    let problem = r
        .stdout
        .lines()
        .find(|l| l.contains("no model provider is usable"))
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(
        problem.contains("no configuration file was read"),
        "{problem}"
    );
    assert!(problem.contains("$ANIMA_CONFIG"), "{problem}");
    assert!(
        problem.contains(&empty.path().join("anima.toml").display().to_string()),
        "{problem}"
    );
}

#[test]
fn a_port_in_use_names_the_config_file_even_in_a_folder_with_spaces() {
    let model = FakeModel::start();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let home = Home::new(
        "anthropic",
        &model.url(),
        &format!(
            "\n[slack]\napi_base_url = \"http://127.0.0.1:9\"\n\n[http]\nlisten = \"{}\"\n",
            taken.local_addr().unwrap()
        ),
    );
    let folder = home.dir.path().join("my ånima home");
    std::fs::create_dir(&folder).unwrap();
    let config = folder.join("anima config.toml");
    std::fs::copy(home.config(), &config).unwrap();
    let mut cmd = anima_command(&config, home.dir.path(), &["run"]);
    cmd.env("SLACK_BOT_TOKEN", support::slack::BOT_TOKEN)
        .env("SLACK_APP_TOKEN", support::slack::APP_TOKEN);
    let r = run(cmd, "");
    assert_ne!(r.status, 0, "{}", r.stderr);
    let said = r
        .stderr
        .lines()
        .find(|l| l.contains("cannot listen on"))
        .unwrap_or_else(|| panic!("{}", r.stderr));
    assert!(
        said.contains(&config.display().to_string()),
        "{}: {said}",
        config.display()
    );
}

#[test]
fn postgres_without_its_connection_string_names_the_config_file() {
    let model = FakeModel::start();
    let home = Home::on(Backend::Sqlite, "anthropic", &model.url(), "");
    let cfg = std::fs::read_to_string(home.config()).unwrap();
    std::fs::write(home.config(), format!("{cfg}\n{ON_POSTGRES}")).unwrap();
    let file = home.config().display().to_string();
    for args in [&["chat"][..], &["state"][..], &["run"][..]] {
        let mut cmd = anima_command(&home.config(), home.dir.path(), args);
        cmd.env_remove(anima::config::DATABASE_URL_VAR)
            .env("SLACK_BOT_TOKEN", support::slack::BOT_TOKEN)
            .env("SLACK_APP_TOKEN", support::slack::APP_TOKEN);
        let r = run(cmd, "hi\n");
        assert_eq!(r.status, 2, "{args:?}: {}", r.stderr);
        assert!(r.stderr.contains(&file), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains(anima::config::DATABASE_URL_VAR),
            "{args:?}: {}",
            r.stderr
        );
    }
}

// `anima mind` (issue 34, point 3): dates, and a person nobody knows is an error.

/// Whether `text` holds an RFC 3339 date to the second in UTC (2026-11-28T09:00:00Z).
fn has_date(text: &str) -> bool {
    let b = text.as_bytes();
    b.windows(20).any(|w| {
        w.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            10 => *c == b'T',
            13 | 16 => *c == b':',
            19 => *c == b'Z',
            _ => c.is_ascii_digit(),
        })
    })
}

#[test]
fn mind_shows_dates_and_refuses_a_person_nobody_knows() {
    let model = FakeModel::start();
    model.reply(&answer("Hello, Ada."));
    let home = Home::new("anthropic", &model.url(), "");
    let chat = home.run(&["chat", "--user", "Ada"], "hello there\n");
    assert_eq!(chat.status, 0, "{}", chat.stderr);
    let r = home.run(&["mind"], "");
    assert_eq!(r.status, 0, "{}", r.stderr);
    let seen = r
        .stdout
        .lines()
        .find(|l| l.contains("last seen"))
        .unwrap_or_else(|| panic!("{}", r.stdout));
    assert!(has_date(seen), "{seen}");
    assert!(!r.stdout.contains("(ms)"), "{}", r.stdout);

    let ada = home.run(&["mind", "--person", "Ada"], "");
    assert_eq!(ada.status, 0, "{}", ada.stderr);
    let nobody = home.run(&["mind", "--person", "NOBODY"], "");
    assert_eq!(nobody.status, 1, "{}{}", nobody.stdout, nobody.stderr);
    assert!(nobody.stderr.contains("`NOBODY`"), "{}", nobody.stderr);
    assert!(nobody.stdout.is_empty(), "{}", nobody.stdout);
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

/// A home on a read-only disk (a tmpfs mounted read-only over the data folder; needs root,
/// as CI runs, and is skipped elsewhere): `chat` and `state` name the file and the system's
/// reason, and what was stored before is still there once the disk is writable again.
#[test]
fn a_home_on_a_read_only_disk_is_named_with_the_systems_reason() {
    if skipped_on_postgres("the home's SQLite file is what the disk refuses") {
        return;
    }
    let model = FakeModel::start();
    model.reply(&answer("Noted."));
    let home = Home::new("anthropic", &model.url(), "");
    let data = home.dir.path().join("data");
    std::fs::create_dir_all(&data).unwrap();
    let mount = |args: &[&str]| {
        std::process::Command::new("mount")
            .args(args)
            .arg(&data)
            .status()
            .is_ok_and(|s| s.success())
    };
    if !mount(&["-t", "tmpfs", "none"]) {
        return eprintln!("skipped: cannot mount a tmpfs here (not root)");
    }
    struct Unmount(std::path::PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(data.clone());
    let first = home.run(&["chat", "--user", "Ada"], "remember this\n");
    assert_eq!(first.status, 0, "{}", first.stderr);
    assert!(mount(&["-o", "remount,ro", "-t", "tmpfs", "none"]));
    let db = data.join("anima.db").display().to_string();
    for args in [&["chat"][..], &["state"][..]] {
        let r = home.run(args, "hello\n");
        assert_ne!(r.status, 0, "{args:?}: {}", r.stdout);
        assert!(r.stderr.contains(&db), "{args:?}: {}", r.stderr);
        assert!(
            r.stderr.contains("Read-only file system"),
            "{args:?}: {}",
            r.stderr
        );
        assert_words(&format!("{args:?}"), &r.stderr);
    }
    assert!(mount(&["-o", "remount,rw", "-t", "tmpfs", "none"]));
    let state = home.run(&["state"], "");
    assert_eq!(state.status, 0, "{}", state.stderr);
    assert!(
        state.stdout.contains("conversations: 1\n"),
        "{}",
        state.stdout
    );
}
