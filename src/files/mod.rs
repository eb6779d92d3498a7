//! Files people share with a message: what a surface says of each (`Attachment`, kept with
//! the message as opaque data), how its bytes are fetched (`Fetch`, a trait the surface
//! implements and the engine holds), and what the soul is told of it (`read`: the bytes
//! sniffed, never the declared type alone; text inlined within a budget, a PDF's text
//! extracted within bounds, an image handed on, anything else named).
//!
//! Pure: no I/O, no Slack, no prompt. A file's name and contents are untrusted: names are
//! made printable here and escaped by the prompt; nothing here is ever a path.

pub mod pdf;
pub mod read;

use serde::{Deserialize, Serialize};

pub use read::{read, Limits, Read, Seen};

/// A file shared with a message, as its surface describes it (all of it untrusted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// The surface's id of the file.
    pub id: String,
    pub name: String,
    /// The declared media type (may lie).
    #[serde(default)]
    pub mimetype: String,
    /// The surface's short type (`png`, `pdf`, `text`…), may be empty.
    #[serde(default)]
    pub filetype: String,
    /// The declared size in bytes.
    #[serde(default)]
    pub size: u64,
    /// Where its bytes are, for the surface's fetcher alone.
    #[serde(default)]
    pub url: String,
}

/// What a fetch brought back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// The whole file.
    Bytes(Vec<u8>),
    /// More than the limit: the fetch stopped there (`read` bytes had come).
    TooBig { read: u64 },
    /// Why it could not be fetched, in words for the soul and the log.
    Failed(String),
}

/// Fetches a shared file's bytes: at most `max_bytes`, streamed, from where the surface allows.
#[async_trait::async_trait]
pub trait Fetch: Send + Sync {
    async fn fetch(&self, file: &Attachment, max_bytes: u64) -> Fetched;
}

/// `n` bytes in words a person reads: `812 bytes`, `2.1 KB`, `40 MB`.
pub fn size_words(n: u64) -> String {
    const UNITS: [&str; 3] = ["KB", "MB", "GB"];
    if n < 1024 {
        return if n == 1 {
            "1 byte".into()
        } else {
            format!("{n} bytes")
        };
    }
    let mut v = n as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if v >= 10.0 {
        format!("{} {}", v.round() as u64, UNITS[unit])
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

/// The most characters of a file's name that are shown.
const MAX_NAME_CHARS: usize = 120;

/// A file's name as it may be shown: control characters (newlines, escapes, bidi marks'
/// neighbours in C0/C1) written as `\u{…}`, cut to a length, never empty. Still untrusted
/// text: the prompt escapes it like any other. Never a path: nothing is written to disk.
pub fn display_name(name: &str) -> String {
    let mut out = String::with_capacity(name.len().min(MAX_NAME_CHARS + 8));
    for (i, c) in name.trim().chars().enumerate() {
        if i == MAX_NAME_CHARS {
            out.push('…');
            break;
        }
        if c.is_control() || matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}') {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    if out.is_empty() {
        out.push_str("unnamed");
    }
    out
}

/// Every attachment of a message from its stored form (empty: none). A form that cannot be
/// read is no attachment, never an error: the message is still answered.
pub fn decode(stored: &str) -> Vec<Attachment> {
    if stored.trim().is_empty() {
        return Vec::new();
    }
    serde_json::from_str(stored).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_say_them() {
        assert_eq!(size_words(0), "0 bytes");
        assert_eq!(size_words(1), "1 byte");
        assert_eq!(size_words(812), "812 bytes");
        assert_eq!(size_words(2150), "2.1 KB");
        assert_eq!(size_words(1_258_291), "1.2 MB");
        assert_eq!(size_words(40 * 1024 * 1024), "40 MB");
        assert_eq!(size_words(3 * 1024 * 1024 * 1024), "3.0 GB");
    }

    #[test]
    fn a_name_is_printable_and_never_empty() {
        assert_eq!(display_name("../../etc/passwd"), "../../etc/passwd");
        assert_eq!(
            display_name("a\nb\u{1b}[31m.txt"),
            "a\\u{a}b\\u{1b}[31m.txt"
        );
        assert_eq!(display_name("evil\u{202E}gnp.exe"), "evil\\u{202e}gnp.exe");
        assert_eq!(display_name("   "), "unnamed");
        let long = "x".repeat(500);
        assert_eq!(display_name(&long).chars().count(), MAX_NAME_CHARS + 1);
    }

    #[test]
    fn a_stored_form_that_cannot_be_read_is_no_attachment() {
        assert!(decode("").is_empty());
        assert!(decode("not json").is_empty());
        let one = decode(r#"[{"id":"F1","name":"a.txt","size":3}]"#);
        assert_eq!(one.len(), 1);
        assert_eq!((one[0].name.as_str(), one[0].size), ("a.txt", 3));
    }
}
