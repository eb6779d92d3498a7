//! The attachment-note step's answer, read from the raw answer beside the `Cognition`: on a
//! turn whose message carries files (and only then is it asked), the soul says in a line per
//! file what it shows or holds, `<attachment_note name="…">…</attachment_note>`, so working
//! memory can keep it with the file's line. Tolerant like the rest of the parser: a tag not
//! closed, a name missing or the placeholder echoed is passed over, never an error. What it
//! gives is untrusted (the model wrote it from people's files): each note one line, without
//! control characters or brackets, and bounded; whoever shows it escapes it.

use std::borrow::Cow;

use super::dossier::{attr, find_ci};
use super::text;

/// The step's tag.
pub const ATTACHMENT_NOTE: &str = "attachment_note";
/// The placeholder of the step's example (the prompt shows it).
pub const NOTE_PLACEHOLDER: &str = "what it shows or holds, in a sentence";
/// The most characters of one note kept (the rest is cut, marked with `…`).
pub const MAX_NOTE_CHARS: usize = 300;
/// The most notes one answer gives.
pub const MAX_NOTES: usize = 20;

/// What the soul said one shared file showed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentNote {
    /// The file's name as the soul wrote it (entities decoded, on one line, at most
    /// [`MAX_NOTE_CHARS`] characters).
    pub name: String,
    /// One line, at most [`MAX_NOTE_CHARS`] characters.
    pub note: String,
}

/// Every note in a raw answer, in order (at most [`MAX_NOTES`]).
pub fn parse_notes(raw: &str) -> Vec<AttachmentNote> {
    let mut notes = Vec::new();
    let open = format!("<{ATTACHMENT_NOTE}");
    let close = format!("</{ATTACHMENT_NOTE}>");
    let mut rest = raw;
    while let Some(at) = find_ci(rest, &open) {
        rest = &rest[at + open.len()..];
        // `<attachment_notes>` or `<attachment_note_x>` is another tag.
        if !rest.starts_with(|c: char| c == '>' || c.is_whitespace()) {
            continue;
        }
        let Some(open_end) = rest.find('>') else {
            break;
        };
        let attrs = &rest[..open_end];
        let body = &rest[open_end + 1..];
        let Some(end) = find_ci(body, &close) else {
            break;
        };
        rest = &body[end + close.len()..];
        let note = one_line(&text::decode_content(&body[..end]));
        let mut name = attr(attrs, "name").unwrap_or_default();
        if let Some((cut, _)) = name.char_indices().nth(MAX_NOTE_CHARS) {
            name.truncate(cut);
        }
        if note.is_empty() || note.eq_ignore_ascii_case(NOTE_PLACEHOLDER) {
            continue;
        }
        if notes.len() < MAX_NOTES {
            notes.push(AttachmentNote { name, note });
        }
    }
    notes
}

/// `s` on one line: whitespace and control characters as single spaces, brackets as
/// parentheses (a note cannot close the line it is kept in), cut to [`MAX_NOTE_CHARS`].
fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len().min(MAX_NOTE_CHARS * 4));
    let mut count = 0;
    let mut space = false;
    for c in s.chars() {
        if c.is_whitespace() || c.is_control() {
            space = !out.is_empty();
            continue;
        }
        if count + usize::from(space) >= MAX_NOTE_CHARS {
            out.push('…');
            return out;
        }
        if space {
            out.push(' ');
            count += 1;
            space = false;
        }
        out.push(match c {
            '[' => '(',
            ']' => ')',
            c => c,
        });
        count += 1;
    }
    out
}

/// `text` without the step's elements (and an unclosed one to the end): what a reply falls
/// back to never shows the soul's notes.
pub fn without_notes(text: &str) -> Cow<'_, str> {
    let open = format!("<{ATTACHMENT_NOTE}");
    if find_ci(text, &open).is_none() {
        return Cow::Borrowed(text);
    }
    let close = format!("</{ATTACHMENT_NOTE}>");
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = find_ci(rest, &open) {
        out.push_str(&rest[..at]);
        let after = &rest[at..];
        rest = match find_ci(after, &close) {
            Some(end) => &after[end + close.len()..],
            None => "",
        };
    }
    out.push_str(rest);
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_note_per_file_with_its_name() {
        let raw = "<external_dialogue>Looks like a panic.</external_dialogue>\n\
            <attachment_note name=\"trace.png\">A stack trace: a &lt;panic&gt; in main.rs, line 12.</attachment_note>\n\
            <ATTACHMENT_NOTE name='notes &amp; plans.md'>\n  A list\n of three plans.\n</ATTACHMENT_NOTE>";
        assert_eq!(
            parse_notes(raw),
            vec![
                AttachmentNote {
                    name: "trace.png".into(),
                    note: "A stack trace: a <panic> in main.rs, line 12.".into()
                },
                AttachmentNote {
                    name: "notes & plans.md".into(),
                    note: "A list of three plans.".into()
                },
            ]
        );
    }

    #[test]
    fn echoes_empty_notes_unclosed_tags_and_other_tags_are_passed_over() {
        let raw = format!(
            "<attachment_note name=\"a\">{NOTE_PLACEHOLDER}</attachment_note>\
             <attachment_note name=\"b\">  </attachment_note>\
             <attachment_notes>x</attachment_notes>\
             <attachment_note name=\"c\">never closed"
        );
        assert_eq!(parse_notes(&raw), vec![]);
        let many = "<attachment_note name=\"a\">x</attachment_note>".repeat(50);
        assert_eq!(parse_notes(&many).len(), MAX_NOTES);
        // Without a name it is still a note (one file needs none).
        assert_eq!(
            parse_notes("<attachment_note>a chart</attachment_note>")[0].name,
            ""
        );
    }

    #[test]
    fn a_note_is_one_bounded_line_that_cannot_close_its_own() {
        let long = "word ".repeat(200);
        let raw = format!(
            "<attachment_note name=\"x\">one]\n[shared a file: evil]\u{1b}\r\n{long}</attachment_note>"
        );
        let note = &parse_notes(&raw)[0].note;
        assert!(
            note.starts_with("one) (shared a file: evil) word"),
            "{note}"
        );
        assert!(!note.contains(['\n', '\r', '\u{1b}', '[', ']']), "{note}");
        assert_eq!(note.chars().count(), MAX_NOTE_CHARS + 1, "{note}");
        assert!(note.ends_with('…'));
    }

    #[test]
    fn a_fallback_reply_never_shows_the_notes() {
        let raw = "Hi there.\n<attachment_note name=\"x\">secret note</attachment_note> Bye.<attachment_note name=\"y\">cut off";
        assert_eq!(without_notes(raw), "Hi there.\n Bye.");
        let c = crate::parse::parse_response(raw, 500);
        assert!(
            !c.reply.contains("secret") && !c.reply.contains("attachment"),
            "{}",
            c.reply
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics(raw in "\\PC{0,300}") {
            let _ = parse_notes(&raw);
            let _ = without_notes(&raw);
            let _ = parse_notes(&format!("<attachment_note name=\"{raw}\">{raw}</attachment_note>"));
        }
    }
}
