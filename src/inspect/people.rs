//! People (`/inspect/people`, `/inspect/person?id=USER`): everyone the soul knows (paged), each
//! user model with its versions' notes, and a line diff between any two of its versions (their
//! texts read with `Users::model_version`: the store's history keeps every version, exported
//! to git or not). A model too long to show is cut, with a link to its whole text
//! (`/inspect/person/model?id=USER&v=N`, plain text). The diff is a small LCS over lines,
//! bounded.

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::api::store_error;
use super::escape::{cut, escape, query_value};
use super::pages::{frame, time};
use super::turn::TEXT_CHARS;
use super::{Inspector, MAX_LIMIT};

/// The lines a diff compares at most on each side (the LCS table is their product).
const DIFF_LINES: usize = 2_000;
/// The characters of one diff line shown.
const LINE_CHARS: usize = 1_000;
/// The characters of a name shown.
const NAME_CHARS: usize = 200;
/// The versions a diff's selectors offer (the newest).
const SELECTABLE: usize = 1_000;

/// A line diff of `a` → `b`: each line with `' '` (kept), `'-'` (gone) or `'+'` (new).
pub fn diff<'a>(a: &'a str, b: &'a str) -> Vec<(char, &'a str)> {
    let a: Vec<&str> = a.lines().take(DIFF_LINES).collect();
    let b: Vec<&str> = b.lines().take(DIFF_LINES).collect();
    let (n, m) = (a.len(), b.len());
    let mut lcs = vec![vec![0u32; m + 1]; n + 1];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::new());
    while i < n && j < m {
        if a[i] == b[j] {
            out.push((' ', a[i]));
            (i, j) = (i + 1, j + 1);
        } else if lcs[i + 1][j] >= lcs[i][j + 1] {
            out.push(('-', a[i]));
            i += 1;
        } else {
            out.push(('+', b[j]));
            j += 1;
        }
    }
    out.extend(a[i..].iter().map(|l| ('-', *l)));
    out.extend(b[j..].iter().map(|l| ('+', *l)));
    out
}

#[derive(Debug, Deserialize)]
pub struct ListQuery {
    /// The page, from 0.
    #[serde(default)]
    page: usize,
}

/// `/inspect/people?page=N`: everyone the soul knows, `MAX_LIMIT` a page, by slug.
pub async fn list(State(s): State<Arc<Inspector>>, Query(q): Query<ListQuery>) -> Response {
    let users = match s.store.users().await {
        Ok(u) => u,
        Err(e) => return store_error(e),
    };
    let pages = users.len().div_ceil(MAX_LIMIT).max(1);
    let page = q.page.min(pages - 1);
    let mut body = String::from("<h2>People</h2><ul class=\"people\">");
    for u in users.iter().skip(page * MAX_LIMIT).take(MAX_LIMIT) {
        let (name, more) = cut(&u.display_name, NAME_CHARS);
        let _ = write!(
            body,
            "<li><a class=\"person\" href=\"/inspect/person?id={}\">{}{}</a> <span class=\"count\">{} turns, model v{}</span></li>",
            escape(&query_value(&u.user_id)),
            escape(name),
            if more { "…" } else { "" },
            u.turns,
            u.model_version
        );
    }
    body.push_str("</ul>");
    if pages > 1 {
        let _ = write!(
            body,
            "<p class=\"pages\">Page {} of {pages} ({} people).",
            page + 1,
            users.len()
        );
        if page > 0 {
            let _ = write!(
                body,
                " <a class=\"newer\" href=\"?page={}\">Previous</a>",
                page - 1
            );
        }
        if page + 1 < pages {
            let _ = write!(
                body,
                " <a class=\"older\" href=\"?page={}\">Next</a>",
                page + 1
            );
        }
        body.push_str("</p>");
    }
    frame("People", &body)
}

#[derive(Debug, Deserialize)]
pub struct PersonQuery {
    id: String,
    a: Option<i64>,
    b: Option<i64>,
}

fn nobody() -> Response {
    (
        StatusCode::NOT_FOUND,
        frame("No one", "<p>No such person.</p>"),
    )
        .into_response()
}

/// The diff of versions `a` → `b` of `user`'s model, as HTML; what is missing, when one is.
async fn diff_html(s: &Inspector, user: &str, a: i64, b: i64) -> Result<String, Response> {
    let (ta, tb) = tokio::try_join!(
        s.store.model_version(user, a),
        s.store.model_version(user, b)
    )
    .map_err(store_error)?;
    let (Some(ta), Some(tb)) = (ta, tb) else {
        return Ok(format!(
            "<p class=\"note\">v{a} or v{b} is not in this person's history.</p>"
        ));
    };
    let mut out = String::from("<pre class=\"diff\">");
    for (mark, line) in diff(&ta, &tb) {
        let class = match mark {
            '+' => "add",
            '-' => "del",
            _ => "same",
        };
        let (line, more) = cut(line, LINE_CHARS);
        let _ = writeln!(
            out,
            "<span class=\"{class}\">{mark} {}{}</span>",
            escape(line),
            if more { "…" } else { "" }
        );
    }
    out.push_str("</pre>");
    Ok(out)
}

/// The diff's form: two selectors over `versions` (newest last), `a` and `b` chosen.
fn diff_form(user_id: &str, versions: &[i64], a: i64, b: i64) -> String {
    let options = |chosen: i64| {
        versions
            .iter()
            .rev()
            .take(SELECTABLE)
            .map(|v| {
                format!(
                    "<option{}>{v}</option>",
                    if *v == chosen { " selected" } else { "" }
                )
            })
            .collect::<String>()
    };
    format!(
        "<h3>Diff</h3><form method=\"get\" action=\"/inspect/person\"><input type=\"hidden\" name=\"id\" value=\"{}\">\
         v<select name=\"a\">{}</select> → v<select name=\"b\">{}</select> <button>Compare</button></form>",
        escape(user_id),
        options(a),
        options(b)
    )
}

pub async fn person(State(s): State<Arc<Inspector>>, Query(q): Query<PersonQuery>) -> Response {
    let user = match s.store.user(&q.id).await {
        Ok(Some(u)) => u,
        Ok(None) => return nobody(),
        Err(e) => return store_error(e),
    };
    let history = match s.store.model_history(&user.user_id).await {
        Ok(h) => h,
        Err(e) => return store_error(e),
    };
    let model = user.model.as_deref().unwrap_or("(none yet)");
    let (shown, more) = cut(model, TEXT_CHARS);
    let whole = if more {
        format!(
            "<p class=\"cut\">Cut at {TEXT_CHARS} of {} characters: \
             <a href=\"/inspect/person/model?id={}&amp;v={}\">the whole model</a></p>",
            model.chars().count(),
            escape(&query_value(&user.user_id)),
            user.model_version
        )
    } else {
        String::new()
    };
    let mut body = format!(
        "<h2 class=\"person\">{}</h2><p class=\"note\">{} · {} turns</p><h3>The user model (v{})</h3><pre class=\"text\">{}</pre>{whole}\
         <h3>Versions</h3><ol class=\"versions\">",
        escape(cut(&user.display_name, NAME_CHARS).0),
        escape(cut(&user.user_id, NAME_CHARS).0),
        user.turns,
        user.model_version,
        escape(shown)
    );
    for (version, note, at) in history.iter().rev().take(MAX_LIMIT) {
        let _ = write!(
            body,
            "<li>v{version} {} {}</li>",
            time(*at),
            escape(cut(note, NAME_CHARS).0)
        );
    }
    body.push_str("</ol>");
    let versions: Vec<i64> = history.iter().map(|(v, _, _)| *v).collect();
    if let [.., older, newest] = versions[..] {
        let (a, b) = (q.a.unwrap_or(older), q.b.unwrap_or(newest));
        body.push_str(&diff_form(&user.user_id, &versions, a, b));
        match diff_html(&s, &user.user_id, a, b).await {
            Ok(html) => body.push_str(&html),
            Err(r) => return r,
        }
    }
    frame(&user.display_name, &body)
}

#[derive(Debug, Deserialize)]
pub struct ModelQuery {
    id: String,
    v: Option<i64>,
}

/// `/inspect/person/model?id=USER&v=N`: a version of the model whole (the current one
/// without `v`), as plain text.
pub async fn model_text(State(s): State<Arc<Inspector>>, Query(q): Query<ModelQuery>) -> Response {
    let text = match q.v {
        Some(v) => s.store.model_version(&q.id, v).await,
        None => s.store.user(&q.id).await.map(|u| u.and_then(|u| u.model)),
    };
    match text {
        Ok(Some(text)) => {
            ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response()
        }
        Ok(None) => (StatusCode::NOT_FOUND, "no such version").into_response(),
        Err(e) => store_error(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_keeps_the_common_lines_and_marks_the_rest() {
        let d = diff("a\nb\nc\n", "a\nc\nd\n");
        assert_eq!(d, vec![(' ', "a"), ('-', "b"), (' ', "c"), ('+', "d")]);
        assert_eq!(diff("", "x"), vec![('+', "x")]);
        assert_eq!(
            diff("日本\n<script>", "日本"),
            vec![(' ', "日本"), ('-', "<script>")]
        );
    }
}
