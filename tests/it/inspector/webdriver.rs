//! A small W3C WebDriver client over reqwest, for the few commands the inspector's browser
//! tests need: headless Chromium through `chromedriver`. When `chromedriver` is not on PATH
//! the tests say so and skip, unless `ANIMA_TEST_BROWSER=1` (CI), where that fails.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::support::wait;

pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    client: reqwest::Client,
    _profile: tempfile::TempDir,
}

/// `chromedriver` on PATH, if there is one.
fn chromedriver() -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("chromedriver"))
        .find(|p| p.is_file())
}

impl Browser {
    /// A headless Chromium, or `None` (with a line saying why) when there is no chromedriver
    /// and the browser is not required.
    pub fn start(test: &str) -> Option<Browser> {
        let Some(driver) = chromedriver() else {
            if std::env::var("ANIMA_TEST_BROWSER").is_ok_and(|v| v == "1") {
                panic!("ANIMA_TEST_BROWSER=1 but no chromedriver on PATH (apt-get install chromium chromium-driver)");
            }
            println!(
                "skipped {test}: no chromedriver on PATH (ANIMA_TEST_BROWSER=1 makes this fail)"
            );
            return None;
        };
        anima::tls::install();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let profile = tempfile::tempdir().unwrap();
        let mut browser = Browser {
            driver: child,
            base: format!("http://127.0.0.1:{port}"),
            session: String::new(),
            client: reqwest::Client::new(),
            _profile: profile,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while browser.call("GET", "/status", Value::Null).is_err() {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not answer within 20 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut args = vec![
            "--headless=new".to_string(),
            "--no-sandbox".into(),
            "--disable-gpu".into(),
            "--disable-dev-shm-usage".into(),
            "--window-size=1280,1000".into(),
            format!("--user-data-dir={}", browser._profile.path().display()),
        ];
        args.push("--no-first-run".into());
        let mut options = json!({ "args": args });
        if std::path::Path::new("/usr/bin/chromium").exists() {
            options["binary"] = json!("/usr/bin/chromium");
        }
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": options,
            "unhandledPromptBehavior": "ignore",
        }}});
        let made = browser
            .call("POST", "/session", caps)
            .expect("a browser session");
        browser.session = made["sessionId"].as_str().unwrap().to_string();
        Some(browser)
    }

    /// One WebDriver command: its `value`, or the error WebDriver named.
    pub fn call(&self, method: &str, path: &str, body: Value) -> Result<Value, Value> {
        let url = format!("{}{path}", self.base);
        let client = self.client.clone();
        let method: reqwest::Method = method.parse().unwrap();
        wait(async move {
            let mut req = client.request(method.clone(), url);
            if method == reqwest::Method::POST {
                req = req.json(&body);
            }
            let resp = req
                .send()
                .await
                .map_err(|e| json!({"error": e.to_string()}))?;
            let ok = resp.status().is_success();
            let json: Value = resp
                .json()
                .await
                .map_err(|e| json!({"error": e.to_string()}))?;
            let value = json.get("value").cloned().unwrap_or(Value::Null);
            if ok {
                Ok(value)
            } else {
                Err(value)
            }
        })
    }

    fn session(&self, method: &str, path: &str, body: Value) -> Value {
        let path = format!("/session/{}{path}", self.session);
        self.call(method, &path, body)
            .unwrap_or_else(|e| panic!("WebDriver {method} {path}: {e}"))
    }

    pub fn goto(&self, url: &str) {
        self.session("POST", "/url", json!({ "url": url }));
    }

    pub fn current_url(&self) -> String {
        self.session("GET", "/url", Value::Null)
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Runs `script` in the page (its arguments `args`): its value.
    pub fn script(&self, script: &str, args: Value) -> Value {
        self.session(
            "POST",
            "/execute/sync",
            json!({"script": script, "args": args}),
        )
    }

    /// The elements `css` selects now.
    pub fn all(&self, css: &str) -> Vec<String> {
        let found = self.session(
            "POST",
            "/elements",
            json!({"using": "css selector", "value": css}),
        );
        found
            .as_array()
            .unwrap()
            .iter()
            .map(|e| {
                e.as_object()
                    .unwrap()
                    .values()
                    .next()
                    .unwrap()
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect()
    }

    /// The first element `css` selects, waiting up to `secs` for one.
    pub fn wait_for(&self, css: &str, secs: u64) -> String {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            if let Some(e) = self.all(css).into_iter().next() {
                return e;
            }
            assert!(
                Instant::now() < deadline,
                "no {css:?} within {secs} s at {}",
                self.current_url()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn text(&self, element: &str) -> String {
        let v = self.session("GET", &format!("/element/{element}/text"), Value::Null);
        v.as_str().unwrap_or("").to_string()
    }

    pub fn attr(&self, element: &str, name: &str) -> Option<String> {
        let v = self.session(
            "GET",
            &format!("/element/{element}/attribute/{name}"),
            Value::Null,
        );
        v.as_str().map(str::to_string)
    }

    pub fn click(&self, element: &str) {
        self.session("POST", &format!("/element/{element}/click"), json!({}));
    }

    pub fn type_in(&self, element: &str, text: &str) {
        self.session(
            "POST",
            &format!("/element/{element}/value"),
            json!({ "text": text }),
        );
    }

    /// The text of the open alert, confirm or prompt dialog, if one is open.
    pub fn alert(&self) -> Option<String> {
        let path = format!("/session/{}/alert/text", self.session);
        match self.call("GET", &path, Value::Null) {
            Ok(text) => Some(text.as_str().unwrap_or("").to_string()),
            Err(e) => {
                assert_eq!(e["error"], "no such alert", "{e}");
                None
            }
        }
    }

    /// The page as a PNG.
    pub fn screenshot(&self) -> Vec<u8> {
        let b64 = self.session("GET", "/screenshot", Value::Null);
        base64_decode(b64.as_str().unwrap())
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self.call("DELETE", &format!("/session/{}", self.session), Value::Null);
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let clean: Vec<u8> = text
        .bytes()
        .filter(|c| !c.is_ascii_whitespace() && *c != b'=')
        .collect();
    let mut out = Vec::with_capacity(clean.len() * 3 / 4);
    for chunk in clean.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= (value(c) as u32) << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    out
}

#[test]
fn base64_reads_back() {
    assert_eq!(base64_decode("aGVsbG8="), b"hello");
    assert_eq!(base64_decode("aGk="), b"hi");
    assert_eq!(base64_decode("YWJj"), b"abc");
}
