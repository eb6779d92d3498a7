//! Who runs `anima service install` and who the service runs as: the system's user
//! database (`getent passwd`, or `dscl` on macOS) and `id`, asked through their commands.

use std::path::Path;
use std::process::Command;

use crate::cli::Failure;
use crate::service::Account;

/// The account named `name`, or a usage error saying there is none.
pub(super) fn lookup(name: &str) -> Result<Account, Failure> {
    let found = if cfg!(target_os = "macos") {
        stdout(Command::new("dscl").args([
            ".",
            "-read",
            &format!("/Users/{name}"),
            "NFSHomeDirectory",
            "PrimaryGroupID",
            "UniqueID",
        ]))
        .and_then(|text| Account::from_dscl(name, &text))
    } else {
        stdout(Command::new("getent").args(["passwd", name]))
            .and_then(|text| text.lines().find_map(Account::from_passwd))
    };
    found.filter(|a| a.name == name).ok_or_else(|| {
        Failure::Usage(format!(
            "there is no user named {name:?} on this machine; give --run-as an existing user (the one whose files anima reads and writes)"
        ))
    })
}

/// The name of the user running anima (root under sudo).
pub(super) fn current() -> Option<String> {
    stdout(Command::new("id").arg("-un")).map(|s| s.trim().to_string())
}

/// Hands `path` to `account` (a file or folder anima created for the service).
pub(super) fn hand_over(path: &Path, account: Option<&Account>) -> std::io::Result<()> {
    match account {
        Some(a) => std::os::unix::fs::chown(path, Some(a.uid), Some(a.gid)),
        None => Ok(()),
    }
}

/// A command's stdout when it ran and succeeded.
fn stdout(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}
