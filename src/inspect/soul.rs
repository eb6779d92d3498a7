//! The soul (`/inspect/soul`): its cognitive state now and its moves over time (newest
//! first), its state (the soul-state keys), the last dream's report, and the solitude's
//! journal. Read from the store; every text escaped, a long one cut with a link to the whole
//! (`/inspect/soul/text/PART`: `dream`, `journal-N`, plain text).

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use super::api::store_error;
use super::escape::{cut, escape};
use super::pages::{frame, time};
use super::turn::TEXT_CHARS;
use super::{Inspector, MAX_LIMIT};

/// The journal entries the page shows.
const JOURNAL: usize = 20;

/// `text` escaped, cut at `TEXT_CHARS` with a link to the whole (`/inspect/soul/text/PART`).
fn shown(part: &str, text: &str) -> String {
    let (head, more) = cut(text, TEXT_CHARS);
    let mut out = format!("<pre class=\"text\">{}</pre>", escape(head));
    if more {
        let _ = write!(
            out,
            "<p class=\"cut\">Cut at {TEXT_CHARS} of {} characters: \
             <a href=\"/inspect/soul/text/{part}\">the whole text</a></p>",
            text.chars().count()
        );
    }
    out
}

pub async fn page(State(s): State<Arc<Inspector>>) -> Response {
    let store = &s.store;
    let (now, moves, state, dream, journal) = match tokio::try_join!(
        store.cognitive_state(),
        store.state_moves(MAX_LIMIT),
        store.soul_state(),
        store.last_dream(),
        store.journal(JOURNAL),
    ) {
        Ok(all) => all,
        Err(e) => return store_error(e),
    };
    let mut body = format!(
        "<h2>The soul</h2><p>In <span class=\"state\">{}</span> since {}{} ({}).</p>\
         <div class=\"columns\"><section><h3>Cognitive states</h3><ol class=\"moves\">",
        escape(&now.state),
        time(now.since_ms),
        if now.degraded { ", degraded" } else { "" },
        escape(&now.cause)
    );
    for m in &moves {
        let _ = write!(
            body,
            "<li>{} <span class=\"state\">{}</span> → <span class=\"state\">{}</span> {}</li>",
            time(m.at_ms),
            escape(&m.from),
            escape(&m.to),
            escape(&m.cause)
        );
    }
    body.push_str("</ol></section><section><h3>Soul state</h3><dl class=\"facts\">");
    for (key, value) in state.all() {
        let _ = write!(body, "<dt>{}</dt><dd>{}</dd>", escape(key), escape(value));
    }
    body.push_str("</dl><h3>The last dream</h3>");
    match dream {
        Some(d) => {
            let report = serde_json::to_string_pretty(&d.report).unwrap_or_default();
            let _ = write!(
                body,
                "<p>{} ({}; {})</p>{}",
                time(d.started_ms),
                escape(&d.cause),
                if d.complete {
                    "complete"
                } else {
                    "not complete"
                },
                shown("dream", &report)
            );
        }
        None => body.push_str("<p class=\"empty\">No dream yet.</p>"),
    }
    body.push_str("<h3>The solitude's journal</h3><ol class=\"journal\">");
    for (n, j) in journal.iter().enumerate() {
        let _ = write!(
            body,
            "<li>{}{}</li>",
            time(j.at_ms),
            shown(&format!("journal-{n}"), &j.entry)
        );
    }
    body.push_str("</ol></section></div>");
    frame("The soul", &body)
}

/// `/inspect/soul/text/PART`: the last dream's report (`dream`) or a journal entry the page
/// shows (`journal-N`, newest first), whole, as plain text.
pub async fn whole_text(State(s): State<Arc<Inspector>>, Path(part): Path<String>) -> Response {
    let text = match part.as_str() {
        "dream" => s
            .store
            .last_dream()
            .await
            .map(|d| d.map(|d| serde_json::to_string_pretty(&d.report).unwrap_or_default())),
        _ => match part
            .strip_prefix("journal-")
            .and_then(|n| n.parse::<usize>().ok())
        {
            Some(n) if n < JOURNAL => s
                .store
                .journal(JOURNAL)
                .await
                .map(|j| j.into_iter().nth(n).map(|e| e.entry)),
            _ => Ok(None),
        },
    };
    match text {
        Ok(Some(text)) => {
            ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
        }
        Ok(None) => (StatusCode::NOT_FOUND, "no such part").into_response(),
        Err(e) => store_error(e),
    }
}
