//! How many stream calls Slack will take, and where it said no: one workspace-wide budget per
//! stream method (Slack limits each method per workspace: start and stop are Tier 2, about
//! 20 a minute; append is Tier 4, about 100), shared by every thread and every daemon of the
//! soul, and the kinds of channel where a stream was refused lately.
//!
//! The budgets and refusals are kept by the store (`faces::Budgets`): in the process for a
//! store one process uses, in the database when several daemons share it, so that together
//! they never make more calls than the workspace's tier. A store that cannot say is a no: the
//! reply goes whole.

use std::sync::Arc;
use std::time::Duration;

use tracing::warn;

use crate::memory::Store;

/// Slack's rate tiers for the stream methods, per workspace.
pub const START_PER_MINUTE: u32 = 20;
pub const APPEND_PER_MINUTE: u32 = 100;
pub const STOP_PER_MINUTE: u32 = 20;

const START: (&str, u32) = ("chat.startStream", START_PER_MINUTE);
const APPEND: (&str, u32) = ("chat.appendStream", APPEND_PER_MINUTE);
const STOP: (&str, u32) = ("chat.stopStream", STOP_PER_MINUTE);

/// The kinds of conversation Slack treats differently for streams, told by the channel id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Dm,
    Channel,
    Group,
    /// Every kind (a missing scope is the app's, not the channel's).
    All,
}

impl Kind {
    pub fn of(channel: &str) -> Kind {
        match channel.as_bytes().first() {
            Some(b'D') => Kind::Dm,
            Some(b'G') => Kind::Group,
            _ => Kind::Channel,
        }
    }

    /// Where a refusal (`code`) of a stream in `channel` holds.
    fn refused_by(channel: &str, code: &str) -> Kind {
        if code == "missing_scope" || code == "not_allowed_token_type" {
            Kind::All
        } else {
            Kind::of(channel)
        }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Dm => "slack:dm",
            Kind::Channel => "slack:channel",
            Kind::Group => "slack:group",
            Kind::All => "slack:all",
        }
    }
}

/// How long a refusal keeps replies to that kind of conversation whole before a stream is
/// tried there again.
pub const REFUSAL_LASTS: Duration = Duration::from_secs(600);

/// The workspace's stream budget and refusals, as the store keeps them.
pub struct Limits {
    store: Arc<dyn Store>,
}

impl Limits {
    pub fn new(store: Arc<dyn Store>) -> Limits {
        Limits { store }
    }

    /// A stream may begin only if it can also be stopped within the budget: both are taken
    /// together, or neither.
    pub async fn begin(&self) -> bool {
        self.take(&[START, STOP]).await
    }

    pub async fn append(&self) -> bool {
        self.take(&[APPEND]).await
    }

    pub async fn stop(&self) -> bool {
        self.take(&[STOP]).await
    }

    async fn take(&self, buckets: &[(&str, u32)]) -> bool {
        match self.store.take_budget(buckets).await {
            Ok(taken) => taken,
            Err(e) => {
                warn!(error = %e, "the stream budget cannot be read; the reply goes whole");
                false
            }
        }
    }

    /// Slack said 429 to `method`: nothing more of it until its budget refills.
    pub async fn rate_limited(&self, method: &str) {
        let bucket = match method {
            "chat.appendStream" => APPEND.0,
            "chat.stopStream" => STOP.0,
            _ => START.0,
        };
        if let Err(e) = self.store.drain_budget(bucket).await {
            warn!(error = %e, "a 429 could not be noted in the stream budget");
        }
    }

    /// Remembers a refusal (`code`) of a stream in `channel`: for its kind of conversation,
    /// or for every kind when the app lacks a scope.
    pub async fn note_refusal(&self, channel: &str, code: &str) {
        let kind = Kind::refused_by(channel, code).name();
        if let Err(e) = self.store.note_refusal(kind, code).await {
            warn!(error = %e, "a refused stream could not be remembered");
        }
    }

    /// The refusal still in force for `channel`, if any; a store that cannot say is one.
    pub async fn refused(&self, channel: &str) -> Option<String> {
        let kinds = [Kind::All.name(), Kind::of(channel).name()];
        match self.store.refusal(&kinds, REFUSAL_LASTS).await {
            Ok(code) => code,
            Err(e) => Some(format!("the store cannot say ({e})")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> (tempfile::TempDir, Limits) {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::memory::sqlite::Sqlite::open(&dir.path().join("anima.db"))
            .unwrap()
            .shared();
        (dir, Limits::new(store))
    }

    #[tokio::test]
    async fn a_stream_begins_only_when_it_can_also_be_stopped() {
        let (_dir, l) = limits();
        while l.stop().await {}
        assert!(!l.begin().await);
        // The start was not spent by the refused begin: five appends and starts remain
        // their own.
        assert!(l.append().await);
    }

    #[tokio::test]
    async fn a_429_spends_that_method_only() {
        let (_dir, l) = limits();
        assert!(l.append().await);
        l.rate_limited("chat.appendStream").await;
        assert!(!l.append().await);
        assert!(l.begin().await);
    }

    #[tokio::test]
    async fn refusals_hold_for_their_kind_of_conversation_and_a_missing_scope_everywhere() {
        let (_dir, l) = limits();
        l.note_refusal("C123", "channel_type_not_supported").await;
        assert_eq!(
            l.refused("C999").await.as_deref(),
            Some("channel_type_not_supported")
        );
        assert_eq!(l.refused("D123").await, None);
        l.note_refusal("D1", "missing_scope").await;
        assert_eq!(l.refused("G1").await.as_deref(), Some("missing_scope"));
    }
}
