//! `anima state [--json] [--journal]`: the soul's state for an operator, read-only, beside a
//! running daemon: the cognitive state (since when, why, the moves its template allows, the
//! template's rationales, the last dream), soul state, interaction count, conversations and
//! their processes, the inbox, pending whispers, the last turn, and the daemons sharing the
//! soul (host, pid, started, last heartbeat, conversations held, which one leads);
//! `--journal`: the solitude's journal.

use std::path::Path;

use clap::Args;

use super::{load_config, CliResult, Failure};
use crate::admin::{state_report, StateReport};
use crate::memory::{DaemonRow, JournalEntry};
use crate::soul;

#[derive(Debug, Args)]
pub struct StateArgs {
    /// One JSON object on stdout.
    #[arg(long)]
    pub json: bool,
    /// The journal the soul writes in solitude, newest first.
    #[arg(long)]
    pub journal: bool,
}

/// Journal entries `--journal` shows.
const JOURNAL_ENTRIES: usize = 50;

pub async fn run(config_path: Option<&Path>, args: StateArgs) -> CliResult {
    let config = load_config(config_path)?;
    let store = super::read_store(&config).await?;
    if args.journal {
        let entries = store
            .journal(JOURNAL_ENTRIES)
            .await
            .map_err(Failure::runtime)?;
        if args.json {
            let line = serde_json::to_string(&entries).map_err(Failure::runtime)?;
            println!("{line}");
        } else {
            print!("{}", journal(&entries, crate::memory::now_ms()));
        }
        return Ok(());
    }
    let template =
        soul::load_template(&config.soul_dir).map_err(|e| Failure::Usage(e.to_string()))?;
    let report = state_report(store.snapshot().await.map_err(Failure::runtime)?, &template);
    let daemons = store.daemons().await.map_err(Failure::runtime)?;
    if args.json {
        let mut value = serde_json::to_value(&report).map_err(Failure::runtime)?;
        value["daemons"] = serde_json::to_value(&daemons).map_err(Failure::runtime)?;
        println!("{value}");
    } else {
        let now = crate::memory::now_ms();
        print!("{}{}", human(&report, now), running(&daemons, now));
    }
    Ok(())
}

/// The daemons sharing the soul (on a store several share; none listed on SQLite).
fn running(daemons: &[DaemonRow], now_ms: i64) -> String {
    if daemons.is_empty() {
        return String::new();
    }
    let mut out = format!("daemons: {}\n", daemons.len());
    for d in daemons {
        out.push_str(&format!(
            "  {} pid {}: started {}, heartbeat {}, {}{}\n",
            d.host,
            d.pid,
            ago(now_ms, d.started_ms),
            ago(now_ms, d.heartbeat_ms),
            plural(d.conversations, "conversation held", "conversations held"),
            if d.leads {
                ", leads scheduled work"
            } else {
                ""
            }
        ));
    }
    out
}

fn journal(entries: &[JournalEntry], now_ms: i64) -> String {
    if entries.is_empty() {
        return "the journal is empty: the soul writes in it in solitude\n".into();
    }
    let mut out = String::new();
    for e in entries {
        out.push_str(&format!(
            "{}:\n{}\n\n",
            ago(now_ms, e.at_ms),
            e.entry.trim()
        ));
    }
    out
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The last dream in one line: when, how it ended, what it did.
fn last_dream(d: &serde_json::Value, now_ms: i64) -> String {
    let r = &d["report"];
    let n = |k: &str| r[k].as_u64().unwrap_or(0);
    let how = if d["finished_ms"].is_null() {
        "running, or killed before it ended"
    } else if d["complete"].as_bool() == Some(true) {
        "complete"
    } else if r["yielded"].as_bool() == Some(true) {
        "yielded to a message"
    } else {
        "incomplete"
    };
    format!(
        "{} ({how}): {} thread(s), {} entries summarised, {} pruned, {} model(s) refreshed, {} model call(s), {} ms",
        ago(now_ms, d["started_ms"].as_i64().unwrap_or(0)),
        n("threads_consolidated"),
        n("entries_summarised"),
        n("entries_pruned"),
        r["models_refreshed"].as_array().map_or(0, Vec::len),
        n("model_calls"),
        n("took_ms"),
    )
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

fn human(r: &StateReport, now_ms: i64) -> String {
    let (s, c) = (&r.snapshot, &r.cognitive_state);
    let mut out = String::new();
    out.push_str(&format!(
        "cognitive state: {}{}, since {}\n  why: {}\n  allowed moves: {}\n",
        c.state,
        if c.degraded {
            " (degraded: the wakeup failed)"
        } else {
            ""
        },
        if c.since_ms == 0 {
            "never started".to_string()
        } else {
            ago(now_ms, c.since_ms)
        },
        c.why,
        if c.allowed_moves.is_empty() {
            "none".to_string()
        } else {
            c.allowed_moves
                .iter()
                .map(|m| m.name())
                .collect::<Vec<_>>()
                .join(", ")
        },
    ));
    let b = &c.template.behaviors;
    let on = |e: bool| if e { "on" } else { "off" };
    out.push_str(&format!(
        "  template: {}{} (wakeup {}, shutdown {}, play {}, dream {}{}, solitude {})\n",
        c.template.file,
        c.template
            .name
            .as_deref()
            .map_or(String::new(), |n| format!(", {n}")),
        on(b.wakeup.enabled),
        b.shutdown.mode.name(),
        on(b.play.enabled),
        on(b.dream.enabled),
        if b.dream.enabled && b.dream.auto_schedule {
            format!(" every {} h at most", b.dream.min_interval_hours)
        } else {
            String::new()
        },
        on(b.solitude.enabled),
    ));
    for (state, why) in &c.rationales {
        out.push_str(&format!("  {state}: {why}\n"));
    }
    out.push_str(&format!(
        "  last dream: {}\n  journal: {}\n",
        c.last_dream
            .as_ref()
            .map_or("none yet".to_string(), |d| last_dream(d, now_ms)),
        plural(s.journal_entries, "entry", "entries"),
    ));
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
