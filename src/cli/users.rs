//! `anima users list | show NAME | log NAME`.

use std::path::Path;

use clap::Subcommand;

use super::{load_config, open_existing_store, plural, CliResult, Failure};
use crate::memory::UserRecord;

#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Everyone the soul has talked to.
    List,
    /// A person's current user model (by name, slug or user id).
    Show { name: String },
    /// The history of a person's model, with change notes, from the git repository.
    Log { name: String },
}

pub async fn run(config_path: Option<&Path>, command: UsersCommand) -> CliResult {
    let config = load_config(config_path)?;
    let store = open_existing_store(&config).await?;
    let users = match &store {
        Some(store) => store.users().await.map_err(Failure::runtime)?,
        None => Vec::new(),
    };
    match command {
        UsersCommand::List => {
            if users.is_empty() {
                println!("no users yet");
                return Ok(());
            }
            println!("{:<24} {:<24} {:>6}  MODEL", "SLUG", "NAME", "TURNS");
            for u in users {
                println!(
                    "{:<24} {:<24} {:>6}  v{}",
                    u.slug, u.display_name, u.turns, u.model_version
                );
            }
            Ok(())
        }
        UsersCommand::Show { name } => {
            let u = find(users, &name)?;
            match &u.model {
                Some(model) => println!("{}", model.trim_end()),
                None => println!(
                    "{} has no user model yet ({} so far)",
                    u.display_name,
                    plural(u.turns.max(0) as u64, "turn")
                ),
            }
            Ok(())
        }
        UsersCommand::Log { name } => {
            let u = find(users, &name)?;
            // The store holds every version with its note (the git repository is the audit
            // trail beside it): the same history from either backend, newest first.
            let mut history = match &store {
                Some(store) => store
                    .model_history(&u.user_id)
                    .await
                    .map_err(Failure::runtime)?,
                None => Vec::new(),
            };
            history.reverse();
            if history.is_empty() {
                println!("no history for {} yet", u.display_name);
            }
            for (version, note, at_ms) in history {
                let version = format!("v{version}");
                println!(
                    "{version:<5} {}  {}",
                    format_time(at_ms.div_euclid(1000)),
                    note.trim_end().replace('\n', &format!("\n{:28}", ""))
                );
            }
            Ok(())
        }
    }
}

/// A person by slug, user id or display name; not found is a runtime failure (exit 1).
fn find(users: Vec<UserRecord>, name: &str) -> Result<UserRecord, Failure> {
    let wanted = name.trim();
    let slug = crate::memory::slug(wanted, wanted);
    users
        .into_iter()
        .find(|u| {
            u.slug == wanted
                || u.user_id == wanted
                || u.display_name.eq_ignore_ascii_case(wanted)
                || u.slug == slug
        })
        .ok_or_else(|| {
            Failure::Runtime(format!(
                "no user named `{wanted}`; `anima users list` shows who there is"
            ))
        })
}

/// RFC 3339 in UTC, to the second.
fn format_time(secs: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

#[cfg(test)]
mod tests {
    #[test]
    fn times_format_in_utc() {
        assert_eq!(super::format_time(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::format_time(1_763_769_600), "2025-11-22T00:00:00Z");
    }
}
