//! `anima check`: whether `chat` and `run` can work. Every problem with the configuration,
//! soul and process files, database and model provider (resolved as at start), each naming
//! the file (and key and line where there is one) and what to do; exit 2 on any problem.
//! Each daimon is reported too (`check_daimons`).
//! Warnings say what works but not as one may think (the built-in soul, no Slack tokens, a
//! Slack that cannot be asked about them).

use std::path::Path;

use super::check_processes::{check_processes, written_at};
use super::{plural, CliResult, Failure};
use crate::assistant;
use crate::config::secret::Secret;
use crate::config::StoreBackend;
use crate::config::{self, SlackMode};
use crate::llm::select::{self, Environment};
use crate::memory::postgres::Postgres;
use crate::memory::sqlite::Sqlite;
use crate::process::def;
use crate::soul::{self, SoulFiles};
use crate::states::template;

pub async fn run(config_path: Option<&Path>, offline: bool) -> CliResult {
    let mut problems: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    // Works, but not as the person may think: said, without failing the check.
    let mut warnings: Vec<String> = Vec::new();

    let config = check_config(config_path, &mut problems, &mut notes);
    if let Some(config) = &config {
        check_soul(config, &mut problems, &mut notes, &mut warnings);
        check_templates(&config.soul_dir, &mut problems, &mut notes);
        check_soul_files(config, &mut problems, &mut notes);
        let defs = check_processes(config, &mut problems, &mut notes, &mut warnings);
        check_tools(config, &defs, &mut problems, &mut notes, &mut warnings).await;
        let (p, n, w) = (&mut problems, &mut notes, &mut warnings);
        super::check_daimons::check_daimons(config, offline, p, n, w).await;
        check_store(config, &mut problems, &mut notes).await;
        check_provider(config, &mut problems, &mut notes).await;
        warnings.extend(slack_tokens_missing(config));
        slack_tokens_asked(config, offline, &mut problems, &mut notes, &mut warnings).await;
    }
    report(&notes, &warnings, &problems)
}

/// Prints what was found, problems last; a problem fails the check (exit 2).
fn report(notes: &[String], warnings: &[String], problems: &[String]) -> CliResult {
    for n in notes {
        println!("ok: {n}");
    }
    for w in warnings {
        println!("warning: {w}");
    }
    for p in problems {
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

/// The configuration file, as `chat` and `run` read it: every problem with file, key and line.
fn check_config(
    config_path: Option<&Path>,
    problems: &mut Vec<String>,
    notes: &mut Vec<String>,
) -> Option<config::Config> {
    match config::load(config_path) {
        Ok(c) => {
            notes.push(match &c.source {
                Some(p) => format!("config: {} is valid", p.display()),
                None => format!("config: {}", c.origin()),
            });
            Some(c)
        }
        Err(e) => {
            problems.extend(e.problems.iter().map(|p| p.to_string()));
            None
        }
    }
}

/// The soul's own file: the built-in soul is a warning, a soul without its recommended
/// sections too.
fn check_soul(
    config: &config::Config,
    problems: &mut Vec<String>,
    notes: &mut Vec<String>,
    warnings: &mut Vec<String>,
) {
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
}

/// The soul folder's other files: the assistant's words and the psyche's constants.
fn check_soul_files(config: &config::Config, problems: &mut Vec<String>, notes: &mut Vec<String>) {
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
        Err(soul::SoulError::Psyche(found)) => problems.extend(found.iter().map(|p| p.to_string())),
        Err(e) => problems.push(e.to_string()),
    }
    let dir = config.soul_dir.join("dossiers");
    if dir.is_dir() {
        let (dossiers, found) = crate::engine::load_hand_written(&dir);
        notes.push(format!(
            "dossiers: {} ({})",
            dir.display(),
            plural(dossiers.len() as u64, "hand-written dossier")
        ));
        problems.extend(found);
    }
}

/// The provider, resolved exactly as `chat` and `run` resolve it at start.
async fn check_provider(
    config: &config::Config,
    problems: &mut Vec<String>,
    notes: &mut Vec<String>,
) {
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
                        written_at(config, "llm", "base_url").unwrap_or_else(|| config.origin())
                    ));
                }
            }
        }
        // The error names the config file (or where a setting would go).
        Err(e) => problems.push(e.to_string()),
    }
}

/// The soul's template, and the archetypes beside it in `templates/`: every problem with
/// file and line.
/// Each tool server (started, or a problem saying why not) and each ISM tool action: a
/// server that is not configured, or a tool its server (when it could be listed) does not have, with file and
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
            Some(why) => problems.push(format!(
                "tool server {}: not started (its tools are unavailable): {why}",
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

/// The Slack tokens that are set, by their form (the wrong kind, quotes around them) and,
/// unless `offline`, by asking Slack (auth.test for the bot token, apps.connections.open for
/// the app token in Socket Mode): a refusal or the wrong kind is a problem naming the
/// variable; a Slack that cannot be reached is a warning.
async fn slack_tokens_asked(
    config: &config::Config,
    offline: bool,
    problems: &mut Vec<String>,
    notes: &mut Vec<String>,
    warnings: &mut Vec<String>,
) {
    use crate::slack::api::{self, SlackApi};
    use crate::slack::credentials::{self, Answer, Token};
    let Some(bot) = Secret::from_env(Token::Bot.var()) else {
        return;
    };
    let app = match config.slack.mode {
        SlackMode::Socket => Secret::from_env(Token::App.var()),
        SlackMode::Events => None,
    };
    let misplaced = credentials::misplaced_all(&bot, app.as_ref());
    if !misplaced.is_empty() {
        problems.extend(misplaced.into_iter().map(|m| format!("slack: {m}")));
        return;
    }
    if offline {
        return notes.push("slack: tokens of the right kinds (--offline: Slack not asked)".into());
    }
    let client = std::sync::Arc::new(slack_morphism::SlackClient::new(api::connector(
        &config.slack.api_base_url,
    )));
    let slack = SlackApi::new(client, &bot);
    let mut asked = vec![(Token::Bot, credentials::ask_bot(&slack).await)];
    if let Some(app) = &app {
        asked.push((Token::App, credentials::ask_app(&slack, app).await));
    }
    for (token, answer) in asked {
        match answer {
            Answer::Accepted => notes.push(format!("slack: Slack takes {}", token.var())),
            Answer::Refused { why, .. } => problems.push(format!("slack: {why}")),
            Answer::Unanswered(e) => warnings.push(format!(
                "slack: {} not checked: Slack could not be asked ({e}); `anima check --offline` skips this",
                token.var()
            )),
        }
    }
}

/// The store `[store]` names: SQLite's file and schema, or PostgreSQL's server and schema, and
/// that its role may create and migrate the schema or write to the current one. A missing
/// connection string, a server that cannot be reached, refused credentials and missing rights
/// are one problem each, and the password is never shown.
async fn check_store(config: &config::Config, problems: &mut Vec<String>, notes: &mut Vec<String>) {
    if config.store.backend == StoreBackend::Postgres {
        let url = match crate::memory::open::database_url() {
            Ok(url) => url,
            Err(e) => return problems.push(e.to_string()),
        };
        match Postgres::prove(url.expose()).await {
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
