//! The store's faces: one async trait per concern, each method an operation a caller means
//! (accept a message, claim a conversation's next row, begin a turn, commit it, apply a psyche
//! event, consolidate a batch). `Store` is all of them; engine, router, daemon, slack and cli
//! hold an `Arc<dyn Store>` and know nothing of the backend behind it.
//!
//! Owns the shape of the boundary only: no SQL, connection or transaction type appears here,
//! and a backend keeps its own economics (SQLite's page tricks, PostgreSQL's locks) inside its
//! implementation. An operation that is one transaction is one method, on every backend.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use super::dream::{
    Backlog, Consolidated, Consolidation, DreamHold, DreamRow, Episode, Keep, Upkeep,
};
use super::forget::{Forgotten, Pruned};
use super::process_state::TransitionRow;
use super::psyche::{LoggedDecision, Mind, Place};
use super::{
    CognitiveRow, DaemonRow, Entry, Inbound, InboxItem, Intake, JournalEntry, Judged, NewMove,
    Overheard, Snapshot, SoulState, StateMove, StoreError, TurnContext, TurnRecord, TurnStart,
    UsageRecord, UserRecord, Verdict, WriteHealth,
};
use crate::process::ThreadProcess;
use crate::psyche::gate::{Decision, GateRules};
use crate::psyche::mapping::{IntentionUpdate, StanceShift};
use crate::psyche::packet::Packet;
use crate::psyche::update::Effects;
use crate::psyche::{Event, Psyche};

type Result<T> = std::result::Result<T, StoreError>;

/// Every face of the store: what the rest of anima holds.
pub trait Store:
    Inbox
    + Claims
    + Budgets
    + Turns
    + Users
    + SoulRecord
    + Whispers
    + Processes
    + States
    + Dreams
    + Psychology
    + Feedback
    + Admin
    + Forgetting
    + Health
{
}

impl<T> Store for T where
    T: Inbox
        + Claims
        + Budgets
        + Turns
        + Users
        + SoulRecord
        + Whispers
        + Processes
        + States
        + Dreams
        + Psychology
        + Feedback
        + Admin
        + Forgetting
        + Health
{
}

/// Which daemon works which conversation, and which daemons run, when several share the store.
/// A conversation is worked by the daemon holding its claim: a lease on the store's clock,
/// renewed while the daemon works there, and an epoch that moves every time it changes hands.
/// A store only one process uses (SQLite) grants every claim to it.
#[async_trait]
pub trait Claims: Send + Sync {
    /// Takes `conversation` for this daemon for `lease`, or renews its own claim: the claim's
    /// epoch, or `None` while another daemon's lease on it runs.
    async fn claim(&self, conversation: &str, lease: Duration) -> Result<Option<i64>>;
    /// Whether this daemon still holds `conversation` at `epoch` with more than `margin` of
    /// its lease left (asked before every post).
    async fn holds(&self, conversation: &str, epoch: i64, margin: Duration) -> Result<bool>;
    /// Lets `conversation` go at once (its worker has nothing more to do there): whether it has
    /// open rows after all, accepted by another daemon while this one held it.
    async fn release(&self, conversation: &str, epoch: i64) -> Result<bool>;
    /// Renews this daemon's heartbeat and its claims on `conversations`, for `lease`.
    async fn heartbeat(&self, conversations: &[String], lease: Duration) -> Result<()>;
    /// Takes or renews the lead of the soul's scheduled work for `lease`: whether this daemon
    /// leads now. One daemon leads at a time; the lead lapses with a daemon that stops
    /// renewing it.
    async fn lead(&self, lease: Duration) -> Result<bool>;
    /// Conversations with open rows that no running lease holds: a dead daemon's, or new.
    async fn unheld_conversations(&self) -> Result<Vec<String>>;
    /// Ends a daemon known to be dead (its process is gone from this machine) at once: its row
    /// goes and its claims and lead lapse, so a daemon restarted after a crash does not wait
    /// a lease for its own conversations.
    async fn bury(&self, daemon: &str) -> Result<()>;
    /// Records this daemon as running (one at a time): how many others run. The first (none
    /// other runs) is the soul's waker: it holds the wakeup, renewed with its heartbeat, until
    /// `woke` (or until it dies and its lease ends).
    async fn join(&self, host: &str, pid: u32, lease: Duration) -> Result<u64>;
    /// This daemon, the waker, is done waking the soul.
    async fn woke(&self) -> Result<()>;
    /// Whether another daemon is waking the soul now.
    async fn waking(&self) -> Result<bool>;
    /// Records that this daemon stops (one at a time): how many others still run. Its claims
    /// stay until it lets them go, when its turns in flight are over.
    async fn leave(&self) -> Result<u64>;
    /// The daemons running now, with the conversations each holds.
    async fn daemons(&self) -> Result<Vec<DaemonRow>>;
}

/// What an outside service allows a minute and where it refused lately, shared by every
/// process on the store, so that several daemons together stay within what one may make. A
/// budget is a token bucket per name (`limit` calls a minute: a fourth at once, the rest
/// refilled over the minute; see `budgets::Bucket`); a refusal is remembered per kind of
/// place. A store one process uses (SQLite) keeps them in that process's memory.
#[async_trait]
pub trait Budgets: Send + Sync {
    /// Takes one call from each bucket (name, calls a minute), all or none: whether taken.
    async fn take_budget(&self, buckets: &[(&str, u32)]) -> Result<bool>;
    /// Empties a bucket (the service said it had too many calls): it refills from now.
    async fn drain_budget(&self, bucket: &str) -> Result<()>;
    /// Remembers that the service refused (`code`) in places of `kind`.
    async fn note_refusal(&self, kind: &str, code: &str) -> Result<()>;
    /// The code of the first of `kinds` refused within `within`, if any.
    async fn refusal(&self, kinds: &[&str], within: Duration) -> Result<Option<String>>;
}

/// The durable inbox: one row per Slack message, claimed in order per conversation.
///
/// With several daemons on one store, the writes to a row (its reply, stream, parts, end) are
/// fenced: `StoreError::Fenced` while another daemon holds the row's conversation (`Claims`).
#[async_trait]
pub trait Inbox: Send + Sync {
    /// Stores a message once however often it arrives (retries, twins from both doors).
    async fn accept_inbound(&self, m: &Inbound) -> Result<Intake>;
    /// The conversation's next row in order, claimed by this process; `None` when none waits.
    async fn claim_next(&self, conversation: &str) -> Result<Option<InboxItem>>;
    /// Counts a failed attempt at a row; returns the failures so far.
    async fn note_failure(&self, id: i64) -> Result<i64>;
    /// Conversations with rows still to work.
    async fn open_conversations(&self) -> Result<Vec<String>>;
    /// Rows waiting or under way.
    async fn inbox_depth(&self) -> Result<u64>;
    async fn inbox_item(&self, id: i64) -> Result<Option<InboxItem>>;
    async fn set_inbox_reply(&self, id: i64, reply: &str) -> Result<()>;
    /// A part of the row's reply was posted at `reference`; `last` finishes the row.
    async fn mark_part_posted(
        &self,
        id: i64,
        parts_posted: i64,
        reference: &str,
        last: bool,
    ) -> Result<()>;
    /// References of posts the conversation holds for other rows (never adopted by this one).
    async fn references_held(&self, id: i64) -> Result<Vec<String>>;
    async fn set_stream_ref(&self, id: i64, reference: &str) -> Result<()>;
    /// A stream stopped by the person after `said`; whether the row was closed.
    async fn mark_stopped(&self, id: i64, said: &str) -> Result<bool>;
    async fn mark_done(&self, id: i64) -> Result<()>;
    async fn mark_failed(&self, id: i64, failure: &str, apology: Option<&str>) -> Result<()>;
    /// Where a conversation's replies go: (address, thread reference).
    async fn conversation_address(
        &self,
        conversation: &str,
    ) -> Result<Option<(String, Option<String>)>>;
    async fn note_conversation(&self, key: &str, note: &str) -> Result<()>;
    async fn conversation_note(&self, key: &str) -> Result<Option<String>>;
    /// A message not addressed to the soul, kept for the psyche to weigh.
    async fn record_overheard(&self, m: &Inbound, place: &str) -> Result<Intake>;
    async fn reopen_overheard(&self, id: i64) -> Result<bool>;
    async fn last_overheard(&self, since_us: i64) -> Result<Option<Overheard>>;
}

/// Turns and working memory.
#[async_trait]
pub trait Turns: Send + Sync {
    /// Records the person's message, counts the turn, claims a whisper, loads the context:
    /// one transaction. `StoreError::Fenced` when the turn carries a conversation claim this
    /// daemon no longer holds.
    async fn begin_turn(&self, t: TurnStart) -> Result<(i64, TurnContext)>;
    /// Everything a turn leaves, in one transaction; the user whose model changed, if any.
    async fn commit_turn(&self, rec: TurnRecord) -> Result<Option<UserRecord>>;
    /// A turn that will not commit gives back its interaction number and whisper claim.
    async fn release_turn(&self, interaction: u64, whisper: Option<(i64, String)>) -> Result<()>;
    async fn load_turn(
        &self,
        thread: &str,
        user_id: &str,
        display_name: &str,
        window: u32,
    ) -> Result<TurnContext>;
    async fn record_user_message(
        &self,
        thread: &str,
        user_id: &str,
        display_name: &str,
        text: &str,
        source: Option<&str>,
    ) -> Result<i64>;
    /// The thread's working memory, oldest first.
    async fn thread_entries(&self, thread: &str) -> Result<Vec<Entry>>;
    /// The person who spoke last in the thread: (user id, name, unix ms).
    async fn last_speaker(&self, thread: &str) -> Result<(String, String, i64)>;
    async fn usage(&self, thread: &str) -> Result<Vec<UsageRecord>>;
    async fn claude_session(&self, thread: &str) -> Result<Option<String>>;
}

/// Users and every version of their models.
#[async_trait]
pub trait Users: Send + Sync {
    async fn user(&self, user_id: &str) -> Result<Option<UserRecord>>;
    async fn users(&self) -> Result<Vec<UserRecord>>;
    /// Users whose current model is not yet in the git repository.
    async fn unexported_models(&self) -> Result<Vec<UserRecord>>;
    async fn mark_exported(&self, user_id: &str, version: i64) -> Result<()>;
    /// Versions not yet in git: (version, model, change note), oldest first.
    async fn pending_model_versions(&self, user_id: &str) -> Result<Vec<(i64, String, String)>>;
    /// (version, change note, unix ms), oldest first.
    async fn model_history(&self, user_id: &str) -> Result<Vec<(i64, String, i64)>>;
}

/// The soul's state and counters.
#[async_trait]
pub trait SoulRecord: Send + Sync {
    async fn soul_state(&self) -> Result<SoulState>;
    /// Turns the soul has processed.
    async fn interactions(&self) -> Result<u64>;
}

/// Whispered intuitions, each claimed by one turn.
#[async_trait]
pub trait Whispers: Send + Sync {
    async fn add_whisper(&self, whisper: &str, source: &str) -> Result<i64>;
}

/// Each thread's mental process.
#[async_trait]
pub trait Processes: Send + Sync {
    async fn thread_process(&self, thread: &str) -> Result<Option<ThreadProcess>>;
    async fn transitions(&self, thread: &str) -> Result<Vec<TransitionRow>>;
    /// Threads quiet since `quiet_since` (unix ms) whose process waits: (thread, last unix ms).
    async fn quiet_threads(&self, quiet_since: i64) -> Result<Vec<(String, i64)>>;
}

/// Decides a move of the cognitive state from the row as it is, inside the move's transaction:
/// `None` refuses it.
pub type Decide = Box<dyn FnOnce(&CognitiveRow) -> Option<NewMove> + Send>;

/// A move conditioned on silence: made only if the newest person's message (its working-memory
/// id; `None` before the first) is still this one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Quiet(pub Option<i64>);

/// How a move came out.
#[derive(Debug)]
pub enum Moved {
    Moved(StateMove),
    /// `decide` refused.
    Refused,
    /// A message was written after the one the move was conditioned on.
    NotQuiet,
}

/// The cognitive state, its moves and the journal.
#[async_trait]
pub trait States: Send + Sync {
    async fn cognitive_state(&self) -> Result<CognitiveRow>;
    /// Reads the row, asks `decide`, and writes the move, in one transaction. With `quiet`,
    /// refused as `NotQuiet` when the newest message is not the one the caller saw.
    async fn move_state(&self, quiet: Option<Quiet>, decide: Decide) -> Result<Moved>;
    async fn newest_message_id(&self) -> Result<Option<i64>>;
    async fn last_message_ms(&self) -> Result<Option<i64>>;
    async fn state_moves(&self, limit: usize) -> Result<Vec<StateMove>>;
    async fn add_journal(&self, entry: &str) -> Result<i64>;
    async fn journal(&self, limit: usize) -> Result<Vec<JournalEntry>>;
    /// (thread, text) of people's messages since `since_ms`.
    async fn messages_since(&self, since_ms: i64) -> Result<Vec<(String, String)>>;
    async fn answered_yes_since(&self, question: &str, since_ms: i64) -> Result<bool>;
}

/// Dreams: consolidation of working memory, and upkeep.
#[async_trait]
pub trait Dreams: Send + Sync {
    /// Takes the soul's one dream at a time, without waiting: `None` while another process
    /// (or another dream of this one) holds it.
    async fn hold_dream(&self) -> Result<Option<DreamHold>>;
    async fn begin_dream(&self, cause: &str) -> Result<i64>;
    async fn finish_dream(&self, id: i64, complete: bool, report: &Value) -> Result<()>;
    async fn last_dream(&self) -> Result<Option<DreamRow>>;
    async fn dream_threads(&self, keep: Keep) -> Result<Vec<String>>;
    async fn backlog(
        &self,
        thread: &str,
        keep: Keep,
        max_entries: usize,
        max_chars: usize,
    ) -> Result<Option<Backlog>>;
    /// The summary, memories, model refreshes and deletions of one batch, in one transaction.
    async fn consolidate(&self, c: Consolidation, keep: Keep) -> Result<Consolidated>;
    async fn thread_summary(&self, thread: &str) -> Result<Option<String>>;
    async fn episodes(&self, thread: &str) -> Result<Vec<Episode>>;
    async fn upkeep(&self) -> Result<Upkeep>;
}

/// The psychology substrate. Every number is computed by `psyche`'s pure functions; an event
/// is one transaction, so two never interleave.
#[async_trait]
pub trait Psychology: Send + Sync {
    async fn psyche_event(
        &self,
        soul: &str,
        psyche: &Psyche,
        rules: &GateRules,
        event: &Event,
        place: &Place,
    ) -> Result<(Effects, Decision)>;
    /// `psyche_event` for an event that may come again: applied the first time `key` is seen.
    async fn psyche_event_once(
        &self,
        soul: &str,
        psyche: &Psyche,
        rules: &GateRules,
        event: &Event,
        place: &Place,
        key: &str,
    ) -> Result<Option<(Effects, Decision)>>;
    async fn psyche_packet(
        &self,
        soul: &str,
        psyche: &Psyche,
        people: &[(String, String)],
        query: &str,
        now: i64,
    ) -> Result<Packet>;
    async fn psyche_post_cognition(
        &self,
        soul: &str,
        psyche: &Psyche,
        shifts: &[StanceShift],
        updates: &[IntentionUpdate],
        now: i64,
    ) -> Result<Vec<String>>;
    async fn psyche_mind(
        &self,
        soul: &str,
        psyche: &Psyche,
        person: Option<&str>,
        now: i64,
    ) -> Result<Mind>;
    async fn psyche_decisions(&self, soul: &str, limit: usize) -> Result<Vec<LoggedDecision>>;
}

/// Tells whether a stored reply's address is the place a click came from.
pub type SamePlace = Box<dyn Fn(&str) -> bool + Send + Sync>;

/// Feedback on replies, and the first times (greetings, titles) that happen once per place.
#[async_trait]
pub trait Feedback: Send + Sync {
    async fn record_feedback(
        &self,
        reference: &str,
        same_place: SamePlace,
        person: &str,
        verdict: Verdict,
    ) -> Result<Judged>;
    async fn feedback_on(&self, reference: &str) -> Result<Vec<(String, Verdict)>>;
    /// True the first time `kind` happens at `place`, false ever after.
    async fn first_time(&self, kind: &str, place: &str) -> Result<bool>;
}

/// What operators do and see.
#[async_trait]
pub trait Admin: Send + Sync {
    /// Closes the thread's conversation (a new one starts at its next message).
    async fn reset_thread(&self, thread: &str) -> Result<bool>;
    /// Logs an admin command once per origin; false when the origin was seen.
    async fn log_admin(
        &self,
        origin: &str,
        user_id: &str,
        command: &str,
        allowed: bool,
    ) -> Result<bool>;
    async fn admin_done(&self, origin: &str) -> Result<()>;
    async fn snapshot(&self) -> Result<Snapshot>;
}

/// Forgetting: a person, on an operator's word, and conversations quiet for long. Each call is
/// one transaction, so every daemon on the store sees the person whole or gone.
#[async_trait]
pub trait Forgetting: Send + Sync {
    /// Removes what the store keeps of `user_id`: their row and every version of their model;
    /// the conversations no one else spoke in, whole (entries, summaries, episodes, process,
    /// usage); elsewhere their messages and the notes on their model; the psyche's
    /// relationships with them, the memories they are in, facts, intentions about them and
    /// gate decisions on their events; their feedback. Inbox rows of theirs already answered
    /// keep only their origin (a late retry stays known, never answered twice), as admin
    /// commands of theirs carried out do; rows not yet answered are kept and counted. A person
    /// the store does not know removes nothing (`known` false).
    async fn forget_person(&self, user_id: &str) -> Result<Forgotten>;
    /// Drops the working memory of every conversation with nothing written and no message
    /// received since `quiet_since` (unix ms, the store's clock) and none waiting, and those
    /// conversations' inbox rows that are finished. Summaries and episodes a dream made stay.
    /// The inbox's newest row stays whatever its age (SQLite would number the next after it).
    async fn forget_quiet(&self, quiet_since: i64) -> Result<Pruned>;
}

/// Whether the store takes writes, and what it is.
#[async_trait]
pub trait Health: Send + Sync {
    /// Writes one row: proves the store takes writes right now.
    async fn probe(&self) -> Result<()>;
    /// The outcome of the last write, and when the last good one was.
    fn write_health(&self) -> &WriteHealth;
    /// Write transactions begun so far (for tests and benchmarks of what a turn costs).
    fn write_transactions(&self) -> u64;
    /// Which backend, and where (a path; never a password).
    fn describe(&self) -> String;
}

/// `States::move_state` with a typed refusal: `decide` says why it refuses, and that reason
/// comes back as `Err`; `quiet` pairs the condition with the reason given when it fails.
pub async fn move_state<E: Send + 'static>(
    store: &dyn States,
    quiet: Option<(Quiet, E)>,
    decide: impl FnOnce(&CognitiveRow) -> std::result::Result<NewMove, E> + Send + 'static,
) -> Result<std::result::Result<StateMove, E>> {
    let refusal = std::sync::Arc::new(std::sync::Mutex::new(None));
    let slot = refusal.clone();
    let (quiet, busy) = match quiet {
        Some((q, busy)) => (Some(q), Some(busy)),
        None => (None, None),
    };
    let decide: Decide = Box::new(move |row| match decide(row) {
        Ok(m) => Some(m),
        Err(e) => {
            *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
            None
        }
    });
    let moved = store.move_state(quiet, decide).await?;
    let (reason, what) = match moved {
        Moved::Moved(m) => return Ok(Ok(m)),
        Moved::Refused => (
            refusal.lock().unwrap_or_else(|p| p.into_inner()).take(),
            "refused",
        ),
        Moved::NotQuiet => (busy, "not quiet"),
    };
    reason
        .map(Err)
        .ok_or_else(|| StoreError::Task(format!("the store answered \"{what}\" unasked")))
}
