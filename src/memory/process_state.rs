//! Threads' places in the process machine, the transitions they took, and the quiet threads
//! a proactive follow-up may go to.

use rusqlite::{Connection, OptionalExtension};

use super::StoreError;
use crate::process::{ThreadProcess, TransitionRecord};

pub use super::records::process::TransitionRow;

pub(super) fn load(conn: &Connection, thread: &str) -> Result<Option<ThreadProcess>, StoreError> {
    let row = conn
        .prepare_cached(
            "SELECT current, previous, invocations, params FROM thread_process WHERE thread = ?1",
        )?
        .query_row([thread], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
            ))
        })
        .optional()?;
    Ok(
        row.map(|(current, previous, invocations, params)| ThreadProcess {
            current,
            previous,
            invocations: invocations.max(0) as u64,
            params: serde_json::from_str(&params).unwrap_or_default(),
        }),
    )
}

pub(super) fn save(
    conn: &Connection,
    thread: &str,
    interaction: u64,
    state: &ThreadProcess,
    transitions: &[TransitionRecord],
    now: i64,
) -> Result<(), StoreError> {
    let params = serde_json::to_string(&state.params).unwrap_or_else(|_| "{}".into());
    conn.prepare_cached(
        "INSERT INTO thread_process (thread, current, previous, invocations, params, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (thread) DO UPDATE SET current = excluded.current, previous = excluded.previous,
             invocations = excluded.invocations, params = excluded.params, updated_at = excluded.updated_at",
    )?
    .execute((thread, &state.current, &state.previous, state.invocations as i64, params, now))?;
    for t in transitions {
        conn.prepare_cached(
            "INSERT INTO process_transitions (thread, interaction, from_process, to_process, rule, execute_now, params, at, action)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?
        .execute(rusqlite::params![
            thread,
            interaction as i64,
            t.from,
            t.to,
            t.rule.map(|r| r as i64),
            t.execute_now,
            serde_json::Value::Object(t.params.clone()).to_string(),
            now,
            t.action
        ])?;
    }
    Ok(())
}
