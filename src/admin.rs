//! Operator commands, shared by the admin HTTP endpoints and admin DMs: what a DM command
//! says (`!status`, `!reset [THREAD]`, `!whisper TEXT`, `!help`), and carrying commands out
//! against the store; the state report an operator reads; PLAY or WORK on request (an
//! operator's, or a process rule's through the engine). Who may use them is the caller's business (a bearer token over HTTP,
//! `[admin] users` in Slack). Knows nothing of Slack or HTTP.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use crate::memory::{CognitiveRow, NewMove, Snapshot, StateMove, Store, StoreError};
use crate::states::{Map, Refused, State, Template};

/// The longest whisper accepted, in characters.
pub const MAX_WHISPER_CHARS: usize = 2_000;

/// What anyone but an admin is told.
pub const REFUSAL: &str =
    "Sorry, admin commands are only for the people who run me. Just talk to me normally instead.";

const USAGE: &str = "Admin commands: `!status` (how I am), `!reset` (start this conversation afresh; `!reset THREAD` for another), `!whisper TEXT` (an intuition for my next turn), `!help`.";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    Status,
    /// The thread to reset; `None`: the conversation the command came from.
    Reset(Option<String>),
    Whisper(String),
    Help,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    /// Ordinary conversation.
    NotACommand,
    Command(Command),
    /// A command with bad arguments: how to use it.
    Usage(&'static str),
}

/// Reads a DM's text: `!` and a known command word; anything else is conversation.
pub fn parse(text: &str) -> Parsed {
    let Some(rest) = text.trim().strip_prefix('!') else {
        return Parsed::NotACommand;
    };
    let (word, args) = rest
        .split_once(char::is_whitespace)
        .map_or((rest, ""), |(w, a)| (w, a.trim()));
    match word.to_ascii_lowercase().as_str() {
        "status" if args.is_empty() => Parsed::Command(Command::Status),
        "status" => Parsed::Usage("Usage: `!status` (it takes nothing after it)."),
        "reset" if args.is_empty() => Parsed::Command(Command::Reset(None)),
        "reset" if !args.contains(char::is_whitespace) => {
            Parsed::Command(Command::Reset(Some(args.to_string())))
        }
        "reset" => Parsed::Usage("Usage: `!reset` or `!reset THREAD` (one thread key)."),
        "whisper" if args.is_empty() => Parsed::Usage("Usage: `!whisper TEXT`."),
        "whisper" if args.chars().count() > MAX_WHISPER_CHARS => {
            Parsed::Usage("A whisper is at most 2,000 characters.")
        }
        "whisper" => Parsed::Command(Command::Whisper(args.to_string())),
        "help" => Parsed::Command(Command::Help),
        _ => Parsed::NotACommand,
    }
}

/// Carries out a command for `who`, sent from the conversation `here`; returns the answer.
pub async fn carry_out(
    store: &Arc<dyn Store>,
    command: &Command,
    who: &str,
    here: &str,
) -> Result<String, StoreError> {
    match command {
        Command::Help => Ok(USAGE.to_string()),
        Command::Status => {
            let snap = store.snapshot().await?;
            Ok(status_line(&snap))
        }
        Command::Reset(thread) => {
            let thread = thread.clone().unwrap_or_else(|| here.to_string());
            let t = thread.clone();
            let found = store.reset_thread(&t).await?;
            Ok(if found {
                format!("Done: the next message in `{thread}` starts a new conversation (its memory is kept).")
            } else {
                format!("I have no conversation `{thread}`.")
            })
        }
        Command::Whisper(text) => {
            let (text, source) = (text.clone(), format!("admin {who}"));
            store.add_whisper(&text, &source).await?;
            Ok("Whispered: it will shape my next turn.".to_string())
        }
    }
}

/// What an operator reads about the soul (`anima state --json`, `GET /api/admin/state`): the
/// store's snapshot and the cognitive state with its template.
#[derive(Debug, Clone, Serialize)]
pub struct StateReport {
    #[serde(flatten)]
    pub snapshot: Snapshot,
    pub cognitive_state: CognitiveReport,
}

/// The cognitive state: which, since when, why; the moves the template allows from it, the
/// template and its rationales; the last dream.
#[derive(Debug, Clone, Serialize)]
pub struct CognitiveReport {
    pub state: String,
    pub since_ms: i64,
    pub why: String,
    pub degraded: bool,
    pub allowed_moves: Vec<State>,
    pub template: Template,
    pub rationales: BTreeMap<&'static str, String>,
    pub recent_moves: Vec<StateMove>,
    pub last_dream: Option<serde_json::Value>,
}

/// The report from a snapshot and the template in force.
pub fn state_report(snapshot: Snapshot, template: &Template) -> StateReport {
    let row: &CognitiveRow = &snapshot.cognitive;
    let map = Map::new(&template.behaviors);
    let allowed_moves = State::from_name(&row.state)
        .map(|s| map.moves_from(s))
        .unwrap_or_default();
    let cognitive_state = CognitiveReport {
        state: row.state.clone(),
        since_ms: row.since_ms,
        why: row.cause.clone(),
        degraded: row.degraded,
        allowed_moves,
        template: template.clone(),
        rationales: template
            .rationales()
            .into_iter()
            .map(|(k, r)| (k, r.to_string()))
            .collect(),
        recent_moves: snapshot.recent_moves.clone(),
        last_dream: snapshot.last_dream.clone(),
    };
    StateReport {
        snapshot,
        cognitive_state,
    }
}

/// Why a requested state change did not happen.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("only PLAY and WORK can be requested; {0} is the soul's own to enter")]
    NotRequestable(State),
    #[error("{0}")]
    Refused(Refused),
    #[error("the soul's state `{0}` is unknown to this anima")]
    Unknown(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Moves the soul to PLAY or WORK on request (an operator, a process rule), if the template
/// allows the move from where the soul is; checked and written in one transaction.
pub async fn request_state(
    store: &dyn Store,
    template: &Template,
    to: State,
    by: &str,
) -> Result<StateMove, RequestError> {
    if !matches!(to, State::Play | State::Work) {
        return Err(RequestError::NotRequestable(to));
    }
    let map = Map::new(&template.behaviors);
    let by = by.to_owned();
    crate::memory::move_state(store, None, move |row| {
        let from =
            State::from_name(&row.state).ok_or_else(|| RequestError::Unknown(row.state.clone()))?;
        map.check(from, to).map_err(RequestError::Refused)?;
        Ok(NewMove {
            to: to.name().into(),
            cause: format!("requested by {by}"),
            detail: serde_json::json!({ "requested_by": by }),
            degraded: false,
        })
    })
    .await?
}

/// One paragraph about how the soul is.
pub fn status_line(s: &Snapshot) -> String {
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!(
        "In {}. {} so far, {} I know, {} waiting in the inbox ({} given up), {} pending.",
        s.cognitive.state,
        plural(s.interactions, "interaction", "interactions"),
        plural(
            s.conversations.len() as u64,
            "conversation",
            "conversations"
        ),
        plural(s.inbox_depth, "message", "messages"),
        s.inbox_failed,
        plural(s.whispers_pending, "whisper", "whispers"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::sqlite::Sqlite;

    #[test]
    fn dm_commands_read_as_the_operator_means_them() {
        let cases = [
            ("!status", Parsed::Command(Command::Status)),
            ("  !STATUS ", Parsed::Command(Command::Status)),
            ("!reset", Parsed::Command(Command::Reset(None))),
            (
                "!reset C1:1.0",
                Parsed::Command(Command::Reset(Some("C1:1.0".into()))),
            ),
            (
                "!whisper they need assurance 🦀",
                Parsed::Command(Command::Whisper("they need assurance 🦀".into())),
            ),
            ("!help", Parsed::Command(Command::Help)),
            ("status", Parsed::NotACommand),
            ("!!! wow", Parsed::NotACommand),
            ("!important news", Parsed::NotACommand),
            ("", Parsed::NotACommand),
        ];
        for (text, want) in cases {
            assert_eq!(parse(text), want, "{text:?}");
        }
        for bad in ["!whisper", "!whisper   ", "!status now", "!reset a b"] {
            assert!(matches!(parse(bad), Parsed::Usage(_)), "{bad:?}");
        }
        let long = format!("!whisper {}", "é".repeat(MAX_WHISPER_CHARS + 1));
        assert!(matches!(parse(&long), Parsed::Usage(_)));
    }

    #[tokio::test]
    async fn commands_change_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let store = Sqlite::open(&dir.path().join("a.db")).unwrap().shared();
        let said = carry_out(&store, &Command::Whisper("hm".into()), "U9", "D1")
            .await
            .unwrap();
        assert!(said.starts_with("Whispered"));
        let status = carry_out(&store, &Command::Status, "U9", "D1")
            .await
            .unwrap();
        assert!(status.contains("1 whisper pending"), "{status}");
        let missing = carry_out(&store, &Command::Reset(None), "U9", "D1")
            .await
            .unwrap();
        assert!(missing.contains("no conversation `D1`"), "{missing}");
    }

    #[tokio::test]
    async fn play_and_work_can_be_requested_where_the_template_allows() {
        let dir = tempfile::tempdir().unwrap();
        let store = Sqlite::open(&dir.path().join("a.db")).unwrap().shared();
        let store = store.as_ref();
        let t = Template::default();
        let err = request_state(store, &t, State::Play, "admin")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("SHUTDOWN → PLAY refused"), "{err}");
        assert!(matches!(
            request_state(store, &t, State::Dream, "admin").await,
            Err(RequestError::NotRequestable(State::Dream))
        ));
        crate::memory::move_state(store, None, |_| {
            Ok::<_, ()>(NewMove {
                to: "WORK".into(),
                cause: "test".into(),
                detail: serde_json::Value::Null,
                degraded: false,
            })
        })
        .await
        .unwrap()
        .unwrap();
        let m = request_state(store, &t, State::Play, "admin U9")
            .await
            .unwrap();
        assert_eq!((m.from.as_str(), m.to.as_str()), ("WORK", "PLAY"));
        let report = state_report(store.snapshot().await.unwrap(), &t);
        assert_eq!(report.cognitive_state.state, "PLAY");
        assert_eq!(report.cognitive_state.why, "requested by admin U9");
        assert_eq!(
            report.cognitive_state.allowed_moves,
            [State::Work, State::Shutdown]
        );
        let mut no_play = Template::default();
        no_play.behaviors.play.enabled = false;
        request_state(store, &no_play, State::Work, "admin")
            .await
            .unwrap();
        let err = request_state(store, &no_play, State::Play, "admin")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("disables PLAY"), "{err}");
    }
}
