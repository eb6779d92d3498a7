//! Dossiers, pure: what the soul knows of the people and subjects it hears about (not the
//! person it talks to, who is a user model). Owns the dossier's shape and its file form
//! (frontmatter `name`, `aliases`, `kind`), the slug a name is kept under, the cheap detection
//! that runs before a turn's call (who or what a message names, which dossiers it mentions)
//! and the recall ranking within a size budget.
//!
//! No I/O: the engine reads the hand-written files (`soul/dossiers/*.md`) and the store's
//! learned dossiers and hands them here; a name from outside is only ever turned into a slug
//! of `a-z`, `0-9` and `-`, never a path.

mod detect;
mod frontmatter;
mod recall;

pub use detect::{named, slack_mentions, Index, Known, Mention, MAX_NAMED};
pub use frontmatter::{parse, render, FrontmatterError, Head};
pub use recall::{recall, Budget, Recalled};

/// The most a dossier's file or text may hold (bytes): a longer hand-written file is refused
/// by `anima check` and left out (logged) by the daemon; a longer learned one is cut.
pub const MAX_BYTES: usize = 64 * 1024;
/// The longest slug kept (characters).
pub const MAX_SLUG: usize = 64;
/// The most names and aliases one dossier answers to.
pub const MAX_ALIASES: usize = 16;

/// What a dossier is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Person,
    Subject,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Person => "person",
            Kind::Subject => "subject",
        }
    }

    pub fn from_name(name: &str) -> Option<Kind> {
        match name.trim() {
            "person" => Some(Kind::Person),
            "subject" => Some(Kind::Subject),
            _ => None,
        }
    }
}

/// Who wrote it: the soul's author (reference knowledge, never overwritten) or the soul.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Origin {
    Hand,
    Learned,
}

/// One dossier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dossier {
    pub slug: String,
    pub name: String,
    pub aliases: Vec<String>,
    pub kind: Kind,
    /// The markdown after the frontmatter (untrusted when learned).
    pub body: String,
    pub origin: Origin,
}

impl Dossier {
    /// Its name and aliases, the name first.
    pub fn terms(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.name.as_str()).chain(self.aliases.iter().map(String::as_str))
    }
}

/// The slug a name is kept under: lower-case ASCII letters and digits, every other run of
/// characters one `-`, at most [`MAX_SLUG`] characters; `None` when nothing is left
/// (`../..`, an empty name). `../../etc` is `etc`, never a path.
pub fn slug(name: &str) -> Option<String> {
    let mut out = String::with_capacity(name.len().min(MAX_SLUG));
    let mut dash = false;
    for c in name.chars() {
        let c = fold(c);
        if c.is_ascii_alphanumeric() {
            if dash && !out.is_empty() {
                out.push('-');
            }
            dash = false;
            out.push(c.to_ascii_lowercase());
            if out.len() >= MAX_SLUG {
                break;
            }
        } else {
            dash = true;
        }
    }
    (!out.is_empty()).then_some(out)
}

/// A Latin letter with a diacritic, as its base letter (`é` → `e`), so `José` is `jose`.
fn fold(c: char) -> char {
    match c {
        'à'..='å' | 'À'..='Å' => 'a',
        'ç' | 'Ç' => 'c',
        'è'..='ë' | 'È'..='Ë' => 'e',
        'ì'..='ï' | 'Ì'..='Ï' => 'i',
        'ñ' | 'Ñ' => 'n',
        'ò'..='ö' | 'Ò'..='Ö' | 'ø' | 'Ø' => 'o',
        'ù'..='ü' | 'Ù'..='Ü' => 'u',
        'ý' | 'ÿ' | 'Ý' => 'y',
        c => c,
    }
}

/// `text` cut to at most `max` bytes at a character boundary, and whether it was cut.
pub fn cut(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], true)
}

#[cfg(test)]
mod tests;
