//! `anima service install|uninstall|status`: writes the unit `service` renders, creates the
//! secrets file (mode 0600; filled only from the shell with `--env-from-shell`), and asks
//! systemctl / launchctl to load, unload or describe it. It starts a service only when its
//! secrets file holds what the configuration needs, and a system service only as a named
//! user whose home is not root's. Without the manager's tool on PATH, it says what to run
//! instead.

mod account;
mod secrets_file;
mod status;

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::{Args, Subcommand};

use super::{load_config, CliResult, Failure};
use crate::config::{self, Config};
use crate::service::{self, Account, Manager, ServiceSpec};

#[derive(Debug, Subcommand)]
pub enum ServiceCommand {
    /// Write the unit (and the secrets file) and start the service once the secrets file
    /// holds the tokens it needs.
    Install(InstallArgs),
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

#[derive(Debug, Args)]
pub struct InstallArgs {
    #[command(flatten)]
    pub service: ServiceArgs,
    /// The user a system service runs as (default: the one who ran sudo). Never root unless
    /// named: --run-as root.
    #[arg(long, value_name = "USER")]
    pub run_as: Option<String>,
    /// Write the secrets the service reads that are exported in this shell into its secrets
    /// file (mode 0600; the values are never printed).
    #[arg(long)]
    pub env_from_shell: bool,
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
        ServiceCommand::Status(a) => status::status(&a),
    }
}

pub(super) fn user_home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/"))
}

fn install(config_path: Option<&Path>, args: &InstallArgs) -> CliResult {
    let a = &args.service;
    let run_as = run_as(args)?;
    let config = load_config(config_for(config_path, run_as.as_ref()).as_deref())?;
    if let Some(account) = run_as.as_ref().filter(|acc| !acc.is_root()) {
        not_in_roots_home(&config, account)?;
    }
    let spec = spec_for(&config, a, run_as)?;
    let manager = a.manager();
    let unit = match manager {
        Manager::Systemd => service::systemd_unit(&spec),
        Manager::Launchd => service::launchd_plist(&spec),
    };
    let path = service::unit_path(manager, a.user, &user_home());
    // Files anima creates for a system service belong to the account it runs as.
    let owner = spec.run_as.as_ref().filter(|acc| !acc.is_root());
    let env_text = secrets_file::secrets_text(&spec.env_file)?;
    let env_text = if args.env_from_shell {
        secrets_file::from_shell(&config, &spec.env_file, env_text, a.dry_run, owner)?
    } else {
        env_text
    };
    if a.dry_run {
        println!("# {}\n{unit}", path.display());
        if let Err(why) = secrets_file::secrets_ready(&config, &spec.env_file, env_text.as_deref())
        {
            eprintln!("anima: note: {why}");
        }
        return Ok(());
    }
    write_files(a, manager, &spec, &path, &unit, owner)?;
    if let Err(why) = secrets_file::secrets_ready(&config, &spec.env_file, env_text.as_deref()) {
        if manager == Manager::Systemd {
            run_steps(
                &[systemctl(a.user, &["daemon-reload"])],
                "for systemd to see it",
            );
        }
        return Err(Failure::Usage(format!(
            "the service is installed but not started: {why}; then run `{}anima service install{}` again to start it",
            if a.user { "" } else { "sudo " },
            if a.user { " --user" } else { "" }
        )));
    }
    start(a, manager, &path);
    Ok(())
}

/// What the service runs: this binary, the configuration and home, the secrets file beside
/// the configuration, the account.
fn spec_for(
    config: &Config,
    a: &ServiceArgs,
    run_as: Option<Account>,
) -> Result<ServiceSpec, Failure> {
    let exe = std::env::current_exe()
        .and_then(|p| p.canonicalize())
        .map_err(|e| Failure::Runtime(format!("cannot find the anima binary: {e}")))?;
    let env_file = match &config.source {
        Some(c) => c.with_file_name("anima.env"),
        None => config.home.join("anima.env"),
    };
    let spec = ServiceSpec {
        exe,
        config: config.source.clone(),
        home: config.home.clone(),
        env_file,
        user: a.user,
        shutdown_grace_secs: config.shutdown_grace_secs,
        claude_cli: matches!(
            config.llm.provider,
            crate::config::ProviderKind::ClaudeCli | crate::config::ProviderKind::Auto
        ),
        run_as,
    };
    spec.check().map_err(Failure::Usage)?;
    Ok(spec)
}

/// Writes the unit (refusing to overwrite a different one without --force), the home (and
/// launchd's logs folder) and the secrets file, handed to the service's account.
fn write_files(
    a: &ServiceArgs,
    manager: Manager,
    spec: &ServiceSpec,
    path: &Path,
    unit: &str,
    owner: Option<&Account>,
) -> CliResult {
    let same = std::fs::read_to_string(path).is_ok_and(|old| old == unit);
    if path.exists() && !same && !a.force {
        return Err(Failure::Usage(format!(
            "{} is already installed, and differs; add --force to write it anew",
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
    std::fs::write(path, unit).map_err(|e| cannot(path, e))?;
    let mut folders = vec![spec.home.clone()];
    if manager == Manager::Launchd {
        folders.push(spec.home.join("logs"));
    }
    for dir in folders {
        if !dir.exists() {
            std::fs::create_dir_all(&dir).map_err(|e| cannot(&dir, e))?;
            account::hand_over(&dir, owner).map_err(|e| cannot(&dir, e))?;
        }
    }
    let created = secrets_file::create_secrets_file(&spec.env_file, owner)
        .map_err(|e| cannot(&spec.env_file, e))?;
    println!("wrote {}", path.display());
    if created {
        println!(
            "created {} (mode 0600) for the service's secrets, one NAME=value a line",
            spec.env_file.display()
        );
    }
    Ok(())
}

/// Starts the installed service, and says what a per-user one needs to keep running.
fn start(a: &ServiceArgs, manager: Manager, path: &Path) {
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
    if a.user {
        match manager {
            Manager::Systemd => println!(
                "a user service stops when you log out; to keep it running, run: loginctl enable-linger {}",
                account::current().unwrap_or_else(|| "$USER".into())
            ),
            Manager::Launchd => println!(
                "a LaunchAgent runs while you are logged in; for a service that runs from boot, install a system one: sudo anima service install --launchd"
            ),
        }
    }
}

/// The account a system service runs as: `--run-as`, else the user who ran sudo, else the
/// user running anima; never root unless named. None for a per-user service.
fn run_as(args: &InstallArgs) -> Result<Option<Account>, Failure> {
    let sudo_user = std::env::var("SUDO_USER")
        .ok()
        .filter(|u| !u.is_empty() && u != "root");
    if args.service.user {
        if args.run_as.is_some() {
            return Err(Failure::Usage(
                "--run-as is for a system service; a --user service runs as you".into(),
            ));
        }
        if sudo_user.is_some() && account::current().as_deref() == Some("root") {
            return Err(Failure::Usage(
                "--user under sudo would install root's own service: run `anima service install --user` without sudo".into(),
            ));
        }
        return Ok(None);
    }
    let name = match (&args.run_as, sudo_user) {
        (Some(name), _) => name.clone(),
        (None, Some(caller)) => caller,
        (None, None) => match account::current() {
            Some(me) if me != "root" => me,
            _ => return Err(Failure::Usage(
                "a system service runs as a named user, not root: give --run-as USER (the user whose files anima reads and writes), or --run-as root to run it as root".into(),
            )),
        },
    };
    account::lookup(&name).map(Some)
}

/// The configuration file: `--config`, `$ANIMA_CONFIG` or `./anima.toml`, else (sudo passes
/// no `$ANIMA_CONFIG`) the one `anima init` wrote in the service user's home.
fn config_for(explicit: Option<&Path>, run_as: Option<&Account>) -> Option<PathBuf> {
    if let Some(found) = config::locate(explicit) {
        return Some(found);
    }
    let theirs = run_as?.home.join(".anima/anima.toml");
    theirs.is_file().then(|| {
        // On stderr: a dry run's stdout is the unit alone.
        eprintln!(
            "anima: using {} (no --config, no $ANIMA_CONFIG, no ./anima.toml)",
            theirs.display()
        );
        theirs
    })
}

/// A service that runs as `account` cannot use files in root's home: under sudo, `~` is
/// root's home, so a config read there, or a `~` path in it, would be a silent
/// `/root/.anima`.
fn not_in_roots_home(config: &Config, account: &Account) -> Result<(), Failure> {
    let Some(root) = account::lookup("root").ok().map(|r| r.home) else {
        return Ok(());
    };
    if root == Path::new("/") {
        return Ok(());
    }
    let paths = [
        ("the config file", config.source.as_deref()),
        ("[paths] home", Some(config.home.as_path())),
        ("[paths] soul_dir", Some(config.soul_dir.as_path())),
        (
            "[paths] processes_dir",
            Some(config.processes_dir.as_path()),
        ),
    ];
    for (what, path) in paths {
        let Some(path) = path.filter(|p| p.starts_with(&root)) else {
            continue;
        };
        return Err(Failure::Usage(format!(
            "{what} is {}, in root's home, but the service runs as {} (home {}); under sudo `~` is root's home. Give --config with {}'s anima.toml (e.g. {}) and write its [paths] out in full, or pass --run-as root",
            path.display(),
            account.name,
            account.home.display(),
            account.name,
            account.home.join(".anima/anima.toml").display()
        )));
    }
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

pub(super) fn systemctl(user: bool, args: &[&str]) -> Vec<String> {
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
