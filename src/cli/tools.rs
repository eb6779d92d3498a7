//! `anima tools list [--json]`: each configured MCP server (started, or why not) and its
//! tools: name, description, input schema, and whether the tool may run (read-only by the
//! server's annotations, or allowed by the config). Starts the servers, waits for them (at
//! most their timeout), reports, and stops them. Exits 2 when a configured server does not
//! start, having said why (a stdio server's last lines of stderr among it).

use std::path::Path;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::{load_config, CliResult, Failure};
use crate::tools::{ServerReport, Tools};

#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// List each MCP server of `[[tools.servers]]` and its tools.
    List(ListArgs),
}

#[derive(Debug, Args)]
pub struct ListArgs {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(config_path: Option<&Path>, command: ToolsCommand) -> CliResult {
    let ToolsCommand::List(args) = command;
    let config = load_config(config_path)?;
    let report = reports(&config.tools).await;
    if args.json {
        let text = serde_json::to_string_pretty(&report).map_err(Failure::runtime)?;
        println!("{text}");
        return not_started(&report);
    }
    if report.is_empty() {
        println!("no tool servers are configured ([[tools.servers]] in the config file)");
    }
    for s in &report {
        match &s.problem {
            None => println!(
                "{}: started, {}",
                s.name,
                super::plural(s.tools.len() as u64, "tool")
            ),
            Some(why) => println!("{}: not started: {why}", s.name),
        }
        for t in &s.tools {
            let may = match (&t.problem, t.may_run, t.read_only) {
                (Some(p), _, _) => format!("refused: {p}"),
                (None, true, true) => "may run (read-only)".into(),
                (None, true, false) => "may run (allowed)".into(),
                (None, false, _) => "refused: not read-only and not allowed".into(),
            };
            println!("  {}.{} ({may})", s.name, t.name);
            if !t.description.trim().is_empty() {
                println!("    {}", one_line(&t.description, 200));
            }
            println!(
                "    arguments: {}",
                crate::tools::schema::compact(&t.input_schema)
            );
        }
    }
    not_started(&report)
}

/// Exit 2 when a server did not start (the report has said why).
fn not_started(report: &[ServerReport]) -> CliResult {
    let down: Vec<&str> = report
        .iter()
        .filter(|s| !s.started)
        .map(|s| s.name.as_str())
        .collect();
    if down.is_empty() {
        return Ok(());
    }
    Err(Failure::Usage(format!(
        "{} did not start: {} (see above why; fix the server or its [[tools.servers]] table)",
        super::plural(down.len() as u64, "tool server"),
        down.join(", ")
    )))
}

/// Starts `servers`, waits until each has started or failed (at most the longest timeout),
/// and stops them.
pub(super) async fn reports(servers: &[crate::config::ToolServer]) -> Vec<ServerReport> {
    if servers.is_empty() {
        return Vec::new();
    }
    let within = servers
        .iter()
        .map(|s| s.timeout)
        .max()
        .unwrap_or(Duration::from_secs(30));
    let tools = Tools::start(servers);
    tools.settled(within + Duration::from_millis(500)).await;
    let report = tools.report();
    tools.shutdown().await;
    report
}

fn one_line(text: &str, max: usize) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    crate::tools::cut(&line, max)
}
