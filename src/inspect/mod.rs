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
mod relations;
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
    /// How a reply's message reads, given by whoever serves the inspector (`placing_replies`).
    placer: std::sync::OnceLock<Placer>,
}

/// Where a reply went, as its surface says it: words (for Slack, the channel and the message's
/// ts) and a link to the message when one can be made. The inspector knows nothing of Slack:
/// the daemon and `anima inspect` hand it this, made from Slack's permalink rule and the
/// workspace URL Slack gave them (auth.test), which is a fact of the Slack app's token, not
/// of the soul's memory, so it is asked of Slack by whoever holds the token and never
/// stored. Called with the inbox row's address and the reply message's reference; `None` for
/// an address it does not read.
pub type Placer = Arc<dyn Fn(&str, &str) -> Option<(String, Option<String>)> + Send + Sync>;

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
            placer: std::sync::OnceLock::new(),
        })
    }

    /// How a turn's page names (and links) the message its reply went into; without it the
    /// page shows the message's reference alone. The first one given stays.
    pub fn placing_replies(&self, placer: Placer) {
        let _ = self.placer.set(placer);
    }

    /// Ends the open streams, for the server's stop.
    pub fn close(&self) {
        self.closed.send_replace(true);
    }

    fn hub(&self) -> &Hub {
        self.engine.hub()
    }
}

/// Every route the inspector serves (axum's path syntax), each behind `auth::gate`: what a
/// test asks of each without the token. A unit test holds `routes` to this list.
pub const PATHS: &[&str] = &[
    "/inspect/",
    "/inspect/thread",
    "/inspect/turn/{trace}",
    "/inspect/turn/{trace}/text/{part}",
    "/inspect/inner",
    "/inspect/process",
    "/inspect/soul",
    "/inspect/soul/text/{part}",
    "/inspect/people",
    "/inspect/person",
    "/inspect/person/model",
    "/inspect/chat",
    "/inspect/static/{file}",
    "/api/inspect/turns",
    "/api/inspect/turns/{trace}",
    "/api/inspect/stream",
];

/// The inspector's routes; none without an inspector (then `/inspect/` and its API are 404,
/// as the admin API is without its token). Every one sits behind one route layer,
/// `auth::gate`: a route added here is checked without saying so.
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
        .route("/inspect/soul/text/{part}", get(soul::whole_text))
        .route("/inspect/people", get(people::list))
        .route("/inspect/person", get(people::person))
        .route("/inspect/person/model", get(people::model_text))
        .route("/inspect/chat", get(chat::page).post(chat::send))
        .route("/inspect/static/{file}", get(pages::static_file))
        .route("/api/inspect/turns", get(api::turns))
        .route("/api/inspect/turns/{trace}", get(api::turn))
        .route("/api/inspect/stream", get(stream::stream))
        .route_layer(axum::middleware::from_fn_with_state(s.clone(), auth::gate))
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

#[cfg(test)]
mod tests {
    /// `PATHS` is every route `routes` declares, in order: the test that asks each without
    /// the token cannot miss one.
    #[test]
    fn the_paths_are_every_route() {
        let source = include_str!("mod.rs");
        let declared: Vec<&str> = source
            .split(".route(\"")
            .skip(1)
            .map(|rest| rest.split('"').next().unwrap_or(""))
            .collect();
        assert_eq!(declared, super::PATHS);
    }
}
