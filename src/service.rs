//! Service units for `anima service`: a systemd unit (Type=notify, watchdog, hardening) and a
//! launchd job, rendered from a `ServiceSpec`, and where each goes; the account a system
//! service runs as, read from the system's user database; the secrets file (`secrets`).
//!
//! Pure text: no I/O, so the units are snapshot-tested. `cli/service.rs` writes them and
//! talks to systemctl / launchctl. Secrets never appear in a unit: they live in an
//! environment file (mode 0600) that anima creates and fills only when asked to
//! (`--env-from-shell`). Exit status 2 (a bad configuration, a missing secret) is never
//! restarted: restarting cannot mend it.

use std::path::{Path, PathBuf};

pub mod secrets;

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

/// The account a system service runs as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Account {
    pub name: String,
    pub uid: u32,
    pub gid: u32,
    pub home: PathBuf,
}

impl Account {
    /// From a line of `getent passwd NAME` (`name:x:uid:gid:gecos:home:shell`).
    pub fn from_passwd(line: &str) -> Option<Account> {
        let f: Vec<&str> = line.trim_end().split(':').collect();
        if f.len() < 7 || f[0].is_empty() || f[5].is_empty() {
            return None;
        }
        Some(Account {
            name: f[0].to_string(),
            uid: f[2].parse().ok()?,
            gid: f[3].parse().ok()?,
            home: PathBuf::from(f[5]),
        })
    }

    /// From `dscl . -read /Users/NAME NFSHomeDirectory PrimaryGroupID UniqueID` (macOS).
    pub fn from_dscl(name: &str, text: &str) -> Option<Account> {
        let get = |key: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.strip_prefix(':'))
                .map(str::trim)
                .filter(|v| !v.is_empty())
        };
        Some(Account {
            name: name.to_string(),
            uid: get("UniqueID")?.parse().ok()?,
            gid: get("PrimaryGroupID")?.parse().ok()?,
            home: PathBuf::from(get("NFSHomeDirectory")?),
        })
    }

    pub fn is_root(&self) -> bool {
        self.uid == 0
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
    /// A system unit runs as this account (`--run-as`, else the one who ran `sudo anima
    /// service install`), so that it can write the home it was configured with.
    pub run_as: Option<Account>,
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
        (Some(a), false) => format!("User={}\n", a.name),
        _ => String::new(),
    };
    // A user manager cannot see the system's network targets: a user unit waits for nothing.
    let network = if s.user {
        ""
    } else {
        "Wants=network-online.target\nAfter=network-online.target\n"
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
{network}
[Service]
Type=notify
NotifyAccess=main
{run_as}ExecStart={exec}
ExecReload=/bin/kill -HUP $MAINPID
EnvironmentFile=-{env}
Restart=on-failure
RestartSec=5
# Exit status 2 is a bad configuration or a missing secret: restarting cannot mend it.
RestartPreventExitStatus=2
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

/// The launchd property list. launchd has no environment file: a shell reads it and runs
/// anima, passing launchd's SIGTERM on. launchd restarts a job that exits with a status other
/// than 0 (`KeepAlive` / `SuccessfulExit` false; `Crashed` covers signals only and no key
/// names one status), so the shell turns anima's exit status 2 into 0: a bad configuration
/// is not restarted every 10 s. A system daemon runs as `UserName`, with its `HOME`.
pub fn launchd_plist(s: &ServiceSpec) -> String {
    let env = shell_quote(&s.env_file.display().to_string());
    let exec = exec_args(s)
        .iter()
        .map(|a| shell_quote(a))
        .collect::<Vec<_>>()
        .join(" ");
    let script = launchd_script(&env, &exec);
    let logs = s.home.join("logs");
    let user = match (&s.run_as, s.user) {
        (Some(a), false) => format!(
            "  <key>UserName</key>\n  <string>{}</string>\n  <key>EnvironmentVariables</key>\n  <dict>\n    <key>HOME</key>\n    <string>{}</string>\n  </dict>\n",
            xml(&a.name),
            xml(&a.home.display().to_string())
        ),
        _ => String::new(),
    };
    format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Written by `anima service install`. Secrets go in the environment file that the script below reads (mode 0600), never here. Exit status 2 (a bad configuration) is reported as 0, so that launchd does not restart it. -->
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
{user}  <key>RunAtLoad</key>
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

/// The launchd job's shell: reads the secrets, runs anima with SIGTERM passed on (a
/// background job of a script ignores SIGINT, so only TERM), waits for its own exit (a
/// trapped signal interrupts `wait`), and exits with anima's status, 2 as 0.
pub fn launchd_script(env_file: &str, exec: &str) -> String {
    format!(
        "set -a; [ -f {env_file} ] && . {env_file}; set +a\n\
         {exec} & pid=$!\n\
         trap 'kill -TERM $pid' TERM\n\
         wait $pid; status=$?\n\
         while kill -0 $pid 2>/dev/null; do wait $pid; status=$?; done\n\
         [ $status -eq 2 ] && exit 0\n\
         exit $status"
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
            run_as: (!user).then(|| Account {
                name: "ada".into(),
                uid: 1000,
                gid: 1000,
                home: "/home/ada".into(),
            }),
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
    fn the_launchd_jobs() {
        insta::assert_snapshot!("launchd_user", launchd_plist(&spec(true)));
        insta::assert_snapshot!("launchd_system", launchd_plist(&spec(false)));
    }

    #[test]
    fn a_bad_configuration_is_never_restarted() {
        for user in [false, true] {
            let unit = systemd_unit(&spec(user));
            assert!(unit.contains("\nRestartPreventExitStatus=2\n"), "{unit}");
            assert!(unit.contains("\nRestart=on-failure\n"), "{unit}");
        }
        let plist = launchd_plist(&spec(true));
        assert!(
            plist.contains("[ $status -eq 2 ] &amp;&amp; exit 0"),
            "{plist}"
        );
    }

    #[test]
    fn a_system_unit_runs_as_its_account_and_a_user_unit_waits_for_no_network() {
        let system = systemd_unit(&spec(false));
        assert!(system.contains("\nUser=ada\n"), "{system}");
        assert!(
            system.contains("\nAfter=network-online.target\n"),
            "{system}"
        );
        let user = systemd_unit(&spec(true));
        assert!(!user.contains("User="), "{user}");
        assert!(!user.contains("network-online"), "{user}");
        let daemon = launchd_plist(&spec(false));
        assert!(
            daemon.contains("<key>UserName</key>\n  <string>ada</string>"),
            "{daemon}"
        );
        assert!(
            daemon.contains("<key>HOME</key>\n    <string>/home/ada</string>"),
            "{daemon}"
        );
        assert!(!launchd_plist(&spec(true)).contains("UserName"));
    }

    #[test]
    fn accounts_are_read_from_passwd_and_dscl() {
        assert_eq!(
            Account::from_passwd("ada:x:1000:1001:Ada L,,,:/home/ada:/bin/bash\n"),
            Some(Account {
                name: "ada".into(),
                uid: 1000,
                gid: 1001,
                home: "/home/ada".into()
            })
        );
        assert_eq!(Account::from_passwd("ada:x:1000"), None);
        assert_eq!(Account::from_passwd("ada:x:uid:1:g:/h:/s"), None);
        let dscl = "NFSHomeDirectory: /Users/ada\nPrimaryGroupID: 20\nUniqueID: 501\n";
        assert_eq!(
            Account::from_dscl("ada", dscl),
            Some(Account {
                name: "ada".into(),
                uid: 501,
                gid: 20,
                home: "/Users/ada".into()
            })
        );
        assert_eq!(Account::from_dscl("ada", "No such key: UniqueID\n"), None);
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
