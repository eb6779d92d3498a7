//! `anima check`: every problem with the configuration, soul files and database, each naming
//! the file (and key and line where there is one) and what to do. Exit 2 on any problem.

use std::path::Path;

use super::{plural, CliResult, Failure};
use crate::config::{self, ProviderKind};
use crate::llm::select::{find_executable, Environment};
use crate::memory::Store;
use crate::process::{def, library};
use crate::soul::SoulFiles;

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

        let db = config.db_path();
        if db.exists() {
            match Store::inspect(&db) {
                Ok(v) => notes.push(format!("database: {} (schema version {v})", db.display())),
                Err(e) => problems.push(format!("{}: {e}", db.display())),
            }
        } else {
            notes.push(format!(
                "database: {} does not exist yet; it is created on first use",
                db.display()
            ));
        }

        let env = Environment::from_process();
        let file = config
            .source
            .as_ref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "(built-in defaults)".into());
        match config.llm.provider {
            ProviderKind::Anthropic if env.anthropic_key.is_none() => problems.push(format!(
                "{file}: key `llm.provider`: \"anthropic\" needs ANTHROPIC_API_KEY in the environment; export it or choose another provider"
            )),
            ProviderKind::ClaudeCli if find_executable(&config.llm.claude_cli_path, env.path.as_deref()).is_none() => {
                problems.push(format!(
                    "{file}: key `llm.claude_cli_path`: `{}` is not an executable on PATH; install Claude Code or fix the path",
                    config.llm.claude_cli_path
                ))
            }
            kind => notes.push(format!("provider: {}", describe(kind, &env, config))),
        }
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

fn describe(kind: ProviderKind, env: &Environment, config: &config::Config) -> String {
    match kind {
        ProviderKind::Auto if env.anthropic_key.is_some() => "auto → anthropic (ANTHROPIC_API_KEY is set)".into(),
        ProviderKind::Auto if env.openai_key.is_some() || !config.llm.base_url.is_empty() => {
            "auto → openai (OPENAI_API_KEY or [llm] base_url is set)".into()
        }
        ProviderKind::Auto => {
            "auto → decided at start: a local Ollama if one answers, else the claude CLI if on PATH; with neither, `anima chat` explains what to set".into()
        }
        other => other.as_str().to_string(),
    }
}
