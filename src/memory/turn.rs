//! The SQL of a turn on SQLite: its begin (the message recorded, its number taken, a whisper
//! claimed, the context read), the context alone, and its commit (all of the turn or none of
//! it), as free functions over an open transaction. `sqlite::turns` implements the `Turns`
//! face with them, one write transaction (or one read) each.

use rusqlite::{Connection, OptionalExtension};

use super::process_state;
use super::{now_ms, soul_state, users, working, NewEntry, StoreError, UserRecord};

pub use super::records::turn::{TurnContext, TurnRecord, TurnStart, UsageRecord, Whisper};

/// Starts a message turn in its write transaction: the message is recorded (before anything
/// can fail), the interaction number is taken (`UPDATE … RETURNING`, so turns running at once
/// get distinct numbers), the inbox row's attempt is counted as this opening's (`instance`),
/// the oldest free whisper is claimed by this turn alone, and the context is read. The
/// message's entry id and the context.
pub(super) fn begin(
    tx: &Connection,
    instance: &str,
    t: &TurnStart,
) -> Result<(i64, TurnContext), StoreError> {
    let id = record_message(
        tx,
        &t.thread,
        &t.user_id,
        &t.display_name,
        &t.text,
        t.source.as_deref(),
    )?;
    let interaction: i64 = tx
        .prepare_cached(
            "UPDATE counters SET value = value + 1 WHERE name = 'interactions' RETURNING value",
        )?
        .query_row([], |r| r.get(0))?;
    if let Some(row) = t.inbox {
        // An attempt under way, this instance's until it fails or ends with the row.
        tx.prepare_cached(
            "UPDATE inbox SET attempts = attempts + 1, in_flight = ?2 WHERE id = ?1",
        )?
        .execute((row, instance))?;
    }
    let now = now_ms();
    let whisper = tx
        .prepare_cached(
            "UPDATE whispers SET claimed_by = ?1, claimed_until = ?2
             WHERE id = (SELECT id FROM whispers
                         WHERE consumed_at IS NULL AND (claimed_until IS NULL OR claimed_until < ?3)
                         ORDER BY id LIMIT 1)
             RETURNING id, whisper, source",
        )?
        .query_row((&t.claimant, t.claim_until_ms, now), |r| {
            Ok(Whisper {
                id: r.get(0)?,
                text: r.get(1)?,
                source: r.get(2)?,
            })
        })
        .optional()?;
    let mut ctx = context(tx, &t.thread, &t.user_id, &t.display_name, t.window)?;
    ctx.interaction = interaction as u64;
    ctx.whisper = whisper;
    Ok((id, ctx))
}

/// Writes a turn's outcome in its write transaction (all of the turn or none of it). The
/// user's record when their model changed, so the caller can export it to the git repository.
pub(super) fn commit(tx: &Connection, rec: &TurnRecord) -> Result<Option<UserRecord>, StoreError> {
    let now = now_ms();
    for e in &rec.entries {
        working::insert(tx, &rec.thread, e, now)?;
    }
    let current: Option<i64> = tx
        .prepare_cached("SELECT since_id FROM threads WHERE thread = ?1")?
        .query_row([&rec.thread], |r| r.get(0))
        .optional()?;
    let reset_meanwhile =
        matches!((rec.since_id, current), (Some(began), Some(now_at)) if began != now_at);
    if reset_meanwhile {
        // An operator closed the conversation while this turn ran: its exchange belongs to
        // the closed one, and the new one starts as the reset left it (no turns, no process,
        // no provider session).
        tx.prepare_cached(
            "UPDATE threads SET since_id = (SELECT coalesce(max(id), 0) FROM working_memory WHERE thread = ?1),
                 updated_at = ?2 WHERE thread = ?1",
        )?
        .execute((&rec.thread, now))?;
    }
    for (k, v) in &rec.soul_updates {
        soul_state::set(tx, k, v, now)?;
    }
    // The interaction number was taken when the turn began. A proactive turn answers no user message: it counts no thread or user turn.
    let counted = i64::from(!rec.proactive);
    tx.prepare_cached(
        "INSERT INTO threads (thread, turns, claude_session, updated_at) VALUES (?1, ?4, ?2, ?3)
             ON CONFLICT (thread) DO UPDATE SET turns = turns + ?4,
                 claude_session = coalesce(excluded.claude_session, claude_session),
                 updated_at = excluded.updated_at",
    )?
    .execute((
        &rec.thread,
        rec.claude_session.as_ref().filter(|_| !reset_meanwhile),
        now,
        counted * i64::from(!reset_meanwhile),
    ))?;
    if let Some(state) = rec.process.as_ref().filter(|_| !reset_meanwhile) {
        process_state::save(
            tx,
            &rec.thread,
            rec.interaction,
            state,
            &rec.transitions,
            now,
        )?;
    }
    if !rec.proactive {
        tx.prepare_cached(
            "UPDATE users SET turns = turns + 1,
                     injected_at_turn = CASE WHEN ?2 THEN turns + 1 ELSE injected_at_turn END,
                     updated_at = ?3
                 WHERE user_id = ?1",
        )?
        .execute((&rec.user_id, rec.injected_user_model, now))?;
    }
    let changed = match &rec.user_model {
        Some((model, note)) => Some(save_model(tx, &rec.user_id, model, note, now)?),
        None => None,
    };
    if let Some(id) = rec.whisper_id {
        tx.prepare_cached(
            "UPDATE whispers SET consumed_at = ?2, consumed_by = ?3, claimed_until = NULL
                 WHERE id = ?1 AND consumed_at IS NULL AND (?4 IS NULL OR claimed_by = ?4)",
        )?
        .execute((id, now, &rec.thread, &rec.whisper_claimant))?;
    }
    for u in &rec.usage {
        tx.prepare_cached(
                "INSERT INTO turn_usage (thread, interaction, provider, model, input_tokens, output_tokens,
                     cache_creation_tokens, cache_read_tokens, latency_ms, stop_reason, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?
            .execute(rusqlite::params![
                rec.thread,
                rec.interaction as i64,
                u.provider,
                u.model,
                u.input_tokens as i64,
                u.output_tokens as i64,
                u.cache_creation_tokens as i64,
                u.cache_read_tokens as i64,
                u.latency_ms as i64,
                u.stop_reason,
                now
            ])?;
    }
    if let Some((id, reply)) = &rec.inbox {
        tx.prepare_cached(
            "UPDATE inbox SET status = 'replying', reply = ?2 WHERE id = ?1 AND status = 'pending'",
        )?
        .execute((id, reply))?;
    }
    let user = match changed {
        Some(()) => users::get(tx, &rec.user_id)?,
        None => None,
    };
    Ok(user)
}

/// Writes the user's message to working memory (and remembers the user) before anything
/// else happens, so a failed turn never loses it. A message with a `source` (an inbox row) is
/// written once: recording it again returns the first entry's id.
pub(super) fn record_message(
    tx: &Connection,
    thread: &str,
    user_id: &str,
    display_name: &str,
    text: &str,
    source: Option<&str>,
) -> Result<i64, StoreError> {
    let now = now_ms();
    upsert_user(tx, user_id, display_name, now)?;
    if let Some(src) = source {
        let existing: Option<i64> = tx
            .prepare_cached("SELECT id FROM working_memory WHERE source = ?1")?
            .query_row([src], |r| r.get(0))
            .optional()?;
        if let Some(id) = existing {
            return Ok(id);
        }
    }
    let entry = NewEntry::new(super::EntryType::UserMessage, text)
        .user(user_id)
        .metadata(serde_json::json!({ "name": display_name }));
    let id = working::insert(tx, thread, &entry, now)?;
    if let Some(src) = source {
        tx.prepare_cached("UPDATE working_memory SET source = ?2 WHERE id = ?1")?
            .execute((id, src))?;
    }
    Ok(id)
}

/// The context a turn reads; `interaction` is the number the next message would take. A turn
/// without a message (a proactive turn) reads only this: it takes no number and claims no
/// whisper.
pub(super) fn context(
    tx: &Connection,
    thread: &str,
    user_id: &str,
    display_name: &str,
    window: u32,
) -> Result<TurnContext, StoreError> {
    let interactions: i64 = tx
        .prepare_cached("SELECT value FROM counters WHERE name = 'interactions'")?
        .query_row([], |r| r.get(0))?;
    let (thread_turns, claude_session, since_id) = tx
        .prepare_cached("SELECT turns, claude_session, since_id FROM threads WHERE thread = ?1")?
        .query_row([thread], |r| {
            Ok((r.get::<_, i64>(0)?, r.get(1)?, r.get::<_, i64>(2)?))
        })
        .optional()?
        .unwrap_or((0, None, 0));
    Ok(TurnContext {
        interaction: interactions as u64 + 1,
        thread_turns,
        recent: working::recent(tx, thread, window, since_id)?,
        soul: soul_state::load(tx)?,
        user: users::get(tx, user_id)?.unwrap_or_else(|| UserRecord::new(user_id, display_name)),
        whisper: None,
        claude_session,
        process: process_state::load(tx, thread)?,
        since_id,
        cognitive_state: super::states::current(tx)?.state,
        summary: super::dream::summary(tx, thread, since_id)?,
    })
}

fn upsert_user(
    conn: &Connection,
    user_id: &str,
    display_name: &str,
    now: i64,
) -> Result<(), StoreError> {
    // The slug is fixed when the user is first seen, so a renamed person keeps their file.
    conn.prepare_cached(
        "INSERT INTO users (user_id, display_name, slug, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (user_id) DO UPDATE SET display_name = excluded.display_name",
    )?
    .execute((
        user_id,
        display_name,
        unique_slug(conn, display_name, user_id)?,
        now,
    ))?;
    Ok(())
}

/// The user's slug, with the user id appended when another person already has it.
fn unique_slug(conn: &Connection, display_name: &str, user_id: &str) -> Result<String, StoreError> {
    let base = users::slug(display_name, user_id);
    let taken: Option<String> = conn
        .prepare_cached("SELECT user_id FROM users WHERE slug = ?1")?
        .query_row([&base], |r| r.get(0))
        .optional()?;
    Ok(match taken {
        Some(owner) if owner != user_id => format!("{base}-{}", users::slug("", user_id)),
        _ => base,
    })
}

pub(super) fn save_model(
    conn: &Connection,
    user_id: &str,
    model: &str,
    note: &str,
    now: i64,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE users SET model = ?2, model_version = model_version + 1, updated_at = ?3 WHERE user_id = ?1",
    )?
    .execute((user_id, model, now))?;
    conn.prepare_cached(
        "INSERT INTO user_model_history (user_id, version, model, change_note, created_at)
         SELECT user_id, model_version, model, ?2, ?3 FROM users WHERE user_id = ?1",
    )?
    .execute((user_id, note, now))?;
    Ok(())
}

#[cfg(test)]
#[path = "turn_tests.rs"]
mod tests;
