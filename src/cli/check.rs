//! `anima check`: whether `chat` and `run` can work. Every problem with the configuration,
//! soul and process files, database and model provider (resolved as at start), each naming
//! the file (and key and line where there is one) and what to do; exit 2 on any problem.
//! Warnings say what works but not as one may think (the built-in soul, no Slack tokens).

use std::path::Path;

use super::{plural, CliResult, Failure};
use crate::assistant;
use crate::config::secret::Secret;
use crate::config::StoreBackend;
use crate::config::{self, SlackMode};
use crate::llm::select::{self, Environment};
use crate::memory::postgres::Postgres;
use crate::memory::sqlite::Sqlite;
use crate::process::{def, library};
use crate::soul::{self, SoulFiles};
use crate::states::template;

pub async fn run(config_path: Option<&Path>) -> CliResult {
    let mut problems: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    // Works, but not as the person may think: said, without failing the check.
    let mut warnings: Vec<String> = Vec::new();

    let config = match config::load(config_path) {
        Ok(c) => {
            notes.push(match &c.source {
                Some(p) => format!("config: {} is valid", p.display()),
                None => "config: no file found; using the built-in defaults".into(),
            });
            Some(c)
        }
        Err(e) => {
            problems.extend(e.problems.iter().map(|p| p.to_string()));
            None
        }
    };

    if let Some(config) = &config {
        match SoulFiles::load_or_built_in(&config.soul_dir) {
            Ok(soul) if soul.is_built_in() => warnings.push(format!(
                "soul: {} does not exist; using the soul built into anima ({}), which cannot be edited until `anima init` writes it out",
                config.soul_dir.display(),
                soul.name()
            )),
            Ok(soul) => {
                notes.push(format!(
                    "soul: {} ({} bytes{})",
                    soul.name(),
                    soul.soul_md.len(),
                    if soul.skills_md.is_some() {
                        ", with skills.md"
                    } else {
                        ""
                    }
                ));
                for section in ["## Persona", "## Speaking Style"] {
                    if !soul.soul_md.contains(section) {
                        warnings.push(format!(
                            "soul: {} has no `{section}` section (recommended)",
                            config.soul_dir.join("soul.md").display()
                        ));
                    }
                }
            }
            Err(e) => problems.push(e.to_string()),
        }
        check_templates(&config.soul_dir, &mut problems, &mut notes);
        match assistant::load(&config.soul_dir) {
            Ok(w) => notes.push(format!(
                "assistant words: {} ({}, {})",
                w.file.display(),
                plural(w.prompts.len() as u64, "suggested prompt"),
                plural(w.loading_messages.len() as u64, "loading message")
            )),
            Err(found) => problems.extend(found.iter().map(|p| p.to_string())),
        }
        match soul::load_psyche(&config.soul_dir) {
            Ok(p) => notes.push(format!(
                "psyche: {} ({} arcs, {} stances, {} intention types)",
                if config.soul_dir.join(crate::psyche::FILE).exists() {
                    p.file.clone()
                } else {
                    "the shipped constants".into()
                },
                p.arcs.len(),
                p.stances.len(),
                p.intentions.len()
            )),
            Err(soul::SoulError::Psyche(found)) => {
                problems.extend(found.iter().map(|p| p.to_string()))
            }
            Err(e) => problems.push(e.to_string()),
        }

        if config.processes_dir.exists() {
            let (defs, file_problems) = def::load_dir(&config.processes_dir);
            let set_problems = def::check_set(&defs, &config.processes_dir);
            if file_problems.is_empty() && set_problems.is_empty() {
                notes.push(format!(
                    "processes: {} ({})",
                    config.processes_dir.display(),
                    defs.keys().cloned().collect::<Vec<_>>().join(", ")
                ));
            }
            problems.extend(
                file_problems
                    .iter()
                    .chain(&set_problems)
                    .map(|p| p.to_string()),
            );
        } else {
            warnings.push(format!(
                "processes: {} does not exist; using the processes built into anima ({}), which cannot be edited until `anima init` writes them out",
                config.processes_dir.display(),
                library::shipped().keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }

        // Each tool server, and each tool action against it.
        let defs = if config.processes_dir.exists() {
            def::load_dir(&config.processes_dir).0
        } else {
            Default::default()
        };
        check_tools(config, &defs, &mut problems, &mut notes, &mut warnings).await;

        check_store(config, &mut problems, &mut notes).await;

        // The provider, resolved exactly as `chat` and `run` resolve it at start.
        match select::select(
            &config.llm,
            config.source.as_deref(),
            &config.home,
            &Environment::from_process(),
        )
        .await
        {
            Ok(chosen) => {
                notes.push(format!(
                    "provider: {} ({}), because {}",
                    chosen.provider.name(),
                    chosen.provider.model(),
                    chosen.reason.trim_start_matches("auto: ")
                ));
                let url = &config.llm.base_url;
                if !url.is_empty() {
                    if let Err(e) = select::answers(url).await {
                        problems.push(format!(
                            "{}: key `llm.base_url`: {url} does not answer ({e}); start the server or fix the URL, or every turn of `chat` and `run` fails",
                            file_name(config)
                        ));
                    }
                }
            }
            Err(e) => problems.push(e.to_string()),
        }

        warnings.extend(slack_tokens_missing(config));
    }

    for n in &notes {
        println!("ok: {n}");
    }
    for w in &warnings {
        println!("warning: {w}");
    }
    for p in &problems {
        println!("problem: {p}");
    }
    if problems.is_empty() {
        match warnings.len() {
            0 => println!("anima check: no problems found"),
            n => println!(
                "anima check: no problems found ({})",
                plural(n as u64, "warning")
            ),
        }
        Ok(())
    } else {
        Err(Failure::Usage(format!(
            "check found {}",
            plural(problems.len() as u64, "problem")
        )))
    }
}

/// The soul's template, and the archetypes beside it in `templates/`: every problem with
/// file and line.
/// Each tool server (started, or why not) and each ISM tool action: a server that is not
/// configured, or a tool its server (when it could be listed) does not have, with file and
/// line.
async fn check_tools(
    config: &config::Config,
    defs: &std::collections::BTreeMap<String, def::ProcessDef>,
    problems: &mut Vec<String>,
    notes: &mut Vec<String>,
    warnings: &mut Vec<String>,
) {
    let report = super::tools::reports(&config.tools).await;
    for s in &report {
        match &s.problem {
            None => notes.push(format!(
                "tool server {}: started, {}",
                s.name,
                plural(s.tools.len() as u64, "tool")
            )),
            Some(why) => warnings.push(format!(
                "tool server {}: not started: {why}; its tools are unavailable",
                s.name
            )),
        }
    }
    for d in defs.values() {
        let Some(ism) = &d.ism else { continue };
        for (action, server, tool) in ism.tools() {
            let at = format!(
                "{}:{}: action `{}`",
                d.file.display(),
                action.line,
                action.name
            );
            match report.iter().find(|s| s.name == server) {
                None if !config.tools.iter().any(|s| s.name == server) => problems.push(format!(
                    "{at}: no tool server `{server}` is configured (add a [[tools.servers]] named \"{server}\")"
                )),
                Some(s) if s.problem.is_none() && !s.tools.iter().any(|t| t.name == tool) => {
                    let names: Vec<&str> = s.tools.iter().map(|t| t.name.as_str()).take(20).collect();
                    problems.push(format!(
                        "{at}: tool server `{server}` has no tool `{tool}` (it has: {})",
                        names.join(", ")
                    ))
                }
                Some(s) => {
                    if let Some(t) = s.tools.iter().find(|t| t.name == tool && !t.may_run) {
                        warnings.push(format!(
                            "{at}: `{server}.{}` is not read-only and not in the server's `allow`: every call will be refused",
                            t.name
                        ));
                    }
                }
                None => {}
            }
        }
    }
}

fn check_templates(soul_dir: &Path, problems: &mut Vec<String>, notes: &mut Vec<String>) {
    match soul::load_template(soul_dir) {
        Ok(t) => notes.push(format!(
            "template: {} ({}wakeup {}, shutdown {})",
            t.file,
            t.name
                .as_deref()
                .map_or(String::new(), |n| format!("{n}: ")),
            if t.behaviors.wakeup.enabled {
                "on"
            } else {
                "off"
            },
            t.behaviors.shutdown.mode.name()
        )),
        Err(soul::SoulError::Template(found)) => {
            problems.extend(found.iter().map(|p| p.to_string()))
        }
        Err(e) => problems.push(e.to_string()),
    }
    let Ok(entries) = std::fs::read_dir(soul_dir.join("templates")) else {
        return;
    };
    let mut files: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    for path in files {
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                if let Err(found) = template::parse(&text, &path) {
                    problems.extend(found.iter().map(|p| p.to_string()));
                }
            }
            Err(e) => problems.push(format!("cannot read {}: {e}", path.display())),
        }
    }
}

fn file_name(config: &config::Config) -> String {
    config
        .source
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "(built-in defaults)".into())
}

/// What `anima run` needs from the environment that `chat` does not.
fn slack_tokens_missing(config: &config::Config) -> Option<String> {
    let needed: &[&str] = match config.slack.mode {
        SlackMode::Socket => &["SLACK_BOT_TOKEN", "SLACK_APP_TOKEN"],
        SlackMode::Events => &["SLACK_BOT_TOKEN", "SLACK_SIGNING_SECRET"],
    };
    let missing: Vec<&str> = needed
        .iter()
        .copied()
        .filter(|name| Secret::from_env(name).is_none())
        .collect();
    (!missing.is_empty()).then(|| {
        format!(
            "slack: {} {} not set; `anima run` needs {} ({} mode), `anima chat` does not",
            missing.join(" and "),
            if missing.len() == 1 { "is" } else { "are" },
            if missing.len() == 1 { "it" } else { "them" },
            match config.slack.mode {
                SlackMode::Socket => "socket",
                SlackMode::Events => "events",
            }
        )
    })
}

/// The store `[store]` names: SQLite's file and schema, or PostgreSQL's server and schema.
/// A missing connection string, a server that cannot be reached and refused credentials are
/// one problem each, and the password is never shown.
async fn check_store(config: &config::Config, problems: &mut Vec<String>, notes: &mut Vec<String>) {
    if config.store.backend == StoreBackend::Postgres {
        let url = match crate::memory::open::database_url() {
            Ok(url) => url,
            Err(e) => return problems.push(e.to_string()),
        };
        match Postgres::inspect(url.expose()).await {
            Ok((place, server, 0)) => notes.push(format!(
                "database: {place} (PostgreSQL {server}; empty: anima creates its schema at the first start)"
            )),
            Ok((place, server, v)) => notes.push(format!(
                "database: {place} (PostgreSQL {server}, schema version {v})"
            )),
            Err(e) => problems.push(e.to_string()),
        }
        return;
    }
    let db = config.db_path();
    if db.exists() {
        match Sqlite::inspect(&db) {
            Ok(v) => notes.push(format!("database: {} (schema version {v})", db.display())),
            Err(e) => problems.push(format!("{}: {e}", db.display())),
        }
    } else {
        notes.push(format!(
            "database: {} does not exist yet; it is created on first use",
            db.display()
        ));
    }
}
