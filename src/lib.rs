//! anima: a Slack chat-bot daemon with an embedded soul engine.
//!
//! Modules in the order a message flows through them: configuration and the soul's files
//! are read; a perception enters the `engine`, which plans the turn and builds the `prompt`
//! (with the `steps` a process asks for), calls a model through `llm`, reads the answer with
//! `parse`, and persists everything in `memory`. `cli` wires it to the terminal.

pub mod cli;
pub mod config;
pub mod engine;
pub mod llm;
pub mod memory;
pub mod parse;
pub mod prompt;
pub mod soul;
pub mod steps;
pub mod telemetry;
