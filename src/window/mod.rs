//! The soul's window: what a model-facing turn leaves behind for the people who shape a soul.
//! `trace` is a turn's record (its prompt in sections, the raw answer, the cognition, the
//! decisions, what memory was written, the reply), kept in the store as JSON beside a few
//! columns to find it by; `stream` is the live soul stream, one record per phase as it
//! happens, and the in-process hub that carries it to whoever watches.
//!
//! Types and the hub only: the engine fills them, memory keeps a trace's body as text it does
//! not read, the inspector, `anima watch` and Slack's "why" read them. No I/O beyond the hub's
//! in-process channel; knows nothing of Slack, providers or SQL.

pub mod stream;
pub mod trace;

pub use stream::{Hub, Phase, Record};
pub use trace::{CognitionStep, Decision, Kind, ModelCall, Section, TraceBody, Written};
