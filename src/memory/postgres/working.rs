//! Working memory's rows on PostgreSQL: an entry written (capped as on SQLite), read back,
//! and a thread's recent window (see `memory::working`).

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use crate::memory::working::capped;
use crate::memory::{Entry, EntryType, NewEntry, StoreError};

type Result<T> = std::result::Result<T, StoreError>;

pub(super) const ENTRY: &str =
    "id, thread, entry_type, content, verb, user_id, metadata, anima_ms(created_at)";

pub(super) fn entry(r: &Row) -> Result<Entry> {
    let kind: &str = r.get(2);
    Ok(Entry {
        id: r.get(0),
        thread: r.get(1),
        entry_type: EntryType::parse(kind)
            .ok_or_else(|| StoreError::Task(format!("unknown entry_type {kind}")))?,
        content: r.get(3),
        verb: r.get(4),
        user_id: r.get(5),
        metadata: r.get(6),
        created_at: r.get(7),
    })
}

pub(super) async fn insert_entry(
    c: &impl GenericClient,
    thread: &str,
    e: &NewEntry,
    now: i64,
) -> Result<i64> {
    Ok(c.query_one(
        "INSERT INTO working_memory (thread, entry_type, content, verb, user_id, metadata, created_at)
         VALUES ($1, $2, $3, $4, $5, $6, anima_at($7)) RETURNING id",
        &[
            &thread,
            &e.entry_type.as_str(),
            &capped(&e.content).as_ref(),
            &e.verb,
            &e.user_id,
            &e.metadata,
            &now,
        ],
    )
    .await?
    .get(0))
}

/// The thread's recent entries: the window counts what was said (see `memory::working`).
pub(super) async fn recent(
    c: &impl GenericClient,
    thread: &str,
    messages: u32,
    since_id: i64,
) -> Result<Vec<Entry>> {
    if messages == 0 {
        return Ok(Vec::new());
    }
    let said: i64 = c
        .query_one(
            "SELECT count(*) FROM working_memory WHERE thread = $1 AND id > $2
             AND entry_type IN ('userMessage', 'externalDialog')",
            &[&thread, &since_id],
        )
        .await?
        .get(0);
    let step = (i64::from(messages) / 2).max(1);
    let skip = ((said - i64::from(messages)).max(0) / step) * step;
    c.query(
        &format!(
            "SELECT {ENTRY} FROM working_memory WHERE thread = $1 AND id > $3 AND id >= coalesce(
                 (SELECT id FROM working_memory WHERE thread = $1 AND id > $3
                  AND entry_type IN ('userMessage', 'externalDialog')
                  ORDER BY id LIMIT 1 OFFSET $2), 0)
             ORDER BY id"
        ),
        &[&thread, &skip, &since_id],
    )
    .await?
    .iter()
    .map(entry)
    .collect()
}
