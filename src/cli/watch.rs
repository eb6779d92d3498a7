//! `anima watch`: follows the soul stream of the daemon(s) of the configured home or database
//! and prints one line per record (`line`), or the record's JSON with `--json` (`print`), filtered by
//! thread and phase.
//!
//! It reads `GET http://<listen>/api/inspect/stream` (server-sent events, `sse`) with the
//! bearer token `ANIMA_INSPECT_TOKEN`, as the daemon serves it. On SQLite the daemon is the
//! one at `[http] listen` (for a port of 0, at the address it wrote beside the database when it
//! bound one); on PostgreSQL every daemon the store lists, each at the address it bound
//! (looked up again every few seconds, so a daemon that starts later is followed too), their records merged and each line naming its daemon. A daemon that cannot be reached
//! or whose stream ends (a restart) is tried again with a growing wait, saying so on stderr.
//! Knows nothing of how records are made: it reads them.

mod line;
mod print;
mod sse;

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::io::{IsTerminal, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::time::Duration;

use futures_util::StreamExt;
use tokio::sync::mpsc;

use super::{load_config, CliResult, Failure};
use crate::config::{Config, StoreBackend};
use crate::memory::DaemonRow;
use crate::window::Phase;

/// The variable the token is read from, as the daemon reads it.
pub const TOKEN_VAR: &str = "ANIMA_INSPECT_TOKEN";
/// The stream's route on the daemon.
pub const STREAM_PATH: &str = "/api/inspect/stream";

/// The first wait before trying a daemon again, and the longest.
const FIRST_WAIT: Duration = Duration::from_millis(500);
const LONGEST_WAIT: Duration = Duration::from_secs(10);
/// How often the daemons of a shared soul are listed again.
const RELIST: Duration = Duration::from_secs(5);
/// The line width when stdout is no terminal and `COLUMNS` says nothing.
const DEFAULT_WIDTH: usize = 160;

#[derive(Debug, clap::Args)]
pub struct WatchArgs {
    /// Only the records of this conversation (its thread id, e.g. `C123:1700000000.000100`).
    #[arg(long, value_name = "ID")]
    pub thread: Option<String>,
    /// Only the records of this phase (stimulus, plan, prompt, model, cognition, decision,
    /// memory, response, error); repeat for several.
    #[arg(long, value_name = "P")]
    pub phase: Vec<String>,
    /// One JSON record per line.
    #[arg(long)]
    pub json: bool,
}

/// What the followers send the printer.
enum Seen {
    /// The records (each its JSON, as the daemon sent it) of one read from a daemon, named
    /// when several are followed.
    Records(Option<String>, Vec<String>),
    /// A daemon refused the token or serves no stream: nothing to wait for.
    Refused(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    name: Option<String>,
    addr: String,
}

pub async fn run(config_path: Option<&std::path::Path>, args: WatchArgs) -> CliResult {
    let phases = phases(&args.phase)?;
    let config = load_config(config_path)?;
    let token = std::env::var(TOKEN_VAR)
        .ok()
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            Failure::Usage(format!(
                "{TOKEN_VAR} is not set: the daemon serves its stream only with {TOKEN_VAR} set; export the daemon's token here too"
            ))
        })?;
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .build()
        .map_err(Failure::runtime)?;
    let (tx, mut rx) = mpsc::channel::<Seen>(256);
    let follow = Follow { client, token, tx };
    let targets = tokio::spawn(keep_following(config.clone(), follow));
    let width = width();
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    // One listener for the whole watch: a Ctrl-C while records are being printed is heard
    // the next time the printer waits.
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    let result = loop {
        let seen = match rx.try_recv() {
            Ok(seen) => Some(seen),
            Err(_) => {
                // Nothing more is ready: what was written goes out now.
                if out.flush().is_err() {
                    // The reader went away (`| head`): done.
                    break Ok(());
                }
                tokio::select! {
                    seen = rx.recv() => seen,
                    _ = &mut interrupted => break Ok(()),
                }
            }
        };
        let (daemon, records) = match seen {
            Some(Seen::Records(daemon, records)) => (daemon, records),
            Some(Seen::Refused(why)) => break Err(Failure::Runtime(why)),
            None => break Ok(()),
        };
        let print = |out: &mut std::io::BufWriter<_>, data: &str| {
            let Some(line) = print::printed(data, daemon.as_deref(), &args, &phases, width) else {
                return Ok(());
            };
            writeln!(out, "{line}")
        };
        if records.iter().try_for_each(|r| print(&mut out, r)).is_err() {
            break Ok(());
        }
    };
    let _ = out.flush();
    targets.abort();
    match (result, targets.await) {
        (Err(e), _) => Err(e),
        (Ok(()), Ok(Err(e))) => Err(e),
        (Ok(()), _) => Ok(()),
    }
}

/// The phases `--phase` names; an unknown one is a usage error that lists them all.
fn phases(names: &[String]) -> Result<Vec<Phase>, Failure> {
    names
        .iter()
        .flat_map(|n| n.split(','))
        .map(|n| {
            Phase::parse(n.trim()).ok_or_else(|| {
                let all: Vec<&str> = Phase::ALL.iter().map(|p| p.as_str()).collect();
                Failure::Usage(format!(
                    "--phase {:?} is not a phase; the phases are: {}",
                    line::harmless(n),
                    all.join(", ")
                ))
            })
        })
        .collect()
}

/// The terminal's width: `COLUMNS`, else the default.
fn width() -> usize {
    let columns = std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok());
    match columns {
        Some(c) if c >= 20 => c,
        _ if std::io::stdout().is_terminal() => 100,
        _ => DEFAULT_WIDTH,
    }
}

/// Follows every daemon of the soul until the printer stops listening: one on SQLite, every
/// live one on PostgreSQL (listed again every `RELIST`, each new one followed, each gone one
/// let go).
async fn keep_following(config: std::sync::Arc<Config>, follow: Follow) -> CliResult {
    if config.store.backend != StoreBackend::Postgres {
        let addr = reachable(sqlite_listen(&config)?, "", "").map_err(Failure::Usage)?;
        follow.daemon(Target { name: None, addr }).await;
        return Ok(());
    }
    let store = super::open_store(&config).await?;
    let here = crate::daemon::host();
    let mut followed: HashMap<String, tokio::task::JoinHandle<()>> = HashMap::new();
    let mut told: HashSet<String> = HashSet::new();
    let mut said_none = false;
    while !follow.tx.is_closed() {
        match store.daemons().await {
            Ok(daemons) => {
                let live = targets(&daemons, &here);
                followed.retain(|id, task| {
                    let keep = live.iter().any(|(l, t)| l == id && t.is_ok());
                    if !keep {
                        task.abort();
                    }
                    keep
                });
                for (id, target) in live {
                    match target {
                        Ok(target) => {
                            if let Entry::Vacant(slot) = followed.entry(id) {
                                let name = target.name.as_deref().unwrap_or("");
                                eprintln!(
                                    "anima: following {} at {}",
                                    line::harmless(name),
                                    target.addr
                                );
                                slot.insert(tokio::spawn(follow.clone().daemon(target)));
                            }
                        }
                        Err(why) => {
                            if told.insert(id) {
                                eprintln!("anima: not following {why}");
                            }
                        }
                    }
                }
                if daemons.is_empty() && !said_none {
                    eprintln!("anima: no daemon runs on this soul now; waiting for one");
                }
                said_none = daemons.is_empty();
            }
            Err(e) => eprintln!("anima: cannot list the daemons: {e}"),
        }
        tokio::time::sleep(RELIST).await;
    }
    Ok(())
}

/// Where the daemon of a SQLite home listens: `[http] listen`, or, when that names port 0 (a
/// free port chosen at start), the address the daemon wrote beside the database when it bound
/// it (`daemon::LISTEN_FILE`).
fn sqlite_listen(config: &Config) -> Result<SocketAddr, Failure> {
    if config.listen.port() != 0 {
        return Ok(config.listen);
    }
    let file = config.db_path().with_file_name(crate::daemon::LISTEN_FILE);
    let text = std::fs::read_to_string(&file).map_err(|e| {
        Failure::Usage(format!(
            "`[http] listen` is {} (a port chosen at start) and {} cannot be read ({e}): start the daemon first, or set a fixed port",
            config.listen,
            file.display()
        ))
    })?;
    text.trim().parse().map_err(|_| {
        Failure::Usage(format!(
            "{} does not hold an address ({:?}): start the daemon again",
            file.display(),
            line::harmless(&text.trim().chars().take(100).collect::<String>())
        ))
    })
}

/// Each daemon (by its id in the store) and where it is reached from `here`, or why it cannot
/// be followed.
fn targets(daemons: &[DaemonRow], here: &str) -> Vec<(String, Result<Target, String>)> {
    daemons
        .iter()
        .map(|d| {
            let name = format!("{} pid {}", d.host, d.pid);
            let addr = match d.listen.parse::<SocketAddr>() {
                Ok(listen) => reachable(listen, &d.host, here),
                Err(_) => Err(format!(
                    "it did not say where it listens (an anima before `watch`): {:?}",
                    d.listen
                )),
            };
            let target = addr
                .map(|addr| Target {
                    name: Some(name.clone()),
                    addr,
                })
                .map_err(|why| format!("the daemon {}: {why}", line::harmless(&name)));
            (d.daemon.clone(), target)
        })
        .collect()
}

/// Where a daemon listening on `listen` on `host` is reached from this machine (`here`):
/// an unspecified address (0.0.0.0, [::]) is the loopback on this machine and the host's
/// name elsewhere. Port 0 (any free port) cannot be found again.
fn reachable(listen: SocketAddr, host: &str, here: &str) -> Result<String, String> {
    if listen.port() == 0 {
        return Err(format!(
            "it listens on {listen}, a port chosen at start: set `[http] listen` to a fixed port to watch it"
        ));
    }
    if !listen.ip().is_unspecified() {
        return Ok(listen.to_string());
    }
    if host.is_empty() || host == here {
        let ip = match listen.ip() {
            IpAddr::V4(_) => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(_) => IpAddr::V6(Ipv6Addr::LOCALHOST),
        };
        return Ok(SocketAddr::new(ip, listen.port()).to_string());
    }
    Ok(format!("{host}:{}", listen.port()))
}

/// What every follower shares: the client, the token, the printer's channel.
#[derive(Clone)]
struct Follow {
    client: reqwest::Client,
    token: String,
    tx: mpsc::Sender<Seen>,
}

/// How one connection to a daemon ended.
enum Ended {
    /// The stream ended or broke (a restart): try again.
    Again(String),
    /// Refused for good (401, 404): stop watching, saying why.
    Refused(String),
    /// Nobody prints any more.
    Done,
}

impl Follow {
    /// Follows one daemon's stream for as long as the printer listens, connecting again
    /// with a growing wait (the server's `retry` the first) whenever it ends.
    async fn daemon(self, target: Target) {
        let mut parser = sse::Parser::default();
        let mut wait = FIRST_WAIT;
        let who = match &target.name {
            Some(n) => format!("the daemon {} at {}", line::harmless(n), target.addr),
            None => format!("the daemon at {}", target.addr),
        };
        loop {
            let (ended, had_records) = self.connect(&target, &mut parser).await;
            let why = match ended {
                Ended::Done => return,
                Ended::Refused(why) => {
                    let _ = self.tx.send(Seen::Refused(why)).await;
                    return;
                }
                Ended::Again(why) => why,
            };
            if had_records {
                wait = parser.retry_ms.map_or(FIRST_WAIT, Duration::from_millis);
            }
            let wait_now = wait.clamp(Duration::from_millis(100), LONGEST_WAIT);
            eprintln!(
                "anima: {why} ({who}: restarted, or this watch fell too far behind); connecting again in {} ms",
                wait_now.as_millis()
            );
            tokio::time::sleep(wait_now).await;
            wait = (wait_now * 2).min(LONGEST_WAIT);
            if self.tx.is_closed() {
                return;
            }
        }
    }

    /// One connection: its records to the printer until it ends. Whether it gave any.
    async fn connect(&self, target: &Target, parser: &mut sse::Parser) -> (Ended, bool) {
        let url = format!("http://{}{STREAM_PATH}", target.addr);
        let mut request = self
            .client
            .get(&url)
            .bearer_auth(&self.token)
            .header("accept", "text/event-stream");
        if let Some(id) = &parser.last_id {
            request = request.header("last-event-id", id.as_str());
        }
        let response = match request.send().await {
            Ok(r) => r,
            Err(e) => {
                return (
                    Ended::Again(format!("cannot reach {url}: {}", cause(&e))),
                    false,
                )
            }
        };
        let status = response.status().as_u16();
        match status {
            200 => {}
            401 | 403 | 404 => {
                let refused = format!(
                    "{url} answered HTTP {status}: the daemon serves its stream only with {TOKEN_VAR} set, and only to that same token"
                );
                return (Ended::Refused(refused), false);
            }
            _ => return (Ended::Again(format!("{url} answered HTTP {status}")), false),
        }
        parser.reconnected();
        let mut body = response.bytes_stream();
        let mut any = false;
        while let Some(chunk) = body.next().await {
            let chunk = match chunk {
                Ok(c) => c,
                Err(e) => {
                    return (
                        Ended::Again(format!("the stream broke: {}", cause(&e))),
                        any,
                    )
                }
            };
            let events = match parser.push(&chunk) {
                Ok(events) => events,
                Err(sse::TooLong) => {
                    return (
                        Ended::Again("the stream sent a line too long to keep".into()),
                        any,
                    )
                }
            };
            let records: Vec<String> = (events.into_iter())
                .filter(|e| e.event == "message")
                .map(|e| e.data)
                .collect();
            if records.is_empty() {
                continue;
            }
            any = true;
            let seen = Seen::Records(target.name.clone(), records);
            if self.tx.send(seen).await.is_err() {
                return (Ended::Done, any);
            }
        }
        (Ended::Again("the stream ended".into()), any)
    }
}

/// An HTTP error's innermost cause, in words (reqwest's own says only "error sending
/// request").
fn cause(e: &dyn std::error::Error) -> String {
    let mut inner: &dyn std::error::Error = e;
    while let Some(next) = inner.source() {
        inner = next;
    }
    inner.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_are_read_by_name_and_an_unknown_one_lists_them() {
        let got = phases(&["model".into(), "error,cognition".into()]).unwrap();
        assert_eq!(got, [Phase::Model, Phase::Error, Phase::Cognition]);
        let Err(Failure::Usage(msg)) = phases(&["modle".into()]) else {
            panic!("a usage error");
        };
        assert!(msg.contains("\"modle\""), "{msg}");
        assert!(
            msg.contains(
                "stimulus, plan, prompt, model, cognition, decision, memory, response, error"
            ),
            "{msg}"
        );
    }

    #[test]
    fn an_unspecified_listen_is_the_loopback_here_and_the_host_elsewhere() {
        let at = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert_eq!(
            reachable(at("0.0.0.0:8080"), "", "").unwrap(),
            "127.0.0.1:8080"
        );
        assert_eq!(
            reachable(at("[::]:8080"), "box", "box").unwrap(),
            "[::1]:8080"
        );
        assert_eq!(
            reachable(at("0.0.0.0:8080"), "far", "box").unwrap(),
            "far:8080"
        );
        assert_eq!(
            reachable(at("10.0.0.5:81"), "far", "box").unwrap(),
            "10.0.0.5:81"
        );
        assert!(reachable(at("127.0.0.1:0"), "", "")
            .unwrap_err()
            .contains("fixed port"));
    }

    #[test]
    fn each_daemon_is_reached_where_it_listens_or_named_when_it_cannot_be() {
        let row = |daemon: &str, host: &str, listen: &str| DaemonRow {
            daemon: daemon.into(),
            host: host.into(),
            pid: 7,
            listen: listen.into(),
            started_ms: 0,
            heartbeat_ms: 0,
            conversations: 0,
            leads: false,
        };
        let got = targets(
            &[
                row("a", "box", "0.0.0.0:3000"),
                row("b", "far", "[::]:3000"),
                row("c", "old", ""),
                row("d", "box", "127.0.0.1:0"),
            ],
            "box",
        );
        let at = |i: usize| got[i].1.as_ref().map(|t| t.addr.clone());
        assert_eq!(at(0).unwrap(), "127.0.0.1:3000");
        assert_eq!(
            got[0].1.as_ref().unwrap().name.as_deref(),
            Some("box pid 7")
        );
        assert_eq!(at(1).unwrap(), "far:3000");
        assert!(at(2).unwrap_err().contains("the daemon old pid 7"));
        assert!(at(3).unwrap_err().contains("fixed port"));
    }
}
