//! The service's secrets file on disk: read, checked against what the configuration needs
//! (`service::secrets` says what), filled from the shell, created and replaced with mode
//! 0600 and the service's owner. Values are never printed.

use std::io::Write;
use std::path::Path;

use super::account;
use crate::cli::Failure;
use crate::config::Config;
use crate::service::secrets::{self, Needed};
use crate::service::Account;

/// The secrets file's text; None when it does not exist yet. A file others may read is
/// read all the same, with a warning that says how to close it.
pub(super) fn secrets_text(path: &Path) -> Result<Option<String>, Failure> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let mode = std::fs::metadata(path).map_or(0, |m| m.permissions().mode() & 0o777);
            if mode & 0o077 != 0 {
                eprintln!(
                    "anima: warning: {} is readable by others (mode {mode:04o}); run: chmod 600 {}",
                    path.display(),
                    path.display()
                );
            }
            Ok(Some(text))
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Failure::Usage(format!(
            "cannot read {}: {e}; run it as a user who may read it (with sudo for a system service)",
            path.display()
        ))),
    }
}

/// Whether the secrets file holds, well-formed, every variable the configuration needs;
/// else what to put there.
pub(super) fn secrets_ready(
    config: &Config,
    file: &Path,
    text: Option<&str>,
) -> Result<(), String> {
    let held = secrets::read(text.unwrap_or(""));
    let needed = secrets::needed(config);
    let missing: Vec<&Needed> = needed.iter().filter(|n| !held.has(n.name)).collect();
    if missing.is_empty() && held.problems.is_empty() {
        return Ok(());
    }
    let file = file.display();
    let mut why: Vec<String> = held
        .problems
        .iter()
        .map(|p| format!("{file}, {p}"))
        .collect();
    if !missing.is_empty() {
        let names: Vec<String> = missing
            .iter()
            .map(|n| format!("{} ({})", n.name, n.what))
            .collect();
        let empty = if held.set.is_empty() && held.problems.is_empty() {
            ", which holds no secrets yet"
        } else {
            ""
        };
        why.push(format!(
            "{file}{empty} lacks {}: put each there as NAME=value, one a line, or export them and run `anima service install --env-from-shell`",
            names.join(", ")
        ));
    }
    Err(why.join("; "))
}

/// `--env-from-shell`: the secrets file with every variable the service reads that is
/// exported in this shell; written (mode 0600) unless this is a dry run. Says which names
/// it wrote, never a value.
pub(super) fn from_shell(
    config: &Config,
    file: &Path,
    text: Option<String>,
    dry_run: bool,
    owner: Option<&Account>,
) -> Result<Option<String>, Failure> {
    let mut names: Vec<String> = secrets::needed(config)
        .iter()
        .map(|n| n.name.to_string())
        .collect();
    names.extend(secrets::optional(config));
    let mut values: Vec<(String, String)> = Vec::new();
    let mut bad = Vec::new();
    for name in &names {
        let Ok(value) = std::env::var(name) else {
            continue;
        };
        if value.is_empty() {
            continue;
        }
        match secrets::check_value(name, &value) {
            Ok(()) => values.push((name.clone(), value)),
            Err(e) => bad.push(e),
        }
    }
    if !bad.is_empty() {
        return Err(Failure::Usage(bad.join("; ")));
    }
    if values.is_empty() {
        eprintln!(
            "anima: --env-from-shell: none of {} is exported in this shell",
            names.join(", ")
        );
        return Ok(text);
    }
    let pairs: Vec<(&str, &str)> = values
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let merged = secrets::merge(text.as_deref().unwrap_or(SECRETS_HEADER), &pairs);
    let names: Vec<&str> = pairs.iter().map(|(n, _)| *n).collect();
    if dry_run {
        eprintln!(
            "anima: would write {} to {} (mode 0600)",
            names.join(", "),
            file.display()
        );
    } else {
        write_secrets(file, &merged, owner)
            .map_err(|e| Failure::Usage(format!("cannot write {}: {e}", file.display())))?;
        println!(
            "wrote {} to {} (mode 0600)",
            names.join(", "),
            file.display()
        );
    }
    Ok(Some(merged))
}

/// The first line of a secrets file anima writes.
const SECRETS_HEADER: &str =
    "# Secrets for anima, one NAME=value a line (never logged, never in the unit).\n";

/// Creates the secrets file with its header and mode 0600 if it is missing, owned by
/// `owner`. True if it was created.
pub(super) fn create_secrets_file(path: &Path, owner: Option<&Account>) -> std::io::Result<bool> {
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
            f.write_all(SECRETS_HEADER.as_bytes())?;
            account::hand_over(path, owner)?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e),
    }
}

/// Replaces the secrets file with `text`: written beside it with mode 0600 (and `owner`),
/// synced, then renamed over it, so it is never seen half written or readable by others.
fn write_secrets(path: &Path, text: &str, owner: Option<&Account>) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_file_name(format!(".anima.env.{}", std::process::id()));
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)?;
    let written = f
        .write_all(text.as_bytes())
        .and_then(|()| f.sync_all())
        .and_then(|()| account::hand_over(&tmp, owner))
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}
