//! The model calls the states make, outside any conversation: the wakeup's affirmation of
//! identity, the shutdown's request for consent, the solitude's journal entry. Builds their
//! text (soul.md verbatim as the system part; everything from outside fenced) and reads the
//! answers tolerantly. Pure.
//!
//! Each call's text begins with `<state_call kind="…">`, so a reader of the traffic (and the
//! test model) can tell it from a conversation turn.

use std::fmt::Write;

use super::quote::{self, fenced, MAX_QUOTED_CONVERSATIONS, MAX_QUOTED_MESSAGES};
use crate::parse::text::{decode_entities, parse_bool, strip_reasoning, truncate_chars};
use crate::prompt::fence;
use crate::prompt::shape::Shape;

/// The longest closing note or objection reason kept, in characters.
pub const MAX_NOTE_CHARS: usize = 500;
/// The longest journal entry kept, in characters.
pub const MAX_JOURNAL_CHARS: usize = 4_000;

/// One call: the system part and the user part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    pub kind: &'static str,
    pub system: String,
    pub user: String,
    /// The answer's shape, for a server that can hold the model to it.
    pub shape: Shape,
}

fn opening(kind: &str) -> String {
    format!("<state_call kind=\"{kind}\">\n")
}

/// What the wakeup affirms.
#[derive(Debug, Clone, Default)]
pub struct WakeupInput<'a> {
    pub soul_state: &'a [(&'a str, &'a str)],
    /// How long the soul was shut down, in minutes (`None`: never ran before).
    pub slept_minutes: Option<u64>,
    /// The last journal entry or closing note, if any.
    pub last_words: Option<&'a str>,
    /// Conversations since the last run: (thread, turns).
    pub conversations: &'a [(String, i64)],
    pub attempt: u32,
}

/// The wakeup: the soul affirms who it is before it works.
pub fn wakeup(soul_md: &str, i: &WakeupInput) -> Call {
    let mut user = opening("wakeup");
    user.push_str("You are waking up. Before you answer anyone, affirm who you are.\n\n");
    match i.slept_minutes {
        None => user.push_str("This is your first waking: you have never run before.\n"),
        Some(m) => {
            let _ = writeln!(user, "You were shut down for {}.", duration_words(m));
        }
    }
    if !i.soul_state.is_empty() {
        user.push_str("\nYour state when you stopped:\n");
        for (k, v) in i.soul_state {
            let _ = writeln!(user, "- {k}: {}", fence::neutralise(v));
        }
    }
    if !i.conversations.is_empty() {
        let _ = writeln!(
            user,
            "\nYou have {} conversation(s) in memory; the most recent:",
            i.conversations.len()
        );
        for (t, turns) in i.conversations.iter().take(5) {
            let _ = writeln!(user, "- {} ({turns} turns)", fence::neutralise(t));
        }
    }
    if let Some(w) = i.last_words {
        user.push_str("\nThe last thing you wrote before stopping:\n");
        fenced(&mut user, w);
    }
    user.push_str(
        "\nAnswer in one short paragraph inside <affirmation></affirmation>: who you are, what you \
         value, and what you will attend to now.\n",
    );
    Call {
        kind: "wakeup",
        system: soul_md.to_string(),
        user,
        shape: Shape::Wakeup,
    }
}

/// The affirmation in a wakeup answer: the tag's text, else the whole answer; `None` when
/// nothing is left (an empty answer is a failed wakeup).
pub fn read_affirmation(answer: &str) -> Option<String> {
    let text = tag(answer, "affirmation").unwrap_or_else(|| strip_reasoning(answer));
    let text = truncate_chars(text.trim(), MAX_JOURNAL_CHARS);
    (!text.trim().is_empty()).then_some(text)
}

/// A conversation active when the shutdown began.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ActiveThread {
    pub thread: String,
    /// Its last message, as the person wrote it.
    pub last_message: String,
}

/// The last message of each conversation in `messages` (thread, text; oldest first), the
/// most recent conversation first.
pub fn active_threads(messages: &[(String, String)]) -> Vec<ActiveThread> {
    let mut seen = std::collections::HashSet::new();
    messages
        .iter()
        .rev()
        .filter(|(thread, _)| seen.insert(thread.as_str()))
        .map(|(thread, text)| ActiveThread {
            thread: thread.clone(),
            last_message: text.clone(),
        })
        .collect()
}

/// The shutdown: the soul is told it is being stopped and asked for its consent. `active`
/// is most recent first; the call quotes the first [`MAX_QUOTED_CONVERSATIONS`] within
/// [`quote::MAX_QUOTED_CHARS`] and says how many it left out.
pub fn consent(soul_md: &str, why: &str, active: &[ActiveThread]) -> Call {
    let mut user = opening("shutdown");
    user.push_str(
        "You are being shut down by your operator. You will be started again later, with your \
         memory intact.\n",
    );
    // `why` may quote soul state (an open task), which turns write: no markup.
    let _ = writeln!(user, "Why you are asked: {}.", fence::neutralise(why));
    if active.is_empty() {
        user.push_str("\nNo conversation was active in the last hour.\n");
    } else {
        user.push_str(
            "\nConversations active in the last hour, the most recent first, with their last \
             message:\n",
        );
        let shown = quote::entries(
            active
                .iter()
                .map(|a| (a.thread.as_str(), a.last_message.as_str())),
            MAX_QUOTED_CONVERSATIONS,
        );
        shown.iter().for_each(|e| user.push_str(e));
        let left = active.len() - shown.len();
        if left > 0 {
            let _ = writeln!(
                user,
                "… and {} not shown.",
                quote::count(left, "more conversation")
            );
        }
    }
    user.push_str(
        "\nAnswer with <consent>yes</consent> or <consent>no</consent>. If no, give your reason in \
         <reason></reason>. You may leave a short closing note for the conversations active in \
         the last hour in \
         <closing_note></closing_note> (empty: none). The shutdown goes ahead either way; an \
         objection is recorded and sent to your operator.\n",
    );
    Call {
        kind: "shutdown",
        system: soul_md.to_string(),
        user,
        shape: Shape::Consent,
    }
}

/// The soul's answer to a shutdown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Consent {
    pub consent: bool,
    /// An objection's reason (empty when it consents).
    pub reason: String,
    pub closing_note: Option<String>,
}

/// Reads a consent answer. An answer that says neither yes nor no is an objection without a
/// reason: silence is not consent.
pub fn read_consent(answer: &str) -> Consent {
    let consent = tag(answer, "consent")
        .and_then(|c| parse_bool(&c))
        .unwrap_or(false);
    let reason = tag(answer, "reason")
        .map(|r| truncate_chars(r.trim(), MAX_NOTE_CHARS))
        .unwrap_or_default();
    let closing_note = tag(answer, "closing_note")
        .map(|n| truncate_chars(n.trim(), MAX_NOTE_CHARS))
        .filter(|n| !n.is_empty());
    Consent {
        consent,
        reason: if consent {
            String::new()
        } else if reason.is_empty() {
            "(no reason given)".into()
        } else {
            reason
        },
        closing_note,
    }
}

/// The solitude's journal entry, written from recent memory: `recent` is (who, text), oldest
/// first; the call quotes the newest [`MAX_QUOTED_MESSAGES`] within
/// [`quote::MAX_QUOTED_CHARS`] and says how many earlier ones it left out.
pub fn journal(soul_md: &str, idle_minutes: u64, recent: &[(String, String)]) -> Call {
    let mut user = opening("solitude");
    let _ = writeln!(
        user,
        "Nobody has written to you for {}. You are alone with your thoughts.",
        duration_words(idle_minutes)
    );
    if recent.is_empty() {
        user.push_str("Nothing happened recently.\n");
    } else {
        user.push_str("\nWhat was said recently, oldest first:\n");
        let mut shown = quote::entries(
            recent
                .iter()
                .rev()
                .map(|(who, text)| (who.as_str(), text.as_str())),
            MAX_QUOTED_MESSAGES,
        );
        let left = recent.len() - shown.len();
        if left > 0 {
            let _ = writeln!(
                user,
                "({} not shown.)",
                quote::count(left, "earlier message")
            );
        }
        shown.reverse();
        shown.iter().for_each(|e| user.push_str(e));
    }
    user.push_str(
        "\nWrite one private journal entry, a few sentences, inside <journal></journal>: what you \
         noticed, what you learned, what you want to remember.\n",
    );
    Call {
        kind: "solitude",
        system: soul_md.to_string(),
        user,
        shape: Shape::Journal,
    }
}

/// The journal entry in an answer; `None` when it is empty.
pub fn read_journal(answer: &str) -> Option<String> {
    let text = tag(answer, "journal").unwrap_or_else(|| strip_reasoning(answer));
    let text = truncate_chars(text.trim(), MAX_JOURNAL_CHARS);
    (!text.trim().is_empty()).then_some(text)
}

/// The text of the first `<name>…</name>` (tag names in any case; an unclosed tag runs to
/// the end), entities decoded.
pub fn tag(text: &str, name: &str) -> Option<String> {
    let lower = text.to_ascii_lowercase();
    let open = format!("<{name}>");
    let start = lower.find(&open)? + open.len();
    let close = format!("</{name}>");
    let end = lower[start..]
        .find(&close)
        .map_or(text.len(), |i| start + i);
    // `to_ascii_lowercase` keeps every byte offset, so these are boundaries of `text` too.
    Some(decode_entities(text[start..end].trim()))
}

/// "3 minutes", "2 hours", "4 days".
pub fn duration_words(minutes: u64) -> String {
    let (n, unit) = match minutes {
        0..=119 => (minutes, "minute"),
        120..=2879 => (minutes / 60, "hour"),
        _ => (minutes / 1440, "day"),
    };
    format!("{n} {unit}{}", if n == 1 { "" } else { "s" })
}
