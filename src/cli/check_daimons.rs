//! `anima check`'s report of `[[daimons]]`: for each, its kind; an endpoint's bearer variable
//! (set or not; never its value) and whether its URL answers at all (a GET within the
//! daimon's timeout, at most 3 s: any HTTP status will do, nothing is asked of the daimon;
//! skipped with `--offline`); a persona's soul file (readable or not).

use std::time::Duration;

use crate::config::secret::Secret;
use crate::config::{Config, DaimonKind};
use crate::daimon;

/// The longest a daimon's URL is waited for.
const PROBE_AT_MOST: Duration = Duration::from_secs(3);

/// Notes, warnings and problems about each daimon, asked all at once.
pub(super) async fn check_daimons(
    config: &Config,
    offline: bool,
    problems: &mut Vec<String>,
    notes: &mut Vec<String>,
    warnings: &mut Vec<String>,
) {
    let probes = config.daimons.iter().map(|d| async move {
        let DaimonKind::Http { url, .. } = &d.kind else {
            return None;
        };
        if offline {
            return None;
        }
        Some(daimon::http::reachable(url, d.timeout.min(PROBE_AT_MOST)).await)
    });
    let reached = futures_util::future::join_all(probes).await;
    for (d, reached) in config.daimons.iter().zip(reached) {
        let name = &d.name;
        match &d.kind {
            DaimonKind::Http { url, bearer_env } => {
                let bearer = if bearer_env.is_empty() {
                    "no bearer token".to_string()
                } else if Secret::from_env(bearer_env).is_some() {
                    format!("{bearer_env} set")
                } else {
                    problems.push(format!(
                        "daimon {name}: its bearer token's variable {bearer_env} is not set; it will never be asked (export it, or put it in the service's secrets file)"
                    ));
                    format!("{bearer_env} not set")
                };
                match reached {
                    None => notes.push(format!(
                        "daimon {name}: {url} ({bearer}; --offline: not reached)"
                    )),
                    Some(Ok(status)) => notes.push(format!(
                        "daimon {name}: {url} ({bearer}; reachable: HTTP {status} to a GET)"
                    )),
                    Some(Err(e)) => warnings.push(format!(
                        "daimon {name}: {url} ({bearer}) is not reachable ({e}); turns go on without its whisper"
                    )),
                }
            }
            DaimonKind::Persona { soul_file, model } => match daimon::read_soul(soul_file) {
                Ok(text) => notes.push(format!(
                    "daimon {name}: a persona from {} ({} bytes), played by the configured provider{}",
                    soul_file.display(),
                    text.len(),
                    if model.is_empty() {
                        String::new()
                    } else {
                        format!(" with the model {model}")
                    }
                )),
                Err(e) => problems.push(format!(
                    "daimon {name}: {e}; it will never be asked"
                )),
            },
        }
    }
}
