//! `anima processes list | graph [--format mermaid|dot] | show THREAD`.

use std::path::Path;

use clap::{Subcommand, ValueEnum};

use super::{load_config, open_existing_store, plural, CliResult, Failure};
use crate::process::{def, graph, library};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum GraphFormat {
    Mermaid,
    Dot,
}

#[derive(Debug, Subcommand)]
pub enum ProcessesCommand {
    /// The process files: name, steps, transitions.
    List,
    /// The process graph, drawn from the files.
    Graph {
        #[arg(long, value_enum, default_value = "mermaid")]
        format: GraphFormat,
    },
    /// A thread's current process, invocation count and transition history.
    Show { thread: String },
}

pub fn run(config_path: Option<&Path>, command: ProcessesCommand) -> CliResult {
    let config = load_config(config_path)?;
    match command {
        ProcessesCommand::List | ProcessesCommand::Graph { .. } => {
            let (defs, problems) = if config.processes_dir.exists() {
                def::load_dir(&config.processes_dir)
            } else {
                eprintln!(
                    "anima: {} does not exist; these are the processes built into anima (`anima init` writes them out)",
                    config.processes_dir.display()
                );
                (library::shipped(), Vec::new())
            };
            for p in &problems {
                eprintln!("problem: {p}");
            }
            if let ProcessesCommand::Graph { format } = command {
                print!(
                    "{}",
                    match format {
                        GraphFormat::Mermaid => graph::mermaid(&defs),
                        GraphFormat::Dot => graph::dot(&defs),
                    }
                );
            } else {
                if defs.is_empty() {
                    println!("no process files in {}", config.processes_dir.display());
                }
                for d in defs.values() {
                    println!("{}  {}", d.name, d.description);
                    let steps: Vec<&str> = d.steps.iter().map(|s| s.name()).collect();
                    println!("    steps: {}", steps.join(", "));
                    for t in &d.transitions {
                        let now = if t.execute_now { " (execute_now)" } else { "" };
                        println!("    → {} when {}{now}", t.to, t.when_text);
                    }
                }
            }
            if problems.is_empty() {
                Ok(())
            } else {
                Err(Failure::Usage(format!(
                    "{} in the process files; `anima check` lists them",
                    plural(problems.len() as u64, "problem")
                )))
            }
        }
        ProcessesCommand::Show { thread } => {
            let store = open_existing_store(&config)?;
            let state = match &store {
                Some(store) => store.thread_process(&thread).map_err(Failure::runtime)?,
                None => None,
            };
            let (Some(store), Some(state)) = (store, state) else {
                return Err(Failure::Runtime(format!(
                    "thread `{thread}` has no process state yet"
                )));
            };
            println!("thread:      {thread}");
            println!("process:     {}", state.current);
            println!("invocations: {}", state.invocations);
            println!("previous:    {}", state.previous.as_deref().unwrap_or("-"));
            if !state.params.is_empty() {
                let params: Vec<String> = state
                    .params
                    .iter()
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect();
                println!("params:      {}", params.join(", "));
            }
            let history = store.transitions(&thread).map_err(Failure::runtime)?;
            if !history.is_empty() {
                println!("transitions:");
            }
            for t in history {
                let rule = t
                    .record
                    .rule
                    .map_or("fallback".to_string(), |r| format!("rule {r}"));
                let now = if t.record.execute_now {
                    ", execute_now"
                } else {
                    ""
                };
                println!(
                    "  interaction {:>4}: {} → {} ({rule}{now})",
                    t.interaction, t.record.from, t.record.to
                );
            }
            Ok(())
        }
    }
}
