//! anima: a Slack chat-bot daemon with an embedded soul engine.
//!
//! Modules in the order a message flows through them.

pub mod config;
pub mod steps;
pub mod parse;
pub mod memory;
pub mod soul;
pub mod prompt;
pub mod llm;
