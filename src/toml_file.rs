//! The one checker every TOML file anima reads goes through: the configuration, process
//! files, the soul's template, its psyche and its assistant words.
//!
//! Owns what a problem is (file, line, key, plain words) and how a file's text becomes its
//! raw serde shape: a syntax error or a refused key is one problem on the line it is on, and
//! an unknown key or choice names the nearest known one. Knows nothing of what any file
//! means; each reader checks its own values and reports through [`TomlFile::problem`].

use std::fmt;
use std::ops::Range;
use std::path::Path;

/// One thing wrong with a file anima reads, located as precisely as we can.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub file: String,
    pub key: String,
    pub line: Option<usize>,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        if self.key.starts_with('[') {
            write!(f, ": in {}", self.key)?;
        } else if !self.key.is_empty() {
            write!(f, ": key `{}`", self.key)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl Problem {
    /// A file or folder (`what`) that could not be read at all; `hint` says what to do.
    pub fn unreadable(path: &Path, what: &str, e: &std::io::Error, hint: &str) -> Self {
        Problem {
            file: path.display().to_string(),
            key: String::new(),
            line: None,
            message: format!("cannot read the {what} ({e}){hint}"),
        }
    }
}

/// A TOML file's text and the name problems give it.
#[derive(Debug, Clone, Copy)]
pub struct TomlFile<'a> {
    name: &'a str,
    text: &'a str,
}

impl<'a> TomlFile<'a> {
    /// `name` is how problems name the file (its path, usually).
    pub fn new(name: &'a str, text: &'a str) -> Self {
        TomlFile { name, text }
    }

    pub fn text(&self) -> &'a str {
        self.text
    }

    /// Reads the text into its raw serde shape. A syntax error or a key the shape refuses
    /// is one problem, with the line and key it is at; an unknown key or choice also names
    /// the nearest one the shape knows, when one is close.
    pub fn read<T: serde::de::DeserializeOwned>(&self) -> Result<T, Vec<Problem>> {
        toml::from_str(self.text).map_err(|e| vec![self.refused(&e)])
    }

    /// A problem the TOML parser or serde reported, located by its span where it has one.
    pub fn refused(&self, e: &toml::de::Error) -> Problem {
        let message = e.message().trim();
        let offset = e.span().map(|s| s.start);
        let section = offset.and_then(|o| section_at(self.text, o));
        let (key, message) = match unknown_name(message) {
            Some((name, known)) => {
                let key = match &section {
                    Some(s) => format!("{s}.{name}"),
                    None => name.to_string(),
                };
                let message = match nearest(name, known.iter().copied()) {
                    Some(n) => format!("{message}; did you mean `{n}`?"),
                    None => message.to_string(),
                };
                (key, message)
            }
            None => {
                let key = match (section, offset.and_then(|o| key_at(self.text, o))) {
                    (Some(section), Some(key)) => format!("{section}.{key}"),
                    (None, Some(key)) => key,
                    (Some(section), None) => format!("[{section}]"),
                    (None, None) => String::new(),
                };
                (key, message.to_string())
            }
        };
        Problem {
            file: self.name.to_string(),
            key,
            line: offset.map(|o| self.line(o)),
            message,
        }
    }

    /// The 1-based line a byte offset falls on.
    pub fn line(&self, offset: usize) -> usize {
        line_of(self.text, offset)
    }

    /// The line a value's span starts on.
    pub fn at(&self, span: Range<usize>) -> Option<usize> {
        Some(self.line(span.start))
    }

    /// A problem in this file, at `line` (when known), with `key`.
    pub fn problem(&self, line: impl Into<Option<usize>>, key: &str, message: String) -> Problem {
        Problem {
            file: self.name.to_string(),
            key: key.to_string(),
            line: line.into(),
            message,
        }
    }
}

/// The 1-based line a byte offset of `text` falls on (an offset past the end: the last
/// line). Counts bytes, so an offset inside a character cannot panic.
pub fn line_of(text: &str, offset: usize) -> usize {
    let before = &text.as_bytes()[..offset.min(text.len())];
    before.iter().filter(|b| **b == b'\n').count() + 1
}

/// The candidate closest to `word` (ignoring case, `-` for `_`), if it is close enough to be
/// a likely misspelling: at most a third of its letters off (two for short words), a swap of
/// neighbours counting as one.
pub fn nearest<'a>(word: &str, candidates: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let norm = |s: &str| s.to_lowercase().replace('-', "_");
    let w = norm(word);
    let limit = (w.chars().count() / 3).max(2);
    candidates
        .map(|c| (strsim::osa_distance(&w, &norm(c)), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// serde's "unknown field `x`, expected one of `a`, `b`" (or variant, or "expected `a`"):
/// the name found and the names it expected.
fn unknown_name(message: &str) -> Option<(&str, Vec<&str>)> {
    let rest = message
        .strip_prefix("unknown field `")
        .or_else(|| message.strip_prefix("unknown variant `"))?;
    let (name, rest) = rest.split_once('`')?;
    let expected = rest.split_once("expected").map_or("", |(_, e)| e);
    let known = expected.split('`').skip(1).step_by(2).collect();
    Some((name, known))
}

/// The key set on the line a byte offset falls in, when the offset is in its value (a value
/// of the wrong type): `max_tokens = "lots"` → `max_tokens`.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let offset = floor_boundary(text, offset);
    let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let (key, _) = text[start..offset].split_once('=')?;
    let key = key.trim().trim_matches('"');
    (!key.is_empty() && !key.starts_with('[')).then(|| key.to_string())
}

/// The `[section]` (or `[[array]]`) a byte offset falls in.
fn section_at(text: &str, offset: usize) -> Option<String> {
    let offset = floor_boundary(text, offset);
    text[..offset].lines().rev().find_map(|l| {
        let l = l.trim();
        let inner = l.strip_prefix("[[").and_then(|r| r.strip_suffix("]]"));
        inner
            .or_else(|| l.strip_prefix('[')?.strip_suffix(']'))
            .map(|s| s.trim().to_string())
    })
}

/// The largest char boundary at or before `offset`.
fn floor_boundary(text: &str, offset: usize) -> usize {
    let mut o = offset.min(text.len());
    while !text.is_char_boundary(o) {
        o -= 1;
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Shape {
        name: String,
        #[serde(default)]
        steps: Vec<String>,
        #[serde(default)]
        actions: Vec<Action>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Action {
        name: String,
        effect: String,
    }

    fn read(text: &str) -> Problem {
        let mut p = TomlFile::new("f.toml", text).read::<Shape>().unwrap_err();
        assert_eq!(p.len(), 1);
        p.remove(0)
    }

    #[test]
    fn a_misspelled_key_names_its_line_its_key_and_the_nearest_name() {
        let p = read("name = \"a\"\nstesp = []\n");
        assert_eq!(p.line, Some(2));
        assert_eq!(p.key, "stesp");
        assert!(
            p.message.ends_with("did you mean `steps`?"),
            "{}",
            p.message
        );
        let p = read("name = \"a\"\n\n[[actions]]\nname = \"x\"\neffcet = \"think\"\n");
        assert_eq!((p.line, p.key.as_str()), (Some(5), "actions.effcet"));
        assert!(
            p.message.ends_with("did you mean `effect`?"),
            "{}",
            p.message
        );
    }

    #[test]
    fn a_key_far_from_every_name_suggests_none() {
        let p = read("name = \"a\"\nzzzzzzzz = 1\n");
        assert_eq!(p.key, "zzzzzzzz");
        assert!(!p.message.contains("did you mean"), "{}", p.message);
        assert!(p.message.contains("expected one of"), "{}", p.message);
    }

    #[test]
    fn a_value_of_the_wrong_kind_names_its_key() {
        let p = read("name = 3\n");
        assert_eq!((p.line, p.key.as_str()), (Some(1), "name"));
        let p = read("name = \"a\"\n[[actions]]\nname = \"x\"\neffect = 4\n");
        assert_eq!((p.line, p.key.as_str()), (Some(4), "actions.effect"));
    }

    #[test]
    fn a_syntax_error_is_one_problem_on_its_line() {
        let p = read("name = \"a\"\nsteps = [\n\"é\" \"ü\"\n");
        assert_eq!(p.line, Some(3));
        assert_eq!(p.file, "f.toml");
    }

    #[test]
    fn nearest_counts_a_swap_as_one_edit_and_ignores_case_and_dashes() {
        let names = ["model", "max_tokens", "slack"];
        assert_eq!(nearest("modle", names.into_iter()), Some("model"));
        assert_eq!(nearest("Max-Tokens", names.into_iter()), Some("max_tokens"));
        assert_eq!(nearest("slak", names.into_iter()), Some("slack"));
        assert_eq!(nearest("provider", names.into_iter()), None);
    }

    #[test]
    fn line_of_counts_from_one_and_never_panics() {
        let text = "a = 1\nb = \"é\"\n";
        assert_eq!(line_of(text, 0), 1);
        assert_eq!(line_of(text, 6), 2);
        assert_eq!(line_of(text, 12), 2, "inside a character");
        assert_eq!(line_of(text, 999), 3, "past the end");
    }

    #[test]
    fn lines_and_sections_are_found_inside_multi_byte_text() {
        let text = "a = \"ü\"\n[sé]\nb = \"日本\"\n";
        for offset in 0..=text.len() + 2 {
            let _ = key_at(text, offset);
            let _ = section_at(text, offset);
            assert!(line_of(text, offset) >= 1);
        }
        assert_eq!(section_at(text, text.len()).as_deref(), Some("sé"));
    }
}
