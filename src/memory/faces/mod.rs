//! The store's faces: one async trait per concern, each method an operation a caller means
//! (accept a message, claim a conversation's next row, begin a turn, commit it, apply a psyche
//! event, consolidate a batch). `Store` is all of them; engine, router, daemon, slack and cli
//! hold an `Arc<dyn Store>` and know nothing of the backend behind it.
//!
//! Owns the shape of the boundary and every operation's contract: each method's docs say what
//! it does, in how many transactions, and which errors it names. A backend implements the
//! contract and says at most how. No SQL, connection or transaction type appears here, and a
//! backend keeps its own economics (SQLite's page tricks, PostgreSQL's locks) inside its
//! implementation. An operation that is one transaction is one method, on every backend.
//!
//! Errors: every method fails with a `StoreError`. Unless its docs name another, that is the
//! backend's own: `Sql` (SQLite), `Postgres` or `Unreachable` (PostgreSQL), `Task` (the work
//! could not run), or `Unknown` (a stored value this anima does not know). A write that fails
//! leaves nothing of itself and shows in `Health::write_health`.

mod dossiers;
mod dreams;
mod inbox;
mod operator;
mod states;
mod traces;
mod turns;

pub use dossiers::{DossierRecord, DossierVersion, DossierWrite, Dossiers};
pub use dreams::{Dreams, Psychology};
pub use inbox::{Budgets, Claims, Inbox};
pub use operator::{Admin, Feedback, Forgetting, Health, SamePlace};
pub use states::{move_state, Decide, Moved, Quiet, States};
pub use traces::Traces;
pub use turns::{Processes, SoulRecord, Turns, Users, Whispers};

use super::StoreError;

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
    + Traces
    + Dossiers
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
        + Traces
        + Dossiers
{
}
