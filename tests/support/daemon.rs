//! Runs the real `anima run` against the fake Slack and the fake model.
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
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        Daemon {
            child,
            http: "127.0.0.1:0".parse().unwrap(),
            log,
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

    pub fn child_alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    pub fn kill9(&mut self) {
        self.child.kill().unwrap();
        let _ = self.child.wait();
    }

    pub fn wait_exit(&mut self, secs: u64) -> i32 {
        let deadline = Instant::now() + Duration::from_secs(secs);
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
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
