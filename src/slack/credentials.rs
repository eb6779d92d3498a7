//! Slack's tokens: which kind each variable must hold (told by prefix, before any call), which
//! of Slack's error codes mean that it refuses a token, asking Slack about each (auth.test for
//! the bot token, apps.connections.open for the app token), and the memory of a token Slack
//! refuses while the daemon runs (for `/healthz` and the log).
//!
//! Says what is wrong and what to do in words a person reads; knows nothing about the daemon
//! or `anima check`'s report, which decide what a refusal costs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use slack_morphism::prelude::SlackApiAppsConnectionOpenRequest;
use tracing::{error, info};

use super::api::{SlackApi, SlackError};
use crate::config::secret::Secret;

/// One of the two tokens anima sends to Slack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Token {
    /// `SLACK_BOT_TOKEN` (xoxb-…): every Web API call.
    Bot,
    /// `SLACK_APP_TOKEN` (xapp-…): apps.connections.open, for Socket Mode.
    App,
}

impl Token {
    /// The environment variable that holds it.
    pub fn var(self) -> &'static str {
        match self {
            Token::Bot => "SLACK_BOT_TOKEN",
            Token::App => "SLACK_APP_TOKEN",
        }
    }

    fn prefix(self) -> &'static str {
        match self {
            Token::Bot => "xoxb-",
            Token::App => "xapp-",
        }
    }

    /// Where a person finds the right one.
    pub fn where_to_find(self) -> &'static str {
        match self {
            Token::Bot => "the Bot User OAuth Token (xoxb-…) on your Slack app's OAuth & Permissions page",
            Token::App => "an app-level token (xapp-…) with the connections:write scope, from your Slack app's Basic Information page (App-Level Tokens)",
        }
    }

    fn method(self) -> &'static str {
        match self {
            Token::Bot => "auth.test",
            Token::App => "apps.connections.open",
        }
    }
}

/// Slack's error codes that say it will not take the token (not "not now").
pub fn refuses(code: &str) -> bool {
    matches!(
        code,
        "invalid_auth"
            | "not_authed"
            | "token_revoked"
            | "token_expired"
            | "account_inactive"
            | "not_allowed_token_type"
    )
}

/// What a refusal code means, for a person.
fn meaning(code: &str) -> &'static str {
    match code {
        "invalid_auth" => "it is not a token Slack knows (mistyped, or its app was deleted)",
        "not_authed" => "no token reached Slack",
        "token_revoked" => "it was revoked (the app was uninstalled, or the token regenerated)",
        "token_expired" => "it expired (token rotation is on for the app)",
        "account_inactive" => "its user or workspace was deactivated",
        "not_allowed_token_type" => "it is not the kind of token this call takes",
        _ => "Slack does not take it",
    }
}

/// Slack refused `token` with `code`: what happened and what to do, in one paragraph.
pub fn refusal(token: Token, method: &str, code: &str) -> String {
    format!(
        "Slack refuses {var} ({code} from {method}): {meaning}. Put {find} in {var}.",
        var = token.var(),
        meaning = meaning(code),
        find = token.where_to_find(),
    )
}

/// The token held in `var` is of the wrong kind or shape, told without asking Slack: quotes
/// around it, or another kind's prefix. Spaces and line breaks around a token were trimmed
/// when it was read (`Secret::from_env`).
pub fn misplaced(token: Token, value: &str) -> Option<String> {
    let var = token.var();
    let quoted = |c: char| matches!(c, '"' | '\'');
    if value.starts_with(quoted) || value.ends_with(quoted) {
        return Some(format!(
            "{var} has quotes around it: remove them (in anima.env, write {var}={}…)",
            token.prefix()
        ));
    }
    if value.starts_with(token.prefix()) {
        return None;
    }
    let holds = match value.split('-').next().unwrap_or("") {
        "xapp" => "an app-level token (xapp-…)",
        "xoxb" => "a bot token (xoxb-…)",
        "xoxp" => "a user token (xoxp-…)",
        "xoxe" => "a refresh token (xoxe-…)",
        _ => "no Slack token anima knows",
    };
    Some(format!(
        "{var} holds {holds}: it takes {}",
        token.where_to_find()
    ))
}

/// Every wrong-kind token among `bot` and `app` (Socket Mode), as one problem each; swapped
/// tokens are said to be swapped.
pub fn misplaced_all(bot: &Secret, app: Option<&Secret>) -> Vec<String> {
    let (b, a) = (bot.expose(), app.map(Secret::expose));
    if let Some(a) = a {
        if b.starts_with(Token::App.prefix()) && a.starts_with(Token::Bot.prefix()) {
            return vec![
                "SLACK_BOT_TOKEN and SLACK_APP_TOKEN are swapped: SLACK_BOT_TOKEN holds the app-level token (xapp-…) and SLACK_APP_TOKEN the bot token (xoxb-…); exchange their values".into(),
            ];
        }
    }
    [(Token::Bot, Some(b)), (Token::App, a)]
        .into_iter()
        .filter_map(|(t, v)| misplaced(t, v?))
        .collect()
}

/// What asking Slack about a token found.
#[derive(Debug)]
pub enum Answer {
    Accepted,
    /// Slack refuses it: the paragraph that says so.
    Refused {
        code: String,
        why: String,
    },
    /// Slack could not be asked, or could not answer now.
    Unanswered(SlackError),
}

impl Answer {
    fn of(token: Token, result: Result<(), SlackError>) -> Answer {
        match result {
            Ok(()) => Answer::Accepted,
            Err(SlackError::Api { code, .. }) if refuses(&code) => Answer::Refused {
                why: refusal(token, token.method(), &code),
                code,
            },
            Err(e) => Answer::Unanswered(e),
        }
    }
}

/// Asks Slack about the bot token (auth.test).
pub async fn ask_bot(api: &SlackApi) -> Answer {
    Answer::of(Token::Bot, api.auth_test().await.map(|_| ()))
}

/// Asks Slack about the app token: apps.connections.open, whose answer (a WebSocket address,
/// good for one connection) is left unused.
pub async fn ask_app(api: &SlackApi, app: &Secret) -> Answer {
    let token = super::api::token(app);
    let session = api.client.open_session(&token);
    let result = api
        .timed_as(
            Token::App,
            "apps.connections.open",
            session.apps_connections_open(&SlackApiAppsConnectionOpenRequest::new()),
        )
        .await
        .map(|_| ());
    Answer::of(Token::App, result)
}

/// The tokens Slack refuses while the daemon runs: each refusal an ERROR line naming the
/// variable (once, until Slack takes the token again), and the reason `/healthz` gives.
/// Before `arm`, refusals are remembered but not logged: at start they are the caller's to
/// report.
#[derive(Debug, Default)]
pub struct Refusals {
    armed: AtomicBool,
    /// (bot, app): the refusal's paragraph, while Slack refuses that token.
    refused: Mutex<[Option<String>; 2]>,
}

impl Refusals {
    pub fn arm(&self) {
        self.armed.store(true, Ordering::SeqCst);
    }

    fn slot(token: Token) -> usize {
        match token {
            Token::Bot => 0,
            Token::App => 1,
        }
    }

    /// The outcome of a call made with `token`.
    pub fn note<T>(&self, token: Token, method: &str, result: &Result<T, SlackError>) {
        let code = match result {
            Ok(_) => None,
            Err(SlackError::Api { code, .. }) if refuses(code) => Some(code.as_str()),
            // Not about the token: nothing learnt about it.
            Err(_) => return,
        };
        let mut refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        let slot = &mut refused[Self::slot(token)];
        let armed = self.armed.load(Ordering::SeqCst);
        match code {
            Some(code) => {
                let why = refusal(token, method, code);
                if slot.is_none() && armed {
                    error!(
                        var = token.var(),
                        code,
                        method,
                        "{why} Until then anima keeps every message in its inbox and tries again"
                    );
                }
                *slot = Some(why);
            }
            None => {
                if slot.take().is_some() && armed {
                    info!(var = token.var(), "Slack takes {} again", token.var());
                }
            }
        }
    }

    /// Why the daemon cannot talk to Slack, while Slack refuses one of its tokens.
    pub fn why(&self) -> Option<String> {
        let refused = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        let all: Vec<&str> = refused.iter().flatten().map(String::as_str).collect();
        (!all.is_empty()).then(|| all.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_of_the_other_kind_is_named_with_where_the_right_one_is() {
        let m = misplaced(Token::Bot, "xapp-1-A1-2-abc").unwrap();
        assert!(
            m.starts_with("SLACK_BOT_TOKEN holds an app-level token (xapp-…)"),
            "{m}"
        );
        assert!(m.contains("OAuth & Permissions"), "{m}");
        let m = misplaced(Token::App, "xoxp-123").unwrap();
        assert!(m.starts_with("SLACK_APP_TOKEN holds a user token"), "{m}");
        assert_eq!(misplaced(Token::Bot, "xoxb-1-2-abc"), None);
        assert_eq!(misplaced(Token::App, "xapp-1-A1-2-abc"), None);
    }

    #[test]
    fn quotes_around_a_token_are_said_and_not_sent() {
        let m = misplaced(Token::Bot, "\"xoxb-1-2-abc\"").unwrap();
        assert!(m.starts_with("SLACK_BOT_TOKEN has quotes around it"), "{m}");
        assert!(misplaced(Token::App, "'xapp-1").is_some());
    }

    #[test]
    fn swapped_tokens_are_one_problem_that_says_swapped() {
        let (bot, app) = (Secret::new("xapp-1-A1-2-abc"), Secret::new("xoxb-1-2-abc"));
        let found = misplaced_all(&bot, Some(&app));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("are swapped"), "{found:?}");
        // Events mode has no app token: an xapp- bot token is just the wrong kind.
        assert_eq!(misplaced_all(&bot, None).len(), 1);
    }

    #[test]
    fn refusal_codes_are_told_from_not_now() {
        for code in [
            "invalid_auth",
            "not_authed",
            "token_revoked",
            "account_inactive",
        ] {
            assert!(refuses(code), "{code}");
        }
        for code in ["ratelimited", "internal_error", "channel_not_found"] {
            assert!(!refuses(code), "{code}");
        }
        let why = refusal(Token::App, "apps.connections.open", "token_revoked");
        assert!(why.starts_with("Slack refuses SLACK_APP_TOKEN (token_revoked from apps.connections.open): it was revoked"), "{why}");
    }

    #[test]
    fn a_refusal_lasts_until_slack_takes_the_token_again() {
        let r = Refusals::default();
        let refused: Result<(), SlackError> = Err(SlackError::Api {
            method: "chat.postMessage",
            code: "token_revoked".into(),
        });
        r.note(Token::Bot, "chat.postMessage", &refused);
        assert!(r.why().unwrap().contains("SLACK_BOT_TOKEN"));
        let busy: Result<(), SlackError> = Err(SlackError::Api {
            method: "chat.postMessage",
            code: "internal_error".into(),
        });
        r.note(Token::Bot, "chat.postMessage", &busy);
        assert!(
            r.why().is_some(),
            "a busy Slack says nothing about the token"
        );
        r.note(Token::Bot, "auth.test", &Ok(()));
        assert_eq!(r.why(), None);
    }
}
