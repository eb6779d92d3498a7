//! `anima dream [--json]`: one memory consolidation now, beside a running daemon or without
//! one, and its report. The dream itself is the engine's; this only starts it and prints.

use std::path::Path;
use std::sync::Arc;

use clap::Args;

use super::{load_config, CliResult, Failure};
use crate::engine::{DreamError, DreamReport, Engine};

#[derive(Debug, Args)]
pub struct DreamArgs {
    /// The report as one JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(config_path: Option<&Path>, args: DreamArgs) -> CliResult {
    let config = load_config(config_path)?;
    let engine = Arc::new(Engine::build(&config).await.map_err(Failure::from)?);
    let dreamt = engine.dream("anima dream (on demand)", None).await;
    engine.flush_traces().await;
    let report = match dreamt {
        Ok(r) => r,
        Err(DreamError::Disabled(m)) => return Err(Failure::Usage(m)),
        Err(e @ DreamError::Refused(_)) => return Err(Failure::Runtime(e.to_string())),
        Err(e) => return Err(Failure::runtime(e)),
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&report).map_err(Failure::runtime)?
        );
    } else {
        print!("{}", text(&report));
    }
    Ok(())
}

/// The report for a person.
pub fn text(r: &DreamReport) -> String {
    let mut out = format!(
        "dream {}: {} ({})\n",
        r.id,
        if r.complete {
            "complete"
        } else if r.yielded {
            "yielded to a message; the next dream resumes"
        } else {
            "incomplete; the next dream redoes what is left"
        },
        r.states
    );
    out.push_str(&format!(
        "  threads: {} with a backlog, {} consolidated\n  entries: {} summarised, {} pruned, {} still waiting\n  episodic memories: {}\n  user models refreshed: {}\n  model calls: {} ({} failed)\n  time: {} ms\n",
        r.threads,
        r.threads_consolidated,
        r.entries_summarised,
        r.entries_pruned,
        r.backlog_left,
        r.episodes,
        if r.models_refreshed.is_empty() {
            "none".to_string()
        } else {
            r.models_refreshed.join(", ")
        },
        r.model_calls,
        r.failed_calls,
        r.took_ms
    ));
    if let Some(u) = &r.upkeep {
        out.push_str(&format!(
            "  upkeep: ANALYZE done; auto_vacuum {}; free pages {} → {}\n",
            u.auto_vacuum, u.free_pages_before, u.free_pages_after
        ));
    }
    if let Some(n) = &r.upkeep_note {
        out.push_str(&format!("  upkeep note: {n}\n"));
    }
    for e in &r.errors {
        out.push_str(&format!("  error: {e}\n"));
    }
    out
}
