//! People (`/inspect/people`, `/inspect/person?id=USER`): everyone the soul knows, each user
//! model with its versions' notes, and a line diff between two versions whose text the store
//! still gives (the current one and those not yet exported to git; older ones are in the
//! git repository, `anima users log`). The diff is a small LCS over lines, bounded.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;

use super::api::store_error;
use super::escape::{cut, escape, query_value};
use super::pages::{frame, time};
use super::turn::TEXT_CHARS;
use super::{auth, Inspector, MAX_LIMIT};

/// The lines a diff compares at most on each side (the LCS table is their product).
const DIFF_LINES: usize = 2_000;

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

pub async fn list(State(s): State<Arc<Inspector>>, headers: HeaderMap) -> Response {
    if !auth::allowed(&s, &headers) {
        return auth::refused();
    }
    let users = match s.store.users().await {
        Ok(u) => u,
        Err(e) => return store_error(e),
    };
    let mut body = String::from("<h2>People</h2><ul class=\"people\">");
    for u in users.iter().take(MAX_LIMIT) {
        let _ = write!(
            body,
            "<li><a class=\"person\" href=\"/inspect/person?id={}\">{}</a> <span class=\"count\">{} turns, model v{}</span></li>",
            escape(&query_value(&u.user_id)),
            escape(&u.display_name),
            u.turns,
            u.model_version
        );
    }
    body.push_str("</ul>");
    if users.len() > MAX_LIMIT {
        let _ = write!(
            body,
            "<p class=\"note\">The first {MAX_LIMIT} of {}.</p>",
            users.len()
        );
    }
    frame("People", &body)
}

#[derive(Debug, Deserialize)]
pub struct PersonQuery {
    id: String,
    a: Option<i64>,
    b: Option<i64>,
}

pub async fn person(
    State(s): State<Arc<Inspector>>,
    headers: HeaderMap,
    Query(q): Query<PersonQuery>,
) -> Response {
    if !auth::allowed(&s, &headers) {
        return auth::refused();
    }
    let user = match s.store.user(&q.id).await {
        Ok(Some(u)) => u,
        Ok(None) => {
            return (
                StatusCode::NOT_FOUND,
                frame("No one", "<p>No such person.</p>"),
            )
                .into_response()
        }
        Err(e) => return store_error(e),
    };
    let (history, pending) = match tokio::try_join!(
        s.store.model_history(&user.user_id),
        s.store.pending_model_versions(&user.user_id)
    ) {
        Ok(both) => both,
        Err(e) => return store_error(e),
    };
    let mut texts: BTreeMap<i64, String> = pending.into_iter().map(|(v, m, _)| (v, m)).collect();
    if let Some(model) = &user.model {
        texts.insert(user.model_version, model.clone());
    }
    let mut body = format!(
        "<h2 class=\"person\">{}</h2><p class=\"note\">{} · {} turns</p><h3>The user model (v{})</h3><pre class=\"text\">{}</pre>\
         <h3>Versions</h3><ol class=\"versions\">",
        escape(&user.display_name),
        escape(&user.user_id),
        user.turns,
        user.model_version,
        escape(cut(user.model.as_deref().unwrap_or("(none yet)"), TEXT_CHARS).0)
    );
    for (version, note, at) in history.iter().rev().take(MAX_LIMIT) {
        let _ = write!(body, "<li>v{version} {} {}</li>", time(*at), escape(note));
    }
    body.push_str("</ol>");
    let versions: Vec<i64> = texts.keys().copied().collect();
    if versions.len() >= 2 {
        let (a, b) = (
            q.a.unwrap_or(versions[versions.len() - 2]),
            q.b.unwrap_or(versions[versions.len() - 1]),
        );
        let options = |chosen: i64| {
            versions
                .iter()
                .map(|v| {
                    format!(
                        "<option{}>{v}</option>",
                        if *v == chosen { " selected" } else { "" }
                    )
                })
                .collect::<String>()
        };
        let _ = write!(
            body,
            "<h3>Diff</h3><form method=\"get\" action=\"/inspect/person\"><input type=\"hidden\" name=\"id\" value=\"{}\">\
             v<select name=\"a\">{}</select> → v<select name=\"b\">{}</select> <button>Compare</button></form>",
            escape(&user.user_id),
            options(a),
            options(b)
        );
        if let (Some(ta), Some(tb)) = (texts.get(&a), texts.get(&b)) {
            body.push_str("<pre class=\"diff\">");
            for (mark, line) in diff(ta, tb) {
                let class = match mark {
                    '+' => "add",
                    '-' => "del",
                    _ => "same",
                };
                let _ = writeln!(
                    body,
                    "<span class=\"{class}\">{mark} {}</span>",
                    escape(line)
                );
            }
            body.push_str("</pre>");
        }
    } else {
        body.push_str("<p class=\"note\">Older versions' text is in the git repository (<code>anima users log</code>).</p>");
    }
    frame(&user.display_name, &body)
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
