//! anima: a Slack chat-bot daemon with an embedded soul engine.
//!
//! Modules in the order a message flows through them: configuration and the soul's files
//! are read; a perception enters the `engine`, which plans the turn and builds the `prompt`
//! (with the `steps` a process asks for), calls a model through `llm`, reads the answer with
//! `parse`, and persists everything in `memory`. In the daemon, `slack` records each
//! accepted event in the inbox and the `router` runs one conversation at a time per thread
//! through the engine and posts the reply; `daemon` wires it together, `cli` is the door.

pub mod config;
pub mod telemetry;
pub mod tls;
pub mod soul;
pub mod steps;
pub mod slack;
pub mod router;
pub mod engine;
pub mod process;
pub mod prompt;
pub mod llm;
pub mod parse;
pub mod memory;
pub mod metrics;
pub mod failpoint;
pub mod daemon;
pub mod cli;
