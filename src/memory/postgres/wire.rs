//! What a turn's server-side functions take and give (migrations/postgres/0002 and 0003): a
//! `TurnRecord` written out as JSON for `anima_commit_turn`, and a `TurnContext` or a user
//! read back from the rows of `anima_turn_context` and `anima_begin_turn` (a JSON head, then
//! one row per entry) and from `anima_user`.
//!
//! Owns only the mapping, and both sides of it live here and in that one SQL file: a key
//! renamed in one must be renamed in the other (the store's conformance tests cover each).

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{json, Value};
use tokio_postgres::types::Json;
use tokio_postgres::Row;

use crate::memory::working::capped;
use crate::memory::{Entry, SoulState, StoreError, TurnContext, TurnRecord, UserRecord, Whisper};
use crate::process::ThreadProcess;

type Result<T> = std::result::Result<T, StoreError>;

/// `rec` as `anima_commit_claimed` reads it, for `daemon` (this store's instance). Entries are
/// capped here, as every entry written.
pub(super) fn turn_record(rec: &TurnRecord, daemon: &str) -> Value {
    json!({
        "claim": rec.claim,
        "daemon": daemon,
        "thread": rec.thread,
        "user_id": rec.user_id,
        "interaction": rec.interaction as i64,
        "entries": rec.entries.iter().map(|e| json!({
            "entry_type": e.entry_type.as_str(),
            "content": capped(&e.content),
            "verb": e.verb,
            "user_id": e.user_id,
            "metadata": e.metadata,
        })).collect::<Vec<_>>(),
        "soul_updates": rec.soul_updates,
        "user_model": rec.user_model.as_ref().map(|(model, note)| json!({
            "model": model,
            "note": note,
        })),
        "injected_user_model": rec.injected_user_model,
        "whisper_id": rec.whisper_id,
        "whisper_claimant": rec.whisper_claimant,
        "claude_session": rec.claude_session,
        "usage": rec.usage.iter().map(|u| json!({
            "provider": u.provider,
            "model": u.model,
            "input_tokens": u.input_tokens as i64,
            "output_tokens": u.output_tokens as i64,
            "cache_creation_tokens": u.cache_creation_tokens as i64,
            "cache_read_tokens": u.cache_read_tokens as i64,
            "latency_ms": u.latency_ms as i64,
            "stop_reason": u.stop_reason,
        })).collect::<Vec<_>>(),
        "inbox": rec.inbox.as_ref().map(|(id, reply)| json!({ "id": id, "reply": reply })),
        "process": rec.process.as_ref().map(|p| json!({
            "current": p.current,
            "previous": p.previous,
            "invocations": p.invocations as i64,
            "params": p.params,
        })),
        "transitions": rec.transitions.iter().map(|t| json!({
            "from": t.from,
            "to": t.to,
            "rule": t.rule.map(|r| r as i32),
            "action": t.action,
            "execute_now": t.execute_now,
            "params": t.params,
        })).collect::<Vec<_>>(),
        "proactive": rec.proactive,
        "since_id": rec.since_id,
    })
}

/// The `head` of a context's first row: everything but the recent entries, which follow it as
/// rows of their own.
#[derive(Deserialize)]
struct ContextWire {
    interaction: i64,
    thread_turns: i64,
    claude_session: Option<String>,
    since_id: i64,
    cognitive_state: String,
    summary: Option<String>,
    soul: BTreeMap<String, String>,
    user: Option<UserWire>,
    process: Option<ProcessWire>,
}

/// The `head` of `anima_begin_turn`'s last row: the message's entry, the turn's number and its
/// whisper.
#[derive(Deserialize)]
struct BeginWire {
    id: i64,
    interaction: i64,
    whisper: Option<WhisperWire>,
}

#[derive(Deserialize)]
struct UserWire {
    user_id: String,
    display_name: String,
    slug: String,
    turns: i64,
    injected_at_turn: Option<i64>,
    model: Option<String>,
    model_version: i64,
    exported_version: i64,
}

#[derive(Deserialize)]
struct ProcessWire {
    current: String,
    previous: Option<String>,
    invocations: i64,
    params: BTreeMap<String, Value>,
}

#[derive(Deserialize)]
struct WhisperWire {
    id: i64,
    text: String,
    source: String,
}

/// The rows of `anima_begin_turn`: the turn's context, and the message's entry id with the
/// number the turn took and the whisper it claimed.
pub(super) fn begun(
    rows: &[Row],
    thread: &str,
    user_id: &str,
    display_name: &str,
) -> Result<(i64, TurnContext)> {
    let mut ctx = turn_context(rows, thread, user_id, display_name)?;
    let b: BeginWire = head(rows, "begun", "turn's beginning")?;
    ctx.interaction = b.interaction.max(0) as u64;
    ctx.whisper = b.whisper.map(|w| Whisper {
        id: w.id,
        text: w.text,
        source: w.source,
    });
    Ok((b.id, ctx))
}

/// A turn's context from the rows of `anima_turn_context` (or `anima_begin_turn`): its head,
/// then the window's entries oldest first. Someone never seen is `display_name`'s new record.
pub(super) fn turn_context(
    rows: &[Row],
    thread: &str,
    user_id: &str,
    display_name: &str,
) -> Result<TurnContext> {
    let w: ContextWire = head(rows, "context", "turn context")?;
    let mut soul = SoulState::default();
    for (k, v) in &w.soul {
        soul.set(k, v);
    }
    let recent = rows
        .iter()
        .filter(|r| r.get::<_, &str>(0) == "entry")
        .map(|r| entry(r, thread))
        .collect::<Result<_>>()?;
    Ok(TurnContext {
        interaction: w.interaction.max(0) as u64,
        thread_turns: w.thread_turns,
        recent,
        soul,
        user: w
            .user
            .map(user)
            .unwrap_or_else(|| UserRecord::new(user_id, display_name)),
        whisper: None,
        claude_session: w.claude_session,
        process: w.process.map(|p| ThreadProcess {
            current: p.current,
            previous: p.previous,
            invocations: p.invocations.max(0) as u64,
            params: p.params,
        }),
        since_id: w.since_id,
        cognitive_state: w.cognitive_state,
        summary: w.summary,
    })
}

/// A user's row from `anima_user`; `None` for SQL NULL or JSON null.
pub(super) fn user_record(v: Option<Value>) -> Result<Option<UserRecord>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(v) => Ok(Some(user(
            serde_json::from_value(v).map_err(|e| unexpected("user", e))?,
        ))),
    }
}

/// The `head` of the row whose part is `part`, parsed straight from the server's JSON.
fn head<T: for<'de> Deserialize<'de>>(rows: &[Row], part: &str, what: &str) -> Result<T> {
    let row = rows
        .iter()
        .find(|r| r.get::<_, &str>(0) == part)
        .ok_or_else(|| unexpected(what, format!("no {part} row")))?;
    row.try_get::<_, Json<T>>(1)
        .map(|Json(t)| t)
        .map_err(|e| unexpected(what, e))
}

fn unexpected(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Task(format!("the database's {what} is not as expected: {e}"))
}

/// An entry row: part, head, id, type, content, verb, user, metadata, created (unix ms).
fn entry(r: &Row, thread: &str) -> Result<Entry> {
    let kind: &str = r.get(3);
    Ok(Entry {
        id: r.get(2),
        entry_type: kind.parse()?,
        thread: thread.to_string(),
        content: r.get(4),
        verb: r.get(5),
        user_id: r.get(6),
        metadata: r.get(7),
        created_at: r.get(8),
    })
}

fn user(u: UserWire) -> UserRecord {
    UserRecord {
        user_id: u.user_id,
        display_name: u.display_name,
        slug: u.slug,
        turns: u.turns,
        injected_at_turn: u.injected_at_turn,
        model: u.model,
        model_version: u.model_version,
        exported_version: u.exported_version,
    }
}
