//! The fake Slack's file host: files served at `/files/{id}` only with the bot token (401
//! otherwise, as Slack answers a file URL without one), every fetch recorded (its file, its
//! Authorization header, the bytes that went out). And `Elsewhere`, another host that records
//! any request it gets: a file URL or a redirect there must never reach it.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::Response;
use futures_util::StreamExt;

use super::{Shared, BOT_TOKEN};

/// The chunks a file's body goes out in.
pub const CHUNK: usize = 64 * 1024;

/// How the fake serves one file.
#[derive(Debug, Clone)]
pub enum Serve {
    /// The bytes, with their Content-Length.
    Bytes { body: Vec<u8>, content_type: String },
    /// `total` bytes of text without a Content-Length (chunked), as fast as they are read.
    Endless { total: u64 },
    /// The first fetch sends the headers and one chunk, then stalls for ever; later fetches
    /// get the bytes.
    StallOnce { body: Vec<u8>, content_type: String },
    /// This status, with a JSON error body.
    Status(u16),
    /// Slack's sign-in page, with 200 (what a file URL gives a client without the scope).
    Html,
    /// 302 to this URL.
    Redirect(String),
}

/// One fetch of a file.
#[derive(Debug, Clone)]
pub struct FileFetch {
    pub id: String,
    pub auth: Option<String>,
    /// The bytes of the body that went out (so far).
    pub sent: Arc<AtomicU64>,
}

#[derive(Default)]
pub struct FileHost {
    files: HashMap<String, Serve>,
    fetches: Vec<FileFetch>,
}

impl super::FakeSlack {
    /// Serves `serve` at `/files/{id}`; returns its URL.
    pub fn serve_file(&self, id: &str, serve: Serve) -> String {
        self.files
            .lock()
            .unwrap()
            .files
            .insert(id.to_string(), serve);
        self.file_url(id)
    }

    pub fn file_url(&self, id: &str) -> String {
        format!("http://{}/files/{id}", self.addr)
    }

    /// Every fetch of a file, in order.
    pub fn file_fetches(&self) -> Vec<FileFetch> {
        self.files.lock().unwrap().fetches.clone()
    }
}

/// `/files/{id}`.
pub(super) async fn serve(
    State(s): State<Shared>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let sent = Arc::new(AtomicU64::new(0));
    let (serve, earlier) = {
        let mut host = s.files.lock().unwrap();
        let earlier = host.fetches.iter().filter(|f| f.id == id).count();
        host.fetches.push(FileFetch {
            id: id.clone(),
            auth: auth.clone(),
            sent: sent.clone(),
        });
        (host.files.get(&id).cloned(), earlier)
    };
    if auth.as_deref() != Some(&format!("Bearer {BOT_TOKEN}")) {
        return status(401, "not_authed");
    }
    match serve {
        None => status(404, "file_not_found"),
        Some(Serve::Status(code)) => status(code, "an error"),
        Some(Serve::Html) => Response::builder()
            .status(200)
            .header("content-type", "text/html; charset=utf-8")
            .body(Body::from(
                "<!DOCTYPE html><html><head><title>Slack</title></head><body>Sign in</body></html>",
            ))
            .unwrap(),
        Some(Serve::Redirect(to)) => Response::builder()
            .status(302)
            .header("location", to)
            .body(Body::empty())
            .unwrap(),
        Some(Serve::Bytes { body, content_type }) => bytes(body, &content_type, sent, false),
        Some(Serve::StallOnce { body, content_type }) => {
            bytes(body, &content_type, sent, earlier == 0)
        }
        Some(Serve::Endless { total }) => {
            let chunks =
                futures_util::stream::iter(0..total.div_ceil(CHUNK as u64)).map(move |i| {
                    let n = (total - i * CHUNK as u64).min(CHUNK as u64);
                    sent.fetch_add(n, Ordering::SeqCst);
                    Ok::<_, std::io::Error>(vec![b'a'; n as usize])
                });
            Response::builder()
                .status(200)
                .header("content-type", "text/plain")
                .body(Body::from_stream(chunks))
                .unwrap()
        }
    }
}

/// `body` in chunks with its Content-Length, each counted as it goes; `stall`: one chunk,
/// then nothing ever again.
fn bytes(body: Vec<u8>, content_type: &str, sent: Arc<AtomicU64>, stall: bool) -> Response {
    let len = body.len();
    let pieces: Vec<Vec<u8>> = body.chunks(CHUNK).map(<[u8]>::to_vec).collect();
    let take = if stall { 1 } else { pieces.len() };
    let chunks = futures_util::stream::iter(pieces.into_iter().take(take))
        .map(move |c| {
            sent.fetch_add(c.len() as u64, Ordering::SeqCst);
            Ok::<_, std::io::Error>(c)
        })
        .chain(
            futures_util::stream::iter(stall.then_some(()))
                .flat_map(|_| futures_util::stream::pending::<Result<Vec<u8>, std::io::Error>>()),
        );
    Response::builder()
        .status(200)
        .header("content-type", content_type)
        .header("content-length", len)
        .body(Body::from_stream(chunks))
        .unwrap()
}

fn status(code: u16, error: &str) -> Response {
    Response::builder()
        .status(code)
        .header("content-type", "application/json")
        .body(Body::from(format!(r#"{{"ok":false,"error":"{error}"}}"#)))
        .unwrap()
}

/// Another host: it records every request's head it gets (none should come) and answers
/// 200 with a few bytes.
pub struct Elsewhere {
    pub port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Elsewhere {
    pub fn start() -> Elsewhere {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let h = heads.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(mut conn) = conn else { continue };
                let _ = conn.set_read_timeout(Some(std::time::Duration::from_secs(2)));
                let mut buf = vec![0; 8192];
                let n = conn.read(&mut buf).unwrap_or(0);
                h.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&buf[..n]).into_owned());
                let _ = conn.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 6\r\n\r\nstolen",
                );
            }
        });
        Elsewhere { port, heads }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// The heads of the requests it got.
    pub fn requests(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}
