//! `anima slack manifest [--json] [--events-url URL] [--minimal]`: the Slack app manifest for this soul,
//! to paste into "Create New App → From a manifest". Reads the soul's name and its
//! suggested prompts; what the manifest holds is `slack::manifest`'s.

use std::io::Write;
use std::path::Path;

use clap::{Args, Subcommand};

use super::{load_config, CliResult, Failure};
use crate::config::SlackMode;
use crate::slack::manifest::{self, yaml, App, Delivery, Extent, EVENTS_PATH};
use crate::soul::SoulFiles;

#[derive(Debug, Subcommand)]
pub enum SlackCommand {
    /// Print the Slack app manifest (YAML; --json for JSON) with the features, bot scopes,
    /// bot events and interactivity anima uses: Socket Mode, or the Events API with
    /// --events-url.
    Manifest(ManifestArgs),
}

#[derive(Debug, Args)]
pub struct ManifestArgs {
    /// Print the manifest as JSON.
    #[arg(long)]
    pub json: bool,
    /// Use the Events API instead of Socket Mode: the public URL of anima's
    /// `POST /slack/events` (e.g. https://anima.example.com/slack/events).
    #[arg(long, value_name = "URL")]
    pub events_url: Option<String>,
    /// Leave out the events and scopes only the soul's inner life uses (reactions, people
    /// joining its channels: `reactions:read`, `channels:read`, `groups:read`); the soul
    /// answers as well without them.
    #[arg(long)]
    pub minimal: bool,
}

/// The name a soul without a `# Name` heading goes by in Slack.
const DEFAULT_NAME: &str = "anima";

pub fn run(config_path: Option<&Path>, command: SlackCommand) -> CliResult {
    let SlackCommand::Manifest(args) = command;
    let url = args.events_url.as_deref().map(check_url).transpose()?;
    let config = load_config(config_path)?;
    let soul =
        SoulFiles::load_or_built_in(&config.soul_dir).map_err(|e| Failure::Usage(e.to_string()))?;
    let words = crate::assistant::load(&config.soul_dir).map_err(|problems| {
        Failure::Usage(
            problems
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join("\n"),
        )
    })?;
    let name = match soul.name() {
        "the soul" => DEFAULT_NAME,
        n => n,
    };
    let delivery = match url {
        Some(url) => {
            if !url_path(url).trim_end_matches('/').ends_with(EVENTS_PATH) {
                eprintln!(
                    "anima: note: anima takes events and interactions at `POST {EVENTS_PATH}`; make sure {url} reaches it"
                );
            }
            Delivery::Events { url }
        }
        None => {
            if config.slack.mode == SlackMode::Events {
                eprintln!(
                    "anima: note: [slack] mode is \"events\" but this manifest is for Socket Mode; pass --events-url https://<host>{EVENTS_PATH} for the Events API"
                );
            }
            Delivery::Socket
        }
    };
    let app = App {
        name,
        prompts: &words.prompts,
    };
    let extent = if args.minimal {
        Extent::Minimal
    } else {
        Extent::Full
    };
    let value = manifest::manifest(&app, delivery, extent);
    let text = if args.json {
        serde_json::to_string_pretty(&value).map_err(Failure::runtime)? + "\n"
    } else {
        yaml::to_yaml(&value)
    };
    // Piped into `head` or a clipboard tool that stops reading: nothing more to say.
    match std::io::stdout().lock().write_all(text.as_bytes()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(Failure::runtime(format!("cannot write the manifest: {e}")))
        }
        _ => Ok(()),
    }
}

/// `url` if Slack can post to it: `http://` or `https://`, a host, no spaces.
fn check_url(url: &str) -> Result<&str, Failure> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    let host = rest.map(|r| r.split(['/', '?', '#']).next().unwrap_or(""));
    let clean = !url.chars().any(|c| c.is_whitespace() || c.is_control());
    match host {
        Some(h) if !h.is_empty() && !h.starts_with(':') && clean => Ok(url),
        _ => Err(Failure::Usage(format!(
            "--events-url {url:?} is not a URL Slack can post to: give the public http:// or https:// URL of anima's {EVENTS_PATH}, e.g. https://anima.example.com{EVENTS_PATH}"
        ))),
    }
}

/// The path of a URL `check_url` accepted, without its query or fragment.
fn url_path(url: &str) -> &str {
    let after_scheme = url.split_once("://").map_or(url, |(_, r)| r);
    let path = after_scheme.find('/').map_or("", |i| &after_scheme[i..]);
    path.split(['?', '#']).next().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::{check_url, url_path};

    #[test]
    fn a_url_slack_can_post_to_is_http_or_https_with_a_host() {
        for good in [
            "https://x.example/slack/events",
            "http://127.0.0.1:3000/slack/events",
            "https://x.example",
        ] {
            assert!(check_url(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "x.example/slack/events",
            "ftp://x.example/slack/events",
            "https://",
            "https:///slack/events",
            "https://:443/slack/events",
            "https://x.example/slack events",
            "HTTPS//x.example",
        ] {
            assert!(check_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_path_is_read_without_query_or_fragment() {
        assert_eq!(
            url_path("https://x.example/slack/events?a=1"),
            "/slack/events"
        );
        assert_eq!(
            url_path("https://x.example/a/slack/events#f"),
            "/a/slack/events"
        );
        assert_eq!(url_path("https://x.example"), "");
    }
}
