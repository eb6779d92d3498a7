//! The router's faces: the durable inbox, the claims several daemons share, and the budgets
//! of outside services.

use std::time::Duration;

use async_trait::async_trait;

use super::Result;
use crate::memory::{DaemonRow, Inbound, InboxItem, Intake, Overheard};

/// Which daemon works which conversation, and which daemons run, when several share the store.
/// A conversation is worked by the daemon holding its claim: a lease on the store's clock,
/// renewed while the daemon works there, and an epoch that moves every time it changes hands.
/// A store only one process uses (SQLite) grants every claim to it, writes nothing, and knows
/// no other daemon.
#[async_trait]
pub trait Claims: Send + Sync {
    /// Takes `conversation` for this daemon for `lease`, or renews its own claim: the claim's
    /// epoch, or `None` while another daemon's lease on it runs. One write transaction.
    async fn claim(&self, conversation: &str, lease: Duration) -> Result<Option<i64>>;
    /// Whether this daemon still holds `conversation` at `epoch` with more than `margin` of
    /// its lease left (asked before every post). A read.
    async fn holds(&self, conversation: &str, epoch: i64, margin: Duration) -> Result<bool>;
    /// Lets `conversation` go at once (its worker has nothing more to do there): whether it has
    /// open rows after all, accepted by another daemon while this one held it. One write
    /// transaction.
    async fn release(&self, conversation: &str, epoch: i64) -> Result<bool>;
    /// Renews this daemon's heartbeat and its claims on `conversations`, for `lease`. One
    /// write transaction.
    async fn heartbeat(&self, conversations: &[String], lease: Duration) -> Result<()>;
    /// Takes or renews the lead of the soul's scheduled work for `lease`: whether this daemon
    /// leads now. One daemon leads at a time; the lead lapses with a daemon that stops
    /// renewing it. One write transaction.
    async fn lead(&self, lease: Duration) -> Result<bool>;
    /// Conversations with open rows that no running lease holds: a dead daemon's, or new. A
    /// read.
    async fn unheld_conversations(&self) -> Result<Vec<String>>;
    /// Ends a daemon known to be dead (its process is gone from this machine) at once: its row
    /// goes and its claims and lead lapse, so a daemon restarted after a crash does not wait
    /// a lease for its own conversations. One write transaction.
    async fn bury(&self, daemon: &str) -> Result<()>;
    /// Records this daemon as running (one at a time): how many others run. The first (none
    /// other runs) is the soul's waker: it holds the wakeup, renewed with its heartbeat, until
    /// `woke` (or until it dies and its lease ends). `listen` is its HTTP address as
    /// bound, kept for whoever follows its soul stream (`DaemonRow::listen`). One write
    /// transaction.
    async fn join(&self, host: &str, pid: u32, listen: &str, lease: Duration) -> Result<u64>;
    /// This daemon, the waker, is done waking the soul: the wakeup's hold goes. One write.
    async fn woke(&self) -> Result<()>;
    /// Whether another daemon is waking the soul now. A read.
    async fn waking(&self) -> Result<bool>;
    /// Records that this daemon stops (one at a time): how many others still run. Its claims
    /// stay until it lets them go, when its turns in flight are over. One write transaction.
    async fn leave(&self) -> Result<u64>;
    /// The daemons running now, with the conversations each holds. A read.
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
    /// One write transaction (all buckets or none).
    async fn take_budget(&self, buckets: &[(&str, u32)]) -> Result<bool>;
    /// Empties a bucket (the service said it had too many calls): it refills from now. One
    /// write.
    async fn drain_budget(&self, bucket: &str) -> Result<()>;
    /// Remembers that the service refused (`code`) in places of `kind`. One write.
    async fn note_refusal(&self, kind: &str, code: &str) -> Result<()>;
    /// The code of the first of `kinds` refused within `within`, if any. A read.
    async fn refusal(&self, kinds: &[&str], within: Duration) -> Result<Option<String>>;
}

/// The durable inbox: accepted messages, in order per conversation, until their reply is
/// delivered, and the conversations the soul has spoken in. A row moves pending → replying
/// (its reply fixed, in the turn's transaction) → done (every part delivered, each part's
/// progress recorded as it goes), or → failed when it could not be answered (it then got the
/// short apology), or → stopped when the person stopped its turn; a message heard but not
/// addressed to the soul is overheard until the soul speaks to it.
///
/// Each pick-up that begins work on a row (its turn, or the delivery of its fixed reply) is an
/// attempt, marked as under way by this store's instance (one per process). An attempt ends in
/// a failure (`note_failure`), or it was interrupted: the process that began it stopped first,
/// and the next instance to claim the row counts the interruption. A row is given up after
/// `MAX_FAILURES` failures or `MAX_INTERRUPTIONS` interruptions (`InboxItem::exhausted`).
///
/// Where a message came from and where its reply goes is an address: text only the surface
/// that wrote it reads. With several daemons on one store, the writes to a row (its reply,
/// stream, parts, stop, end) are fenced: `StoreError::Fenced` while another daemon holds the
/// row's conversation (`Claims`).
#[async_trait]
pub trait Inbox: Send + Sync {
    /// Writes an accepted message once however often it arrives (retries, twins from both
    /// doors meet at its origin: `Duplicate`), unless it needs a conversation the soul has
    /// spoken in and this is not one (`NotParticipating`). The conversation's note travels
    /// with it. One write transaction, so two twins racing cannot both be accepted.
    async fn accept_inbound(&self, m: &Inbound) -> Result<Intake>;
    /// Picks up the conversation's next unfinished row, in order (`seq`, then id); `None`
    /// when none waits. An attempt that another instance began and never ended was
    /// interrupted: counted here. A row whose reply is fixed counts the pick-up as an attempt
    /// (delivering it is the attempt), unless it is exhausted; a pending row is only read: its
    /// attempt counts in the transaction that begins its turn. A read, then (only when it
    /// counts something) one write transaction; the rule is `records::inbox::Pickup`.
    async fn claim_next(&self, conversation: &str) -> Result<Option<InboxItem>>;
    /// An attempt at row `id` that this instance began failed (an error or a panic, caught):
    /// counted, and the attempt is over. Nothing when no attempt of this instance is under
    /// way. The row's failures so far (0 for no such row). One write transaction.
    async fn note_failure(&self, id: i64) -> Result<i64>;
    /// Conversations with unfinished (pending or replying) rows, to resume after a restart.
    /// A read.
    async fn open_conversations(&self) -> Result<Vec<String>>;
    /// Rows accepted and not yet answered (pending or replying). A read.
    async fn inbox_depth(&self) -> Result<u64>;
    /// Row `id` as stored, if there is one. A read.
    async fn inbox_item(&self, id: i64) -> Result<Option<InboxItem>>;
    /// Fixes the reply of a pending row whose turn did not commit (the model failed and the
    /// reply is an apology): it becomes replying. A row no longer pending is left as it is.
    /// One write; fenced.
    async fn set_inbox_reply(&self, id: i64, reply: &str) -> Result<()>;
    /// Records that parts up to `parts_posted` are delivered, the last at `reference`; the
    /// first part's reference is kept, every part's is remembered, and the conversation
    /// becomes one the soul has spoken in. `last`: the row is done. Monotonic: a part marked
    /// late never takes the count back, and a reference is kept once. One write transaction;
    /// fenced.
    async fn mark_part_posted(
        &self,
        id: i64,
        parts_posted: i64,
        reference: &str,
        last: bool,
    ) -> Result<()>;
    /// The surface's references that the rows of row `id`'s conversation hold (`id`'s own
    /// included): the messages their replies streamed into and every part delivered (an
    /// apology too). A message the inbox has given to one reply is never taken for another.
    /// A read.
    async fn references_held(&self, id: i64) -> Result<Vec<String>>;
    /// Remembers the message a row's reply is being streamed into, as soon as it exists; the
    /// conversation becomes one the soul has spoken in. One write transaction; fenced.
    async fn set_stream_ref(&self, id: i64, reference: &str) -> Result<()>;
    /// Closes a row whose turn the person stopped; `said` is what they were told of the reply.
    /// A row whose reply was fixed as the stop came (the turn committed first) is closed too,
    /// with what was said, unless the stop cut nothing: part of the reply was delivered, or
    /// what was said is the whole reply; then it is delivered to the end like any other
    /// (`records::inbox::stop_closes`). Whether the row was closed (false for no such row).
    /// One write transaction; fenced.
    async fn mark_stopped(&self, id: i64, said: &str) -> Result<bool>;
    /// Row `id` is answered: every part delivered. One write; fenced.
    async fn mark_done(&self, id: i64) -> Result<()>;
    /// Gives a row up: it was answered with the apology (`apology`: the surface's reference of
    /// it, when delivered) or could not be, and `failure` says why, for the operator. Only an
    /// open row: one answered meanwhile stays answered. One write; fenced.
    async fn mark_failed(&self, id: i64, failure: &str, apology: Option<&str>) -> Result<()>;
    /// Where a conversation's replies go now: the address and note of its latest row; `None`
    /// for a conversation the inbox has no row of. A read.
    async fn conversation_address(
        &self,
        conversation: &str,
    ) -> Result<Option<(String, Option<String>)>>;
    /// The soul takes part in conversation `key` from its start, and the surface notes
    /// something about it (for Slack: an assistant thread, where the working sign is a
    /// status); a later note replaces it. One write.
    async fn note_conversation(&self, key: &str, note: &str) -> Result<()>;
    /// The surface's note on conversation `key`, if it made one. A read.
    async fn conversation_note(&self, key: &str) -> Result<Option<String>>;
    /// Records a message that does not address the soul, heard in `place`, closed (overheard):
    /// its retries are duplicates, and nothing answers it unless `reopen_overheard` makes it a
    /// message to answer. Accepted as `accept_inbound` accepts. One write transaction.
    async fn record_overheard(&self, m: &Inbound, place: &str) -> Result<Intake>;
    /// The soul will speak on an overheard row: it becomes pending, answered like any other.
    /// False when it was not overheard, or is already to be answered. One write.
    async fn reopen_overheard(&self, id: i64) -> Result<bool>;
    /// The last message overheard anywhere, if it came at or after `since_us` (unix
    /// microseconds) and the soul has not spoken to it: what the soul may come back to. An
    /// older overheard row is never brought up instead. A read.
    async fn last_overheard(&self, since_us: i64) -> Result<Option<Overheard>>;
}
