//! Operator commands, shared by the admin HTTP endpoints and admin DMs: what a DM command
//! says (`!status`, `!reset [THREAD]`, `!whisper TEXT`, `!help`), and carrying commands out
//! against the store. Who may use them is the caller's business (a bearer token over HTTP,
//! `[admin] users` in Slack). Knows nothing of Slack or HTTP.

use std::sync::Arc;

use crate::memory::{Snapshot, Store, StoreError};

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
    store: &Arc<Store>,
    command: &Command,
    who: &str,
    here: &str,
) -> Result<String, StoreError> {
    match command {
        Command::Help => Ok(USAGE.to_string()),
        Command::Status => {
            let snap = store.call(|s| s.snapshot()).await?;
            Ok(status_line(&snap))
        }
        Command::Reset(thread) => {
            let thread = thread.clone().unwrap_or_else(|| here.to_string());
            let t = thread.clone();
            let found = store.call(move |s| s.reset_thread(&t)).await?;
            Ok(if found {
                format!("Done: the next message in `{thread}` starts a new conversation (its memory is kept).")
            } else {
                format!("I have no conversation `{thread}`.")
            })
        }
        Command::Whisper(text) => {
            let (text, source) = (text.clone(), format!("admin {who}"));
            store.call(move |s| s.add_whisper(&text, &source)).await?;
            Ok("Whispered: it will shape my next turn.".to_string())
        }
    }
}

/// One paragraph about how the soul is.
pub fn status_line(s: &Snapshot) -> String {
    let plural = |n: u64, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    format!(
        "{} so far, {} I know, {} waiting in the inbox ({} given up), {} pending.",
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
        let store = Arc::new(Store::open(&dir.path().join("a.db")).unwrap());
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
}
