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
    /// The reply's last part (where a surface puts its feedback buttons).
    pub last: bool,
    /// For an inbox row's reply: the references the inbox holds for replies in its
    /// conversation (this reply's parts delivered so far included). None of them is its copy.
    pub held: &'a [String],
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

/// What became of the first words of a streamed reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Begun {
    /// The message exists: its reference, and how many bytes of the text it took.
    Started { reference: String, took: usize },
    /// Nothing can be shown yet (the text so far may still become markup): more text first.
    Wait,
    /// Whether the message came to exist is not known (the answer was lost): if it did, it is
    /// the unrecorded stream at the address ([`Surface::find_unrecorded_stream`]), and it
    /// took this many bytes of the text.
    Unknown { took: usize },
    /// Not streamed (the surface's budget is spent, or it refused): the reply goes whole.
    Whole,
}

/// What became of more words for a streamed reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Appended {
    /// Shown: this many bytes of the text were taken.
    Took(usize),
    /// Not now (the budget): keep the text and offer it later.
    Later,
    /// The stream broke (expired, stopped, refused, or the outcome is unknown): nothing more
    /// is added; the message is rewritten with the final text when the turn ends.
    Broken,
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

    /// The files shared with the message at `at` (kept in its address), for its turn to read.
    fn attachments(&self, _at: &Address) -> Vec<crate::files::Attachment> {
        Vec::new()
    }

    /// Whether a reply to `to` may be streamed now.
    fn streams(&self, _to: &Address) -> bool {
        false
    }

    /// Begins a streamed reply to `to` (for `recipient`) with the start of `text`.
    fn begin_stream<'a>(
        &'a self,
        _to: &'a Address,
        _recipient: &'a str,
        _text: &'a str,
    ) -> BoxFuture<'a, Begun> {
        Box::pin(async { Begun::Whole })
    }

    /// Adds the start of `text` to the streamed message `reference`.
    fn append_stream<'a>(
        &'a self,
        _to: &'a Address,
        _reference: &'a str,
        _text: &'a str,
    ) -> BoxFuture<'a, Appended> {
        Box::pin(async { Appended::Broken })
    }

    /// Ends the streamed message `reference` so that it reads `part` (the reply's first part,
    /// in this surface's format) and returns its reference. `shown`: all the text it was given
    /// while streaming, when every piece arrived in this process; `None` when the stream
    /// broke or began before a restart (the message is then rewritten whole).
    fn finish_stream<'a>(
        &'a self,
        _to: &'a Address,
        reference: &'a str,
        _shown: Option<&'a str>,
        _part: Part<'a>,
    ) -> BoxFuture<'a, Result<String, Undeliverable>> {
        Box::pin(async move { Ok(reference.to_string()) })
    }

    /// Ends the streamed message `reference` as it stands, with `rest` added and the reply's
    /// `mark` (the person stopped the turn). A courtesy: it never fails.
    fn halt_stream<'a>(
        &'a self,
        _to: &'a Address,
        _reference: &'a str,
        _rest: &'a str,
        _mark: Option<PartMark>,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// A streamed message at `to` begun for a reply whose start was never recorded (anima
    /// stopped, or the start's outcome was unknown), if there is one: the reply goes there.
    /// `held`: the references the inbox has given to other rows' replies. None of them is
    /// ever the one found, whatever the surface can or cannot tell of them.
    fn find_unrecorded_stream<'a>(
        &'a self,
        _to: &'a Address,
        _held: &'a [String],
    ) -> BoxFuture<'a, Option<String>> {
        Box::pin(async { None })
    }
}
