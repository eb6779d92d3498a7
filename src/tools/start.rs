//! Starting one server and making the MCP handshake, within the server's timeout: a stdio
//! server's program found (a path relative to the config file's folder, a bare name on
//! anima's `PATH`), or a streamable-HTTP session opened. A start that fails says why in words:
//! the end of a stdio server's stderr, an HTTP server's status and what to check.

use std::path::{Path, PathBuf};

use rmcp::ServiceExt;

use super::server::{Handler, Running};
use super::stderr::{self, Stderr};
use super::words::words;
use super::{http, stdio};
use crate::config::{ToolServer, ToolTransport};

/// Starts `server` with `handler`; the running service, and a stdio server's stderr.
pub(super) async fn start(
    server: &ToolServer,
    handler: Handler,
) -> Result<(Running, Option<Stderr>), String> {
    let within = server.timeout;
    let timed_out = || format!("no answer to `initialize` within {} s", within.as_secs());
    match &server.transport {
        ToolTransport::Stdio { command, env, dir } => {
            let bounds = stdio::Bounds::for_chars(server.max_result_chars);
            let (child, stderr) = stdio::spawn(
                &server.name,
                &program(&command[0], dir),
                &command[1..],
                env,
                dir,
                bounds,
            )
            .map_err(|e| format!("`{}` could not be started: {e}", command[0]))?;
            let why = match tokio::time::timeout(within, handler.serve(child)).await {
                Ok(Ok(running)) => return Ok((running, Some(stderr))),
                Ok(Err(e)) => format!("the MCP handshake failed: {}", words(&e)),
                Err(_) => timed_out(),
            };
            Err(stderr::quoting(why, Some(&stderr)).await)
        }
        ToolTransport::Http { url, bearer_env } => {
            let bounds = stdio::Bounds::for_chars(server.max_result_chars);
            let (transport, probe) =
                http::transport(&server.name, url, bearer_env, within, bounds)?;
            match tokio::time::timeout(within, handler.serve(transport)).await {
                Ok(Ok(running)) => Ok((running, None)),
                Ok(Err(e)) => Err(probe.failed(words(&e)).await),
                Err(_) => Err(timed_out()),
            }
        }
    }
}

/// A program named with a path is relative to the config file's folder; a bare name is
/// looked up on anima's `PATH` (the server itself gets only the variables it is given).
fn program(name: &str, dir: &Path) -> PathBuf {
    let p = Path::new(name);
    if p.components().count() > 1 || p.is_absolute() {
        return dir.join(p);
    }
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|path| std::env::split_paths(&path).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|c| c.is_file())
        .unwrap_or_else(|| p.to_path_buf())
}
