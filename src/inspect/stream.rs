//! `GET /api/inspect/stream`: the soul stream as server-sent events, one `data:` line of a
//! record's JSON each, a keep-alive comment every 15 s. A client that falls `window::stream::
//! CAPACITY` records behind is dropped (the stream ends; the page reconnects and reloads), so
//! a slow browser never holds records or the turns back. A stream ends when the server stops
//! (`Inspector::close`).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use tokio::sync::broadcast::error::RecvError;

use super::Inspector;

/// How often an idle stream says it is alive.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);

pub async fn stream(State(s): State<Arc<Inspector>>) -> Response {
    let rx = s.hub().subscribe();
    let closed = s.closed.subscribe();
    let events = stream::unfold((rx, closed), |(mut rx, mut closed)| async move {
        let next = tokio::select! {
            next = rx.recv() => next,
            _ = closed.wait_for(|c| *c) => return None,
        };
        match next {
            Ok(record) => {
                let json = serde_json::to_string(&*record).unwrap_or_else(|_| "{}".into());
                Some((
                    Ok::<_, Infallible>(Event::default().data(json)),
                    (rx, closed),
                ))
            }
            // Behind by more than the hub keeps, or the hub gone: this client is dropped.
            Err(RecvError::Lagged(_)) | Err(RecvError::Closed) => None,
        }
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("alive"))
        .into_response()
}
