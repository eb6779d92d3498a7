//! What the store says about daemons sharing one soul (the `Claims` face): each running
//! daemon, and the conversations it holds.
//!
//! Owns the types only; the claims themselves live in a backend that several processes can
//! share (PostgreSQL). Knows nothing of Slack or the router.

/// A running daemon, as `anima state` shows it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct DaemonRow {
    /// The daemon's name in the store (its process's store instance).
    pub daemon: String,
    pub host: String,
    pub pid: i64,
    /// Its HTTP listen address as bound (`[http] listen`, e.g. `0.0.0.0:8080`; a port of 0 is
    /// the one chosen at start): where `anima watch` finds its stream. Empty for a daemon of
    /// an anima before it was kept.
    pub listen: String,
    /// Unix milliseconds.
    pub started_ms: i64,
    pub heartbeat_ms: i64,
    /// Conversations whose claim it holds now.
    pub conversations: u64,
    /// It leads the soul's scheduled work (dreams, solitude, follow-ups, the psyche's tick).
    pub leads: bool,
}
