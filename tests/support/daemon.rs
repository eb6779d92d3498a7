//! Runs the real `anima run` against the fake Slack and the fake model: one, or several on
//! one home (one config, one PostgreSQL database, one fake Slack and model; each daemon its
//! own HTTP port and log), with signals to kill, pause, resume or stop one of them.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::slack::{FakeSlack, APP_TOKEN, BOT_TOKEN, SIGNING_SECRET};
use super::{FakeModel, Home};

pub struct Daemon {
    pub child: Child,
    pub http: SocketAddr,
    log: Arc<Mutex<Vec<String>>>,
    /// The thread reading the daemon's stderr into `log`: done once the daemon has exited and
    /// its last line is in.
    reader: std::thread::JoinHandle<()>,
}

/// A home whose config points anima at the fakes. `extra` is more TOML: keys under a leading
/// `[slack]` line join the `[slack]` table; other tables follow it.
pub fn home(model: &FakeModel, slack: &FakeSlack, mode: &str, extra: &str) -> Home {
    home_on(super::backend(), model, slack, mode, extra)
}

/// `home` on this backend (see `Home::on`).
pub fn home_on(
    backend: super::Backend,
    model: &FakeModel,
    slack: &FakeSlack,
    mode: &str,
    extra: &str,
) -> Home {
    let extra = extra.strip_prefix("[slack]\n").unwrap_or(extra);
    Home::on(
        backend,
        "anthropic",
        &model.url(),
        &format!(
            "\n[slack]\nmode = \"{mode}\"\napi_base_url = \"{}\"\n{extra}\n\n[http]\nlisten = \"127.0.0.1:0\"\n\n[daemon]\nshutdown_grace_secs = 10\n",
            slack.api_url()
        ),
    )
}

impl Daemon {
    pub fn start(home: &Home) -> Daemon {
        Self::start_env(home, &[])
    }

    pub fn start_env(home: &Home, env: &[(&str, &str)]) -> Daemon {
        let mut d = Self::spawn(home, env);
        d.http = d.wait_http();
        d
    }

    /// Spawns without waiting for anything.
    pub fn spawn(home: &Home, env: &[(&str, &str)]) -> Daemon {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_anima"));
        cmd.arg("--config")
            .arg(home.config())
            .arg("run")
            .current_dir(home.dir.path())
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", home.dir.path())
            .env("ANTHROPIC_API_KEY", "sk-ant-test-secret-key")
            .env("SLACK_BOT_TOKEN", BOT_TOKEN)
            .env("SLACK_APP_TOKEN", APP_TOKEN)
            .env("SLACK_SIGNING_SECRET", SIGNING_SECRET)
            .env("ANIMA_LOG", "anima=debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        super::database_env(&mut cmd, home.dir.path());
        for (k, v) in env {
            if v.is_empty() {
                cmd.env_remove(k);
            } else {
                cmd.env(k, v);
            }
        }
        let mut child = cmd.spawn().expect("anima run starts");
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let sink = log.clone();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Daemon {
            child,
            http: "127.0.0.1:0".parse().unwrap(),
            log,
            reader,
        }
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    pub fn wait_log(&self, needle: &str, secs: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if let Some(line) = self.log.lock().unwrap().iter().find(|l| l.contains(needle)) {
                return line.clone();
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!(
            "no log line with {needle:?} within {secs} s:\n{}",
            self.log()
        );
    }

    fn wait_http(&self) -> SocketAddr {
        let line = self.wait_log("http listening", 20);
        let addr = line
            .split("addr=")
            .nth(1)
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap();
        addr.parse().unwrap()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.http)
    }

    /// Sends SIGTERM and waits for the exit code.
    pub fn terminate(&mut self) -> i32 {
        let pid = self.child.id() as i32;
        Command::new("kill")
            .arg("-TERM")
            .arg(pid.to_string())
            .status()
            .unwrap();
        self.wait_exit(30)
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal (`STOP`, `CONT`, `TERM`, `KILL` …) with `kill(1)`.
    pub fn signal(&self, name: &str) {
        let status = Command::new("kill")
            .arg(format!("-{name}"))
            .arg(self.pid().to_string())
            .status()
            .unwrap();
        assert!(status.success(), "kill -{name} {} failed", self.pid());
    }

    /// SIGSTOP: the process is paused (its sockets stay open; nothing it does moves).
    pub fn pause(&self) {
        self.signal("STOP");
    }

    /// SIGCONT: a paused process goes on where it stopped.
    pub fn resume(&self) {
        self.signal("CONT");
    }

    /// The fake Slack's ids of the Socket Mode connections this process holds now (found by
    /// the client's end of each TCP connection in `/proc`).
    pub fn slack_connections(&self, slack: &FakeSlack) -> Vec<usize> {
        let ours = socket_inodes(self.pid());
        let tcp = tcp_inodes(slack.addr.port());
        slack
            .connections()
            .into_iter()
            .filter(|c| c.open)
            .filter(|c| {
                tcp.get(&c.peer.port())
                    .is_some_and(|inode| ours.contains(inode))
            })
            .map(|c| c.id)
            .collect()
    }

    /// The local ports of this process's TCP connections to the fake Slack now (its Socket
    /// Mode connections and its Web API client's): see `slack_ports`.
    pub fn slack_ports(&self, slack: &FakeSlack) -> Vec<u16> {
        slack_ports(self.pid(), slack.addr.port())
    }

    /// Waits until this process holds `n` open Socket Mode connections; returns their ids.
    pub fn wait_slack_connections(&self, slack: &FakeSlack, n: usize, secs: u64) -> Vec<usize> {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let held = self.slack_connections(slack);
            if held.len() >= n {
                return held;
            }
            if Instant::now() > deadline {
                panic!(
                    "daemon {} holds {} Socket Mode connections after {secs} s, not {n}:\n{}",
                    self.pid(),
                    held.len(),
                    self.log()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn child_alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub fn kill9(&mut self) {
        self.child.kill().unwrap();
        let _ = self.child.wait();
    }

    /// After the exit: waits (a little) for the reader to take the daemon's last lines, so
    /// `log` holds everything it said.
    fn read_to_the_end(&self) {
        let deadline = Instant::now() + Duration::from_secs(5);
        while !self.reader.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn wait_exit(&mut self, secs: u64) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                self.read_to_the_end();
                return status.code().unwrap_or(-1);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("anima did not exit within {secs} s:\n{}", self.log());
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A blocking HTTP request to the daemon, for tests: (status, body).
pub fn http(method: &str, url: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    try_http(method, url, headers, body).unwrap()
}

/// Like `http`, but a connection the server closed before taking the whole body is an error.
pub fn try_http(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> Result<(u16, String), String> {
    anima::tls::install();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = reqwest::Client::new();
        let mut req = client
            .request(method.parse().unwrap(), url)
            .body(body.to_string());
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.map_err(|e| format!("{e:?}"))?;
        let status = resp.status().as_u16();
        Ok((status, resp.text().await.map_err(|e| e.to_string())?))
    })
}

/// The local ports of process `pid`'s open loopback TCP connections to `port` (the fake
/// Slack's): a post's `from` port names the process that posted it while that connection
/// stays open (the Web API client keeps its connections for reuse).
pub fn slack_ports(pid: u32, port: u16) -> Vec<u16> {
    let ours = socket_inodes(pid);
    let mut ports: Vec<u16> = tcp_inodes(port)
        .into_iter()
        .filter(|(_, inode)| ours.contains(inode))
        .map(|(local, _)| local)
        .collect();
    ports.sort_unstable();
    ports
}

/// The inodes of the sockets process `pid` holds open.
fn socket_inodes(pid: u32) -> std::collections::HashSet<u64> {
    let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Default::default();
    };
    fds.filter_map(Result::ok)
        .filter_map(|fd| std::fs::read_link(fd.path()).ok())
        .filter_map(|link| {
            let link = link.to_string_lossy().into_owned();
            link.strip_prefix("socket:[")?
                .strip_suffix(']')?
                .parse()
                .ok()
        })
        .collect()
}

/// Loopback TCP connections to `port`: the client's port → the socket's inode.
fn tcp_inodes(port: u16) -> std::collections::HashMap<u16, u64> {
    let text = std::fs::read_to_string("/proc/net/tcp").unwrap_or_default();
    let port_of = |addr: &str| u16::from_str_radix(addr.rsplit(':').next()?, 16).ok();
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (local, remote, inode) = (f.get(1)?, f.get(2)?, f.get(9)?);
            (port_of(remote)? == port).then_some(())?;
            Some((port_of(local)?, inode.parse().ok()?))
        })
        .collect()
}

/// Several `anima run` on one home: each started after the last has connected to Slack.
pub struct Daemons {
    pub list: Vec<Daemon>,
}

/// A home on PostgreSQL for several daemons: a fresh database, `[store] claim_lease_secs =
/// lease_secs`, the fakes; `extra` as for `home`. `None` (said on stderr) when
/// `ANIMA_TEST_POSTGRES_URL` is unset: the test is skipped.
pub fn shared_home(
    model: &FakeModel,
    slack: &FakeSlack,
    lease_secs: u64,
    extra: &str,
) -> Option<Home> {
    if std::env::var(super::postgres::POSTGRES_URL).map_or(true, |u| u.is_empty()) {
        eprintln!(
            "skipped: several daemons need PostgreSQL ({} is not set)",
            super::postgres::POSTGRES_URL
        );
        return None;
    }
    let home = home_on(super::Backend::Postgres, model, slack, "socket", extra);
    let cfg = std::fs::read_to_string(home.config()).unwrap();
    assert!(
        cfg.trim_end().ends_with("backend = \"postgres\""),
        "the [store] section is last: {cfg}"
    );
    std::fs::write(
        home.config(),
        format!("{cfg}claim_lease_secs = {lease_secs}\n"),
    )
    .unwrap();
    Some(home)
}

impl Daemons {
    /// Starts `n` daemons on `home`, one after another, each once it holds its Socket Mode
    /// connections (two each) and the one before it has too.
    pub fn start(home: &Home, slack: &FakeSlack, n: usize, env: &[(&str, &str)]) -> Daemons {
        let mut list = Vec::new();
        for _ in 0..n {
            list.push(start_connected(home, slack, env));
        }
        Daemons { list }
    }

    /// Starts one more daemon on `home` (after a restart: its replacement) and waits for its
    /// connections; returns its index.
    pub fn add(&mut self, home: &Home, slack: &FakeSlack, env: &[(&str, &str)]) -> usize {
        self.list.push(start_connected(home, slack, env));
        self.list.len() - 1
    }

    pub fn logs(&self) -> String {
        self.list
            .iter()
            .enumerate()
            .map(|(i, d)| format!("--- daemon {i} (pid {}) ---\n{}", d.pid(), d.log()))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl std::ops::Index<usize> for Daemons {
    type Output = Daemon;
    fn index(&self, i: usize) -> &Daemon {
        &self.list[i]
    }
}

impl std::ops::IndexMut<usize> for Daemons {
    fn index_mut(&mut self, i: usize) -> &mut Daemon {
        &mut self.list[i]
    }
}

/// A daemon started on `home` that holds its two Socket Mode connections.
fn start_connected(home: &Home, slack: &FakeSlack, env: &[(&str, &str)]) -> Daemon {
    let d = Daemon::start_env(home, env);
    d.wait_slack_connections(slack, 2, 20);
    d
}
