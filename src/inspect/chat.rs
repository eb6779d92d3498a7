//! The chat pane (`/inspect/chat`): talk to the soul from the browser through the same engine
//! and memory as `anima chat`, the monologue shown beside each reply. Its POST needs the
//! session and the page's CSRF token; without JavaScript the form posts and a page answers,
//! with it the script posts and shows the answer (asking for JSON).

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Form, Json};
use serde::Deserialize;
use serde_json::json;

use super::escape::escape;
use super::pages::frame;
use super::turn::TEXT_CHARS;
use super::{auth, Inspector};
use crate::engine::{Message, Perception, TurnOutcome};

/// The conversation the pane talks in unless told otherwise.
const DEFAULT_THREAD: &str = "inspector";

#[derive(Debug, Deserialize)]
pub struct Said {
    #[serde(default)]
    message: String,
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    thread: String,
    #[serde(default)]
    name: String,
}

fn form(s: &Inspector, thread: &str, name: &str) -> String {
    format!(
        "<form id=\"chat\" class=\"chat\" method=\"post\" action=\"/inspect/chat\">\
         <input type=\"hidden\" name=\"csrf\" value=\"{}\">\
         <label>Conversation <input name=\"thread\" value=\"{}\"></label> \
         <label>Your name <input name=\"name\" value=\"{}\"></label>\
         <textarea name=\"message\" rows=\"3\" required placeholder=\"Say something to the soul\"></textarea>\
         <button type=\"submit\">Send</button></form><ol id=\"exchange\" class=\"exchange\"></ol>",
        escape(&s.csrf),
        escape(thread),
        escape(name)
    )
}

pub async fn page(State(s): State<Arc<Inspector>>) -> Response {
    let body = format!(
        "<h2>Chat</h2><p class=\"note\">Through the same engine and memory as <code>anima chat</code>.</p>{}",
        form(&s, DEFAULT_THREAD, "inspector")
    );
    frame("Chat", &body)
}

fn monologue(outcome: &TurnOutcome) -> String {
    outcome
        .cognition
        .as_ref()
        .and_then(|c| c.monologue.as_ref())
        .map(|m| m.text.clone())
        .unwrap_or_default()
}

pub async fn send(
    State(s): State<Arc<Inspector>>,
    headers: HeaderMap,
    Form(said): Form<Said>,
) -> Response {
    if !auth::same(&said.csrf, &s.csrf) {
        return (
            StatusCode::FORBIDDEN,
            "403: the form's CSRF token is missing or wrong\n",
        )
            .into_response();
    }
    if said.message.trim().is_empty() {
        return (StatusCode::BAD_REQUEST, "400: an empty message\n").into_response();
    }
    let thread = match said.thread.trim() {
        "" => DEFAULT_THREAD.to_string(),
        t => t.chars().take(200).collect(),
    };
    let name = match said.name.trim() {
        "" => "inspector".to_string(),
        n => n.chars().take(100).collect(),
    };
    let outcome = {
        let _one_at_a_time = s.chatting.lock().await;
        s.engine
            .perceive(&Perception::Message(Message {
                thread: thread.clone(),
                user_id: format!("inspector:{}", crate::memory::slug(&name, "user")),
                display_name: name.clone(),
                text: said.message.clone(),
                attachments: Vec::new(),
                source: None,
                inbox_id: None,
                claim: None,
                newer: None,
                speech: None,
            }))
            .await
    };
    let outcome = match outcome {
        Ok(o) => o,
        Err(e) => {
            return (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("the turn failed: {e}"),
            )
                .into_response()
        }
    };
    let wants_json = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("application/json"));
    if wants_json {
        return Json(json!({
            "reply": outcome.reply, "monologue": monologue(&outcome),
            "process": outcome.process, "thread": outcome.thread, "error": outcome.error,
        }))
        .into_response();
    }
    let mut body = String::from("<h2>Chat</h2><ol class=\"exchange\">");
    // A long text is cut; its turn's page (in the conversation's turns) has it whole.
    let whole = format!(
        "… <a class=\"cut\" href=\"/inspect/thread?thread={}\">the whole, in this turn's trace</a>",
        escape(&super::escape::query_value(&thread))
    );
    let cut = |t: &str| {
        let (head, more) = super::escape::cut(t, TEXT_CHARS);
        format!("{}{}", escape(head), if more { whole.as_str() } else { "" })
    };
    let _ = write!(
        body,
        "<li><p class=\"said\">{}</p><p class=\"reply\">{}</p><p class=\"monologue\">{}</p></li></ol>",
        cut(&said.message),
        cut(&outcome.reply),
        cut(&monologue(&outcome))
    );
    body.push_str(&form(&s, &thread, &name));
    frame("Chat", &body)
}
