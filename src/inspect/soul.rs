//! The soul (`/inspect/soul`): its cognitive state now and its moves over time (newest
//! first), its state (the soul-state keys), the last dream's report, and the solitude's
//! journal. Read from the store; every text escaped.

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;

use super::api::store_error;
use super::escape::escape;
use super::pages::{frame, time};
use super::{Inspector, MAX_LIMIT};

pub async fn page(State(s): State<Arc<Inspector>>) -> Response {
    let store = &s.store;
    let (now, moves, state, dream, journal) = match tokio::try_join!(
        store.cognitive_state(),
        store.state_moves(MAX_LIMIT),
        store.soul_state(),
        store.last_dream(),
        store.journal(20),
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
                "<p>{} ({}; {})</p><pre class=\"text\">{}</pre>",
                time(d.started_ms),
                escape(&d.cause),
                if d.complete {
                    "complete"
                } else {
                    "not complete"
                },
                escape(super::escape::cut(&report, super::turn::TEXT_CHARS).0)
            );
        }
        None => body.push_str("<p class=\"empty\">No dream yet.</p>"),
    }
    body.push_str("<h3>The solitude's journal</h3><ol class=\"journal\">");
    for j in &journal {
        let _ = write!(
            body,
            "<li>{}<pre class=\"text\">{}</pre></li>",
            time(j.at_ms),
            escape(super::escape::cut(&j.entry, super::turn::TEXT_CHARS).0)
        );
    }
    body.push_str("</ol></section></div>");
    frame("The soul", &body)
}
