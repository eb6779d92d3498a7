//! `anima service install|uninstall|status`: writes the unit `service` renders, creates the
//! secrets file (mode 0600, never filled), and asks systemctl / launchctl to load, unload or
//! describe it. Without the manager's tool on PATH, it says what to run instead.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::{Args, Subcommand};

use super::{load_config, CliResult, Failure};
use crate::service::{self, Manager, ServiceSpec};

#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Write the unit (and an empty secrets file) and start the service.
    Install(ServiceArgs),
    /// Stop the service and remove its unit (the secrets file stays).
    Uninstall(ServiceArgs),
    /// Installed or not, running or not, and the last exit.
    Status(ServiceArgs),
}

#[derive(Debug, Args)]
pub struct ServiceArgs {
    /// A systemd unit (the default on Linux).
    #[arg(long, conflicts_with = "launchd")]
    pub systemd: bool,
    /// A launchd property list (the default on macOS).
    #[arg(long)]
    pub launchd: bool,
    /// A per-user service (systemd --user, a LaunchAgent) instead of a system one.
    #[arg(long)]
    pub user: bool,
    /// Print the unit and where it would go; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Overwrite a unit that is already installed.
    #[arg(long)]
    pub force: bool,
}

impl ServiceArgs {
    fn manager(&self) -> Manager {
        match (self.systemd, self.launchd) {
            (true, _) => Manager::Systemd,
            (_, true) => Manager::Launchd,
            _ => Manager::native(),
        }
    }
}

pub fn run(config_path: Option<&Path>, command: ServiceCommand) -> CliResult {
    match command {
        ServiceCommand::Install(a) => install(config_path, &a),
        ServiceCommand::Uninstall(a) => uninstall(&a),
        ServiceCommand::Status(a) => status(&a),
    }
}

fn user_home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

fn install(config_path: Option<&Path>, a: &ServiceArgs) -> CliResult {
    let config = load_config(config_path)?;
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| Failure::Runtime(format!("cannot find the anima binary: {e}")))?;
    let config_file = config
        .source
        .as_ref()
        .map(|p| std::path::absolute(p).unwrap_or(p.clone()));
    let env_file = match &config_file {
        Some(c) => c.with_file_name("anima.env"),
        None => config.home.join("anima.env"),
    };
    let spec = ServiceSpec {
        exe,
        config: config_file,
        home: config.home.clone(),
        env_file,
        user: a.user,
        shutdown_grace_secs: config.shutdown_grace_secs,
        claude_cli: matches!(
            config.llm.provider,
            crate::config::ProviderKind::ClaudeCli | crate::config::ProviderKind::Auto
        ),
        run_as: std::env::var("SUDO_USER")
            .ok()
            .filter(|u| !u.is_empty() && u != "root"),
    };
    spec.check().map_err(Failure::Usage)?;
    let manager = a.manager();
    let unit = match manager {
        Manager::Systemd => service::systemd_unit(&spec),
        Manager::Launchd => service::launchd_plist(&spec),
    };
    let path = service::unit_path(manager, a.user, &user_home());
    if a.dry_run {
        println!("# {}\n{unit}", path.display());
        return Ok(());
    }
    if path.exists() && !a.force {
        return Err(Failure::Usage(format!(
            "{} is already installed; add --force to write it anew",
            path.display()
        )));
    }
    let cannot = |what: &Path, e: std::io::Error| {
        let advice = if a.user {
            "check that folder's permissions"
        } else {
            "run it with sudo, or install a per-user service with --user"
        };
        Failure::Usage(format!("cannot write {}: {e}; {advice}", what.display()))
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| cannot(dir, e))?;
    }
    std::fs::write(&path, &unit).map_err(|e| cannot(&path, e))?;
    std::fs::create_dir_all(&spec.home).map_err(|e| cannot(&spec.home, e))?;
    if manager == Manager::Launchd {
        let logs = spec.home.join("logs");
        std::fs::create_dir_all(&logs).map_err(|e| cannot(&logs, e))?;
    }
    let created = create_secrets_file(&spec.env_file).map_err(|e| cannot(&spec.env_file, e))?;
    println!("wrote {}", path.display());
    if created {
        println!(
            "created {} (mode 0600): put SLACK_BOT_TOKEN, SLACK_APP_TOKEN (or SLACK_SIGNING_SECRET) and your model key there, one NAME=value a line",
            spec.env_file.display()
        );
    }
    let steps: Vec<Vec<String>> = match manager {
        Manager::Systemd => vec![
            systemctl(a.user, &["daemon-reload"]),
            systemctl(a.user, &["enable", "--now", "anima.service"]),
        ],
        Manager::Launchd => vec![vec![
            "launchctl".into(),
            "load".into(),
            "-w".into(),
            path.display().to_string(),
        ]],
    };
    run_steps(&steps, "to start it");
    Ok(())
}

fn uninstall(a: &ServiceArgs) -> CliResult {
    let manager = a.manager();
    let path = service::unit_path(manager, a.user, &user_home());
    if !path.exists() {
        return Err(Failure::Runtime(format!(
            "no service is installed at {}",
            path.display()
        )));
    }
    if a.dry_run {
        println!("would remove {}", path.display());
        return Ok(());
    }
    let steps: Vec<Vec<String>> = match manager {
        Manager::Systemd => vec![systemctl(a.user, &["disable", "--now", "anima.service"])],
        Manager::Launchd => vec![vec![
            "launchctl".into(),
            "unload".into(),
            "-w".into(),
            path.display().to_string(),
        ]],
    };
    run_steps(&steps, "to stop it");
    std::fs::remove_file(&path)
        .map_err(|e| Failure::Runtime(format!("cannot remove {}: {e}", path.display())))?;
    if manager == Manager::Systemd {
        run_steps(&[systemctl(a.user, &["daemon-reload"])], "to forget it");
    }
    println!(
        "removed {} (the secrets file is left where it is)",
        path.display()
    );
    Ok(())
}

fn status(a: &ServiceArgs) -> CliResult {
    let manager = a.manager();
    let path = service::unit_path(manager, a.user, &user_home());
    let installed = path.exists();
    println!(
        "installed: {}",
        if installed {
            format!("yes ({})", path.display())
        } else {
            format!("no ({} does not exist)", path.display())
        }
    );
    match manager {
        Manager::Systemd => {
            let active = output(&systemctl(a.user, &["is-active", "anima.service"]));
            let shown = output(&systemctl(
                a.user,
                &[
                    "show",
                    "anima.service",
                    "-p",
                    "ExecMainStatus",
                    "-p",
                    "ExecMainExitTimestamp",
                ],
            ));
            match active {
                Some(state) => println!(
                    "running: {} ({state})",
                    if state == "active" { "yes" } else { "no" }
                ),
                None => println!("running: unknown (systemctl is not available)"),
            }
            if let Some(props) = shown {
                let get = |k: &str| {
                    props
                        .lines()
                        .find_map(|l| l.strip_prefix(&format!("{k}=")))
                        .filter(|v| !v.is_empty())
                        .map(str::to_string)
                };
                match (get("ExecMainStatus"), get("ExecMainExitTimestamp")) {
                    (Some(code), Some(at)) => println!("last exit: status {code} at {at}"),
                    (Some(code), None) => println!("last exit: status {code}"),
                    _ => println!("last exit: none recorded"),
                }
            }
        }
        Manager::Launchd => {
            match output(&[
                "launchctl".to_string(),
                "list".to_string(),
                service::LAUNCHD_LABEL.to_string(),
            ]) {
                Some(list) => {
                    let pid = list.lines().find_map(|l| {
                        l.trim()
                            .strip_prefix("\"PID\" = ")
                            .map(|v| v.trim_end_matches(';').to_string())
                    });
                    let last = list.lines().find_map(|l| {
                        l.trim()
                            .strip_prefix("\"LastExitStatus\" = ")
                            .map(|v| v.trim_end_matches(';').to_string())
                    });
                    println!(
                        "running: {}",
                        pid.map_or("no".to_string(), |p| format!("yes (pid {p})"))
                    );
                    println!(
                        "last exit: {}",
                        last.map_or("none recorded".to_string(), |c| format!("status {c}"))
                    );
                }
                None => println!(
                    "running: no (launchctl does not list {})",
                    service::LAUNCHD_LABEL
                ),
            }
        }
    }
    Ok(())
}

fn systemctl(user: bool, args: &[&str]) -> Vec<String> {
    let mut v = vec!["systemctl".to_string()];
    if user {
        v.push("--user".into());
    }
    v.extend(args.iter().map(|s| s.to_string()));
    v
}

/// Runs each step; at the first that cannot run or fails, says what to run by hand.
fn run_steps(steps: &[Vec<String>], purpose: &str) {
    for (i, step) in steps.iter().enumerate() {
        let result = Command::new(&step[0]).args(&step[1..]).status();
        let ok = matches!(&result, Ok(s) if s.success());
        if !ok {
            let why = match result {
                Ok(s) => format!("`{}` exited with {s}", step.join(" ")),
                Err(e) => format!("cannot run `{}`: {e}", step[0]),
            };
            eprintln!("anima: {why}; {purpose}, run:");
            for s in &steps[i..] {
                eprintln!("  {}", s.join(" "));
            }
            return;
        }
    }
}

/// A command's stdout, trimmed; `None` when it cannot run.
fn output(cmd: &[String]) -> Option<String> {
    let out = Command::new(&cmd[0]).args(&cmd[1..]).output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Creates the secrets file empty with mode 0600 if it is missing. True if it was created.
fn create_secrets_file(path: &Path) -> std::io::Result<bool> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(mut f) => {
            f.write_all(
                b"# Secrets for anima, one NAME=value a line (never logged, never in the unit).\n",
            )?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}
