//! `anima state [--json]`: the soul's state for an operator, read-only, beside a running
//! daemon: soul state, interaction count, conversations and their processes, the inbox,
//! pending whispers, the last turn.

use std::path::Path;

use clap::Args;

use super::{load_config, CliResult, Failure};
use crate::memory::{Snapshot, Store, StoreError};

#[derive(Debug, Args)]
pub struct StateArgs {
    /// One JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

pub fn run(config_path: Option<&Path>, args: StateArgs) -> CliResult {
    let config = load_config(config_path)?;
    let db = config.db_path();
    if !db.exists() {
        return Err(Failure::Runtime(format!(
            "no database at {} yet: the soul has not had a conversation (run `anima chat` or `anima run`)",
            db.display()
        )));
    }
    let store = Store::open_read_only(&db).map_err(|e| match e {
        e @ (StoreError::TooNew { .. } | StoreError::Outdated { .. }) => {
            Failure::Usage(e.to_string())
        }
        e => Failure::runtime(e),
    })?;
    let snap = store.snapshot().map_err(Failure::runtime)?;
    if args.json {
        let line = serde_json::to_string(&snap).map_err(Failure::runtime)?;
        println!("{line}");
    } else {
        print!("{}", human(&snap, crate::memory::now_ms()));
    }
    Ok(())
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn ago(now_ms: i64, at_ms: i64) -> String {
    let secs = ((now_ms - at_ms).max(0) / 1000) as u64;
    match secs {
        0..=59 => plural(secs, "second", "seconds") + " ago",
        60..=3599 => plural(secs / 60, "minute", "minutes") + " ago",
        3600..=86_399 => plural(secs / 3600, "hour", "hours") + " ago",
        _ => plural(secs / 86_400, "day", "days") + " ago",
    }
}

fn human(s: &Snapshot, now_ms: i64) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "interactions: {}\nlast turn: {}\ninbox: {} waiting, {} given up\nwhispers pending: {}\n",
        s.interactions,
        s.last_turn_ms
            .map_or("none yet".to_string(), |t| ago(now_ms, t)),
        s.inbox_depth,
        s.inbox_failed,
        s.whispers_pending
    ));
    out.push_str("soul state:\n");
    for (k, v) in &s.soul_state {
        out.push_str(&format!(
            "  {k}: {}\n",
            if v.is_empty() { "(empty)" } else { v }
        ));
    }
    out.push_str(&format!("conversations: {}\n", s.conversations.len()));
    for c in &s.conversations {
        out.push_str(&format!(
            "  {}  {}  {}, last {}{}\n",
            c.thread,
            c.process.as_deref().unwrap_or("-"),
            plural(c.turns.max(0) as u64, "turn", "turns"),
            ago(now_ms, c.updated_ms),
            if c.open > 0 {
                format!(", {} waiting", c.open)
            } else {
                String::new()
            }
        ));
    }
    out
}
