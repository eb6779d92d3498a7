//! The JSON API: `GET /api/inspect/turns` (a conversation's turns, or everyone's, newest
//! first, paged by `before`) and `GET /api/inspect/turns/TRACE` (one turn, whole). The cookie
//! or a bearer header; else 401.

use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};

use super::{turn, Inspector, MAX_LIMIT};
use crate::memory::{TraceRow, TraceSummary};
use crate::window::TraceBody;

/// A list's query: `thread`, `limit` (at most `MAX_LIMIT`), `before` (unix ms, exclusive);
/// for the conversations, `after_at` and `after_thread` (the last one listed).
#[derive(Debug, Default, Deserialize)]
pub struct ListQuery {
    pub thread: Option<String>,
    pub limit: Option<usize>,
    pub before: Option<i64>,
    pub after_at: Option<i64>,
    pub after_thread: Option<String>,
}

impl ListQuery {
    pub fn limit(&self) -> usize {
        self.limit.unwrap_or(50).clamp(1, MAX_LIMIT)
    }

    pub fn thread(&self) -> Option<&str> {
        self.thread.as_deref().filter(|t| !t.is_empty())
    }

    /// The conversation the list of conversations goes on after, if any.
    pub fn after(&self) -> Option<(i64, String)> {
        Some((
            self.after_at?,
            self.after_thread.clone().unwrap_or_default(),
        ))
    }
}

/// A page of summaries, and the cursor of the next (older) one when this one was full.
pub async fn page_of(
    s: &Inspector,
    q: &ListQuery,
) -> Result<(Vec<TraceSummary>, Option<i64>), Response> {
    let limit = q.limit();
    let turns = s
        .store
        .traces(q.thread(), q.before, limit)
        .await
        .map_err(store_error)?;
    let next = (turns.len() == limit)
        .then(|| turns.last().map(|t| t.at))
        .flatten();
    Ok((turns, next))
}

pub fn store_error(e: crate::memory::StoreError) -> Response {
    (StatusCode::INTERNAL_SERVER_ERROR, format!("the store: {e}")).into_response()
}

pub async fn turns(State(s): State<Arc<Inspector>>, Query(q): Query<ListQuery>) -> Response {
    let (turns, next) = match page_of(&s, &q).await {
        Ok(page) => page,
        Err(r) => return r,
    };
    let turns: Vec<Value> = turns
        .iter()
        .map(|t| {
            json!({
                "trace": t.trace, "thread": t.thread, "person": t.person, "process": t.process,
                "at": t.at, "reply": t.reply, "kind": t.kind,
            })
        })
        .collect();
    Json(json!({ "turns": turns, "before": next })).into_response()
}

pub async fn turn(State(s): State<Arc<Inspector>>, Path(id): Path<String>) -> Response {
    match turn::load(&s, &id).await {
        Ok(Some((row, body))) => {
            let mut json = turn_json(&row, &body);
            json["posted"] = match turn::posted(&s, &row).await {
                Some((text, link)) => json!({"text": text, "link": link}),
                None => Value::Null,
            };
            Json(json).into_response()
        }
        Ok(None) => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": "no trace kept"})),
        )
            .into_response(),
        Err(r) => r,
    }
}

/// A turn as the API gives it: its columns, its first call's sections, prompt and raw answer
/// at the top, every call whole under `calls`.
pub fn turn_json(row: &TraceRow, body: &TraceBody) -> Value {
    let first = body.calls.first();
    json!({
        "trace": row.trace,
        "kind": row.kind,
        "thread": row.thread,
        "person": row.person,
        "process": row.process,
        "at": row.at,
        "stimulus": body.stimulus,
        "processes": body.processes,
        "sections": first.map(|c| c.sections.clone()).unwrap_or_default(),
        "prompt": first.map(|c| c.prompt.as_str()).unwrap_or(""),
        "raw": first.map(|c| c.raw.as_str()).unwrap_or(""),
        "calls": body.calls,
        "cognition": body.cognition,
        "decisions": body.decisions,
        "memory": body.memory,
        "errors": body.errors,
        "total_ms": body.total_ms,
        "reply": row.reply,
    })
}
