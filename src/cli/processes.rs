//! `anima processes list | graph [--format mermaid|dot] | show THREAD`.

use std::collections::BTreeMap;
use std::path::Path;

use clap::{Subcommand, ValueEnum};

use super::{load_config, open_existing_store, plural, CliResult, Failure};
use crate::config::{Config, Problem};
use crate::ism::{Effect, Iteration};
use crate::memory::{Entry, EntryType};
use crate::process::def::ProcessDef;
use crate::process::{def, graph, library};

/// ISM iterations `processes show` prints.
const SHOWN: usize = 20;

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

pub async fn run(config_path: Option<&Path>, command: ProcessesCommand) -> CliResult {
    let config = load_config(config_path)?;
    match command {
        ProcessesCommand::List => {
            let (defs, problems) = load_defs(&config);
            if defs.is_empty() {
                println!("no process files in {}", config.processes_dir.display());
            }
            for d in defs.values() {
                print_def(d, config.ism.max_loops);
            }
            problems_found(&problems)
        }
        ProcessesCommand::Graph { format } => {
            let (defs, problems) = load_defs(&config);
            print!(
                "{}",
                match format {
                    GraphFormat::Mermaid => graph::mermaid(&defs),
                    GraphFormat::Dot => graph::dot(&defs),
                }
            );
            problems_found(&problems)
        }
        ProcessesCommand::Show { thread } => show(&config, &thread).await,
    }
}

/// The process files (the shipped ones, said, when the folder is missing), each problem
/// printed to stderr.
fn load_defs(config: &Config) -> (BTreeMap<String, ProcessDef>, Vec<Problem>) {
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
    (defs, problems)
}

/// Fails the command when the files had problems.
fn problems_found(problems: &[Problem]) -> CliResult {
    if problems.is_empty() {
        Ok(())
    } else {
        Err(Failure::Usage(format!(
            "{} in the process files; `anima check` lists them",
            plural(problems.len() as u64, "problem")
        )))
    }
}

/// One process for `processes list`: its steps (or its ISM) and transitions.
fn print_def(d: &ProcessDef, default_loops: u32) {
    println!("{}  {}", d.name, d.description);
    let steps: Vec<&str> = d.steps.iter().map(|s| s.name()).collect();
    if let Some(ism) = &d.ism {
        let loops = ism
            .max_loops
            .map_or(format!("{default_loops} ([ism] max_loops)"), |n| {
                n.to_string()
            });
        println!("    kind: ism, up to {loops} iterations");
        println!("    goal: {}", ism.goal);
        if !ism.playbook.is_empty() {
            println!("    playbook: {}", ism.playbook);
        }
        for a in &ism.actions {
            println!(
                "    action {} ({}): {}",
                a.name,
                effect_text(&a.effect),
                a.description
            );
        }
        println!("    answering steps: {}", steps.join(", "));
    } else {
        println!("    steps: {}", steps.join(", "));
    }
    for t in &d.transitions {
        let now = if t.execute_now { " (execute_now)" } else { "" };
        println!("    → {} when {}{now}", t.to, t.when_text);
    }
}

/// `processes show THREAD`: its state, its latest ISM iterations, its transitions.
async fn show(config: &Config, thread: &str) -> CliResult {
    let store = open_existing_store(config).await?;
    let state = match &store {
        Some(store) => store
            .thread_process(thread)
            .await
            .map_err(Failure::runtime)?,
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
    let entries = store
        .thread_entries(thread)
        .await
        .map_err(Failure::runtime)?;
    print_iterations(&entries);
    let history = store.transitions(thread).await.map_err(Failure::runtime)?;
    if !history.is_empty() {
        println!("transitions:");
    }
    for t in history {
        let rule = match (&t.record.action, t.record.rule) {
            (Some(a), _) => format!("action {a}"),
            (None, Some(r)) => format!("rule {r}"),
            (None, None) => "fallback".to_string(),
        };
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

/// The latest `SHOWN` ISM iterations among a thread's entries, a line each.
fn print_iterations(entries: &[Entry]) {
    let iterations: Vec<_> = entries
        .iter()
        .filter(|e| e.entry_type == EntryType::ActionSelection)
        .collect();
    if !iterations.is_empty() {
        println!(
            "ism iterations (latest {} of {}):",
            iterations.len().min(SHOWN),
            iterations.len()
        );
    }
    for e in iterations
        .iter()
        .skip(iterations.len().saturating_sub(SHOWN))
    {
        println!("  {}", iteration_line(e));
    }
}

/// An effect as `processes list` shows it.
fn effect_text(e: &Effect) -> String {
    match e {
        Effect::Query { question } => format!("query {question:?}"),
        Effect::Respond { keep_going: true } => "respond, then continue".into(),
        Effect::Transition {
            to, execute_now, ..
        } => format!(
            "transition to {to}{}",
            if *execute_now { ", execute_now" } else { "" }
        ),
        Effect::Tool { server, tool } => format!("tool {server}.{tool}"),
        other => other.name().into(),
    }
}

/// One recorded ISM iteration on a line: its number, what was chosen, why, how it ended.
fn iteration_line(e: &Entry) -> String {
    let m = &e.metadata;
    let it = Iteration::from_record(&e.content, m);
    let mut line = format!(
        "{} #{}: {}",
        m.get("process").and_then(|v| v.as_str()).unwrap_or("?"),
        it.number,
        if it.chosen.is_empty() {
            "no usable choice".to_string()
        } else {
            it.chosen.join(", ")
        }
    );
    if !it.unknown.is_empty() {
        line.push_str(&format!(" (skipped: {})", it.unknown.join(", ")));
    }
    if !it.reasoning.is_empty() {
        line.push_str(&format!(" — {}", it.reasoning));
    }
    if let Some(end) = m.get("ending").and_then(|v| v.as_str()) {
        line.push_str(&format!(" [ended: {end}]"));
    }
    for c in &it.calls {
        let args: String = c
            .arguments
            .chars()
            .map(|ch| if ch.is_control() { ' ' } else { ch })
            .collect();
        line.push_str(&format!(
            "\n    tool {} {} → {} ({} ms)",
            c.tool,
            crate::tools::cut(&args, 200),
            c.outcome,
            c.ms
        ));
    }
    line
}
