//! Daimons: other souls anima asks for a whisper of counsel before it answers, and anima as
//! one (`/api/counsel`), in Claudicle's whisper protocol.
//!
//! Owns the protocol's bytes (`protocol`), each daimon's hourly budget (`budget`), the ask
//! itself (an endpoint over HTTP, `http`; or a persona the configured provider plays,
//! `voice`) and anima's own counsel's call (`voice`). A daimon is told only the soul's state,
//! its last monologue cut to 200 characters and the interaction count: no person's words and
//! no user model leave anima. Its answer is untrusted text, bounded here; the prompt escapes
//! and fences it as the turn's intuition.
//!
//! Must not: name the store, Slack or the prompt's sections (the engine decides when to ask
//! and where the whisper goes), wait on a daimon past its timeout, or log a bearer token.

pub mod budget;
pub mod http;
pub mod protocol;
pub mod voice;

use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::stream::{FuturesUnordered, StreamExt};
use tracing::{info, warn};

pub use protocol::{Asked, Context, SoulStateView};

use crate::config::secret::Secret;
use crate::config::{DaimonConfig, DaimonKind};
use crate::llm::Provider;

/// The most of a persona's soul file read, in bytes.
const MAX_SOUL_FILE_BYTES: u64 = 256 * 1024;

/// The configured daimons, ready to ask.
pub struct Daimons {
    list: Vec<Daimon>,
}

struct Daimon {
    name: String,
    timeout: Duration,
    way: Way,
    budget: Mutex<budget::Hourly>,
}

/// How a daimon is asked, or why it cannot be.
enum Way {
    Http {
        client: reqwest::Client,
        url: String,
        token: Option<Secret>,
    },
    Persona {
        soul: String,
        model: String,
    },
    /// Configured but unusable (its token's variable unset, its soul file unreadable): never
    /// asked; said once when the daimons are built.
    Unusable,
}

/// A whisper a daimon gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heard {
    /// The daimon's name, as configured.
    pub name: String,
    /// Bounded, untrusted.
    pub whisper: String,
    pub after: Duration,
}

impl Daimons {
    /// The daimons of `configs`: tokens read from their variables, persona soul files read;
    /// one that cannot be used is said once here and never asked. None: nothing is built.
    pub fn new(configs: &[DaimonConfig]) -> Daimons {
        let list = configs
            .iter()
            .map(|c| Daimon {
                name: c.name.clone(),
                timeout: c.timeout,
                way: way(c),
                budget: Mutex::new(budget::Hourly::new(c.per_hour)),
            })
            .collect();
        Daimons { list }
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Asks every daimon whose budget allows, all at once, each within its timeout; the first
    /// whisper to come wins (the others are not waited for). Failures are logged with the
    /// daimon's name and cost the turn no more than the longest timeout. `asker` is the
    /// soul's name, sent as the request's `source`.
    pub async fn ask(
        &self,
        asker: &str,
        context: &Context,
        provider: &dyn Provider,
    ) -> Option<Heard> {
        let body = protocol::request_body(asker, context);
        let now = Instant::now();
        let mut asking: FuturesUnordered<_> = self
            .list
            .iter()
            .filter(|d| !matches!(d.way, Way::Unusable))
            .filter(|d| {
                let taken = d.budget.lock().map(|mut b| b.take(now)).unwrap_or(false);
                if !taken {
                    info!(daimon = %d.name, "daimon not asked: its hourly budget is spent");
                }
                taken
            })
            .map(|d| d.ask(asker, context, &body, provider))
            .collect();
        while let Some((d, answer)) = asking.next().await {
            let ms = now.elapsed().as_millis() as u64;
            match answer {
                Ok(Some(whisper)) => {
                    info!(daimon = %d.name, ms, "daimon whispered");
                    return Some(Heard {
                        name: d.name.clone(),
                        whisper,
                        after: now.elapsed(),
                    });
                }
                Ok(None) => info!(daimon = %d.name, ms, "daimon had no whisper"),
                Err(e) => warn!(daimon = %d.name, ms, error = %e, "daimon gave no whisper"),
            }
        }
        None
    }
}

impl Daimon {
    async fn ask<'a>(
        &'a self,
        asker: &str,
        context: &Context,
        body: &[u8],
        provider: &dyn Provider,
    ) -> (&'a Daimon, Result<Option<String>, String>) {
        let answer = match &self.way {
            Way::Http { client, url, token } => {
                http::ask(client, url, token.as_ref(), body.to_vec(), self.timeout).await
            }
            Way::Persona { soul, model } => {
                let call = voice::persona(soul, &self.name, asker, &Asked::from(context));
                let model = (!model.is_empty()).then_some(model.as_str());
                voice::speak(provider, &call, model, self.timeout).await
            }
            Way::Unusable => Ok(None),
        };
        (self, answer)
    }
}

/// How `c` is asked; said once when it cannot be.
fn way(c: &DaimonConfig) -> Way {
    match &c.kind {
        DaimonKind::Http { url, bearer_env } => {
            let token = (!bearer_env.is_empty()).then(|| Secret::from_env(bearer_env));
            if let Some(None) = token {
                warn!(daimon = %c.name, variable = %bearer_env, "daimon never asked: its bearer token's variable is not set");
                return Way::Unusable;
            }
            match http::client() {
                Ok(client) => Way::Http {
                    client,
                    url: url.clone(),
                    token: token.flatten(),
                },
                Err(e) => {
                    warn!(daimon = %c.name, error = %e, "daimon never asked");
                    Way::Unusable
                }
            }
        }
        DaimonKind::Persona { soul_file, model } => match read_soul(soul_file) {
            Ok(soul) => Way::Persona {
                soul,
                model: model.clone(),
            },
            Err(e) => {
                warn!(daimon = %c.name, error = %e, "daimon never asked");
                Way::Unusable
            }
        },
    }
}

/// A persona's soul file: readable, not blank, at most `MAX_SOUL_FILE_BYTES`.
pub fn read_soul(path: &std::path::Path) -> Result<String, String> {
    let meta = std::fs::metadata(path)
        .map_err(|e| format!("cannot read the soul file {}: {e}", path.display()))?;
    if meta.len() > MAX_SOUL_FILE_BYTES {
        return Err(format!(
            "the soul file {} is over {} KB",
            path.display(),
            MAX_SOUL_FILE_BYTES / 1024
        ));
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read the soul file {}: {e}", path.display()))?;
    if text.trim().is_empty() {
        return Err(format!("the soul file {} is empty", path.display()));
    }
    Ok(text)
}
