//! `GET /api/inspect/stream`: the soul stream as server-sent events, one `data:` line of a
//! record's JSON each, a keep-alive comment every 15 s. A client that falls `window::stream::
//! CAPACITY` records behind is dropped (the stream ends; the page reconnects and reloads), so
//! a slow browser never holds records or the turns back. A stream ends when the server stops
//! (`Inspector::close`).
//!
//! Records go out in batches: a record that comes after a quiet spell is sent at once, and
//! those that follow within `GATHER` of a send wait for the rest of that span, to go out
//! together in one write. A busy daemon (a turn makes ten records or so) then writes to a
//! watcher at most once every `GATHER`, not once a record, and each record still reaches it
//! within `GATHER` of happening.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::State;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::stream;
use tokio::sync::broadcast::error::TryRecvError;
use tokio::sync::broadcast::Receiver;
use tokio::time::Instant;

use super::Inspector;
use crate::window::Record;

/// How often an idle stream says it is alive.
pub const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// The span records gather in behind a send before the next one goes.
pub const GATHER: Duration = Duration::from_millis(20);

/// One client's place in the stream.
struct Follower {
    rx: Receiver<Arc<Record>>,
    closed: tokio::sync::watch::Receiver<bool>,
}

impl Follower {
    /// The next record to send, or none when the stream ends (the server stops, or this
    /// client fell too far behind).
    async fn next(&mut self) -> Option<Arc<Record>> {
        match self.rx.try_recv() {
            // Ready now: it joins the batch being sent.
            Ok(record) => return Some(record),
            Err(TryRecvError::Empty) => {}
            Err(TryRecvError::Lagged(_) | TryRecvError::Closed) => return None,
        }
        // Nothing more is ready, so what was yielded goes out now, in one write.
        let sent = Instant::now();
        let record = tokio::select! {
            // Behind by more than the hub keeps, or the hub gone: this client is dropped.
            next = self.rx.recv() => next.ok()?,
            _ = self.closed.wait_for(|c| *c) => return None,
        };
        // Soon after a send, the records that follow gather for the rest of the span.
        if sent.elapsed() < GATHER {
            tokio::select! {
                () = tokio::time::sleep_until(sent + GATHER) => {}
                _ = self.closed.wait_for(|c| *c) => return None,
            }
        }
        Some(record)
    }
}

pub async fn stream(State(s): State<Arc<Inspector>>) -> Response {
    let follower = Follower {
        rx: s.hub().subscribe(),
        closed: s.closed.subscribe(),
    };
    let events = stream::unfold(follower, |mut f| async move {
        let record = f.next().await?;
        let json = serde_json::to_string(&*record).unwrap_or_else(|_| "{}".into());
        Some((Ok::<_, Infallible>(Event::default().data(json)), f))
    });
    Sse::new(events)
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE).text("alive"))
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::{Hub, Phase};

    fn record(n: i64) -> Record {
        Record {
            phase: Phase::Model,
            trace: "t".into(),
            thread: "C1:1.0".into(),
            at: n,
            text: format!("call {n}"),
            data: serde_json::Value::Null,
        }
    }

    fn follower(hub: &Hub) -> (Follower, tokio::sync::watch::Sender<bool>) {
        let (close, closed) = tokio::sync::watch::channel(false);
        let f = Follower {
            rx: hub.subscribe(),
            closed,
        };
        (f, close)
    }

    /// Emits `n` after `ms`, on a task of its own.
    fn later(hub: &Hub, ms: u64, n: i64) {
        let hub = hub.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            hub.emit(|| record(n));
        });
    }

    #[tokio::test(start_paused = true)]
    async fn records_soon_after_a_send_gather_and_one_after_a_quiet_spell_goes_at_once() {
        let hub = Hub::default();
        let (mut f, _close) = follower(&hub);
        // After a quiet spell: at once.
        later(&hub, 500, 1);
        let start = Instant::now();
        assert_eq!(f.next().await.unwrap().at, 1);
        assert_eq!(start.elapsed(), Duration::from_millis(500));
        // Right behind it, three more over 6 ms: held until the span is over, then all.
        let sent = Instant::now();
        later(&hub, 2, 2);
        later(&hub, 4, 3);
        later(&hub, 6, 4);
        assert_eq!(f.next().await.unwrap().at, 2);
        assert_eq!(sent.elapsed(), GATHER);
        assert_eq!(f.next().await.unwrap().at, 3);
        assert_eq!(f.next().await.unwrap().at, 4);
        assert_eq!(
            sent.elapsed(),
            GATHER,
            "the rest were ready: no more waiting"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_stream_ends_when_the_server_stops_even_while_gathering() {
        let hub = Hub::default();
        let (mut f, close) = follower(&hub);
        hub.emit(|| record(1));
        assert_eq!(f.next().await.unwrap().at, 1);
        later(&hub, 1, 2);
        let stopping = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            close.send_replace(true);
        });
        assert!(f.next().await.is_none());
        stopping.await.unwrap();
    }

    #[tokio::test]
    async fn a_follower_that_falls_too_far_behind_is_dropped() {
        let hub = Hub::default();
        let (mut f, _close) = follower(&hub);
        for n in 0..(crate::window::stream::CAPACITY as i64 + 5) {
            hub.emit(|| record(n));
        }
        assert!(f.next().await.is_none());
    }
}
