//! The cheap detection before a turn's call: which known dossiers a text mentions (by name or
//! alias, whole words, case-insensitive), and which names a message brings up that the soul
//! could keep a dossier of (another person's Slack mention, capitalised names).

use std::collections::HashMap;

use super::{Head, Origin};

/// A dossier the index knows: its slug, where it comes from and its head (no body: the body
/// is read only when the dossier is recalled).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Known {
    pub slug: String,
    pub origin: Origin,
    pub head: Head,
}

/// How often one known dossier is mentioned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mention {
    /// Its place in [`Index::known`].
    pub at: usize,
    pub in_message: u32,
    pub in_thread: u32,
}

/// Every known dossier's names and aliases, by their first word.
#[derive(Debug, Default)]
pub struct Index {
    known: Vec<Known>,
    /// First word (lower-case) → (the term's further words, the dossier's place).
    terms: HashMap<String, Vec<(Vec<String>, usize)>>,
}

impl Index {
    pub fn new(known: Vec<Known>) -> Index {
        let mut terms: HashMap<String, Vec<(Vec<String>, usize)>> = HashMap::new();
        for (at, k) in known.iter().enumerate() {
            let names = std::iter::once(&k.head.name).chain(&k.head.aliases);
            for term in names {
                let lower = term.to_lowercase();
                let mut words = words(&lower).map(str::to_string);
                let Some(first) = words.next() else { continue };
                let rest: Vec<String> = words.collect();
                let slot = terms.entry(first).or_default();
                if !slot.iter().any(|(r, i)| *i == at && *r == rest) {
                    slot.push((rest, at));
                }
            }
        }
        Index { known, terms }
    }

    pub fn known(&self) -> &[Known] {
        &self.known
    }

    pub fn len(&self) -> usize {
        self.known.len()
    }

    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    /// The dossiers `message` and `thread` mention, each once with its counts, in the order
    /// of their first mention (the message first).
    pub fn mentions(&self, message: &str, thread: &[&str]) -> Vec<Mention> {
        let mut out: Vec<Mention> = Vec::new();
        if self.terms.is_empty() {
            return out;
        }
        let mut count = |text: &str, in_message: bool| {
            let lower = text.to_lowercase();
            let ws: Vec<&str> = words(&lower).collect();
            for (i, w) in ws.iter().enumerate() {
                let Some(slot) = self.terms.get(*w) else {
                    continue;
                };
                for (rest, at) in slot {
                    let follows = ws.len() > i + rest.len()
                        && rest.iter().zip(&ws[i + 1..]).all(|(a, b)| a == b);
                    if !follows {
                        continue;
                    }
                    let m = match out.iter_mut().find(|m| m.at == *at) {
                        Some(m) => m,
                        None => {
                            out.push(Mention {
                                at: *at,
                                in_message: 0,
                                in_thread: 0,
                            });
                            out.last_mut().expect("pushed")
                        }
                    };
                    if in_message {
                        m.in_message += 1;
                    } else {
                        m.in_thread += 1;
                    }
                }
            }
        };
        count(message, true);
        for t in thread {
            count(t, false);
        }
        out
    }
}

/// The words of a text: maximal runs of letters and digits.
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

/// The most names one message is taken to bring up.
pub const MAX_NAMED: usize = 8;

/// Capitalised words that name nobody.
const NOT_NAMES: [&str; 40] = [
    "I",
    "I'm",
    "I've",
    "I'd",
    "I'll",
    "Im",
    "Ive",
    "Id",
    "Ill",
    "OK",
    "Ok",
    "Okay",
    "Hi",
    "Hello",
    "Hey",
    "Thanks",
    "Thank",
    "Yes",
    "No",
    "Please",
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
    "The",
];

/// The names `message` brings up that are not in `exclude` (the speaker's Slack id and
/// display name, the soul's name: each word of them): other people's Slack mentions
/// (`<@U…>`, or the name in `<@U…|name>`), and runs of capitalised words that do not begin a
/// sentence (`… with Ada Lovelace` → `Ada Lovelace`). At most [`MAX_NAMED`], in order.
pub fn named(message: &str, exclude: &[&str]) -> Vec<String> {
    let excluded = |w: &str| {
        exclude
            .iter()
            .flat_map(|e| e.split_whitespace())
            .any(|e| e.eq_ignore_ascii_case(w))
    };
    let mut out: Vec<String> = Vec::new();
    let push = |name: String, out: &mut Vec<String>| {
        if out.len() < MAX_NAMED && !out.iter().any(|n| n.eq_ignore_ascii_case(&name)) {
            out.push(name);
        }
    };
    let mut rest = message;
    let mut plain = String::with_capacity(message.len());
    // Slack markup: a mention of someone else is a name; a link or a channel is no text.
    while let Some(open) = rest.find('<') {
        plain.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('>') else {
            plain.push_str(&rest[open..]);
            rest = "";
            break;
        };
        let inner = &after[..close];
        if let Some(id) = inner.strip_prefix('@') {
            let (id, label) = id.split_once('|').unwrap_or((id, ""));
            let label = label.trim();
            let speaker = excluded(id) || (!label.is_empty() && excluded(label));
            if !speaker {
                push(
                    if label.is_empty() { id } else { label }.to_string(),
                    &mut out,
                );
            }
        }
        plain.push_str(". ");
        rest = &after[close + 1..];
    }
    plain.push_str(rest);
    for run in capitalised_runs(&plain) {
        if run.iter().all(|w| excluded(w)) {
            continue;
        }
        push(run.join(" "), &mut out);
    }
    out
}

/// The people a message mentions the Slack way: (id, label) for each `<@U…>` (label empty)
/// or `<@U…|label>`, in order.
pub fn slack_mentions(message: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = message;
    while let Some(open) = rest.find("<@") {
        let after = &rest[open + 2..];
        let Some(close) = after.find('>') else { break };
        let (id, label) = after[..close]
            .split_once('|')
            .unwrap_or((&after[..close], ""));
        if !id.is_empty() && id.chars().all(|c| c.is_ascii_alphanumeric()) {
            out.push((id.to_string(), label.trim().to_string()));
        }
        rest = &after[close + 1..];
    }
    out
}

/// Runs of capitalised words (not all upper-case, not in [`NOT_NAMES`]) that do not begin a
/// sentence (a run that begins one is passed over whole: its first word may be any word).
fn capitalised_runs(text: &str) -> Vec<Vec<&str>> {
    let mut runs = Vec::new();
    let mut run: Vec<&str> = Vec::new();
    // At a sentence's start, until its first word that is not capitalised.
    let mut opening = true;
    for token in text.split_whitespace() {
        let word = token.trim_matches(|c: char| !c.is_alphanumeric() && c != '\'');
        let word = word.strip_suffix("'s").unwrap_or(word);
        let capital = word.chars().next().is_some_and(char::is_uppercase)
            && word.chars().count() >= 2
            && word.chars().any(char::is_lowercase)
            && word
                .chars()
                .all(|c| c.is_alphanumeric() || c == '\'' || c == '-')
            && !NOT_NAMES.contains(&word);
        if capital && !opening {
            run.push(word);
        } else {
            if !run.is_empty() {
                runs.push(std::mem::take(&mut run));
            }
            opening = opening && capital;
        }
        if token.ends_with(['.', '!', '?', ':', ';']) {
            opening = true;
        }
        if !run.is_empty() && token.ends_with([',', '.', '!', '?', ':', ';', ')']) {
            runs.push(std::mem::take(&mut run));
        }
    }
    if !run.is_empty() {
        runs.push(run);
    }
    runs
}
