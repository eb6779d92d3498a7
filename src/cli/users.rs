//! `anima users list | show NAME | log NAME | forget NAME`.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::sync::Arc;

use clap::Subcommand;

use super::{load_config, open_existing_store, plural, CliResult, Failure};
use crate::memory::model_repo::{hold_exports, ModelRepo};
use crate::memory::{Forgotten, Store, UserRecord};

#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Everyone the soul has talked to.
    List,
    /// A person's current user model (by name, slug or user id).
    Show { name: String },
    /// The history of a person's model, with change notes, from the git repository.
    Log { name: String },
    /// Forgets a person: their model and its versions, their working memory, what the soul's
    /// psyche keeps of them, their words in the inbox, and their file in the git repository.
    Forget {
        name: String,
        /// Rewrite the git repository's history so that no version of their file remains.
        #[arg(long)]
        purge_history: bool,
        /// Also remove the dossiers the soul keeps about them (from git too).
        #[arg(long)]
        dossiers: bool,
        /// Forget without asking (for scripts).
        #[arg(long)]
        yes: bool,
    },
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
        UsersCommand::Forget {
            name,
            purge_history,
            dossiers,
            yes,
        } => {
            let (u, store) = match (find(users, &name), store) {
                (Ok(u), Some(store)) => (u, store),
                // Forgotten by the store already (or never known): only their file's history
                // may be left, in this home's repository.
                (unknown, _) if purge_history => {
                    return purge_left_over(&config.memory_dir(), &name, yes)
                        .unwrap_or(unknown.map(drop));
                }
                (unknown, _) => return unknown.map(drop),
            };
            confirm(&u.display_name, &[&u.slug, &u.user_id], yes)?;
            // The dossiers first: forgetting the person takes the name they were found by.
            let (root, purge) = (config.memory_dir(), purge_history);
            if dossiers {
                println!("Dossiers about {}:", u.display_name);
                super::dossiers::forget_about(&store, &root, &u, purge).await?;
            }
            forget(&store, &root, &u, purge_history).await
        }
    }
}

/// The history of a person's file when the store no longer knows them (forgotten without
/// `--purge-history`, or on another home): rewritten, if this home's repository has any;
/// `None` when it has none, and NAME is no one.
fn purge_left_over(root: &Path, name: &str, yes: bool) -> Option<Result<(), Failure>> {
    let slug = crate::memory::slug(name.trim(), name.trim());
    let repo = ModelRepo::open_existing(root)?;
    if repo.log(&slug).ok()?.is_empty() {
        return None;
    }
    let purged = (|| {
        confirm(&slug, &[], yes)?;
        let _lock = hold_exports(root).map_err(Failure::runtime)?;
        repo.remove_model(&slug, &slug).map_err(Failure::runtime)?;
        let dropped = repo.purge_history(&slug).map_err(Failure::runtime)?;
        println!(
            "No one named `{slug}` in the store; memory/users/{slug}.md: history rewritten, no \
             commit holds it ({} left out)",
            plural(dropped as u64, "commit")
        );
        Ok(())
    })();
    Some(purged)
}

/// Asks on the terminal, unless `yes`: `name`, one of `also` (a slug, an id) or `yes` goes on.
fn confirm(name: &str, also: &[&str], yes: bool) -> Result<(), Failure> {
    if yes {
        return Ok(());
    }
    if !std::io::stdin().is_terminal() {
        return Err(Failure::Usage(format!(
            "forgetting {name} cannot be undone and there is no terminal to ask on: pass --yes"
        )));
    }
    eprint!(
        "Forget {name} for good: their model, working memory and what the soul feels about \
         them? Type their name or `yes`: "
    );
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(Failure::runtime)?;
    let answer = answer.trim();
    if answer == name || answer == "yes" || also.contains(&answer) {
        Ok(())
    } else {
        Err(Failure::Runtime(format!(
            "not confirmed: {name} is not forgotten"
        )))
    }
}

/// Forgets `u` from the git repository at `root` and from the store, under the repository's
/// export lock: no daemon beside this commits the person's model again meanwhile, and once
/// the store has forgotten them none has a version of theirs to commit.
async fn forget(
    store: &Arc<dyn Store>,
    root: &Path,
    u: &UserRecord,
    purge_history: bool,
) -> Result<(), Failure> {
    let repo = ModelRepo::open_existing(root);
    let _lock = match &repo {
        Some(_) => Some(hold_exports(root).map_err(Failure::runtime)?),
        None => None,
    };
    let removed = match &repo {
        Some(repo) => repo
            .remove_model(&u.slug, &u.user_id)
            .map_err(Failure::runtime)?,
        None => false,
    };
    let f = store
        .forget_person(&u.user_id)
        .await
        .map_err(Failure::runtime)?;
    let dropped = match repo {
        Some(repo) if purge_history => Some(repo.purge_history(&u.slug).map_err(|e| {
            Failure::Runtime(format!(
                "{e}; {} is forgotten from the store, not yet from the repository's \
                         history: run `anima users forget {} --purge-history` again",
                u.display_name, u.slug
            ))
        })?),
        _ => None,
    };
    println!("Forgot {} ({}):", u.display_name, u.user_id);
    for line in report(&f) {
        println!("  {line}");
    }
    let file = format!("memory/users/{}.md", u.slug);
    match (removed, dropped) {
        (true, None) => println!("  git: {file} removed (commit \"forget {}\")", u.user_id),
        (false, None) => println!("  git: no {file}"),
        (_, Some(n)) => println!(
            "  git: {file} removed and history rewritten: no commit holds it ({} left out)",
            plural(n as u64, "commit")
        ),
    }
    if f.inbox_waiting > 0 {
        println!(
            "  {} of theirs not yet answered kept: run this again once answered",
            plural(f.inbox_waiting, "message")
        );
    }
    Ok(())
}

/// What the store removed, in lines.
fn report(f: &Forgotten) -> Vec<String> {
    vec![
        format!("user model: {}", plural(f.model_versions, "version")),
        format!(
            "working memory: {} ({} only theirs, whole)",
            counted(f.entries, "entry", "entries"),
            plural(f.conversations, "conversation")
        ),
        format!(
            "inbox: {} answered, their words blanked",
            plural(f.inbox_rows, "message")
        ),
        format!(
            "psyche: {}, {}, {}, {}, {}",
            plural(f.relationships, "relationship"),
            counted(f.memories, "memory", "memories"),
            plural(f.facts, "fact"),
            plural(f.intentions, "intention"),
            plural(f.gate_decisions, "gate decision")
        ),
        format!(
            "feedback: {}; admin commands: {}",
            plural(f.feedback, "click"),
            f.admin_commands
        ),
        format!("traces: {}", plural(f.traces, "turn")),
    ]
}

/// "1 entry", "2 entries".
fn counted(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
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
pub(super) fn format_time(secs: i64) -> String {
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
