//! A fake daimon speaking Claudicle's whisper protocol (`POST /api/whisper`, a bearer token,
//! `{"whisper": …, "influence": "subtle"}`): it answers as the test says (at once, late, in
//! HTML, ten megabytes of it) and records every request with when it came.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};

/// How the daimon answers every request.
#[derive(Debug, Clone)]
pub enum Answer {
    /// `{"whisper": text, "influence": "subtle"}` after this many ms.
    Whisper(u64, String),
    /// A status, a content type and a body, at once.
    Raw(u16, &'static str, Vec<u8>),
    /// A JSON answer whose whisper is `bytes` long, streamed in 64 KB pieces.
    Huge(usize),
}

/// One request the daimon got.
#[derive(Debug, Clone)]
pub struct Asked {
    pub at: Instant,
    pub authorization: Option<String>,
    pub content_type: Option<String>,
    /// The body as sent.
    pub body: String,
}

impl Asked {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("the request is JSON")
    }
}

struct Inner {
    answer: Answer,
    asked: Vec<Asked>,
}

pub struct FakeDaimon {
    pub addr: SocketAddr,
    inner: Arc<Mutex<Inner>>,
}

impl FakeDaimon {
    pub fn start(answer: Answer) -> FakeDaimon {
        let inner = Arc::new(Mutex::new(Inner {
            answer,
            asked: Vec::new(),
        }));
        let state = inner.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let app = Router::new()
                    .route("/api/whisper", post(whisper))
                    .with_state(state);
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
                tx.send(listener.local_addr().unwrap()).unwrap();
                axum::serve(listener, app).await.unwrap();
            });
        });
        let addr = rx.recv().unwrap();
        FakeDaimon { addr, inner }
    }

    /// The whisper endpoint.
    pub fn url(&self) -> String {
        format!("http://{}/api/whisper", self.addr)
    }

    /// How it answers from now on.
    pub fn answer(&self, answer: Answer) {
        self.inner.lock().unwrap().answer = answer;
    }

    pub fn asked(&self) -> Vec<Asked> {
        self.inner.lock().unwrap().asked.clone()
    }
}

async fn whisper(
    State(inner): State<Arc<Mutex<Inner>>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    let answer = {
        let mut inner = inner.lock().unwrap();
        inner.asked.push(Asked {
            at: Instant::now(),
            authorization: header("authorization"),
            content_type: header("content-type"),
            body: String::from_utf8_lossy(&body).into_owned(),
        });
        inner.answer.clone()
    };
    match answer {
        Answer::Whisper(ms, text) => {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            let body = json!({ "whisper": text, "influence": "subtle" }).to_string();
            Response::builder()
                .header("content-type", "application/json")
                .body(Body::from(body))
                .unwrap()
        }
        Answer::Raw(status, content_type, body) => Response::builder()
            .status(status)
            .header("content-type", content_type)
            .body(Body::from(body))
            .unwrap(),
        Answer::Huge(bytes) => {
            let pieces = std::iter::once(Bytes::from_static(b"{\"whisper\":\""))
                .chain((0..bytes / 65_536).map(|_| Bytes::from(vec![b'x'; 65_536])))
                .chain(std::iter::once(Bytes::from_static(b"\"}")))
                .map(Ok::<_, std::convert::Infallible>);
            Response::builder()
                .header("content-type", "application/json")
                .body(Body::from_stream(futures_util::stream::iter(pieces)))
                .unwrap()
        }
    }
}
