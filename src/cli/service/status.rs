//! `anima service status`: installed or not, running or not, and the last exit, as systemctl
//! or launchctl tell it.

use std::process::Command;

use super::{systemctl, ServiceArgs};
use crate::cli::CliResult;
use crate::service::{self, Manager};

pub(super) fn status(a: &ServiceArgs) -> CliResult {
    let manager = a.manager();
    let path = service::unit_path(manager, a.user, &super::user_home());
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

/// A command's stdout, trimmed; `None` when it cannot run.
fn output(cmd: &[String]) -> Option<String> {
    let out = Command::new(&cmd[0]).args(&cmd[1..]).output().ok()?;
    Some(String::from_utf8_lossy(&out.stdout).trim().to_string())
}
