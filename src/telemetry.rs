//! Logging: `tracing` to stderr, human or JSON, filtered by `ANIMA_LOG`.
//!
//! Message bodies are logged only at debug level; secrets never reach a log line (they are
//! `Secret`s, whose Debug and Display print `[redacted]`).

use std::io::IsTerminal;

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    Human,
    Json,
}

/// Installs the subscriber. `default_filter` applies when `ANIMA_LOG` is unset.
pub fn init(format: LogFormat, default_filter: &str) {
    let filter =
        EnvFilter::try_from_env("ANIMA_LOG").unwrap_or_else(|_| EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false);
    let _ = match format {
        LogFormat::Human => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
