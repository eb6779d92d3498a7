//! Working memory's rows on PostgreSQL, read back (see `memory::working`). A turn's entries
//! are written, capped as on SQLite, and its recent window read, by the turn's functions
//! (`turns`, `wire`).

use tokio_postgres::Row;

use crate::memory::{Entry, StoreError};

type Result<T> = std::result::Result<T, StoreError>;

pub(super) const ENTRY: &str =
    "id, thread, entry_type, content, verb, user_id, metadata, anima_ms(created_at)";

pub(super) fn entry(r: &Row) -> Result<Entry> {
    let kind: &str = r.get(2);
    Ok(Entry {
        id: r.get(0),
        thread: r.get(1),
        entry_type: kind.parse()?,
        content: r.get(3),
        verb: r.get(4),
        user_id: r.get(5),
        metadata: r.get(6),
        created_at: r.get(7),
    })
}
