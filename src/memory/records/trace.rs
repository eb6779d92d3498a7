//! A turn's trace as the store keeps it: the columns it is found by, and its body, the JSON
//! the window wrote (`window::TraceBody`), which the store keeps as text and never reads,
//! with the pieces of text it refers to (kept once however many traces share one).

/// One trace, whole.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceRow {
    /// Its id: 32 hex digits, the first 12 of which name the turn in the logs.
    pub trace: String,
    /// `message`, `thought`, `state` or `dream` (the window's words).
    pub kind: String,
    /// The conversation; empty for a call outside any.
    pub thread: String,
    /// The person who spoke, if one did.
    pub person: Option<String>,
    /// The inbox row the turn answered, if it answered one: how a reply's message finds it.
    pub inbox: Option<i64>,
    /// The process the thread stood in after the turn.
    pub process: String,
    /// When the turn began (unix ms).
    pub at: i64,
    /// What the soul said, if it said something.
    pub reply: Option<String>,
    /// The rest, as the window's JSON.
    pub body: String,
    /// Texts the body refers to by their place in this list (a call's cached prompt prefix,
    /// the same in most traces): the store keeps each text once, whatever shares it.
    pub pieces: Vec<String>,
}

/// The name a piece of a trace is kept under: its content's SHA-256, the first 128 bits in
/// hex (the same text, the same name, in every process and on every backend).
pub fn piece_key(text: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, text.as_bytes());
    digest.as_ref()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// A trace's pieces' names as its row lists them: in order, separated by spaces.
pub fn piece_keys(pieces: &[String]) -> String {
    let keys: Vec<String> = pieces.iter().map(|p| piece_key(p)).collect();
    keys.join(" ")
}

/// A trace in a list: its columns, and the reply's beginning (at most
/// `SUMMARY_REPLY_CHARS` characters).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceSummary {
    pub trace: String,
    pub kind: String,
    pub thread: String,
    pub person: Option<String>,
    pub process: String,
    pub at: i64,
    pub reply: Option<String>,
}

/// A trace's body as a bulk read gives it: without its pieces (what every trace recorded,
/// read at once: the process graph's moves).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracedBody {
    pub trace: String,
    pub kind: String,
    pub at: i64,
    pub body: String,
}

/// The characters of a reply a summary keeps.
pub const SUMMARY_REPLY_CHARS: usize = 200;

/// A conversation that has traces: its newest and how many are kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TracedConversation {
    pub thread: String,
    pub traces: u64,
    pub last_at: i64,
}

/// A sample of the inner life, taken now and then for the window's charts: the soul's
/// substrate at `at` as the window's JSON (mood, drives, energy), kept as text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PsycheSample {
    pub at: i64,
    pub body: String,
}
