//! The faces a turn reads and writes: the turn itself and working memory, people and their
//! models, the soul's own state, whispers, each thread's mental process.

use async_trait::async_trait;

use super::Result;
use crate::memory::process_state::TransitionRow;
use crate::memory::{
    Entry, SoulState, TurnContext, TurnRecord, TurnStart, UsageRecord, UserRecord,
};
use crate::process::ThreadProcess;

/// Turns and working memory: a turn reads its context, then writes its outcome in one
/// transaction (all of the turn or none of it).
#[async_trait]
pub trait Turns: Send + Sync {
    /// Starts a message turn in one write transaction: the person's message is recorded
    /// (once per `source`: a retried row's message is not written twice), the interaction
    /// number is taken (turns running at once get distinct numbers), the oldest free whisper
    /// is claimed by this turn alone (`claimant`, until `claim_until_ms`), the inbox row's
    /// attempt is counted and marked as under way, and the context is read. The message's
    /// entry id and the context. `StoreError::Fenced` when the turn carries a conversation
    /// claim this daemon no longer holds (nothing written).
    async fn begin_turn(&self, t: TurnStart) -> Result<(i64, TurnContext)>;
    /// Writes everything a turn leaves in one transaction: its entries (each capped at
    /// `MAX_ENTRY_CHARS`), soul-state updates, the user's new model (a new version), its
    /// whisper consumed (only while its claim holds), usage, the inbox row's reply fixed, the
    /// process state and transitions, the counters. A turn whose conversation an operator
    /// closed meanwhile (`since_id`) leaves the new one as the reset left it. The user's
    /// record when their model changed (to export it to git). `StoreError::Fenced` when
    /// `claim` is given and this daemon no longer holds it (nothing written).
    async fn commit_turn(&self, rec: TurnRecord) -> Result<Option<UserRecord>>;
    /// Undoes what `begin_turn` took for a turn that will not commit (the model did not
    /// answer): the interaction number is given back unless a later turn has taken one, and
    /// the whisper (id, claimant) is released for the next turn. The message stays in working
    /// memory. One write transaction.
    async fn release_turn(&self, interaction: u64, whisper: Option<(i64, String)>) -> Result<()>;
    /// Reads what a turn without a message (a proactive turn) needs, with the last `window`
    /// messages of the thread; takes no number and claims no whisper. A read.
    async fn load_turn(
        &self,
        thread: &str,
        user_id: &str,
        display_name: &str,
        window: u32,
    ) -> Result<TurnContext>;
    /// Writes the person's message to working memory (and remembers the person) before
    /// anything else happens, so a failed turn never loses it. A message with a `source` (an
    /// inbox row) is written once: recording it again returns the first entry's id. One write
    /// transaction.
    async fn record_user_message(
        &self,
        thread: &str,
        user_id: &str,
        display_name: &str,
        text: &str,
        source: Option<&str>,
    ) -> Result<i64>;
    /// Rewrites the text of message `id` (a `userMessage` entry; cut like any entry): its
    /// shared files' lines, once the soul said what each showed. Nothing when there is no such
    /// message. One write.
    async fn rewrite_message(&self, id: i64, text: &str) -> Result<()>;
    /// The thread's working memory, oldest first (all of it; for inspection and tests). A
    /// read.
    async fn thread_entries(&self, thread: &str) -> Result<Vec<Entry>>;
    /// The thread's last speaker (user id and display name, empty if none) and the time of
    /// its last entry (unix ms): what a proactive turn needs without reading the whole
    /// thread. A read.
    async fn last_speaker(&self, thread: &str) -> Result<(String, String, i64)>;
    /// The model calls of the thread's turns, oldest first. A read.
    async fn usage(&self, thread: &str) -> Result<Vec<UsageRecord>>;
    /// The provider session the thread's turns continue (a CLI provider's), if one was
    /// recorded. A read.
    async fn claude_session(&self, thread: &str) -> Result<Option<String>>;
}

/// People and every version of their user models; the git repository (`model_repo`) exports
/// what is not yet in it.
#[async_trait]
pub trait Users: Send + Sync {
    /// The person's record, if the store knows them. A read.
    async fn user(&self, user_id: &str) -> Result<Option<UserRecord>>;
    /// Every person the store knows, by slug. A read.
    async fn users(&self) -> Result<Vec<UserRecord>>;
    /// People whose current model is not yet committed to the git repository. A read.
    async fn unexported_models(&self) -> Result<Vec<UserRecord>>;
    /// The person's model is in git up to `version`: never taken back by an older version.
    /// One write.
    async fn mark_exported(&self, user_id: &str, version: i64) -> Result<()>;
    /// Versions of the person's model not yet in git: (version, model, change note), oldest
    /// first. A read.
    async fn pending_model_versions(&self, user_id: &str) -> Result<Vec<(i64, String, String)>>;
    /// The person's model history: (version, change note, unix ms), oldest first. A read.
    async fn model_history(&self, user_id: &str) -> Result<Vec<(i64, String, i64)>>;
    /// The text of the person's model at `version`, any version its history lists (exported to
    /// git or not: the history keeps every version's text, the same text git was given), so
    /// two of them can be compared; `None` for a version it does not list. A read.
    async fn model_version(&self, user_id: &str, version: i64) -> Result<Option<String>>;
}

/// The soul's own state and counters.
#[async_trait]
pub trait SoulRecord: Send + Sync {
    /// The soul's state: its stored keys over the defaults. A read.
    async fn soul_state(&self) -> Result<SoulState>;
    /// Turns the soul has processed. A read.
    async fn interactions(&self) -> Result<u64>;
}

/// Whispered intuitions, each claimed by one turn.
#[async_trait]
pub trait Whispers: Send + Sync {
    /// Queues a whispered intuition (and who whispered it) for the next turn that succeeds:
    /// its id. One write.
    async fn add_whisper(&self, whisper: &str, source: &str) -> Result<i64>;
}

/// Each thread's place in the process machine.
#[async_trait]
pub trait Processes: Send + Sync {
    /// The thread's process state, if it has one yet (`None` before its first turn). A read.
    async fn thread_process(&self, thread: &str) -> Result<Option<ThreadProcess>>;
    /// Where each of `threads` stands: (thread, its current process), in no order, a thread
    /// with no process state yet left out. One read for them all.
    async fn standing(&self, threads: &[String]) -> Result<Vec<(String, String)>>;
    /// The transitions the thread took, oldest first. A read.
    async fn transitions(&self, thread: &str) -> Result<Vec<TransitionRow>>;
    /// Threads the soul has taken part in whose last entry is older than `quiet_since` (unix
    /// ms) and is not itself from a proactive turn: (thread, last entry's unix ms). At most
    /// one proactive attempt, and so one unanswered follow-up, per quiet spell. A read.
    async fn quiet_threads(&self, quiet_since: i64) -> Result<Vec<(String, i64)>>;
}
