//! `ANIMA_LOAD_WATCH=1`: one `anima watch --json` follows the daemon's soul stream through the
//! whole run, its every line read (a watcher that keeps up); `ANIMA_LOAD_KEEP=N` sets
//! `[inspect] keep_turns` (0: no traces), to compare a run with traces and without.

use std::io::{BufRead, BufReader};
use std::process::Child;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::support::daemon::Daemon;
use crate::support::Home;

/// The token the daemon serves its stream with, and `anima watch` sends.
pub const TOKEN: &str = "load-bench-inspect-token";

/// Whether a watcher is wanted (`ANIMA_LOAD_WATCH`).
pub fn wanted() -> bool {
    std::env::var_os("ANIMA_LOAD_WATCH").is_some()
}

/// `[inspect] keep_turns` as `ANIMA_LOAD_KEEP` asks (none: the default), as config lines.
pub fn keep_lines() -> String {
    match std::env::var("ANIMA_LOAD_KEEP") {
        Ok(n) => format!(
            "\n[inspect]\nkeep_turns = {}\n",
            n.parse::<u64>().expect("ANIMA_LOAD_KEEP: a number")
        ),
        Err(_) => String::new(),
    }
}

/// A running `anima watch` and the records it printed.
pub struct Watcher {
    child: Child,
    pub records: Arc<AtomicU64>,
}

impl Watcher {
    /// Follows `d` (a daemon of `home` serving on an address of its own): `anima watch` reads
    /// `[http] listen` from a copy of the home's config naming that address.
    pub fn start(home: &Home, d: &Daemon) -> Watcher {
        let cfg = std::fs::read_to_string(home.config()).unwrap();
        let cfg = cfg.replace(
            "listen = \"127.0.0.1:0\"",
            &format!("listen = \"{}\"", d.http),
        );
        let path = home.dir.path().join("watch.toml");
        std::fs::write(&path, cfg).unwrap();
        let mut cmd = crate::support::anima_command(&path, home.dir.path(), &["watch", "--json"]);
        cmd.env("ANIMA_INSPECT_TOKEN", TOKEN)
            .stderr(std::process::Stdio::null());
        let mut child = crate::support::spawn(&mut cmd);
        let stdout = child.stdout.take().unwrap();
        let records = Arc::new(AtomicU64::new(0));
        let r = records.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).split(b'\n') {
                if line.is_err() {
                    break;
                }
                r.fetch_add(1, Ordering::Relaxed);
            }
        });
        Watcher { child, records }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
