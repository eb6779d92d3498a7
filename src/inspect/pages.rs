//! The pages' frame (head, navigation, the embedded JS and CSS) and the timeline pages: the
//! conversations with the latest turns (`/inspect/`, which also takes the login link) and one
//! conversation's turns (`/inspect/thread`), newest first, paged by `before`.

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};

use super::api::{page_of, store_error, ListQuery};
use super::escape::{cut, escape, query_value};
use super::{Inspector, MAX_LIMIT};
use crate::memory::TraceSummary;

const JS: &str = include_str!("static/inspector.js");
const CSS: &str = include_str!("static/inspector.css");

/// The characters of a reply a timeline shows.
const TIMELINE_REPLY_CHARS: usize = 160;
/// The characters of a person's name a timeline shows.
const NAME_CHARS: usize = 80;

/// A whole page: `title` and `body` (already escaped HTML), with the navigation.
pub fn frame(title: &str, body: &str) -> Response {
    let mut html = String::with_capacity(body.len() + 1024);
    let _ = write!(
        html,
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} · anima inspector</title>\
         <link rel=\"stylesheet\" href=\"/inspect/static/inspector.css\">\
         <script src=\"/inspect/static/inspector.js\" defer></script></head><body>\
         <header><strong>anima</strong> <nav>\
         <a href=\"/inspect/\">Conversations</a> \
         <a href=\"/inspect/process\">Process</a> \
         <a href=\"/inspect/soul\">Soul</a> \
         <a href=\"/inspect/inner\">Inner life</a> \
         <a href=\"/inspect/people\">People</a> \
         <a href=\"/inspect/chat\">Chat</a></nav></header>\
         <main>{body}</main></body></html>",
        escape(title)
    );
    Html(html).into_response()
}

/// A unix-ms time as `2026-11-28 15:04:05 UTC`.
pub fn time(ms: i64) -> String {
    let Ok(secs) = u64::try_from(ms.div_euclid(1000)) else {
        return "before 1970".into();
    };
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(secs);
    humantime::format_rfc3339_seconds(at)
        .to_string()
        .replace('T', " ")
        .replace('Z', " UTC")
}

/// The timeline of `turns`, newest first, with the link to the older ones.
pub fn timeline(turns: &[TraceSummary], thread: Option<&str>, next: Option<i64>) -> String {
    let mut out = format!(
        "<ol id=\"timeline\" class=\"timeline\" data-thread=\"{}\">",
        escape(thread.unwrap_or(""))
    );
    for t in turns {
        let reply = t.reply.as_deref().unwrap_or("");
        let (head, more) = cut(reply, TIMELINE_REPLY_CHARS);
        let _ = write!(
            out,
            "<li class=\"turn\" data-trace=\"{trace}\"><a href=\"/inspect/turn/{trace}\">{at}</a> \
             <span class=\"kind\">{kind}</span> <span class=\"person\">{person}</span> \
             <a class=\"thread\" href=\"/inspect/thread?thread={q}\">{thread}</a> \
             <span class=\"process\">{process}</span> <span class=\"reply\">{reply}{ell}</span></li>",
            trace = escape(&query_value(&t.trace)),
            at = time(t.at),
            kind = escape(&t.kind),
            person = escape(cut(t.person.as_deref().unwrap_or(""), NAME_CHARS).0),
            q = escape(&query_value(&t.thread)),
            thread = escape(&t.thread),
            process = escape(&t.process),
            reply = escape(head),
            ell = if more { "…" } else { "" },
        );
    }
    out.push_str("</ol>");
    if turns.is_empty() {
        out.push_str("<p class=\"empty\">No turns kept yet.</p>");
    }
    if let Some(before) = next {
        let thread = thread.map(|t| format!("thread={}&amp;", escape(&query_value(t))));
        let _ = write!(
            out,
            "<p><a class=\"older\" href=\"?{}before={before}\">Older turns</a></p>",
            thread.unwrap_or_default()
        );
    }
    out
}

/// `/inspect/`: the login link's target; the conversations and the latest turns.
pub async fn home(State(s): State<Arc<Inspector>>, Query(q): Query<ListQuery>) -> Response {
    let conversations = match s.store.traced_conversations(q.after(), MAX_LIMIT).await {
        Ok(c) => c,
        Err(e) => return store_error(e),
    };
    let (turns, next) = match page_of(&s, &q).await {
        Ok(page) => page,
        Err(r) => return r,
    };
    let mut body = String::from(
        "<div class=\"columns\"><section class=\"conversations\"><h2>Conversations</h2><ul>",
    );
    for c in &conversations {
        let _ = write!(
            body,
            "<li><a href=\"/inspect/thread?thread={}\">{}</a> <span class=\"count\">{} turns, last {}</span></li>",
            escape(&query_value(&c.thread)),
            escape(if c.thread.is_empty() { "(outside any conversation)" } else { &c.thread }),
            c.traces,
            time(c.last_at)
        );
    }
    body.push_str("</ul>");
    if conversations.is_empty() && q.after().is_some() {
        body.push_str("<p class=\"empty\">No conversations traced before these.</p>");
    }
    if let Some(last) = conversations
        .last()
        .filter(|_| conversations.len() == MAX_LIMIT)
    {
        let _ = write!(
            body,
            "<p><a class=\"older\" href=\"?after_at={}&amp;after_thread={}\">Conversations traced \
             before these</a></p>",
            last.last_at,
            escape(&query_value(&last.thread))
        );
    }
    body.push_str("</section><section><h2>Latest turns</h2>");
    body.push_str(&timeline(&turns, None, next));
    body.push_str("</section></div>");
    frame("Conversations", &body)
}

/// `/inspect/thread?thread=ID`: one conversation's turns and where it stands.
pub async fn thread(State(s): State<Arc<Inspector>>, Query(q): Query<ListQuery>) -> Response {
    let Some(thread) = q.thread().map(str::to_string) else {
        return (StatusCode::BAD_REQUEST, "which conversation? ?thread=ID").into_response();
    };
    let (turns, next) = match page_of(&s, &q).await {
        Ok(page) => page,
        Err(r) => return r,
    };
    let stands = match s.store.thread_process(&thread).await {
        Ok(Some(p)) => format!(
            "<p>Stands in <span class=\"process\">{}</span> (run {} times since entered).</p>",
            escape(&p.current),
            p.invocations
        ),
        _ => String::new(),
    };
    let body = format!(
        "<h2>Conversation <span class=\"thread\">{}</span></h2>{stands}{}",
        escape(&thread),
        timeline(&turns, Some(&thread), next)
    );
    frame(&format!("Conversation {thread}"), &body)
}

/// `/inspect/static/FILE`: the embedded script and stylesheet.
pub async fn static_file(Path(file): Path<String>) -> Response {
    let (kind, text) = match file.as_str() {
        "inspector.js" => ("text/javascript; charset=utf-8", JS),
        "inspector.css" => ("text/css; charset=utf-8", CSS),
        _ => return (StatusCode::NOT_FOUND, "not found").into_response(),
    };
    ([(header::CONTENT_TYPE, kind)], text).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_read_as_utc() {
        assert_eq!(time(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(time(-5), "before 1970");
    }

    #[test]
    fn a_timeline_escapes_everything_it_shows() {
        let t = TraceSummary {
            trace: "ab\"c".into(),
            kind: "message".into(),
            thread: "C1:<b>".into(),
            person: Some("<script>".into()),
            process: "main".into(),
            at: 0,
            reply: Some("<img src=x onerror=alert(1)>".into()),
        };
        let html = timeline(&[t], Some("C1:<b>"), Some(5));
        assert!(!html.contains("<script>") && !html.contains("<img") && !html.contains("<b>"));
        assert!(html.contains("&lt;script&gt;"), "{html}");
        assert!(html.contains("before=5"), "{html}");
    }
}
