//! The inspector: the soul's window in a browser, served by the daemon on `[http] listen` (when
//! `ANIMA_INSPECT_TOKEN` is set) and by `anima inspect`. Pages rendered here as HTML, the
//! little JS and CSS embedded in the binary, charts as SVG; a JSON API and the soul stream as
//! server-sent events; a chat pane through the same engine and memory as `anima chat`.
//!
//! Owns the routes under `/inspect/` and `/api/inspect/`, their authentication (a login link
//! that sets a cookie, or a bearer header), the CSRF token of its one POST, and the escaping
//! of every text it shows. Reads the store through its faces and never writes to it except
//! through the engine's turn (the chat pane). Knows nothing of Slack or providers; every text
//! from outside (messages, names, model output, user models) is escaped before it is shown.

mod api;
mod auth;
mod chat;
mod charts;
mod escape;
mod graph;
mod pages;
mod people;
mod soul;
mod stream;
mod turn;

use std::sync::Arc;

use axum::http::{header, HeaderValue};
use axum::response::Response;
use axum::routing::get;
use axum::Router;

use crate::config::secret::Secret;
use crate::engine::Engine;
use crate::memory::Store;
use crate::window::Hub;

pub use auth::random_token;
pub use escape::escape;

/// The most items a list shows or the API returns at once.
pub const MAX_LIMIT: usize = 100;

/// What the inspector's routes share.
pub struct Inspector {
    store: Arc<dyn Store>,
    /// The engine the chat pane talks through, and whose hub the live pages follow.
    engine: Arc<Engine>,
    token: Secret,
    /// The chat's CSRF token, random per process, put in the page and checked on POST.
    csrf: String,
    /// The chat pane's turns, one at a time (as `anima chat` takes one line at a time).
    chatting: tokio::sync::Mutex<()>,
    /// True once the server stops: the open streams end (a graceful shutdown waits for
    /// every connection, and a stream never ends by itself).
    closed: tokio::sync::watch::Sender<bool>,
}

impl Inspector {
    /// The inspector of `engine`'s soul, opened with `token`.
    pub fn new(engine: Arc<Engine>, token: Secret) -> Arc<Inspector> {
        Arc::new(Inspector {
            store: engine.store().clone(),
            engine,
            token,
            csrf: random_token(),
            chatting: tokio::sync::Mutex::new(()),
            closed: tokio::sync::watch::Sender::new(false),
        })
    }

    /// Ends the open streams, for the server's stop.
    pub fn close(&self) {
        self.closed.send_replace(true);
    }

    fn hub(&self) -> &Hub {
        self.engine.hub()
    }
}

/// The inspector's routes; none without an inspector (then `/inspect/` and its API are 404,
/// as the admin API is without its token).
pub fn routes(inspector: Option<Arc<Inspector>>) -> Router {
    let Some(s) = inspector else {
        return Router::new();
    };
    Router::new()
        .route("/inspect/", get(pages::home))
        .route("/inspect/thread", get(pages::thread))
        .route("/inspect/turn/{trace}", get(turn::page))
        .route("/inspect/turn/{trace}/text/{part}", get(turn::whole_text))
        .route("/inspect/inner", get(charts::page))
        .route("/inspect/process", get(graph::page))
        .route("/inspect/soul", get(soul::page))
        .route("/inspect/people", get(people::list))
        .route("/inspect/person", get(people::person))
        .route("/inspect/chat", get(chat::page).post(chat::send))
        .route("/inspect/static/{file}", get(pages::static_file))
        .route("/api/inspect/turns", get(api::turns))
        .route("/api/inspect/turns/{trace}", get(api::turn))
        .route("/api/inspect/stream", get(stream::stream))
        .with_state(s)
        .layer(axum::middleware::map_response(safe_headers))
}

/// The content security policy every answer carries: no inline script, nothing from elsewhere.
pub const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; frame-ancestors 'none'";

async fn safe_headers(mut response: Response) -> Response {
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}
