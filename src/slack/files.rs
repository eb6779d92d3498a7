//! The files people share, fetched with the bot token from Slack's file hosts only:
//! `files.slack.com` over HTTPS, and the host and port of `[slack] api_base_url` (so a Slack
//! stand-in serves files too; over HTTP only when that base is HTTP). The token is never sent
//! anywhere else: the client follows no redirect; one to an allowed origin is followed by hand
//! (a few at most), one elsewhere is not. The body is streamed and the read stops at the
//! limit. Implements `files::Fetch`, which the engine calls in the turn.

use std::time::Duration;

use reqwest::{StatusCode, Url};
use tracing::warn;

use crate::config::secret::Secret;
use crate::files::{Attachment, Fetch, Fetched};

/// Slack's file host.
const FILE_HOST: &str = "files.slack.com";
/// Redirects followed (each to an allowed origin) before the fetch gives up.
const MAX_REDIRECTS: usize = 3;
/// A file's whole fetch, from the request to its last byte.
const WITHIN: Duration = Duration::from_secs(60);

/// Where files may come from: a scheme, a host and a port.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Origin {
    scheme: String,
    host: String,
    port: Option<u16>,
}

impl Origin {
    fn of(url: &Url) -> Option<Origin> {
        Some(Origin {
            scheme: url.scheme().to_string(),
            host: url.host_str()?.to_ascii_lowercase(),
            port: url.port_or_known_default(),
        })
    }
}

/// Fetches shared files with the bot token.
pub struct SlackFiles {
    client: reqwest::Client,
    token: Secret,
    /// `[slack] api_base_url`'s origin.
    base: Option<Origin>,
}

impl SlackFiles {
    pub fn new(api_base_url: &str, bot_token: &Secret) -> Result<SlackFiles, String> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(Duration::from_secs(10))
            .user_agent(concat!("anima/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| format!("no HTTP client for Slack's files: {e}"))?;
        Ok(SlackFiles {
            client,
            token: bot_token.clone(),
            base: Url::parse(api_base_url).ok().as_ref().and_then(Origin::of),
        })
    }

    fn allowed(&self, url: &Url) -> bool {
        allowed(self.base.as_ref(), url)
    }

    async fn get(&self, address: &str, max_bytes: u64) -> Fetched {
        let Ok(mut url) = Url::parse(address) else {
            return Fetched::Failed("its address is not a URL".into());
        };
        for _ in 0..=MAX_REDIRECTS {
            if !self.allowed(&url) {
                warn!(
                    host = url.host_str().unwrap_or(""),
                    "a file address outside Slack's file hosts: not fetched, the token not sent"
                );
                return Fetched::Failed("its address is not one of Slack's file hosts".into());
            }
            let sent = self
                .client
                .get(url.clone())
                .bearer_auth(self.token.expose())
                .send()
                .await;
            let resp = match sent {
                Ok(r) => r,
                Err(e) => return Fetched::Failed(words(&e)),
            };
            let status = resp.status();
            if status.is_redirection() {
                let next = resp
                    .headers()
                    .get(reqwest::header::LOCATION)
                    .and_then(|l| l.to_str().ok())
                    .and_then(|l| url.join(l).ok());
                match next {
                    Some(next) => url = next,
                    None => {
                        return Fetched::Failed(format!(
                            "Slack answered {status} without a place to go"
                        ))
                    }
                }
                continue;
            }
            if !status.is_success() {
                return Fetched::Failed(refused(status));
            }
            return read_body(resp, max_bytes).await;
        }
        Fetched::Failed("too many redirects".into())
    }
}

/// Whether the token may go to `url`: Slack's file host over HTTPS, or the API base's own
/// scheme, host and port (`base`). Never an address with credentials of its own.
fn allowed(base: Option<&Origin>, url: &Url) -> bool {
    let Some(origin) = Origin::of(url) else {
        return false;
    };
    if !url.username().is_empty() || url.password().is_some() {
        return false;
    }
    let slack = origin.scheme == "https" && origin.host == FILE_HOST && origin.port == Some(443);
    slack || base == Some(&origin)
}

#[async_trait::async_trait]
impl Fetch for SlackFiles {
    async fn fetch(&self, file: &Attachment, max_bytes: u64) -> Fetched {
        match tokio::time::timeout(WITHIN, self.get(&file.url, max_bytes)).await {
            Ok(fetched) => fetched,
            Err(_) => Fetched::Failed(format!("no answer within {} s", WITHIN.as_secs())),
        }
    }
}

/// The body, streamed: at most `max_bytes` are kept; past them the read stops.
async fn read_body(mut resp: reqwest::Response, max_bytes: u64) -> Fetched {
    if resp.content_length().is_some_and(|n| n > max_bytes) {
        return Fetched::TooBig { read: 0 };
    }
    let expected = resp.content_length().unwrap_or(0).min(max_bytes);
    let mut body = Vec::with_capacity(usize::try_from(expected).unwrap_or(0));
    loop {
        match resp.chunk().await {
            Ok(Some(chunk)) => {
                let read = body.len() as u64 + chunk.len() as u64;
                if read > max_bytes {
                    return Fetched::TooBig { read };
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Fetched::Bytes(body),
            Err(e) => return Fetched::Failed(words(&e)),
        }
    }
}

/// A refusal in words.
fn refused(status: StatusCode) -> String {
    match status.as_u16() {
        401 | 403 => format!("Slack refused it ({status}; does the app have `files:read`?)"),
        404 | 410 => format!("Slack has no such file ({status})"),
        _ => format!("Slack answered {status}"),
    }
}

/// A transport error in words, without its URL.
fn words(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else if e.is_body() || e.is_decode() {
        "the download broke off"
    } else {
        "the request failed"
    };
    let mut source = std::error::Error::source(e);
    let mut last = None;
    while let Some(s) = source {
        last = Some(s.to_string());
        source = s.source();
    }
    match last {
        Some(why) => format!("{kind}: {why}"),
        None => kind.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(url: &str) -> Option<Origin> {
        Origin::of(&Url::parse(url).unwrap())
    }

    #[test]
    fn only_slacks_file_host_and_the_api_base_are_allowed() {
        let b = base("http://127.0.0.1:4000/api");
        let ok = |u: &str| allowed(b.as_ref(), &Url::parse(u).unwrap());
        assert!(ok("https://files.slack.com/files-pri/T1-F1/download/a.png"));
        assert!(ok("https://FILES.slack.com/x"));
        assert!(ok("http://127.0.0.1:4000/files/F1"));
        assert!(!ok("http://files.slack.com/x"), "plain HTTP to Slack");
        assert!(!ok("https://files.slack.com:8443/x"), "another port");
        assert!(
            !ok("http://127.0.0.1:4001/files/F1"),
            "the base's host, another port"
        );
        assert!(
            !ok("https://127.0.0.1:4000/files/F1"),
            "the base's port, another scheme"
        );
        assert!(!ok("https://files.slack.com.evil.example/x"));
        assert!(!ok("https://evil.example/files.slack.com"));
        assert!(!ok("https://user:pw@files.slack.com/x"));
        assert!(!ok("file:///etc/passwd"));
    }

    #[test]
    fn the_real_api_base_allows_no_plain_http() {
        let b = base("https://slack.com/api");
        assert!(allowed(
            b.as_ref(),
            &Url::parse("https://slack.com/files/x").unwrap()
        ));
        assert!(!allowed(
            b.as_ref(),
            &Url::parse("http://slack.com/files/x").unwrap()
        ));
    }
}
