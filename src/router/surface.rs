//! The place replies go, as the router sees it: a small trait the router owns, so that it
//! knows nothing of Slack (or of a terminal). An address is the surface's own text, stored
//! with each inbox row and read only by the surface.

use futures_util::future::BoxFuture;

/// Where a message came from and its reply goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// Written by the surface when the message arrived; only the surface reads it.
    pub text: String,
    /// The surface's note on the conversation (for Slack: an assistant thread).
    pub note: Option<String>,
}

/// Names a part of a reply (its inbox row and number), so that a copy which already arrived
/// can be recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PartMark {
    pub row: i64,
    pub part: usize,
}

/// One part of a reply to deliver.
#[derive(Debug, Clone, Copy)]
pub struct Part<'a> {
    pub text: &'a str,
    /// `None` for a reply that answers no inbox row (a follow-up).
    pub mark: Option<PartMark>,
    /// It may already have been delivered (it was in flight when anima stopped): look for it
    /// before delivering it.
    pub maybe_delivered: bool,
}

/// Why a part was not delivered.
#[derive(Debug, thiserror::Error)]
pub enum Undeliverable {
    /// Refused for good (retrying would not help): the reply is given up.
    #[error("refused: {0}")]
    Refused(String),
    /// Not now (the surface is unreachable or busy, or whether the part arrived cannot be
    /// told): the router tries the same part again later, as one that may have arrived.
    #[error("unavailable: {0}")]
    Unavailable(String),
}

pub trait Surface: Send + Sync {
    /// Shows (`on`) or clears the sign that the soul is working on the message at `at`.
    /// A courtesy: it never fails a reply.
    fn working<'a>(&'a self, at: &'a Address, on: bool) -> BoxFuture<'a, ()>;

    /// The name the soul calls a person by.
    fn speaker_name<'a>(&'a self, user_id: &'a str) -> BoxFuture<'a, String>;

    /// A reply cut into the parts this surface delivers one by one, in its own format.
    fn parts(&self, reply: &str) -> Vec<String>;

    /// Delivers one part to `to` and returns the surface's reference of it. Waits out rate
    /// limits; never delivers a part twice.
    fn deliver<'a>(
        &'a self,
        to: &'a Address,
        part: Part<'a>,
    ) -> BoxFuture<'a, Result<String, Undeliverable>>;
}
