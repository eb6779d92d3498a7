//! Slack's Web API, through slack-morphism: who the bot is, display names, posting replies
//! (rate limits honoured, never twice), the working sign.
//!
//! Every call goes to `[slack] api_base_url`. Owns the retry policy for Slack calls; knows
//! nothing about souls or turns.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use slack_morphism::prelude::*;
use tracing::{debug, info, warn};

pub(super) use super::error::transient;
pub use super::error::SlackError;
pub(super) use super::mark::reply_content;
pub use super::mark::{PostMark, REPLY_EVENT_TYPE};

use super::credentials::{Refusals, Token};
use crate::config::secret::Secret;
use crate::metrics::{MethodLabels, Metrics, SlackErrorLabels};

mod readback;

/// A call that takes longer than this is abandoned (its outcome is then unknown).
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// How long a display name is trusted.
const NAME_TTL: Duration = Duration::from_secs(3600);
/// The reaction shown while the soul thinks.
pub const WORKING_REACTION: &str = "thinking_face";

/// The bot's own identity, from auth.test.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BotIdentity {
    pub user_id: String,
    pub bot_id: Option<String>,
    pub team: String,
    /// The workspace's id (a stream in a channel names its recipient's team).
    pub team_id: String,
}

/// One message to post.
#[derive(Debug, Clone, Copy)]
pub struct Outgoing<'a> {
    pub channel: &'a str,
    /// The thread to post in; `None`: the channel's top level.
    pub thread_ts: Option<&'a str>,
    /// The message it answers: a copy of it is looked for only after this ts.
    pub after_ts: &'a str,
    pub text: &'a str,
    pub mark: Option<PostMark>,
    /// The reply's last message in an AI-app conversation: it carries the feedback buttons
    /// (then the text goes as a `markdown` block, which renders the same Markdown).
    pub feedback: bool,
    /// The messages the inbox holds for replies in this conversation: never taken for this
    /// one's copy.
    pub held: &'a [String],
}

pub struct SlackApi {
    pub(super) client: Arc<SlackHyperClient>,
    pub(super) bot_token: SlackApiToken,
    names: Mutex<HashMap<String, (String, Instant)>>,
    /// (method, code) of the courtesies that failed: each is a warning once, then debug.
    warned: Mutex<std::collections::HashSet<(&'static str, String)>>,
    metrics: Option<Arc<Metrics>>,
    /// The soul's words for the assistant status (its loading messages).
    pub(super) words: Option<Arc<crate::assistant::Words>>,
    /// The tokens Slack refuses now.
    refusals: Arc<Refusals>,
    /// The workspace's URL (`https://NAME.slack.com/`), as the last auth.test gave it.
    workspace: Mutex<Option<String>>,
}

/// A hyper connector that speaks HTTPS (native roots) and plain HTTP (for a local fake or a
/// proxy), with HTTP/1 and HTTP/2.
pub fn connector(api_base_url: &str) -> SlackClientHyperHttpsConnector {
    let builder = hyper_rustls::HttpsConnectorBuilder::new();
    let https = match builder.with_native_roots() {
        Ok(b) => b.https_or_http().enable_http1().enable_http2().build(),
        Err(e) => {
            warn!(error = %e, "no native TLS roots found; only plain-http Slack URLs will work");
            let config = rustls::ClientConfig::builder()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth();
            hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(config)
                .https_or_http()
                .enable_http1()
                .enable_http2()
                .build()
        }
    };
    // slack-morphism joins `{base}/{method}`: the base has no trailing slash.
    SlackClientHyperConnector::with_connector(https)
        .with_slack_api_url(api_base_url.trim_end_matches('/'))
}

/// A Slack ts (`"1610241741.000200"`) as a sortable pair; unreadable parts sort first.
pub fn ts_order(ts: &str) -> (u64, u64) {
    let (secs, frac) = ts.split_once('.').unwrap_or((ts, "0"));
    let micros: String = frac.chars().chain(std::iter::repeat('0')).take(6).collect();
    (secs.parse().unwrap_or(0), micros.parse().unwrap_or(0))
}

pub fn token(secret: &Secret) -> SlackApiToken {
    SlackApiToken::new(SlackApiTokenValue::new(secret.expose().to_string()))
}

impl SlackApi {
    pub fn new(client: Arc<SlackHyperClient>, bot_token: &Secret) -> Self {
        SlackApi {
            client,
            bot_token: token(bot_token),
            names: Mutex::new(HashMap::new()),
            warned: Mutex::new(Default::default()),
            metrics: None,
            words: None,
            refusals: Arc::default(),
            workspace: Mutex::new(None),
        }
    }

    /// The workspace's URL as the last auth.test gave it (none before one answered): what a
    /// message's permalink begins with (`why::permalink`).
    pub fn workspace_url(&self) -> Option<String> {
        self.workspace
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The tokens Slack refuses now (each call's outcome is noted there).
    pub fn refusals(&self) -> &Arc<Refusals> {
        &self.refusals
    }

    /// The soul's words for the assistant surfaces (status and loading messages).
    pub fn with_words(mut self, words: Arc<crate::assistant::Words>) -> Self {
        self.words = Some(words);
        self
    }

    /// Counts Slack's errors (by method and code) and 429s in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    pub(super) async fn timed<T>(
        &self,
        method: &'static str,
        fut: impl std::future::Future<Output = ClientResult<T>>,
    ) -> Result<T, SlackError> {
        self.timed_as(Token::Bot, method, fut).await
    }

    /// A call made with `token`, within `CALL_TIMEOUT`: its errors counted, and what it says
    /// of the token noted (`refusals`).
    pub(super) async fn timed_as<T>(
        &self,
        token: Token,
        method: &'static str,
        fut: impl std::future::Future<Output = ClientResult<T>>,
    ) -> Result<T, SlackError> {
        let result = match tokio::time::timeout(CALL_TIMEOUT, fut).await {
            Ok(r) => r.map_err(|e| SlackError::from_client(method, e)),
            Err(_) => Err(SlackError::Transport {
                method,
                message: format!("no answer within {} s", CALL_TIMEOUT.as_secs()),
            }),
        };
        if let (Err(e), Some(m)) = (&result, &self.metrics) {
            match e {
                SlackError::RateLimited { .. } => {
                    Metrics::inc(&m.slack_rate_limited.get_or_create(&MethodLabels { method }))
                }
                SlackError::Api { code, .. } => {
                    Metrics::inc(&m.slack_errors.get_or_create(&SlackErrorLabels {
                        method,
                        code: code.clone(),
                    }))
                }
                SlackError::Transport { .. } => {
                    Metrics::inc(&m.slack_errors.get_or_create(&SlackErrorLabels {
                        method,
                        code: "transport".into(),
                    }))
                }
            }
        }
        self.refusals.note(token, method, &result);
        result
    }

    pub async fn auth_test(&self) -> Result<BotIdentity, SlackError> {
        let session = self.client.open_session(&self.bot_token);
        let r = self.timed("auth.test", session.auth_test()).await?;
        *self.workspace.lock().unwrap_or_else(|e| e.into_inner()) = Some(r.url.0.to_string());
        Ok(BotIdentity {
            user_id: r.user_id.to_string(),
            bot_id: r.bot_id.map(|b| b.to_string()),
            team: r.team,
            team_id: r.team_id.to_string(),
        })
    }

    /// auth.test until Slack answers, backing off up to 30 s while it is unreachable or busy,
    /// logging each failure. `Ok(None)`: `stop` fired first; `Err`: Slack refuses the bot
    /// token (the paragraph that says so), which no retry mends.
    pub async fn connect(
        &self,
        stop: &tokio::sync::watch::Receiver<bool>,
    ) -> Result<Option<BotIdentity>, String> {
        let mut wait = Duration::from_millis(500);
        let mut stop = stop.clone();
        loop {
            match self.auth_test().await {
                Ok(id) => return Ok(Some(id)),
                Err(SlackError::Api { code, method }) if super::credentials::refuses(&code) => {
                    return Err(super::credentials::refusal(Token::Bot, method, &code))
                }
                Err(e) => {
                    warn!(error = %e, retry_in_ms = wait.as_millis() as u64, "Slack is unreachable; retrying");
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = stop.wait_for(|s| *s) => return Ok(None),
            }
            wait = (wait * 2).min(Duration::from_secs(30));
        }
    }

    /// The person's display name (users.info, cached); their id if Slack will not say.
    pub async fn display_name(&self, user_id: &str) -> String {
        if let Some((name, at)) = self
            .names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(user_id)
        {
            if at.elapsed() < NAME_TTL {
                return name.clone();
            }
        }
        let session = self.client.open_session(&self.bot_token);
        let req = SlackApiUsersInfoRequest::new(SlackUserId::new(user_id.to_string()));
        let name = match self.timed("users.info", session.users_info(&req)).await {
            Ok(r) => {
                let u = r.user;
                let profile = u.profile.as_ref();
                [
                    profile.and_then(|p| p.display_name.clone()),
                    profile.and_then(|p| p.real_name.clone()),
                    u.real_name.clone(),
                    u.name.clone(),
                ]
                .into_iter()
                .flatten()
                .map(|n| n.trim().to_string())
                .find(|n| !n.is_empty())
                .unwrap_or_else(|| user_id.to_string())
            }
            Err(e) => {
                warn!(error = %e, user = user_id, "users.info failed; using the user id as the name");
                return user_id.to_string();
            }
        };
        self.names
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(user_id.to_string(), (name.clone(), Instant::now()));
        name
    }

    /// Posts one message and returns its ts. Rate limits are waited out; an error whose
    /// outcome is unknown (a timeout, a dropped connection, a 5xx) is followed by a look at the
    /// conversation, so a message that did arrive is never posted again. `maybe_posted`: a
    /// post of this message may already have happened (it was in flight when anima stopped),
    /// so look before the first attempt too.
    pub async fn post(
        &self,
        bot: &BotIdentity,
        out: &Outgoing<'_>,
        maybe_posted: bool,
    ) -> Result<String, SlackError> {
        // A message that answers no row gets a mark of its own for this post, so that one
        // whose outcome is unknown is found by it: Slack does not give back the
        // `markdown_text` it was sent, so the text cannot be compared.
        let out = &Outgoing {
            mark: Some(out.mark.unwrap_or_else(PostMark::one_off)),
            ..*out
        };
        if maybe_posted {
            // Not knowing is not "not there": a lookup that fails posts nothing (the caller
            // tries again later).
            if let Some(ts) = self.find_posted(bot, out).await? {
                info!(ts = %ts, "the reply had arrived before the restart; not posting it again");
                return Ok(ts);
            }
        }
        let mut attempt = 0u32;
        loop {
            let session = self.client.open_session(&self.bot_token);
            let req = SlackApiChatPostMessageRequest::new(
                SlackChannelId::new(out.channel.to_string()),
                reply_content(out.text, out.mark, out.feedback),
            )
            .opt_thread_ts(out.thread_ts.map(|t| SlackTs::new(t.to_string())));
            let err = match self
                .timed("chat.postMessage", session.chat_post_message(&req))
                .await
            {
                Ok(r) => return Ok(r.ts.to_string()),
                Err(e) => e,
            };
            attempt += 1;
            let wait = match &err {
                SlackError::RateLimited { retry_after, .. } => {
                    let wait = retry_after.unwrap_or(Duration::from_secs(1));
                    info!(
                        wait_ms = wait.as_millis() as u64,
                        "chat.postMessage rate limited; waiting as Slack asked"
                    );
                    wait
                }
                SlackError::Api { code, .. } if code == "ratelimited" => Duration::from_secs(1),
                SlackError::Api { code, .. } if transient(code) => {
                    warn!(method = "chat.postMessage", code = %code, "Slack could not take the reply now");
                    return Err(err);
                }
                SlackError::Api { code, .. } => {
                    warn!(method = "chat.postMessage", code = %code, channel = out.channel, "Slack refused the reply");
                    return Err(err);
                }
                SlackError::Transport { .. } => {
                    warn!(error = %err, attempt, "chat.postMessage outcome unknown; checking the conversation");
                    if let Some(ts) = self.find_posted(bot, out).await? {
                        info!(ts = %ts, "the reply had arrived; not posting it again");
                        return Ok(ts);
                    }
                    Duration::from_millis(500 * 2u64.pow(attempt.min(5)))
                }
            };
            if attempt >= 3 {
                return Err(err);
            }
            tokio::time::sleep(wait).await;
        }
    }

    /// Shows that the soul is working: a reaction on the message, or the assistant status
    /// (with the soul's loading messages) in an assistant thread. Clearing it sends an empty
    /// status.
    pub async fn working(&self, channel: &str, ts: &str, assistant_thread: Option<&str>, on: bool) {
        let session = self.client.open_session(&self.bot_token);
        let channel_id = SlackChannelId::new(channel.to_string());
        let result = match (assistant_thread, on) {
            (Some(thread), _) => {
                // An agent's session shows the stop button while it is processing (Slack does
                // not leave that state by itself: it is set back when the soul is done).
                let session_status = if on {
                    SlackAgentSessionStatus::Processing
                } else {
                    SlackAgentSessionStatus::Active
                };
                let req = SlackApiAgentsSessionsSetStatusRequest::new(session_status)
                    .with_channel_id(channel_id.clone())
                    .with_thread_ts(SlackTs::new(thread.to_string()));
                self.courtesy(
                    self.timed(
                        "agents.sessions.setStatus",
                        session.agents_sessions_set_status(&req),
                    )
                    .await,
                    "agent session status not set",
                );
                self.set_status(channel, thread, on).await
            }
            (None, true) => {
                let req = SlackApiReactionsAddRequest::new(
                    channel_id,
                    SlackReactionName::new(WORKING_REACTION.to_string()),
                    SlackTs::new(ts.to_string()),
                );
                self.timed("reactions.add", session.reactions_add(&req))
                    .await
                    .map(|_| ())
            }
            (None, false) => {
                let req = SlackApiReactionsRemoveRequest::new(SlackReactionName::new(
                    WORKING_REACTION.to_string(),
                ))
                .with_channel(channel_id)
                .with_timestamp(SlackTs::new(ts.to_string()));
                self.timed("reactions.remove", session.reactions_remove(&req))
                    .await
                    .map(|_| ())
            }
        };
        self.courtesy(result, "working sign not shown");
    }

    /// A courtesy call's outcome (the working sign, a status, a title, prompts, a greeting):
    /// its failure never stops a reply. Each kind of failure (method and code: a missing
    /// scope, a token type Slack does not allow, an unknown error) is a warning once for the
    /// process's life, then debug: it would otherwise fill the log. True if it succeeded.
    pub(super) fn courtesy<T>(&self, result: Result<T, SlackError>, what: &str) -> bool {
        let Err(e) = result else {
            return true;
        };
        self.warn_once(&e, what);
        false
    }

    /// Logs a failure that degrades a courtesy (a stream, a sign): a warning the first time
    /// for its method and code, then at debug, so a missing scope does not fill the log.
    pub(super) fn warn_once(&self, e: &SlackError, what: &str) {
        let key = match e {
            SlackError::Api { method, code } => (*method, code.clone()),
            SlackError::RateLimited { method, .. } => (*method, "ratelimited".to_string()),
            SlackError::Transport { method, .. } => (*method, "transport".to_string()),
        };
        let first = self
            .warned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(key);
        if first {
            warn!(error = %e, "{what} (further failures like this at debug)");
        } else {
            debug!(error = %e, "{what}");
        }
    }
}

#[cfg(test)]
impl BotIdentity {
    /// The bot the unit tests' events are judged for (`UBOT`, `BBOT`).
    pub fn for_tests() -> BotIdentity {
        BotIdentity {
            user_id: "UBOT".into(),
            bot_id: Some("BBOT".into()),
            team: "T".into(),
            team_id: "T1".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ts_order_is_numeric() {
        use super::ts_order;
        assert!(ts_order("1800000000.000000") > ts_order("7.0"));
        assert!(ts_order("1700000000.000200") > ts_order("1700000000.0001"));
        assert_eq!(ts_order("12.5"), (12, 500_000));
        assert_eq!(ts_order("x.é"), (0, 0));
    }
}
