//! Running anima as a service: `anima service install|uninstall|status` against a fake
//! systemctl, the unit checked by `systemd-analyze verify` where it exists, the daemon's
//! READY / WATCHDOG / STOPPING on a fake NOTIFY_SOCKET, and `anima state` beside the daemon.

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::time::{Duration, Instant};

use serde_json::json;
use support::daemon::{home, Daemon};
use support::slack::{self, FakeSlack};
use support::*;

/// A home with a fake `systemctl` first on PATH that logs its arguments.
fn with_fake_systemctl(home: &Home) -> (String, std::path::PathBuf) {
    let bin = home.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let log = home.dir.path().join("systemctl.log");
    script(
        &bin.join("systemctl"),
        &format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\ncase \"$*\" in\n  *is-active*) echo active ;;\n  *show*) printf 'ExecMainStatus=0\\nExecMainExitTimestamp=Mon 2026-11-23 10:00:00 UTC\\n' ;;\nesac\n",
            log.display()
        ),
    );
    (format!("{}:/usr/bin:/bin", bin.display()), log)
}

#[test]
fn a_dry_run_prints_the_unit_and_where_it_would_go() {
    let home = Home::new(
        "anthropic",
        "http://127.0.0.1:9",
        "\n[daemon]\nshutdown_grace_secs = 25\n",
    );
    // Under sudo, run by the user `nobody`: the unit runs as them.
    let r = home.run_env(
        &["service", "install", "--systemd", "--dry-run"],
        "",
        &[("SUDO_USER", "nobody")],
    );
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stdout
            .starts_with("# /etc/systemd/system/anima.service\n"),
        "{}",
        r.stdout
    );
    let config = home.config().canonicalize().unwrap();
    for line in [
        "Type=notify".to_string(),
        "User=nobody".to_string(),
        "RestartPreventExitStatus=2".to_string(),
        "After=network-online.target".to_string(),
        format!(
            "ExecStart={} --config {} run",
            std::fs::canonicalize(env!("CARGO_BIN_EXE_anima"))
                .unwrap()
                .display(),
            config.display()
        ),
        format!(
            "EnvironmentFile=-{}",
            config.with_file_name("anima.env").display()
        ),
        "Restart=on-failure".to_string(),
        "WatchdogSec=60".to_string(),
        "TimeoutStopSec=35".to_string(),
        "NoNewPrivileges=yes".to_string(),
        "ProtectSystem=strict".to_string(),
        "ProtectHome=read-only".to_string(),
        format!("ReadWritePaths={}", home.data().display()),
        "PrivateTmp=yes".to_string(),
        "CapabilityBoundingSet=".to_string(),
    ] {
        assert!(
            r.stdout.lines().any(|l| l == line),
            "{line} in\n{}",
            r.stdout
        );
    }
    assert!(
        !home.dir.path().join("anima.env").exists(),
        "a dry run writes nothing"
    );
    assert!(
        r.stderr.contains("lacks SLACK_BOT_TOKEN"),
        "and says what the secrets file lacks: {}",
        r.stderr
    );

    // A config path with spaces is one quoted word.
    let spaced = home.dir.path().join("my anima");
    std::fs::create_dir_all(&spaced).unwrap();
    std::fs::copy(home.config(), spaced.join("anima.toml")).unwrap();
    let mut cmd = support::anima_command(
        &spaced.join("anima.toml"),
        home.dir.path(),
        &["service", "install", "--systemd", "--dry-run"],
    );
    cmd.env("SUDO_USER", "nobody");
    let r = support::run(cmd, "");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains(&format!(
            " --config \"{}\" run\n",
            spaced.canonicalize().unwrap().join("anima.toml").display()
        )),
        "{}",
        r.stdout
    );

    let r = home.run(
        &["service", "install", "--launchd", "--user", "--dry-run"],
        "",
    );
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("Library/LaunchAgents/dev.anima.plist"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("<key>KeepAlive</key>"), "{}", r.stdout);
}

#[test]
fn systemd_analyze_finds_nothing_wrong_with_the_unit() {
    let Ok(out) = std::process::Command::new("systemd-analyze")
        .arg("--version")
        .output()
    else {
        eprintln!("systemd-analyze is not installed here: skipped");
        return;
    };
    assert!(out.status.success());
    // systemd-analyze calls `nobody` unsafe: `daemon` is an ordinary system account.
    if home_of("daemon").is_none() {
        eprintln!("no user `daemon` here: skipped");
        return;
    }
    let home = Home::new("anthropic", "http://127.0.0.1:9", "");
    let r = home.run_env(
        &["service", "install", "--systemd", "--dry-run"],
        "",
        &[("SUDO_USER", "daemon")],
    );
    assert_eq!(r.status, 0, "{}", r.stderr);
    let unit = r.stdout.split_once('\n').unwrap().1;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("anima.service");
    std::fs::write(&file, unit).unwrap();
    let out = std::process::Command::new("systemd-analyze")
        .arg("verify")
        .arg(&file)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stderr.contains("anima.service"),
        "systemd-analyze complained about the unit:\n{stderr}"
    );
}

/// The user running the tests.
fn whoami() -> String {
    let out = std::process::Command::new("id")
        .arg("-un")
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A user's home, from the user database (Linux's getent).
fn home_of(user: &str) -> Option<std::path::PathBuf> {
    let out = std::process::Command::new("getent")
        .args(["passwd", user])
        .output()
        .ok()?;
    let line = String::from_utf8_lossy(&out.stdout).into_owned();
    line.trim().split(':').nth(5).map(std::path::PathBuf::from)
}

/// What the home's service needs in its secrets file, with made-up values.
fn tokens(home: &Home) -> String {
    let mut text =
        "SLACK_BOT_TOKEN=xoxb-kept\nSLACK_APP_TOKEN=xapp-kept\nANTHROPIC_API_KEY=sk-ant-kept\n"
            .to_string();
    if let Some(url) = home.database() {
        text += &format!("ANIMA_DATABASE_URL={url}\n");
    }
    text
}

#[test]
fn install_status_and_uninstall_a_user_service() {
    let home = Home::new("anthropic", "http://127.0.0.1:9", "");
    let (path, log) = with_fake_systemctl(&home);
    let env = [("PATH", path.as_str())];
    // Without its secrets the unit is written, and not started.
    let r = home.run_env(&["service", "install", "--systemd", "--user"], "", &env);
    assert_eq!(r.status, 2, "{}", r.stderr);
    let secrets = home.dir.path().join("anima.env");
    for word in [
        "not started",
        "SLACK_BOT_TOKEN",
        "SLACK_APP_TOKEN",
        "ANTHROPIC_API_KEY",
        "holds no secrets yet",
        "--env-from-shell",
        secrets.to_str().unwrap(),
    ] {
        assert!(r.stderr.contains(word), "{word}: {}", r.stderr);
    }
    let unit = home.dir.path().join(".config/systemd/user/anima.service");
    let text = std::fs::read_to_string(&unit).unwrap();
    assert!(text.contains("WantedBy=default.target"), "{text}");
    assert!(!text.contains("network-online"), "{text}");
    let mode = std::fs::metadata(&secrets).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the secrets file is private");
    assert!(
        std::fs::read_to_string(&secrets)
            .unwrap()
            .lines()
            .all(|l| l.starts_with('#')),
        "and holds no value"
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(calls.lines().collect::<Vec<_>>(), ["--user daemon-reload"]);

    // With them, the same command starts it, and says how to keep it after logout.
    std::fs::write(&secrets, tokens(&home)).unwrap();
    let r = home.run_env(&["service", "install", "--systemd", "--user"], "", &env);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(r.stdout.contains("loginctl enable-linger"), "{}", r.stdout);
    let calls = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        calls.lines().collect::<Vec<_>>(),
        [
            "--user daemon-reload",
            "--user daemon-reload",
            "--user enable --now anima.service"
        ]
    );

    // A different unit only when forced; the secrets file is never overwritten.
    let config = std::fs::read_to_string(home.config()).unwrap();
    std::fs::write(
        home.config(),
        config + "\n[daemon]\nshutdown_grace_secs = 7\n",
    )
    .unwrap();
    let again = home.run_env(&["service", "install", "--systemd", "--user"], "", &env);
    assert_eq!(again.status, 2);
    assert!(again.stderr.contains("--force"), "{}", again.stderr);
    let forced = home.run_env(
        &["service", "install", "--systemd", "--user", "--force"],
        "",
        &env,
    );
    assert_eq!(forced.status, 0, "{}", forced.stderr);
    assert_eq!(std::fs::read_to_string(&secrets).unwrap(), tokens(&home));
    assert!(
        !forced.stdout.contains("xoxb") && !forced.stderr.contains("xoxb"),
        "secrets are never echoed"
    );

    let status = home.run_env(&["service", "status", "--systemd", "--user"], "", &env);
    assert_eq!(status.status, 0, "{}", status.stderr);
    assert!(
        status.stdout.contains("installed: yes"),
        "{}",
        status.stdout
    );
    assert!(
        status.stdout.contains("running: yes (active)"),
        "{}",
        status.stdout
    );
    assert!(
        status
            .stdout
            .contains("last exit: status 0 at Mon 2026-11-23"),
        "{}",
        status.stdout
    );

    let gone = home.run_env(&["service", "uninstall", "--systemd", "--user"], "", &env);
    assert_eq!(gone.status, 0, "{}", gone.stderr);
    assert!(!unit.exists());
    assert!(secrets.exists(), "the secrets stay");
    let status = home.run_env(&["service", "status", "--systemd", "--user"], "", &env);
    assert!(status.stdout.contains("installed: no"), "{}", status.stdout);
}

/// `--env-from-shell` writes what the service needs from this shell into its secrets file,
/// mode 0600, keeping the file's other lines, and starts it; it never prints a value.
#[test]
fn env_from_shell_writes_the_exported_secrets_privately_and_starts_the_service() {
    let home = Home::new("anthropic", "http://127.0.0.1:9", "");
    let (path, log) = with_fake_systemctl(&home);
    let secrets = home.dir.path().join("anima.env");
    std::fs::write(&secrets, "# mine\nOTHER=kept\nSLACK_BOT_TOKEN=xoxb-old\n").unwrap();
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o644)).unwrap();
    let mut env = vec![
        ("PATH", path.as_str()),
        ("SLACK_BOT_TOKEN", "xoxb-from-the-shell"),
        ("SLACK_APP_TOKEN", "xapp-from-the-shell"),
    ];
    let url = home.database().map(str::to_string);
    if let Some(url) = &url {
        env.push(("ANIMA_DATABASE_URL", url));
    }
    let r = home.run_env(
        &[
            "service",
            "install",
            "--systemd",
            "--user",
            "--env-from-shell",
        ],
        "",
        &env,
    );
    assert_eq!(r.status, 0, "{}", r.stderr);
    let mode = std::fs::metadata(&secrets).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let text = std::fs::read_to_string(&secrets).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        &lines[..5],
        [
            "# mine",
            "OTHER=kept",
            "SLACK_BOT_TOKEN=xoxb-from-the-shell",
            "SLACK_APP_TOKEN=xapp-from-the-shell",
            "ANTHROPIC_API_KEY=sk-ant-test-secret-key",
        ]
    );
    assert!(
        r.stdout
            .contains("wrote SLACK_BOT_TOKEN, SLACK_APP_TOKEN, ANTHROPIC_API_KEY"),
        "{}",
        r.stdout
    );
    for secret in ["xoxb-from", "xapp-from", "sk-ant-test-secret-key"] {
        assert!(
            !r.stdout.contains(secret) && !r.stderr.contains(secret),
            "{secret} printed"
        );
    }
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(
        calls.contains("--user enable --now anima.service"),
        "{calls}"
    );
}

/// An empty secrets file, quotes or spaces around a token, in the file or in the shell: the
/// service is not started, and the message names the file, the line and the variable, never
/// the value.
#[test]
fn malformed_secrets_are_named_and_the_service_is_not_started() {
    let home = Home::new("anthropic", "http://127.0.0.1:9", "");
    let (path, log) = with_fake_systemctl(&home);
    let env = [("PATH", path.as_str())];
    let secrets = home.dir.path().join("anima.env");
    std::fs::write(&secrets, "").unwrap();
    std::fs::set_permissions(&secrets, std::fs::Permissions::from_mode(0o644)).unwrap();
    let r = home.run_env(&["service", "install", "--systemd", "--user"], "", &env);
    assert_eq!(r.status, 2, "{}", r.stderr);
    assert!(r.stderr.contains("holds no secrets yet"), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("is readable by others (mode 0644); run: chmod 600"),
        "{}",
        r.stderr
    );

    std::fs::write(
        &secrets,
        "SLACK_BOT_TOKEN=\"xoxb-quoted\"\nSLACK_APP_TOKEN= xapp-spaced\nANTHROPIC_API_KEY=sk-ant-ok\n",
    )
    .unwrap();
    let r = home.run_env(&["service", "install", "--systemd", "--user"], "", &env);
    assert_eq!(r.status, 2, "{}", r.stderr);
    let file = secrets.display().to_string();
    assert!(
        r.stderr.contains(&format!(
            "{file}, line 1: SLACK_BOT_TOKEN: the value is in quotes"
        )),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains(&format!(
            "{file}, line 2: SLACK_APP_TOKEN: spaces around the value"
        )),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("xoxb-quoted") && !r.stderr.contains("xapp-spaced"));

    let r = home.run_env(
        &[
            "service",
            "install",
            "--systemd",
            "--user",
            "--env-from-shell",
        ],
        "",
        &[
            ("PATH", path.as_str()),
            ("SLACK_BOT_TOKEN", " xoxb-pasted "),
            ("SLACK_APP_TOKEN", "'xapp-pasted'"),
        ],
    );
    assert_eq!(r.status, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("SLACK_BOT_TOKEN in this shell has spaces around it")
            && r.stderr
                .contains("SLACK_APP_TOKEN in this shell is in quotes"),
        "{}",
        r.stderr
    );
    assert!(!r.stderr.contains("pasted"));
    assert!(
        std::fs::read_to_string(&secrets)
            .unwrap()
            .contains("xoxb-quoted"),
        "the file is left as it was"
    );
    let calls = std::fs::read_to_string(&log).unwrap();
    assert!(!calls.contains("enable"), "never started: {calls}");
}

/// A system service runs as a named user: never root unless asked, never a user who does
/// not exist, never with its files in root's home.
#[test]
fn a_system_service_runs_as_a_named_user_whose_files_are_not_roots() {
    let home = Home::new("anthropic", "http://127.0.0.1:9", "");
    let dry = ["service", "install", "--systemd", "--dry-run"];
    let as_root = home.run(&dry, "");
    if whoami() == "root" {
        assert_eq!(as_root.status, 2, "{}", as_root.stdout);
        assert!(
            as_root.stderr.contains("--run-as USER") && as_root.stderr.contains("--run-as root"),
            "{}",
            as_root.stderr
        );
    }
    let mut args = dry.to_vec();
    args.extend(["--run-as", "root"]);
    let r = home.run(&args, "");
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(r.stdout.contains("\nUser=root\n"), "{}", r.stdout);

    let mut args = dry.to_vec();
    args.extend(["--run-as", "no-such-user-here"]);
    let r = home.run(&args, "");
    assert_eq!(r.status, 2);
    assert!(
        r.stderr.contains("no user named \"no-such-user-here\""),
        "{}",
        r.stderr
    );

    let r = home.run_env(
        &[
            "service",
            "install",
            "--systemd",
            "--user",
            "--run-as",
            "nobody",
            "--dry-run",
        ],
        "",
        &[],
    );
    assert_eq!(r.status, 2);
    assert!(
        r.stderr.contains("--run-as is for a system service"),
        "{}",
        r.stderr
    );

    // Under sudo, `~` is root's home: a service run by someone else never gets root's files.
    let Some(roots) = home_of("root") else {
        return;
    };
    std::fs::write(
        home.config(),
        "[paths]\nhome = \"~/.anima\"\n[llm]\nprovider = \"anthropic\"\n",
    )
    .unwrap();
    let r = home.run_env(
        &dry,
        "",
        &[("SUDO_USER", "nobody"), ("HOME", roots.to_str().unwrap())],
    );
    assert_eq!(r.status, 2, "{}", r.stdout);
    let anima = roots.join(".anima");
    assert!(
        r.stderr.contains(&format!(
            "[paths] home is {}, in root's home",
            anima.display()
        )) && r.stderr.contains("the service runs as nobody"),
        "{}",
        r.stderr
    );
}

/// launchd restarts any exit but 0: its shell turns anima's 2 (a bad configuration) into 0,
/// passes every other status on, and passes launchd's SIGTERM to anima.
#[test]
fn the_launchd_shell_reports_a_bad_configuration_as_done_and_passes_sigterm_on() {
    let dir = tempfile::tempdir().unwrap();
    let fake = dir.path().join("anima");
    let got = dir.path().join("got");
    script(
        &fake,
        &format!(
            "#!/bin/sh\ntrap 'echo TERM > \"{}\"; exit 0' TERM\n[ -n \"$EXIT\" ] && exit $EXIT\necho started > \"{}\"\nwhile :; do sleep 0.05; done\n",
            got.display(),
            got.display()
        ),
    );
    let env_file = dir.path().join("anima.env");
    std::fs::write(&env_file, "EXIT=2\n").unwrap();
    let sh = |env_file: &std::path::Path| {
        let script = anima::service::launchd_script(
            &format!("'{}'", env_file.display()),
            &format!("'{}' 'run'", fake.display()),
        );
        std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .spawn()
            .unwrap()
    };
    assert_eq!(sh(&env_file).wait().unwrap().code(), Some(0), "2 is done");
    std::fs::write(&env_file, "EXIT=1\n").unwrap();
    assert_eq!(
        sh(&env_file).wait().unwrap().code(),
        Some(1),
        "1 is a failure"
    );

    let mut running = sh(&dir.path().join("none.env"));
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::fs::read_to_string(&got).unwrap_or_default() != "started\n" {
        assert!(Instant::now() < deadline, "the fake anima did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::process::Command::new("kill")
        .args(["-TERM", &running.id().to_string()])
        .status()
        .unwrap();
    assert_eq!(running.wait().unwrap().code(), Some(0));
    assert_eq!(std::fs::read_to_string(&got).unwrap(), "TERM\n");
}

#[test]
fn an_unwritable_unit_folder_says_what_to_do_instead() {
    let home = Home::new("anthropic", "http://127.0.0.1:9", "");
    let (path, _) = with_fake_systemctl(&home);
    // A file where the folder should be.
    std::fs::create_dir_all(home.dir.path().join(".config")).unwrap();
    std::fs::write(home.dir.path().join(".config/systemd"), "not a folder").unwrap();
    let r = home.run_env(
        &["service", "install", "--systemd", "--user"],
        "",
        &[("PATH", path.as_str())],
    );
    assert_eq!(r.status, 2, "{}", r.stderr);
    assert!(r.stderr.contains("cannot write"), "{}", r.stderr);
    assert!(r.stderr.contains(".config/systemd"), "{}", r.stderr);
}

#[test]
fn under_systemd_the_daemon_says_ready_pings_the_watchdog_and_says_stopping() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let home = home(&model, &slack, "socket", "");
    let socket_path = home.dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&socket_path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let mut d = Daemon::start_env(
        &home,
        &[
            ("NOTIFY_SOCKET", socket_path.to_str().unwrap()),
            ("WATCHDOG_USEC", "400000"),
        ],
    );
    slack.wait_connected_or(|| d.log());
    let mut heard: Vec<String> = Vec::new();
    let mut buf = [0u8; 512];
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline
        && !(heard.iter().any(|m| m == "READY=1")
            && heard.iter().filter(|m| *m == "WATCHDOG=1").count() >= 2)
    {
        if let Ok(n) = socket.recv(&mut buf) {
            heard.push(String::from_utf8_lossy(&buf[..n]).trim().to_string());
        }
    }
    assert!(
        heard.iter().any(|m| m == "READY=1"),
        "{heard:?}\n{}",
        d.log()
    );
    assert!(
        heard.iter().filter(|m| *m == "WATCHDOG=1").count() >= 2,
        "{heard:?}"
    );
    assert_eq!(d.terminate(), 0);
    let mut stopping = false;
    while let Ok(n) = socket.recv(&mut buf) {
        stopping |= String::from_utf8_lossy(&buf[..n]).trim() == "STOPPING=1";
    }
    assert!(stopping, "STOPPING=1 at shutdown");
}

#[test]
fn state_reads_the_soul_beside_a_running_daemon() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Hello."));
    let home = home(&model, &slack, "socket", "");
    // A SQLite home has no database before the first start; a PostgreSQL one always has.
    if home.database().is_none() {
        let none = home.run(&["state"], "");
        assert_eq!(none.status, 1, "{}", none.stderr);
        assert!(none.stderr.contains("no database"), "{}", none.stderr);
    }

    let d = Daemon::start(&home);
    slack.wait_connected_or(|| d.log());
    slack.send_event(
        json!({"type":"app_mention","user":"U1","text":format!("<@{}> hi", slack::BOT_USER),"ts":"1.000001","channel":"C1","event_ts":"1.000001"}),
        "E1",
        0,
    );
    slack.wait(10, "the reply", |s| s.posts().len() == 1);
    let r = home.run(&["state", "--json"], "");
    assert_eq!(r.status, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert_eq!(v["interactions"], 1);
    assert_eq!(v["inbox_depth"], 0);
    assert_eq!(v["conversations"][0]["thread"], "C1:1.000001");
    assert_eq!(v["conversations"][0]["turns"], 1);
    assert_eq!(v["conversations"][0]["process"], "main");
    let plain = home.run(&["state"], "");
    assert!(plain.stdout.contains("interactions: 1"), "{}", plain.stdout);
    assert!(
        plain.stdout.contains("C1:1.000001  main  1 turn,"),
        "{}",
        plain.stdout
    );
}

#[test]
fn metrics_answer_an_operators_questions() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Counted."));
    slack.refuse("reactions.add", "missing_scope");
    let home = home(&model, &slack, "socket", "");
    let d = Daemon::start(&home);
    slack.wait_connected_or(|| d.log());
    slack.send_event(
        json!({"type":"app_mention","user":"U1","text":format!("<@{}> count me", slack::BOT_USER),"ts":"3.000001","channel":"C1","event_ts":"3.000001"}),
        "E1",
        0,
    );
    slack.wait(10, "the reply", |s| s.posts().len() == 1);
    std::thread::sleep(Duration::from_millis(300));
    let (_, text) = support::daemon::http("GET", &d.url("/metrics"), &[], "");
    for line in [
        "anima_turns_total{process=\"main\",outcome=\"completed\"} 1",
        "anima_model_calls_total{provider=\"anthropic\",outcome=\"ok\"} 1",
        "anima_model_tokens_total{kind=\"input\"} 2095",
        "anima_model_tokens_total{kind=\"cache_read\"} 1800",
        "anima_model_call_seconds_count 1",
        "anima_engine_turn_seconds_count 1",
        "anima_replies_total{mode=\"whole\"} 1",
        "anima_inbox_depth 0",
        "anima_slack_api_errors_total{method=\"reactions.add\",code=\"missing_scope\"} 1",
    ] {
        assert!(text.lines().any(|l| l == line), "{line} in\n{text}");
    }
    let ratio: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("anima_prompt_cache_hit_ratio "))
        .unwrap()
        .parse()
        .unwrap();
    assert!((ratio - 1800.0 / 3895.0).abs() < 1e-6, "{ratio}");
    assert!(
        !text.contains("U1") && !text.contains("C1:"),
        "no user or thread labels"
    );
}

#[test]
fn a_turn_is_one_span_whose_json_log_line_says_what_happened() {
    let model = FakeModel::start();
    model.reply(&answer("Logged."));
    let home = Home::new("anthropic", &model.url(), "");
    let r = home.run_env(
        &["--log-format", "json", "chat"],
        "hello\n",
        &[("ANIMA_LOG", "anima=info")],
    );
    assert_eq!(r.status, 0, "{}", r.stderr);
    // Every log line is one JSON object (chat's opening line to the person is not a log line).
    let lines: Vec<serde_json::Value> = r
        .stderr
        .lines()
        .filter(|l| !l.starts_with("Talking to "))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let done = lines
        .iter()
        .find(|v| v["message"] == "turn done")
        .unwrap_or_else(|| panic!("{}", r.stderr));
    let span = &done["span"];
    assert_eq!(span["name"], "turn");
    assert_eq!(span["thread"], "terminal");
    assert_eq!(span["process"], "main");
    assert_eq!(span["model"], "claude-test");
    assert_eq!(span["input_tokens"], 2095);
    assert_eq!(span["outcome"], "completed");
    assert!(span["steps"]
        .as_str()
        .unwrap()
        .contains("external_dialogue"));
    assert!(!r.stderr.contains("hello"), "message bodies only at debug");
    assert!(
        !r.stderr.contains("sk-ant-test-secret-key"),
        "secrets never"
    );
}
