//! Service units for `anima service`: a systemd unit (Type=notify, watchdog, hardening) and a
//! launchd agent, rendered from a `ServiceSpec`, and where each goes.
//!
//! Pure text: no I/O, so the units are snapshot-tested. `cli/service.rs` writes them and
//! talks to systemctl / launchctl. Secrets never appear in a unit: they live in an
//! environment file (mode 0600) that anima creates empty and never fills.

use std::path::{Path, PathBuf};

/// The systemd unit's (and launchd label's) name.
pub const NAME: &str = "anima";
/// The launchd label.
pub const LAUNCHD_LABEL: &str = "dev.anima";
/// How often systemd expects a sign of life; the daemon pings at half of it.
pub const WATCHDOG_SECS: u64 = 60;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Manager {
    Systemd,
    Launchd,
}

impl Manager {
    /// The platform's own: launchd on macOS, systemd elsewhere.
    pub fn native() -> Manager {
        if cfg!(target_os = "macos") {
            Manager::Launchd
        } else {
            Manager::Systemd
        }
    }
}

/// Everything a unit says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceSpec {
    /// The anima binary, absolute.
    pub exe: PathBuf,
    /// The configuration file, absolute; `None`: the built-in defaults.
    pub config: Option<PathBuf>,
    /// `[paths] home`: the only place the service writes.
    pub home: PathBuf,
    /// The secrets, one `NAME=value` a line.
    pub env_file: PathBuf,
    /// A per-user service (systemd --user, a LaunchAgent) rather than a system one.
    pub user: bool,
    pub shutdown_grace_secs: u64,
    /// A system unit runs as this user (the one who ran `sudo anima service install`), so
    /// that it can write the home it was configured with.
    pub run_as: Option<String>,
    /// The model may be the Claude Code CLI, which writes its sessions and settings in the
    /// service user's home (`~/.claude`, `~/.claude.json`): those stay writable.
    pub claude_cli: bool,
}

impl ServiceSpec {
    /// A path with a control character (a newline would start a new directive) cannot go
    /// into a unit.
    pub fn check(&self) -> Result<(), String> {
        let mut paths = vec![&self.exe, &self.home, &self.env_file];
        paths.extend(self.config.iter());
        for p in paths {
            let text = p.display().to_string();
            if text.chars().any(char::is_control) {
                return Err(format!(
                    "the path {text:?} has a control character; a service unit cannot name it"
                ));
            }
        }
        Ok(())
    }
}

/// Where the unit goes. `user_home` is the invoking user's home (for per-user units).
pub fn unit_path(manager: Manager, user: bool, user_home: &Path) -> PathBuf {
    match (manager, user) {
        (Manager::Systemd, false) => PathBuf::from("/etc/systemd/system/anima.service"),
        (Manager::Systemd, true) => user_home.join(".config/systemd/user/anima.service"),
        (Manager::Launchd, false) => PathBuf::from("/Library/LaunchDaemons/dev.anima.plist"),
        (Manager::Launchd, true) => user_home.join("Library/LaunchAgents/dev.anima.plist"),
    }
}

/// The systemd unit.
pub fn systemd_unit(s: &ServiceSpec) -> String {
    let exec = exec_args(s)
        .iter()
        .map(|a| systemd_quote(a))
        .collect::<Vec<_>>()
        .join(" ");
    let run_as = match (&s.run_as, s.user) {
        (Some(u), false) => format!("User={u}\n"),
        _ => String::new(),
    };
    let wanted_by = if s.user {
        "default.target"
    } else {
        "multi-user.target"
    };
    format!(
        "# Written by `anima service install`. Secrets go in the EnvironmentFile (mode 0600),
# never here. Edit with care: `anima service install --force` writes it anew.
[Unit]
Description=anima, a Slack chat-bot daemon with a soul
Wants=network-online.target
After=network-online.target

[Service]
Type=notify
NotifyAccess=main
{run_as}ExecStart={exec}
ExecReload=/bin/kill -HUP $MAINPID
EnvironmentFile=-{env}
Restart=on-failure
RestartSec=5
WatchdogSec={WATCHDOG_SECS}
TimeoutStopSec={stop}
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=read-only
ReadWritePaths={home}{claude}
PrivateTmp=yes
CapabilityBoundingSet=
RestrictSUIDSGID=yes
LockPersonality=yes

[Install]
WantedBy={wanted_by}
",
        // EnvironmentFile= takes the rest of the line as one path (no quotes, no `$`), with
        // specifiers; ReadWritePaths= is a quoted list with specifiers but no `$`.
        env = s.env_file.display().to_string().replace('%', "%%"),
        stop = s.shutdown_grace_secs + 10,
        home = list_quote(&s.home.display().to_string().replace('%', "%%")),
        // `%h`: the home of the user the service runs as; `-`: fine if it does not exist yet.
        claude = if s.claude_cli {
            " -%h/.claude -%h/.claude.json"
        } else {
            ""
        },
    )
}

/// The launchd property list. launchd has no environment file: a shell reads it and execs
/// anima, so the secrets stay out of the plist.
pub fn launchd_plist(s: &ServiceSpec) -> String {
    let env = shell_quote(&s.env_file.display().to_string());
    let exec = exec_args(s)
        .iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ");
    let script = format!("set -a; [ -f {env} ] && . {env}; set +a; exec {exec}");
    let logs = s.home.join("logs");
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Written by `anima service install`. Secrets go in the environment file that the script below reads (mode 0600), never here. -->
<plist version="1.0">
<dict>
  <key>Label</key>
  <string>{LAUNCHD_LABEL}</string>
  <key>ProgramArguments</key>
  <array>
    <string>/bin/sh</string>
    <string>-c</string>
    <string>{script}</string>
  </array>
  <key>WorkingDirectory</key>
  <string>{home}</string>
  <key>RunAtLoad</key>
  <true/>
  <key>KeepAlive</key>
  <dict>
    <key>SuccessfulExit</key>
    <false/>
  </dict>
  <key>ExitTimeOut</key>
  <integer>{stop}</integer>
  <key>StandardOutPath</key>
  <string>{out}</string>
  <key>StandardErrorPath</key>
  <string>{err}</string>
</dict>
</plist>
"#,
        script = xml(&script),
        home = xml(&s.home.display().to_string()),
        stop = s.shutdown_grace_secs + 10,
        out = xml(&logs.join("anima.out.log").display().to_string()),
        err = xml(&logs.join("anima.log").display().to_string()),
    )
}

fn exec_args(s: &ServiceSpec) -> Vec<String> {
    let mut args = vec![s.exe.display().to_string()];
    if let Some(c) = &s.config {
        args.push("--config".into());
        args.push(c.display().to_string());
    }
    args.push("run".into());
    args
}

/// A systemd command-line word: quoted when it holds anything but plain path characters;
/// `%` and `$` doubled so systemd does not expand them.
fn systemd_quote(word: &str) -> String {
    let escaped = word.replace('%', "%%").replace('$', "$$");
    let plain = escaped
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@%$".contains(c));
    if plain && !escaped.is_empty() {
        escaped
    } else {
        format!("\"{}\"", escaped.replace('\\', "\\\\").replace('"', "\\\""))
    }
}

/// A word of a space-separated list such as ReadWritePaths=: quoted when it has a space or
/// a quote.
fn list_quote(word: &str) -> String {
    if word
        .chars()
        .any(|c| c.is_whitespace() || c == '"' || c == '\'' || c == '\\')
    {
        format!("\"{}\"", word.replace('\\', "\\\\").replace('"', "\\\""))
    } else {
        word.to_string()
    }
}

/// A POSIX shell word in single quotes.
fn shell_quote(word: &str) -> String {
    format!("'{}'", word.replace('\'', "'\\''"))
}

fn xml(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(user: bool) -> ServiceSpec {
        ServiceSpec {
            exe: "/usr/local/bin/anima".into(),
            config: Some("/home/ada/anima/anima.toml".into()),
            home: "/home/ada/.anima".into(),
            env_file: "/home/ada/anima/anima.env".into(),
            user,
            shutdown_grace_secs: 20,
            run_as: (!user).then(|| "ada".to_string()),
            claude_cli: false,
        }
    }

    #[test]
    fn the_claude_cli_may_write_its_own_files_in_the_service_users_home() {
        let unit = systemd_unit(&ServiceSpec {
            claude_cli: true,
            ..spec(false)
        });
        assert!(
            unit.contains("\nReadWritePaths=/home/ada/.anima -%h/.claude -%h/.claude.json\n"),
            "{unit}"
        );
        assert!(unit.contains("\nProtectHome=read-only\n"), "{unit}");
    }

    #[test]
    fn the_systemd_units() {
        insta::assert_snapshot!("systemd_system", systemd_unit(&spec(false)));
        insta::assert_snapshot!("systemd_user", systemd_unit(&spec(true)));
    }

    #[test]
    fn the_launchd_agent() {
        insta::assert_snapshot!("launchd_user", launchd_plist(&spec(true)));
    }

    #[test]
    fn odd_paths_stay_one_word_and_expand_nothing() {
        let mut s = spec(false);
        s.exe = "/opt/my apps/anima".into();
        s.config = Some("/etc/anima/100%$HOME's.toml".into());
        let unit = systemd_unit(&s);
        assert!(
            unit.contains(
                "ExecStart=\"/opt/my apps/anima\" --config \"/etc/anima/100%%$$HOME's.toml\" run"
            ),
            "{unit}"
        );
        s.home = "/srv/my anima/100%".into();
        s.env_file = "/srv/zoë's anima/anima.env".into();
        let unit = systemd_unit(&s);
        assert!(
            unit.contains("\nEnvironmentFile=-/srv/zoë's anima/anima.env\n"),
            "one unquoted path: {unit}"
        );
        assert!(
            unit.contains("\nReadWritePaths=\"/srv/my anima/100%%\"\n"),
            "{unit}"
        );
        let plist = launchd_plist(&s);
        assert!(
            plist.contains("&apos;") || plist.contains("'\\''"),
            "{plist}"
        );
        assert!(
            !plist.contains("<string>/opt/my apps"),
            "quoted inside the script"
        );
    }

    /// Every event of `doc` as quick-xml reads it, strictly (comments checked too), and the
    /// text of each `<string>`.
    fn strings_of_well_formed(doc: &str) -> Result<Vec<String>, String> {
        let mut reader = quick_xml::Reader::from_str(doc);
        let config = reader.config_mut();
        config.check_comments = true;
        config.check_end_names = true;
        let (mut strings, mut current) = (Vec::new(), None::<String>);
        loop {
            match reader.read_event().map_err(|e| e.to_string())? {
                quick_xml::events::Event::Eof => return Ok(strings),
                quick_xml::events::Event::Start(t) => {
                    current = (t.name().into_inner() == "string").then(String::new)
                }
                quick_xml::events::Event::Text(t) => {
                    if let Some(c) = current.as_mut() {
                        c.push_str(&t.into_inner());
                    }
                }
                // An entity (`&amp;` …): quick-xml gives each as an event of its own.
                quick_xml::events::Event::GeneralRef(r) => {
                    let name = r.into_inner();
                    let ch = quick_xml::escape::resolve_predefined_entity(&name)
                        .ok_or_else(|| format!("unknown entity {name}"))?;
                    if let Some(c) = current.as_mut() {
                        c.push_str(ch);
                    }
                }
                quick_xml::events::Event::End(_) => strings.extend(current.take()),
                _ => {}
            }
        }
    }

    #[test]
    fn every_path_anima_accepts_gives_a_well_formed_plist() {
        let hostile = [
            "/tmp/a--b",
            "/tmp/--",
            "/tmp/a&b",
            "/tmp/a<b>",
            "/tmp/]]>",
            "/tmp/\"quoted\" and 'single'",
            "/tmp/日本語/😀/é",
            "/tmp/100%$HOME",
            "/tmp/<!-- x -->",
        ];
        for path in hostile {
            let mut s = spec(true);
            s.config = Some(format!("{path}/anima.toml").into());
            s.env_file = format!("{path}/anima.env").into();
            s.home = format!("{path}/home").into();
            s.exe = format!("{path}/anima").into();
            assert!(s.check().is_ok(), "{path}");
            let plist = launchd_plist(&s);
            let strings =
                strings_of_well_formed(&plist).unwrap_or_else(|e| panic!("{path}: {e}\n{plist}"));
            let script = &strings[3];
            assert!(
                script.contains(&shell_quote(&format!("{path}/anima.env"))),
                "{path}: {script}"
            );
            assert!(
                script.contains(&shell_quote(&format!("{path}/anima.toml"))),
                "{path}: {script}"
            );
            assert_eq!(strings[4], format!("{path}/home"));
        }
    }

    #[test]
    fn a_path_with_a_newline_is_refused() {
        let mut s = spec(false);
        assert!(s.check().is_ok());
        s.config = Some("/tmp/a\nExecStartPre=/bin/sh -c id".into());
        assert!(s.check().unwrap_err().contains("control character"));
    }

    #[test]
    fn units_go_where_their_manager_looks() {
        let home = Path::new("/home/ada");
        assert_eq!(
            unit_path(Manager::Systemd, true, home),
            Path::new("/home/ada/.config/systemd/user/anima.service")
        );
        assert_eq!(
            unit_path(Manager::Systemd, false, home),
            Path::new("/etc/systemd/system/anima.service")
        );
        assert_eq!(
            unit_path(Manager::Launchd, true, home),
            Path::new("/home/ada/Library/LaunchAgents/dev.anima.plist")
        );
    }
}
