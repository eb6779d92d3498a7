//! The soul stream: one record for each phase of a turn as it happens (stimulus, plan,
//! prompt, model, cognition, decision, memory, response, error), and the hub that carries
//! them from the engine to whoever watches (`anima watch`, the inspector's live pages).
//!
//! The hub is a bounded broadcast channel: a record nobody watches is never built
//! (`Hub::emit` takes a closure and calls it only while someone is subscribed), and a watcher
//! that falls behind by more than `CAPACITY` records loses the oldest ones and is told how
//! many (`Lagged`), so a slow reader never holds memory or the turn back.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;

/// Records a watcher may fall behind by before it loses the oldest.
pub const CAPACITY: usize = 1024;

/// A phase of a turn, as the stream names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Stimulus,
    Plan,
    Prompt,
    Model,
    Cognition,
    Decision,
    Memory,
    Response,
    Error,
}

impl Phase {
    pub const ALL: [Phase; 9] = [
        Phase::Stimulus,
        Phase::Plan,
        Phase::Prompt,
        Phase::Model,
        Phase::Cognition,
        Phase::Decision,
        Phase::Memory,
        Phase::Response,
        Phase::Error,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Stimulus => "stimulus",
            Phase::Plan => "plan",
            Phase::Prompt => "prompt",
            Phase::Model => "model",
            Phase::Cognition => "cognition",
            Phase::Decision => "decision",
            Phase::Memory => "memory",
            Phase::Response => "response",
            Phase::Error => "error",
        }
    }

    /// The phase `name` names, if any (for `--phase`).
    pub fn parse(name: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.as_str() == name)
    }
}

/// One record of the soul stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub phase: Phase,
    /// The turn's trace id (the one in the logs and the store).
    pub trace: String,
    /// The conversation; empty for a call outside any (a state call, a dream).
    pub thread: String,
    /// When it happened (unix ms).
    pub at: i64,
    /// What happened, in one line (text from outside or the model: escape it to show it).
    pub text: String,
    /// What else the phase carries (sizes, tokens, the decision's kind), as JSON.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub data: serde_json::Value,
}

/// Where the engine sends the stream, and where watchers take it from.
#[derive(Debug, Clone)]
pub struct Hub {
    tx: broadcast::Sender<Arc<Record>>,
}

impl Default for Hub {
    fn default() -> Self {
        Hub {
            tx: broadcast::Sender::new(CAPACITY),
        }
    }
}

impl Hub {
    /// Sends the record `make` builds, if anyone watches; nothing is built otherwise.
    pub fn emit(&self, make: impl FnOnce() -> Record) {
        if self.tx.receiver_count() > 0 {
            // Every watcher may have gone since the count: then the record is dropped.
            let _ = self.tx.send(Arc::new(make()));
        }
    }

    /// Whether anyone watches now.
    pub fn watched(&self) -> bool {
        self.tx.receiver_count() > 0
    }

    /// A new watcher: every record sent from now on, until it falls `CAPACITY` behind.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Record>> {
        self.tx.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(n: i64) -> Record {
        Record {
            phase: Phase::Model,
            trace: "t".into(),
            thread: "C1:1.0".into(),
            at: n,
            text: format!("call {n}"),
            data: serde_json::Value::Null,
        }
    }

    #[test]
    fn nothing_is_built_while_nobody_watches() {
        let hub = Hub::default();
        hub.emit(|| panic!("built with nobody watching"));
        assert!(!hub.watched());
    }

    #[tokio::test]
    async fn a_watcher_gets_records_in_order() {
        let hub = Hub::default();
        let mut rx = hub.subscribe();
        hub.emit(|| record(1));
        hub.emit(|| record(2));
        assert_eq!(rx.recv().await.unwrap().at, 1);
        assert_eq!(rx.recv().await.unwrap().at, 2);
    }

    #[tokio::test]
    async fn a_watcher_that_falls_behind_loses_the_oldest_and_is_told() {
        let hub = Hub::default();
        let mut rx = hub.subscribe();
        for n in 0..(CAPACITY as i64 + 10) {
            hub.emit(|| record(n));
        }
        match rx.recv().await {
            Err(broadcast::error::RecvError::Lagged(n)) => assert_eq!(n, 10),
            other => panic!("expected a lag, got {other:?}"),
        }
        assert_eq!(rx.recv().await.unwrap().at, 10);
    }

    #[test]
    fn phases_read_back_by_name() {
        for p in Phase::ALL {
            assert_eq!(Phase::parse(p.as_str()), Some(p));
        }
        assert_eq!(Phase::parse("nonsense"), None);
        let json = serde_json::to_string(&record(3)).unwrap();
        assert!(json.contains("\"phase\":\"model\""), "{json}");
    }
}
