//! anima: a Slack chat-bot daemon with an embedded soul engine.
//!
//! The parts, in the order a message flows: `cli` is the door for a person and `daemon`
//! wires the long-running service; `slack` takes events in by both doors and hands them to
//! the `router`, which keeps the durable inbox and runs one conversation at a time through
//! the `engine`; the engine moves a thread through its `process`, builds the `prompt`, asks a
//! model through `llm`, reads the answer with `parse`, calls an ISM's MCP `tools`, asks
//! other souls for a whisper through `daimon`, and keeps everything in `memory`; the
//! router delivers the reply back through slack's surface. `states` is the soul's cognitive
//! state (WAKEUP, WORK, PLAY, DREAM, SOLITUDE, SHUTDOWN) as its template shapes it: pure,
//! carried out by the daemon and the engine. `psyche` is the soul's numeric inner life (drives,
//! mood, relationships, memories) and the gate for speaking unasked: pure, its numbers never
//! reach a prompt. The rest is shared: `config`, `soul` (and `assistant`, its words on
//! assistant surfaces), `steps`, `metrics`, `telemetry`, `tls`, `failpoint`.
//! `tests/it/architecture.rs` holds each part to the edges it may have.

pub mod cli;
pub mod eval;
pub mod daemon;
pub mod inspect;
pub mod service;
pub mod admin;
pub mod slack;
pub mod router;
pub mod engine;
pub mod states;
pub mod process;
pub mod ism;
pub mod psyche;
pub mod prompt;
pub mod llm;
pub mod daimon;
pub mod parse;
pub mod tools;
pub mod memory;
pub mod dossier;
pub mod config;
pub mod toml_file;
pub mod soul;
pub mod assistant;
pub mod steps;
pub mod files;
pub mod window;
pub mod metrics;
pub mod telemetry;
pub mod tls;
pub mod failpoint;
#[cfg(test)]
mod arbitrary;
