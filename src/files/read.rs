//! What the soul is told of one shared file: decided first from what its surface declares
//! (`plan`: too big, a kind anima does not read, an image it cannot see: named, never
//! fetched), then from its bytes (`read`: sniffed, whatever the declared type says). Pure.

use super::{display_name, pdf, size_words, Attachment, Fetched};

/// The bounds a message's files are read within (`[files]`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub max_bytes: u64,
    pub max_files: usize,
    /// The most characters of one file's text the prompt shows.
    pub text_chars: usize,
    /// The model will see an image (images on, and the provider reads them).
    pub images: bool,
}

/// What a file is, as far as the soul is told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Image,
    Pdf,
    Text,
    Video,
    Audio,
    Other,
}

impl Kind {
    /// The noun, with its article: "an image", "a PDF".
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Image => "an image",
            Kind::Pdf => "a PDF",
            Kind::Text => "a text file",
            Kind::Video => "a video",
            Kind::Audio => "a recording",
            Kind::Other => "a file",
        }
    }

    /// The noun after a size: "a 40 MB video".
    fn bare(self) -> &'static str {
        self.noun().split_once(' ').map_or("file", |x| x.1)
    }
}

/// What became of a shared file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// Its name, printable (still untrusted).
    pub name: String,
    pub kind: Kind,
    /// Its size in bytes (as read, or as declared when it was not); `None`: not known.
    pub size: Option<u64>,
    pub read: Read,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// Its text (already within the budget) and, when it was cut, a note saying so.
    Text { text: String, cut: Option<String> },
    /// An image's bytes, for the model.
    Image(Vec<u8>),
    /// An image the model sees with the message (its bytes went to the provider).
    Shown,
    /// Not read: why, in words.
    Named(String),
}

impl Seen {
    /// One line for the soul (and the log): what the file is and what became of it.
    pub fn about(&self) -> String {
        let noun = self.kind.noun();
        let what = match self.size {
            Some(n) => format!("{noun}, {}", size_words(n)),
            None => noun.to_string(),
        };
        match &self.read {
            Read::Text { cut: Some(c), .. } => format!("{what} ({c})"),
            Read::Text { .. } => what,
            Read::Image(_) | Read::Shown => format!("{what}, shown to you with the message"),
            Read::Named(why) => match self.size {
                Some(n) => format!("a {} {}, not read: {why}", size_words(n), self.kind.bare()),
                None => format!("{noun}, not read: {why}"),
            },
        }
    }

    /// The line working memory keeps of it: the name, the kind, the size; never its bytes.
    pub fn remembered(&self) -> String {
        self.remembered_with(None)
    }

    /// The line working memory keeps of it, with what the soul said it showed (one line,
    /// already bounded by the parser; still untrusted: the prompt escapes it).
    pub fn remembered_with(&self, note: Option<&str>) -> String {
        let size = self.size.map(|n| format!(", {}", size_words(n)));
        let note = note
            .filter(|n| !n.trim().is_empty())
            .map(|n| format!("; you noted: {}", n.trim()));
        format!(
            "[shared a file: {} ({}{}){}]",
            self.name,
            self.kind.noun(),
            size.unwrap_or_default(),
            note.unwrap_or_default()
        )
    }

    fn named(file: &Attachment, kind: Kind, size: Option<u64>, why: impl Into<String>) -> Seen {
        Seen {
            name: display_name(&file.name),
            kind,
            size,
            read: Read::Named(why.into()),
        }
    }
}

/// The kind a file declares (its media type, the surface's type, its name's extension).
pub fn declared(file: &Attachment) -> Kind {
    let mime = file.mimetype.to_ascii_lowercase();
    let ext = file
        .name
        .rsplit_once('.')
        .map(|x| x.1.to_ascii_lowercase())
        .unwrap_or_default();
    let ft = file.filetype.to_ascii_lowercase();
    if mime.starts_with("image/") {
        Kind::Image
    } else if mime.starts_with("video/") {
        Kind::Video
    } else if mime.starts_with("audio/") {
        Kind::Audio
    } else if mime == "application/pdf" || ft == "pdf" || ext == "pdf" {
        Kind::Pdf
    } else if mime.starts_with("text/") {
        Kind::Text
    } else {
        Kind::Other
    }
}

/// Before any fetch: the file is named without being fetched (`Some`), or it is to be
/// fetched (`None`).
pub fn plan(file: &Attachment, limits: &Limits) -> Option<Seen> {
    let kind = declared(file);
    // A size of 0 is one the surface did not give.
    let size = (file.size > 0).then_some(file.size);
    if file.size > limits.max_bytes {
        let why = format!("larger than the {} limit", size_words(limits.max_bytes));
        return Some(Seen::named(file, kind, size, why));
    }
    match kind {
        Kind::Video | Kind::Audio => Some(Seen::named(
            file,
            kind,
            size,
            "anima reads text, PDFs and images",
        )),
        Kind::Image if !limits.images => Some(Seen::named(
            file,
            kind,
            size,
            "an image was shared; you cannot see it",
        )),
        _ => None,
    }
}

/// A file past `[files] max_files`: named, not fetched.
pub fn beyond_the_count(file: &Attachment, max_files: usize) -> Seen {
    let size = (file.size > 0).then_some(file.size);
    let why = format!("anima reads at most {max_files} files of one message");
    Seen::named(file, declared(file), size, why)
}

/// What the soul is told of `file`, from what its fetch brought back.
pub fn read(file: &Attachment, fetched: Fetched, limits: &Limits) -> Seen {
    let bytes = match fetched {
        Fetched::Bytes(b) => b,
        Fetched::TooBig { .. } => {
            let why = format!("larger than the {} limit", size_words(limits.max_bytes));
            return Seen::named(file, declared(file), None, why);
        }
        Fetched::Failed(why) => {
            let size = (file.size > 0).then_some(file.size);
            let why = format!("the download failed ({why})");
            return Seen::named(file, declared(file), size, why);
        }
    };
    let size = Some(bytes.len() as u64);
    let named = |kind, why: &str| Seen::named(file, kind, size, why);
    match sniff(&bytes) {
        Sniffed::Image if limits.images => Seen {
            name: display_name(&file.name),
            kind: Kind::Image,
            size,
            read: Read::Image(bytes),
        },
        Sniffed::Image => named(Kind::Image, "an image was shared; you cannot see it"),
        Sniffed::Pdf => match pdf::text(&bytes, limits.text_chars) {
            Ok(t) if t.text.trim().is_empty() => {
                named(Kind::Pdf, "it holds no text anima can read (a scan?)")
            }
            Ok(t) => Seen {
                name: display_name(&file.name),
                kind: Kind::Pdf,
                size,
                read: Read::Text {
                    cut: t.note(),
                    text: t.text,
                },
            },
            Err(e) => named(Kind::Pdf, &format!("its text could not be read ({e})")),
        },
        Sniffed::Text => match text_of(bytes) {
            Some(text) => {
                let (text, cut) = cut_text(text, limits.text_chars);
                Seen {
                    name: display_name(&file.name),
                    kind: Kind::Text,
                    size,
                    read: Read::Text { text, cut },
                }
            }
            None => named(declared(file), NOT_READ),
        },
        Sniffed::Html => named(
            Kind::Other,
            "the download gave a web page, not the file (is the app missing `files:read`?)",
        ),
        Sniffed::Binary => named(declared(file), NOT_READ),
    }
}

/// Why a file of other bytes is not read.
const NOT_READ: &str = "its bytes are not text, a PDF or an image anima reads";

enum Sniffed {
    Image,
    Pdf,
    Html,
    Text,
    Binary,
}

/// What the bytes are, whatever the file said it was.
fn sniff(bytes: &[u8]) -> Sniffed {
    let head = &bytes[..bytes.len().min(1024)];
    let image = head.starts_with(b"\x89PNG\r\n\x1a\n")
        || head.starts_with(b"\xFF\xD8\xFF")
        || head.starts_with(b"GIF87a")
        || head.starts_with(b"GIF89a")
        || (head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP");
    if image {
        return Sniffed::Image;
    }
    if head.windows(5).any(|w| w == b"%PDF-") {
        return Sniffed::Pdf;
    }
    if bytes.contains(&0) {
        Sniffed::Binary
    } else if looks_like_html_page(&String::from_utf8_lossy(head)) {
        Sniffed::Html
    } else {
        Sniffed::Text
    }
}

/// The bytes as text, taken over without a copy when they are UTF-8 (a byte-order mark
/// dropped); a few invalid sequences become U+FFFD; many invalid bytes or control characters
/// mean it is not text.
fn text_of(bytes: Vec<u8>) -> Option<String> {
    let text = match String::from_utf8(bytes) {
        Ok(mut text) => {
            if text.starts_with('\u{FEFF}') {
                text.drain(..'\u{FEFF}'.len_utf8());
            }
            text
        }
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    // One pass: the characters, the replacement characters and the control characters other
    // than whitespace (what a binary file is made of).
    let (mut chars, mut bad, mut controls) = (0usize, 0usize, 0usize);
    for c in text.chars() {
        chars += 1;
        bad += usize::from(c == '\u{FFFD}');
        controls += usize::from(c.is_control() && !matches!(c, '\n' | '\r' | '\t' | '\u{c}'));
    }
    // A few stray bytes in a long text are allowed; more than one in fifty is not text.
    let most = chars / 50 + 2;
    if bad > most || controls > most {
        return None;
    }
    Some(text)
}

/// Slack's sign-in page (or an error page) where a file was expected.
fn looks_like_html_page(text: &str) -> bool {
    let start = text.trim_start().get(..64).unwrap_or(text.trim_start());
    let start = start.to_ascii_lowercase();
    start.starts_with("<!doctype html") || start.starts_with("<html")
}

/// `text` within `max` characters (cut on a character boundary), and a note when cut.
pub fn cut_chars(text: &str, max: usize) -> (String, Option<String>) {
    match text.char_indices().nth(max) {
        None => (text.to_string(), None),
        Some((at, _)) => (text[..at].to_string(), Some(cut_note(text, max))),
    }
}

/// `cut_chars` on a text it owns: cut in place, never copied.
fn cut_text(mut text: String, max: usize) -> (String, Option<String>) {
    match text.char_indices().nth(max) {
        None => (text, None),
        Some((at, _)) => {
            let note = cut_note(&text, max);
            text.truncate(at);
            text.shrink_to_fit();
            (text, Some(note))
        }
    }
}

fn cut_note(text: &str, max: usize) -> String {
    let total = text.chars().count();
    format!("cut: the first {max} of its {total} characters")
}

#[cfg(test)]
mod tests;
