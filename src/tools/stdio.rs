//! A stdio server's process and pipes: started in the config file's folder with only the
//! environment it is given; its stdout read one message (one line) at a time up to a byte
//! bound, so that a result of any size costs bounded memory and is handed on cut as soon as it
//! has streamed past; its stderr read by [`Stderr`]. rmcp sees an ordinary transport.
//!
//! The bound of a tool's result follows the server's `max_result_chars` (4 bytes a character,
//! and room for the JSON around it); any other message (a tool list of thousands of tools)
//! may be up to [`ANY_BOUND`]. A message past its bound is read on by a [`Scan`] without
//! being kept, and what it makes of the message goes to rmcp in its place.

use std::borrow::Cow;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::transport::Transport;
use rmcp::RoleClient;
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tracing::{info, warn};

use super::scan::Scan;
use super::stderr::Stderr;

/// Room for the JSON around a result's text (the envelope, other blocks' names, escapes).
const FRAMING: usize = 64 * 1024;
/// The bound of a message that is not a tool's result.
pub const ANY_BOUND: usize = 16 * 1024 * 1024;
/// How long a closed server gets to exit before it is killed.
const EXIT_WAIT: Duration = Duration::from_secs(3);
/// The pipe between the reader of stdout (or of an HTTP server's events) and rmcp.
pub const PIPE: usize = 64 * 1024;

/// How much of a message is read before it is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bounds {
    /// A tool's result, in bytes.
    pub result: usize,
    /// Any other message, in bytes.
    pub any: usize,
    /// The characters of a cut result's text kept.
    pub max_chars: usize,
}

impl Bounds {
    pub fn for_chars(max_chars: usize) -> Bounds {
        let result = max_chars.saturating_mul(4).saturating_add(FRAMING);
        Bounds {
            result,
            any: ANY_BOUND.max(result),
            max_chars,
        }
    }
}

/// A running stdio server, as a transport: dropping it kills the process.
pub struct Child {
    transport: AsyncRwTransport<RoleClient, tokio::io::DuplexStream, tokio::process::ChildStdin>,
    child: tokio::process::Child,
}

/// Starts `program` with `args` in `dir`, with only the variables named in `env`.
pub fn spawn(
    server: &str,
    program: &Path,
    args: &[String],
    env: &[String],
    dir: &Path,
    bounds: Bounds,
) -> std::io::Result<(Child, Stderr)> {
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .current_dir(dir)
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for name in env {
        if let Some(v) = std::env::var_os(name) {
            cmd.env(name, v);
        }
    }
    let mut child = cmd.spawn()?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(std::io::Error::other("the child's pipes were not opened"));
    };
    let stderr = Stderr::spawn(server.to_string(), stderr);
    let (to_rmcp, from_pump) = tokio::io::duplex(PIPE);
    tokio::spawn(pump(server.to_string(), stdout, to_rmcp, bounds, b""));
    let transport = AsyncRwTransport::new(from_pump, stdin).with_max_line_length(bounds.any + 1);
    Ok((Child { transport, child }, stderr))
}

impl Transport<RoleClient> for Child {
    type Error = std::io::Error;

    fn name() -> Cow<'static, str> {
        "stdio".into()
    }

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl std::future::Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.transport.send(item)
    }

    fn receive(
        &mut self,
    ) -> impl std::future::Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        self.transport.receive()
    }

    /// Closes the server's input (an MCP server exits at the end of it), waits a little for
    /// it to exit, and kills it if it has not.
    async fn close(&mut self) -> Result<(), Self::Error> {
        self.transport.close().await?;
        if tokio::time::timeout(EXIT_WAIT, self.child.wait())
            .await
            .is_err()
        {
            self.child.kill().await?;
        }
        Ok(())
    }
}

/// Copies `from` (the server's stdout, or the lines of an HTTP server's SSE events) to `to`
/// (rmcp's side) message by message, one a line: a message within its bound as it is, one past
/// it as its [`Scan`] answers for it, after `frame` (what a line holding a message starts
/// with: nothing on stdio, `data: ` in SSE). Ends when either side does.
pub async fn pump(
    server: String,
    from: impl AsyncRead + Unpin,
    mut to: impl AsyncWrite + Unpin,
    bounds: Bounds,
    frame: &'static [u8],
) {
    let mut from = BufReader::with_capacity(PIPE, from);
    let mut line: Vec<u8> = Vec::new();
    let mut scan: Option<Scan> = None;
    // Past its bound: read by the scan alone, no longer kept.
    let mut streaming = false;
    loop {
        let (take, end) = match from.fill_buf().await {
            Ok([]) | Err(_) => break,
            Ok(chunk) => {
                let newline = chunk.iter().position(|&b| b == b'\n');
                let take = newline.map_or(chunk.len(), |i| i + 1);
                let piece = &chunk[..newline.unwrap_or(take)];
                if scan.is_none() && line.len() + take > bounds.result {
                    let mut s = Scan::new(bounds.max_chars);
                    s.feed(&line);
                    scan = Some(s);
                }
                if let Some(s) = scan.as_mut() {
                    s.feed(piece);
                    if !streaming && (s.is_tool_result() || line.len() + take > bounds.any) {
                        streaming = true;
                        line = Vec::new();
                    }
                }
                if !streaming {
                    line.extend_from_slice(&chunk[..take]);
                }
                (take, newline.is_some())
            }
        };
        from.consume(take);
        if !end {
            continue;
        }
        let out = match (streaming, scan.take()) {
            (true, Some(s)) => match s.answer(bounds.any) {
                Some(answer) => {
                    info!(server = %server, bytes = s.bytes(), "a message of {} bytes from the tool server was cut (its bound: {} bytes)", s.bytes(), if s.is_tool_result() { bounds.result } else { bounds.any });
                    [frame, answer.as_bytes()].concat()
                }
                None => {
                    warn!(server = %server, bytes = s.bytes(), "a message of {} bytes from the tool server, too long and not an answer anima waits for, was dropped", s.bytes());
                    Vec::new()
                }
            },
            _ => std::mem::take(&mut line),
        };
        streaming = false;
        line.clear();
        if out.is_empty() {
            continue;
        }
        let newline: &[u8] = if out.ends_with(b"\n") { b"" } else { b"\n" };
        if to.write_all(&out).await.is_err() || to.write_all(newline).await.is_err() {
            break;
        }
    }
    let _ = to.shutdown().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    async fn through(input: Vec<u8>, bounds: Bounds, frame: &'static [u8]) -> String {
        let (mut rx, tx) = tokio::io::duplex(1 << 16);
        let pumping = tokio::spawn(pump(
            "t".into(),
            std::io::Cursor::new(input),
            tx,
            bounds,
            frame,
        ));
        let mut out = String::new();
        rx.read_to_string(&mut out).await.unwrap();
        pumping.await.unwrap();
        out
    }

    #[tokio::test]
    async fn messages_within_their_bound_pass_as_they_are_and_one_past_it_is_cut() {
        let bounds = Bounds {
            result: 200,
            any: 1000,
            max_chars: 3,
        };
        let small = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;
        let list = format!(
            r#"{{"jsonrpc":"2.0","id":2,"result":{{"tools":["{}"]}}}}"#,
            "t".repeat(500)
        );
        let big = format!(
            r#"{{"jsonrpc":"2.0","id":3,"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
            "x".repeat(100_000)
        );
        let huge_list = format!(
            r#"{{"jsonrpc":"2.0","id":4,"result":{{"tools":["{}"]}}}}"#,
            "t".repeat(5000)
        );
        let input = format!("{small}\n{list}\n{big}\n{huge_list}\n{small}\n");
        let out = through(input.into_bytes(), bounds, b"").await;
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 5, "{out}");
        assert_eq!(lines[0], small);
        assert_eq!(
            lines[1], list,
            "a list past the result's bound is kept whole"
        );
        let cut: serde_json::Value = serde_json::from_str(lines[2]).unwrap();
        assert_eq!(cut["id"], 3);
        assert_eq!(cut["result"]["content"][0]["text"], "xxx");
        assert_eq!(cut["result"]["_meta"]["anima/cut"]["chars"], 100_000);
        let refused: serde_json::Value = serde_json::from_str(lines[3]).unwrap();
        assert_eq!(refused["id"], 4);
        assert!(refused["error"]["message"].is_string(), "{refused}");
        assert_eq!(lines[4], small, "the next message is read as ever");
    }

    #[tokio::test]
    async fn an_sse_event_past_its_bound_keeps_its_data_frame_and_the_other_lines() {
        let bounds = Bounds {
            result: 200,
            any: 1000,
            max_chars: 3,
        };
        let big = format!(
            r#"data: {{"jsonrpc":"2.0","id":3,"result":{{"content":[{{"type":"text","text":"{}"}}]}}}}"#,
            "x".repeat(100_000)
        );
        let input = format!("event: message\nid: 1\n{big}\n\n");
        let out = through(input.into_bytes(), bounds, b"data: ").await;
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[..2], ["event: message", "id: 1"], "{out}");
        let cut: serde_json::Value =
            serde_json::from_str(lines[2].strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(cut["id"], 3);
        assert_eq!(cut["result"]["content"][0]["text"], "xxx");
        assert_eq!(lines[3], "", "the event still ends: {out}");
    }
}
