//! One turn's page (`/inspect/turn/TRACE`): the context window (each call's sections with
//! their size, cached or not, each opening to its text), the raw answer with its tags marked
//! beside the parsed cognition, the process path and decisions, timings, what memory was
//! written, the reply. A long text is cut, with a link to the whole of it
//! (`/inspect/turn/TRACE/text/PART`, served as plain text).

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use super::api::store_error;
use super::escape::{cut, escape, query_value};
use super::pages::{frame, time};
use super::Inspector;
use crate::memory::TraceRow;
use crate::window::{ModelCall, TraceBody};

/// The characters of one text a page shows before it is cut.
pub const TEXT_CHARS: usize = 20_000;
/// The characters of a line of a list (a decision, a memory write, an error) or of a name.
pub const ITEM_CHARS: usize = 2_000;
const NAME_CHARS: usize = 200;

/// The trace kept under `id`, its body read (a body that cannot be read shows as its error).
pub async fn load(s: &Inspector, id: &str) -> Result<Option<(TraceRow, TraceBody)>, Response> {
    let Some(row) = s.store.trace(id).await.map_err(store_error)? else {
        return Ok(None);
    };
    let body = TraceBody::from_row(&row.body, &row.pieces).unwrap_or_else(|why| TraceBody {
        errors: vec![why],
        ..TraceBody::default()
    });
    Ok(Some((row, body)))
}

/// Where the turn's reply went: (words, an http(s) link if one is known), from the inbox row
/// the turn answered (its first part's message, or the one it streamed into). `None` for a
/// turn that answered no inbox row, or whose row or reply message is not (or no longer) known.
pub async fn posted(s: &Inspector, row: &TraceRow) -> Option<(String, Option<String>)> {
    let item = s.store.inbox_item(row.inbox?).await.ok()??;
    let reference = item.reply_ref.or(item.stream_ref)?;
    let placed = match s.placer.get() {
        Some(place) => place(&item.address, &reference),
        None => None,
    };
    let (text, link) = placed.unwrap_or_else(|| (format!("message {reference}"), None));
    let link = link.filter(|l| l.starts_with("https://") || l.starts_with("http://"));
    Some((text, link))
}

/// The reply's place as HTML: a link (escaped, http(s) only, opening no referrer) or words.
fn posted_html(posted: &Option<(String, Option<String>)>) -> String {
    match posted {
        Some((text, Some(link))) => format!(
            "<p class=\"posted\">Posted: <a class=\"slack\" href=\"{}\" rel=\"noopener noreferrer\">{}</a></p>",
            escape(link),
            escape(text)
        ),
        Some((text, None)) => format!("<p class=\"posted\">Posted: {}</p>", escape(text)),
        None => String::new(),
    }
}

/// `text`, escaped, cut at `TEXT_CHARS` with a link to the whole (`part` of `trace`).
fn shown(trace: &str, part: &str, text: &str) -> String {
    let (head, more) = cut(text, TEXT_CHARS);
    let mut out = format!("<pre class=\"text\">{}</pre>", escape(head));
    if more {
        let _ = write!(
            out,
            "<p class=\"cut\">Cut at {TEXT_CHARS} of {} characters: \
             <a href=\"/inspect/turn/{}/text/{part}\">the whole text</a></p>",
            text.chars().count(),
            escape(&query_value(trace))
        );
    }
    out
}

/// `text` escaped inline, cut at `ITEM_CHARS` with a link to the whole (`part` of `trace`).
fn item(trace: &str, part: &str, text: &str) -> String {
    let (head, more) = cut(text, ITEM_CHARS);
    if !more {
        return escape(head);
    }
    format!(
        "{}… <a class=\"cut\" href=\"/inspect/turn/{}/text/{part}\">the whole ({} characters)</a>",
        escape(head),
        escape(&query_value(trace)),
        text.chars().count()
    )
}

/// The raw answer, escaped, its tags (`<name>`, `<name attr="…">`, `</name>`) marked;
/// whatever else it holds stays text.
pub fn marked(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len() + 64);
    let mut rest = raw;
    while let Some(open) = rest.find('<') {
        out.push_str(&escape(&rest[..open]));
        let after = &rest[open..];
        match tag_len(after) {
            Some(len) => {
                let _ = write!(out, "<span class=\"tag\">{}</span>", escape(&after[..len]));
                rest = &after[len..];
            }
            None => {
                out.push_str("&lt;");
                rest = &after[1..];
            }
        }
    }
    out.push_str(&escape(rest));
    out
}

/// The length of the tag `text` begins with: `<`, an optional `/`, a name of letters, digits,
/// `_` or `-`, then anything but `<` up to `>` (at most 200 bytes in all).
fn tag_len(text: &str) -> Option<usize> {
    let body = text.strip_prefix('<')?;
    let body = body.strip_prefix('/').unwrap_or(body);
    let name = body
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-')
        .count();
    if name == 0 {
        return None;
    }
    let end = text.find('>')?;
    (end < 200 && !text[1..end].contains('<')).then_some(end + 1)
}

/// Each section's text in a call's prompt. The engine's sections tile the prompt (each
/// section's characters follow the ones before it), so each is its slice; a prompt they do
/// not tile is searched for each section's tags instead.
fn section_texts(call: &ModelCall) -> Vec<Option<&str>> {
    let total: u64 = call.sections.iter().map(|s| s.chars).sum();
    let bounds: Vec<usize> = call
        .prompt
        .char_indices()
        .map(|(i, _)| i)
        .chain([call.prompt.len()])
        .collect();
    if total + 1 == bounds.len() as u64 {
        let mut at = 0usize;
        return call
            .sections
            .iter()
            .map(|s| {
                let end = at + s.chars as usize;
                let text = &call.prompt[bounds[at]..bounds[end]];
                at = end;
                Some(text)
            })
            .collect();
    }
    call.sections
        .iter()
        .map(|s| tagged(&call.prompt, &s.name))
        .collect()
}

/// The text between `<name>` and `</name>` in `prompt`, if both are there.
fn tagged<'a>(prompt: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let close = format!("</{name}>");
    let start = prompt.find(&open)? + open.len();
    let end = prompt[start..].find(&close)? + start;
    Some(prompt[start..end].trim_matches('\n'))
}

fn call_html(out: &mut String, trace: &str, n: usize, call: &ModelCall) {
    let _ = write!(
        out,
        "<section class=\"call\"><h3>Call {}: {}</h3><p class=\"timing\">{} · {} ms · {} in, {} out, \
         {} read from cache, {} written to it</p>",
        n + 1,
        escape(&call.purpose),
        escape(&call.model),
        call.latency_ms,
        call.input_tokens,
        call.output_tokens,
        call.cache_read_tokens,
        call.cache_creation_tokens
    );
    if let Some(e) = &call.error {
        let _ = write!(out, "<p class=\"error\">{}</p>", escape(e));
    }
    out.push_str("<h4>Context window</h4><table class=\"sections\"><tr><th>section</th><th>chars</th><th>tokens</th><th>cached</th></tr>");
    for (s, text) in call.sections.iter().zip(section_texts(call)) {
        let _ = write!(
            out,
            "<tr><td><details class=\"section\" data-section=\"{name}\"><summary>{name}</summary>{text}</details></td>\
             <td>{}</td><td>{}</td><td>{}</td></tr>",
            s.chars,
            s.tokens,
            if s.cached { "cached" } else { "not cached" },
            name = escape(&s.name),
            text = match text {
                Some(t) => shown(trace, &format!("prompt-{n}"), t),
                None => "<p class=\"note\">Its text is in the whole prompt.</p>".into(),
            }
        );
    }
    out.push_str("</table><details class=\"prompt\"><summary>The whole prompt</summary>");
    out.push_str(&shown(trace, &format!("prompt-{n}"), &call.prompt));
    out.push_str("</details>");
    let (head, more) = cut(&call.raw, TEXT_CHARS);
    let _ = write!(
        out,
        "<h4>Raw answer</h4><pre class=\"raw\">{}</pre>{}</section>",
        marked(head),
        if more {
            format!(
                "<p class=\"cut\"><a href=\"/inspect/turn/{}/text/raw-{n}\">the whole answer</a></p>",
                escape(&query_value(trace))
            )
        } else {
            String::new()
        }
    );
}

fn body_html(
    row: &TraceRow,
    body: &TraceBody,
    posted: &Option<(String, Option<String>)>,
) -> String {
    let t = &row.trace;
    let mut out = format!(
        "<h2>Turn <span class=\"trace\">{}</span></h2><dl class=\"facts\">\
         <dt>kind</dt><dd>{}</dd><dt>when</dt><dd>{}</dd><dt>conversation</dt>\
         <dd><a href=\"/inspect/thread?thread={}\">{}</a></dd><dt>person</dt><dd class=\"person\">{}</dd>\
         <dt>process</dt><dd>{}</dd><dt>path</dt><dd>{}</dd><dt>took</dt><dd>{} ms</dd></dl>",
        escape(t),
        escape(&row.kind),
        time(row.at),
        escape(&query_value(&row.thread)),
        escape(&row.thread),
        item(t, "person", row.person.as_deref().unwrap_or("")),
        escape(&row.process),
        escape(&body.processes.join(" → ")),
        body.total_ms
    );
    out.push_str("<h3>Stimulus</h3>");
    out.push_str(&shown(t, "stimulus", &body.stimulus));
    out.push_str("<h3>Reply</h3>");
    out.push_str(&shown(t, "reply", row.reply.as_deref().unwrap_or("")));
    out.push_str(&posted_html(posted));
    out.push_str("<div class=\"columns\"><section class=\"cognition\"><h3>Cognition</h3><ol>");
    for (n, c) in body.cognition.iter().enumerate() {
        let _ = write!(
            out,
            "<li><span class=\"step\">{}</span> <span class=\"verb\">{}</span>{}</li>",
            escape(&c.step),
            escape(&c.verb),
            shown(t, &format!("cognition-{n}"), &c.text)
        );
    }
    out.push_str("</ol></section><section class=\"decisions\"><h3>Decisions</h3><ul>");
    for (n, d) in body.decisions.iter().enumerate() {
        let _ = write!(
            out,
            "<li><span class=\"kind\">{}</span> {}</li>",
            escape(cut(&d.kind, NAME_CHARS).0),
            item(t, &format!("decision-{n}"), &d.text)
        );
    }
    out.push_str("</ul><h3>Memory written</h3><ul>");
    for (n, w) in body.memory.iter().enumerate() {
        let _ = write!(
            out,
            "<li><span class=\"kind\">{}</span> {}</li>",
            escape(cut(&w.what, NAME_CHARS).0),
            item(t, &format!("memory-{n}"), &w.detail)
        );
    }
    out.push_str("</ul>");
    for (n, e) in body.errors.iter().enumerate() {
        let _ = write!(
            out,
            "<p class=\"error\">{}</p>",
            item(t, &format!("error-{n}"), e)
        );
    }
    out.push_str("</section></div>");
    for (n, call) in body.calls.iter().enumerate() {
        call_html(&mut out, t, n, call);
    }
    out
}

/// `/inspect/turn/TRACE`.
pub async fn page(State(s): State<Arc<Inspector>>, Path(id): Path<String>) -> Response {
    match load(&s, &id).await {
        Ok(Some((row, body))) => {
            let placed = posted(&s, &row).await;
            frame(
                &format!("Turn {}", row.trace),
                &body_html(&row, &body, &placed),
            )
        }
        Ok(None) => (
            StatusCode::NOT_FOUND,
            frame(
                "No trace",
                "<p>No trace kept under this id (never kept, or pruned).</p>",
            ),
        )
            .into_response(),
        Err(r) => r,
    }
}

/// The text a part names: `stimulus`, `reply`, `person`, or one of a list by its index
/// (`prompt-N`, `raw-N`, `cognition-N`, `decision-N`, `memory-N`, `error-N`).
fn part_text(row: &TraceRow, body: &TraceBody, part: &str) -> Option<String> {
    match part {
        "stimulus" => return Some(body.stimulus.clone()),
        "reply" => return row.reply.clone(),
        "person" => return row.person.clone(),
        _ => {}
    }
    let (list, n) = part.rsplit_once('-')?;
    let n: usize = n.parse().ok()?;
    let call = || body.calls.get(n);
    match list {
        "prompt" => call().map(|c| c.prompt.clone()),
        "raw" => call().map(|c| c.raw.clone()),
        "cognition" => body.cognition.get(n).map(|c| c.text.clone()),
        "decision" => body.decisions.get(n).map(|d| d.text.clone()),
        "memory" => body.memory.get(n).map(|w| w.detail.clone()),
        "error" => body.errors.get(n).cloned(),
        _ => None,
    }
}

/// `/inspect/turn/TRACE/text/PART`: one of the turn's texts whole, as plain text.
pub async fn whole_text(
    State(s): State<Arc<Inspector>>,
    Path((id, part)): Path<(String, String)>,
) -> Response {
    let (row, body) = match load(&s, &id).await {
        Ok(Some(found)) => found,
        Ok(None) => return (StatusCode::NOT_FOUND, "no trace kept").into_response(),
        Err(r) => return r,
    };
    let text = part_text(&row, &body, &part);
    match text {
        Some(text) => ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response(),
        None => (StatusCode::NOT_FOUND, "no such part").into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_marked_and_soup_stays_text() {
        assert_eq!(
            marked("<said>hi & <b onclick=x></said>"),
            // A tag with attributes is marked too: escaped, it is text whatever it says.
            "<span class=\"tag\">&lt;said&gt;</span>hi &amp; <span class=\"tag\">&lt;b onclick=x&gt;</span><span class=\"tag\">&lt;/said&gt;</span>"
        );
        assert_eq!(
            marked("<m verb=\"x\">é</m>"),
            "<span class=\"tag\">&lt;m verb=&quot;x&quot;&gt;</span>é<span class=\"tag\">&lt;/m&gt;</span>"
        );
        let soup = "<<<</>>><a<<img src=x onerror=alert(1)>🌍<";
        let html = marked(soup);
        assert!(!html.contains("<img") && !html.contains("<a"), "{html}");
        assert!(html.ends_with("🌍&lt;"), "{html}");
    }

    #[test]
    fn sections_are_the_prompt_s_slices_when_they_tile_it_else_found_by_their_tags() {
        use crate::window::Section;
        let parts = [
            ("soul", "<soul>Wren 🌍</soul>\n"),
            ("history", "é\n"),
            ("message", "<message>hi</message>"),
        ];
        let mut call = ModelCall {
            sections: parts
                .iter()
                .map(|(n, t)| Section::of(n, t, false))
                .collect(),
            prompt: parts.iter().map(|(_, t)| *t).collect(),
            ..ModelCall::default()
        };
        let texts: Vec<_> = section_texts(&call)
            .into_iter()
            .map(Option::unwrap)
            .collect();
        assert_eq!(texts, parts.map(|(_, t)| t));
        call.prompt.push('x');
        assert_eq!(section_texts(&call), [Some("Wren 🌍"), None, Some("hi")]);
    }

    #[test]
    fn a_long_text_is_cut_with_a_link() {
        let long = "é".repeat(3 * TEXT_CHARS);
        let html = shown("abc", "stimulus", &long);
        assert!(html.contains("/inspect/turn/abc/text/stimulus"));
        assert!(html.len() < long.len());
    }
}
