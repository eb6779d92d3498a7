//! A turn's records: what it starts from, what it reads before the prompt, and everything it
//! writes when it succeeds.

use super::{Entry, NewEntry, SoulState, UserRecord};
use crate::process::{ThreadProcess, TransitionRecord};

/// What a turn needs to know before the prompt is built.
#[derive(Debug, Clone)]
pub struct TurnContext {
    /// This turn's interaction number: taken by `begin_turn`; for a proactive turn, the
    /// number the next message would take.
    pub interaction: u64,
    /// Completed turns in this thread before this one.
    pub thread_turns: i64,
    /// The thread's entries since its `memory_window`-th latest message (a user message or
    /// a reply), oldest first (this turn's message included).
    pub recent: Vec<Entry>,
    pub soul: SoulState,
    pub user: UserRecord,
    /// The whisper this turn claimed.
    pub whisper: Option<Whisper>,
    pub claude_session: Option<String>,
    /// The thread's place in the process machine; `None` before its first turn.
    pub process: Option<ThreadProcess>,
    /// Where the thread's current conversation begins (entries up to this id belong to one
    /// an operator closed).
    pub since_id: i64,
    /// The soul's cognitive state as the turn begins (`WORK`, `PLAY` …).
    pub cognitive_state: String,
    /// What dreams kept of this conversation's older part, if any.
    pub summary: Option<String>,
}

/// A whispered intuition, and who whispered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Whisper {
    pub id: i64,
    pub text: String,
    pub source: String,
}

/// What a message turn starts from.
#[derive(Debug, Clone)]
pub struct TurnStart {
    pub thread: String,
    pub user_id: String,
    pub display_name: String,
    pub text: String,
    /// Where the message came from (an inbox row): recorded once however often it is retried.
    pub source: Option<String>,
    /// The inbox row this turn answers: its attempt is counted here, and marked as under way.
    pub inbox: Option<i64>,
    pub window: u32,
    /// Names this turn's claim on a whisper (unique per turn).
    pub claimant: String,
    /// When the claim lapses (unix ms) if the turn neither commits nor releases it: a claim
    /// held by a process that died is freed then.
    pub claim_until_ms: i64,
    /// The claim (its epoch) this daemon holds on the conversation, if it holds one: the
    /// turn begins only while it holds (several daemons on one store; `Claims`).
    pub conversation_claim: Option<i64>,
}

/// Token counts and timing of one model call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UsageRecord {
    pub provider: String,
    pub model: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_creation_tokens: u64,
    pub cache_read_tokens: u64,
    pub latency_ms: u64,
    pub stop_reason: Option<String>,
}

/// Everything a successful turn writes.
#[derive(Debug, Clone, Default)]
pub struct TurnRecord {
    pub thread: String,
    pub user_id: String,
    pub interaction: u64,
    pub entries: Vec<NewEntry>,
    /// Soul-state keys to set (already filtered to the keys a model may set).
    pub soul_updates: Vec<(String, String)>,
    /// A new user model and its change note.
    pub user_model: Option<(String, String)>,
    /// The user model was in this turn's prompt.
    pub injected_user_model: bool,
    pub whisper_id: Option<i64>,
    /// The claim the turn holds on it: only a turn still holding its claim consumes it.
    pub whisper_claimant: Option<String>,
    pub claude_session: Option<String>,
    /// One row per model call (an execute_now chain makes several).
    pub usage: Vec<UsageRecord>,
    /// The inbox row this turn answers, and its reply: fixed in the same transaction.
    pub inbox: Option<(i64, String)>,
    /// The thread's process state after this turn, and the transitions it took.
    pub process: Option<ThreadProcess>,
    pub transitions: Vec<TransitionRecord>,
    /// A proactive turn: no user message, so no interaction, thread or user turn is counted.
    pub proactive: bool,
    /// The conversation the turn began in (`TurnContext::since_id`): if an operator closed it
    /// meanwhile, the turn's exchange stays in the closed one and leaves the new one as the
    /// reset left it. `None`: not checked.
    pub since_id: Option<i64>,
    /// The claim on the conversation the turn was run under (its epoch): the commit is made
    /// only while this daemon still holds it (`StoreError::Fenced` otherwise). `None`: not
    /// checked (a turn outside the router, a store one process uses).
    pub claim: Option<i64>,
}
