//! A stdio server's stderr: read so the server can never block on a full pipe, its lines
//! written to anima's log, and its last lines kept to quote when the server fails to start or
//! dies. Bounded whatever the server writes: a line is kept to its first
//! [`LINE_CHARS`] characters (the rest of it skipped as it comes), only the last
//! [`TAIL_LINES`] are kept, and past the first [`LOGGED_LINES`] of a start, at most one line
//! every [`LOG_EVERY`] is logged, with how many were not.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::watch;
use tracing::info;

/// The characters of a line kept.
pub const LINE_CHARS: usize = 300;
/// The last lines kept, to quote.
pub const TAIL_LINES: usize = 10;
/// Lines of one start logged before the rest are thinned.
pub const LOGGED_LINES: u64 = 50;
pub const LOG_EVERY: Duration = Duration::from_secs(10);

/// The end of a server's stderr, as it is read.
#[derive(Clone)]
pub struct Stderr {
    tail: Arc<Mutex<VecDeque<String>>>,
    ended: watch::Receiver<bool>,
}

impl Stderr {
    /// Reads `from` on its own task until it ends, logging as `server`.
    pub fn spawn(server: String, from: impl AsyncRead + Unpin + Send + 'static) -> Stderr {
        let tail = Arc::new(Mutex::new(VecDeque::with_capacity(TAIL_LINES)));
        let (done, ended) = watch::channel(false);
        tokio::spawn(read(server, from, tail.clone(), done));
        Stderr { tail, ended }
    }

    /// Its last lines, one per line, once the pipe has ended or `within` has passed (a
    /// server that has exited has its last words read first); `None` when it wrote nothing.
    pub async fn last_lines(&self, within: Duration) -> Option<String> {
        let mut ended = self.ended.clone();
        let _ = tokio::time::timeout(within, ended.wait_for(|e| *e)).await;
        let tail = self.tail.lock().unwrap_or_else(|p| p.into_inner());
        let lines: Vec<&str> = tail.iter().map(String::as_str).collect();
        (!lines.is_empty()).then(|| lines.join("\n"))
    }
}

/// `why`, and the end of the server's stderr when it wrote any.
pub async fn quoting(why: String, stderr: Option<&Stderr>) -> String {
    let Some(stderr) = stderr else { return why };
    match stderr.last_lines(Duration::from_millis(500)).await {
        Some(lines) => format!("{why}; its stderr ends:\n{}", indent(&lines)),
        None => why,
    }
}

fn indent(lines: &str) -> String {
    lines
        .lines()
        .map(|l| format!("    {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

async fn read(
    server: String,
    from: impl AsyncRead + Unpin,
    tail: Arc<Mutex<VecDeque<String>>>,
    done: watch::Sender<bool>,
) {
    let mut from = BufReader::with_capacity(8192, from);
    let mut line: Vec<u8> = Vec::new();
    let mut lines: u64 = 0;
    let mut unlogged: u64 = 0;
    let mut last_logged = Instant::now();
    loop {
        let (take, end) = match from.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(chunk) => {
                let newline = chunk.iter().position(|&b| b == b'\n');
                let take = newline.map_or(chunk.len(), |i| i + 1);
                let keep = (LINE_CHARS * 4).saturating_sub(line.len()).min(take);
                line.extend_from_slice(&chunk[..keep]);
                (take, newline.is_some())
            }
        };
        from.consume(take);
        if !end {
            continue;
        }
        let text = one_line(&line);
        line.clear();
        if text.is_empty() {
            continue;
        }
        lines += 1;
        if lines <= LOGGED_LINES || last_logged.elapsed() >= LOG_EVERY {
            if unlogged > 0 {
                info!(server = %server, unlogged, "tool server stderr: {text} ({unlogged} lines before it not logged)");
            } else {
                info!(server = %server, "tool server stderr: {text}");
            }
            unlogged = 0;
            last_logged = Instant::now();
        } else {
            unlogged += 1;
        }
        let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
        if tail.len() == TAIL_LINES {
            tail.pop_front();
        }
        tail.push_back(text);
    }
    if !line.is_empty() {
        let text = one_line(&line);
        if !text.is_empty() {
            let mut tail = tail.lock().unwrap_or_else(|p| p.into_inner());
            if tail.len() == TAIL_LINES {
                tail.pop_front();
            }
            tail.push_back(text);
        }
    }
    if unlogged > 0 {
        info!(server = %server, unlogged, "tool server stderr: {unlogged} more lines not logged");
    }
    done.send_replace(true);
}

/// A line as text: at most [`LINE_CHARS`] characters, trimmed, control characters dropped.
fn one_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text: String = text
        .trim()
        .chars()
        .filter(|c| !c.is_control())
        .take(LINE_CHARS)
        .collect();
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_last_lines_are_kept_and_a_long_line_is_cut() {
        let mut text = String::new();
        for i in 0..30 {
            text += &format!("line {i}\n");
        }
        text += &"é".repeat(100_000);
        text += "\nbye";
        let stderr = Stderr::spawn("t".into(), std::io::Cursor::new(text.into_bytes()));
        let last = stderr.last_lines(Duration::from_secs(5)).await.unwrap();
        let lines: Vec<&str> = last.lines().collect();
        assert_eq!(lines.len(), TAIL_LINES);
        assert_eq!(lines[0], "line 22");
        assert_eq!(lines[8], "é".repeat(LINE_CHARS));
        assert_eq!(lines[9], "bye");
    }
}
