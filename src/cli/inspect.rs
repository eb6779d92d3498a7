//! `anima inspect [--listen ADDR] [--no-open]`: the inspector without a daemon, for the home or
//! database the config names. It builds the engine as `anima chat` does (so the chat pane
//! talks to the same soul and memory), serves on loopback by default, makes a random token
//! and prints the login URL on stdout; it opens a browser unless told not to, and never fails
//! when there is none. With `SLACK_BOT_TOKEN` in its environment it asks Slack once, in the
//! background, for the workspace's URL (auth.test), so a turn's page links its reply to the
//! Slack message; without it, or while Slack does not answer, the page names the message.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use clap::Args;

use super::{load_config, CliResult, Failure};
use crate::config::secret::Secret;
use crate::engine::Engine;
use crate::inspect::{random_token, routes, Inspector};

#[derive(Debug, Args)]
pub struct InspectArgs {
    /// Where to serve (a port of 0 takes a free one; the URL printed names it).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Print the URL only: open no browser.
    #[arg(long)]
    pub no_open: bool,
}

pub async fn run(config_path: Option<&Path>, args: InspectArgs) -> CliResult {
    let config = load_config(config_path)?;
    let engine = Arc::new(
        Engine::build(&config)
            .await
            .map_err(Failure::from)?
            .start_tools(),
    );
    let token = random_token();
    let inspector = Inspector::new(engine.clone(), Secret::new(token.clone()));
    place_replies(&config, &inspector);
    let closing = inspector.clone();
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| Failure::Runtime(format!("cannot listen on {}: {e}", args.listen)))?;
    let addr = listener.local_addr().map_err(Failure::runtime)?;
    let url = format!("http://{addr}/inspect/?token={token}");
    println!("{url}");
    eprintln!("The inspector is served at http://{addr}/inspect/ (Ctrl-C stops it).");
    if !args.no_open {
        open_browser(&url);
    }
    let stop = async move {
        let _ = tokio::signal::ctrl_c().await;
        closing.close();
    };
    let served = axum::serve(listener, routes(Some(inspector)))
        .with_graceful_shutdown(stop)
        .await;
    engine.flush_traces().await;
    engine.stop_tools().await;
    served.map_err(|e| Failure::Runtime(format!("serving the inspector: {e}")))
}

/// How a turn's page names the Slack message its reply went into: its permalink once Slack has
/// named the workspace (asked once, in the background, when `SLACK_BOT_TOKEN` is set).
fn place_replies(config: &crate::config::Config, inspector: &Inspector) {
    let api = Secret::from_env("SLACK_BOT_TOKEN").map(|bot| {
        let client = Arc::new(slack_morphism::SlackClient::new(
            crate::slack::api::connector(&config.slack.api_base_url),
        ));
        Arc::new(crate::slack::api::SlackApi::new(client, &bot))
    });
    if let Some(api) = &api {
        let api = api.clone();
        tokio::spawn(async move {
            if let Err(e) = api.auth_test().await {
                tracing::debug!(error = %e, "auth.test: the workspace's URL stays unknown");
            }
        });
    }
    inspector.placing_replies(Arc::new(move |address, reference| {
        let workspace = api.as_ref().and_then(|a| a.workspace_url());
        crate::slack::why::permalink(workspace.as_deref(), address, reference)
    }));
}

/// Opens `url` with the desktop's opener if there is one (`xdg-open`, or `open` on macOS);
/// says so on stderr when there is none, and carries on.
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let spawned = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    match spawned {
        // Waited for on a thread of its own, so it leaves no zombie behind.
        Ok(mut child) => drop(std::thread::spawn(move || child.wait())),
        Err(_) => eprintln!("No `{opener}` to open a browser: open the URL above."),
    }
}
