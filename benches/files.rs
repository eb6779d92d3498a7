//! Shared files' cost: `cargo bench --bench files`.
//!
//! Reports, for files served by a plain local HTTP server (its body allocated before the
//! measure begins) and fetched as the daemon fetches them (`slack::files::SlackFiles`:
//! streamed, stopped at the limit) then read as the engine reads them (`files::read`):
//!   * the time and the peak resident memory over idle each file costs (Linux: VmHWM after
//!     resetting it; target ≤ 3× the file), for a 10 MB text file with and without a
//!     Content-Length, a 4 MB PDF and a 40 MB file against a 10 MB limit;
//!   * what a message without files pays: its stored address and its prompt are byte for
//!     byte what they were before files existed (no `files` key, no attachments section),
//!     and reading its files is an empty list's check.
//!
//! Figures are printed, not asserted.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::time::Instant;

use anima::config::secret::Secret;
use anima::files::{self, Attachment, Fetch, Limits};
use anima::slack::files::SlackFiles;
use anima::slack::out::SlackAddress;

const MB: usize = 1024 * 1024;

/// Serves `body` to every request on a thread of its own; `length`: with a Content-Length.
fn serve(body: Arc<Vec<u8>>, length: bool) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let body = body.clone();
            std::thread::spawn(move || {
                let mut head = [0u8; 4096];
                let _ = conn.read(&mut head);
                let header = if length {
                    format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    )
                } else {
                    "HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n".to_string()
                };
                let _ = conn.write_all(header.as_bytes());
                for chunk in body.chunks(64 * 1024) {
                    if conn.write_all(chunk).is_err() {
                        return;
                    }
                }
            });
        }
    });
    port
}

/// Resident memory now and at its peak since the last reset, in bytes (Linux).
fn rss() -> Option<(usize, usize)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<usize> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kb: usize = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb * 1024)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Sets the peak back to what is resident now.
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn case(rt: &tokio::runtime::Runtime, name: &str, body: Vec<u8>, length: bool, max_bytes: u64) {
    let size = body.len();
    let port = serve(Arc::new(body), length);
    let base = format!("http://127.0.0.1:{port}/api");
    let fetcher = SlackFiles::new(&base, &Secret::new("xoxb-bench")).unwrap();
    let file = Attachment {
        id: "F1".into(),
        name: name.into(),
        mimetype: String::new(),
        filetype: String::new(),
        size: 0,
        url: format!("http://127.0.0.1:{port}/files/F1"),
    };
    let limits = Limits {
        max_bytes,
        max_files: 5,
        text_chars: 20_000,
        images: false,
    };
    reset_peak();
    let idle = rss().map(|r| r.0);
    let started = Instant::now();
    let fetched = rt.block_on(fetcher.fetch(&file, max_bytes));
    let fetched_in = started.elapsed();
    let seen = files::read(&file, fetched, &limits);
    let total = started.elapsed();
    let peak = rss().map(|r| r.1);
    let over = idle.zip(peak).map(|(i, p)| p.saturating_sub(i));
    println!(
        "{name:<28} {:>6.1} MB  fetch {:>7.1} ms  fetch+read {:>7.1} ms  peak over idle {}  ({})",
        size as f64 / MB as f64,
        fetched_in.as_secs_f64() * 1e3,
        total.as_secs_f64() * 1e3,
        over.map_or("n/a".to_string(), |o| format!(
            "{:.1} MB = {:.2}× the file",
            o as f64 / MB as f64,
            o as f64 / size.max(1) as f64
        )),
        seen.about(),
    );
}

fn main() {
    anima::tls::install();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let line = b"2026-01-01T00:00:00Z INFO a log line of a service that talks a lot\n";
    let text: Vec<u8> = line.iter().copied().cycle().take(10 * MB).collect();
    case(
        &rt,
        "10 MB log, Content-Length",
        text.clone(),
        true,
        10 * MB as u64 + 1,
    );
    case(&rt, "10 MB log, chunked", text, false, 10 * MB as u64 + 1);
    let page = "word ".repeat(20_000);
    let pages: Vec<&str> = (0..40).map(|_| page.trim_end()).collect();
    case(
        &rt,
        "4 MB PDF",
        files::pdf::sample(&pages),
        true,
        10 * MB as u64,
    );
    case(
        &rt,
        "40 MB file, limit 10 MB",
        vec![b'a'; 40 * MB],
        false,
        10 * MB as u64,
    );

    // A message without files.
    let address = SlackAddress {
        channel: "C1".into(),
        ts: "1.000200".into(),
        thread_ts: Some("1.000100".into()),
        files: Vec::new(),
    }
    .encode();
    println!("a message without files: its stored address {address} (as before: no `files` key)");
    let started = Instant::now();
    let mut n = 0;
    for _ in 0..1_000_000 {
        n += std::hint::black_box(files::decode(std::hint::black_box(""))).len();
    }
    println!(
        "a message without files: its files read in {:.1} ns ({n} found)",
        started.elapsed().as_secs_f64() * 1e9 / 1e6
    );
}
