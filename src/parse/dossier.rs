//! The dossier steps' answers, read from the raw answer beside the `Cognition` (they are asked
//! only on turns that name someone, after the other steps): the check, and each dossier
//! written with its change note. Tolerant like the rest of the parser: a tag not closed, an
//! attribute missing or a placeholder echoed is passed over, never an error.

use super::text;
use crate::steps::{DOSSIER_CHANGE_NOTE, DOSSIER_CHECK, DOSSIER_UPDATE, EXAMPLE_TEXTS};

/// The most dossiers one answer may write.
pub const MAX_UPDATES: usize = 3;
/// The most bytes of one written dossier kept (the rest is cut).
pub const MAX_TEXT: usize = 16 * 1024;

/// One dossier the soul wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DossierUpdate {
    /// Whom or what it is about (untrusted).
    pub name: String,
    /// `person` or `subject` as written (checked by the engine).
    pub kind: String,
    pub aliases: Vec<String>,
    /// The whole dossier in markdown.
    pub text: String,
    pub note: String,
}

/// The dossier steps' answers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DossierAnswer {
    pub check: Option<bool>,
    pub updates: Vec<DossierUpdate>,
}

/// Reads the dossier steps' answers from a raw answer.
pub fn parse_dossiers(raw: &str) -> DossierAnswer {
    let mut answer = DossierAnswer::default();
    let mut rest = raw;
    while let Some(at) = rest.find('<') {
        rest = &rest[at + 1..];
        let name_len = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
            .unwrap_or(rest.len());
        let name = rest[..name_len].to_ascii_lowercase().replace('-', "_");
        if name != DOSSIER_CHECK && name != DOSSIER_UPDATE {
            continue;
        }
        let Some(open_end) = rest.find('>') else {
            break;
        };
        let attrs = &rest[name_len..open_end];
        let body = &rest[open_end + 1..];
        let close = format!("</{name}>");
        let Some(end) = find_ci(body, &close) else {
            continue;
        };
        let content = text::tidy(&text::decode_content(&body[..end]));
        rest = &body[end + close.len()..];
        if name == DOSSIER_CHECK {
            if let Some(b) = text::parse_bool(&content) {
                answer.check = Some(b);
            }
            continue;
        }
        let name = attr(attrs, "name").unwrap_or_default();
        if name.is_empty() || content.is_empty() || is_echo(&content) {
            continue;
        }
        if answer.updates.len() >= MAX_UPDATES {
            continue;
        }
        let note = note_after(rest);
        let text = cut(&content, MAX_TEXT);
        answer.updates.push(DossierUpdate {
            name,
            kind: attr(attrs, "kind").unwrap_or_default(),
            aliases: attr(attrs, "aliases")
                .unwrap_or_default()
                .split(',')
                .map(|a| a.trim().to_string())
                .filter(|a| !a.is_empty())
                .take(MAX_ALIASES)
                .collect(),
            text,
            note,
        });
    }
    answer
}

const MAX_ALIASES: usize = 16;

fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_string()
}

fn is_echo(content: &str) -> bool {
    EXAMPLE_TEXTS
        .iter()
        .chain(&[DOSSIER_PLACEHOLDER])
        .any(|x| content.eq_ignore_ascii_case(x))
}

/// The placeholder of the dossier update's example (the prompt shows it).
pub const DOSSIER_PLACEHOLDER: &str = "the whole dossier in markdown";

/// The note that follows an update, before any other dossier tag.
fn note_after(rest: &str) -> String {
    let open = format!("<{DOSSIER_CHANGE_NOTE}>");
    let close = format!("</{DOSSIER_CHANGE_NOTE}>");
    let Some(at) = find_ci(rest, &open) else {
        return String::new();
    };
    if find_ci(rest, &format!("<{DOSSIER_UPDATE}")).is_some_and(|next| next < at) {
        return String::new();
    }
    let body = &rest[at + open.len()..];
    let end = find_ci(body, &close).unwrap_or(body.len());
    let note = text::tidy(&text::decode_content(&body[..end]));
    cut(&note, 500)
}

/// An attribute's value (`name="…"` or `name='…'`), entities decoded, on one line.
pub(super) fn attr(attrs: &str, key: &str) -> Option<String> {
    let mut rest = attrs;
    loop {
        let at = rest.find(key)?;
        let before_ok = at == 0 || rest.as_bytes()[at - 1].is_ascii_whitespace();
        let after = rest[at + key.len()..].trim_start();
        if let (true, Some(v)) = (before_ok, after.strip_prefix('=')) {
            let v = v.trim_start();
            let q = v.chars().next()?;
            if q == '"' || q == '\'' {
                let inner = &v[1..];
                let end = inner.find(q)?;
                let value = text::decode_entities(&inner[..end]);
                return Some(value.split_whitespace().collect::<Vec<_>>().join(" "));
            }
        }
        rest = &rest[at + key.len()..];
    }
}

/// `text` without the dossier steps' elements (and an unclosed one to the end): what a reply
/// falls back to never shows the soul's notes.
pub fn without_dossiers(text: &str) -> std::borrow::Cow<'_, str> {
    if find_ci(text, "<dossier_").is_none() {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = find_ci(rest, "<dossier_") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let close = format!("</{}>", &after[..name_len]);
        rest = match find_ci(after, &close) {
            Some(end) => &after[end + close.len()..],
            None => "",
        };
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

/// Case-insensitive find of an ASCII needle.
pub(super) fn find_ci(hay: &str, needle: &str) -> Option<usize> {
    let (h, n) = (hay.as_bytes(), needle.as_bytes());
    if n.is_empty() || h.len() < n.len() {
        return None;
    }
    (0..=h.len() - n.len()).find(|&i| h[i..i + n.len()].eq_ignore_ascii_case(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_check_and_each_update_with_its_note() {
        let raw = "<external_dialogue>hi</external_dialogue>\n<dossier_check>true</dossier_check>\n\
            <dossier_update name=\"Priya Raman\" kind=\"person\" aliases=\"Priya, PR\">Works on the &lt;compiler&gt;.</dossier_update>\n\
            <dossier_change_note>Met through Tom.</dossier_change_note>\n\
            <dossier_update name='Rust'>A language.</dossier_update>";
        let a = parse_dossiers(raw);
        assert_eq!(a.check, Some(true));
        assert_eq!(a.updates.len(), 2);
        assert_eq!(a.updates[0].name, "Priya Raman");
        assert_eq!(a.updates[0].aliases, vec!["Priya", "PR"]);
        assert_eq!(a.updates[0].text, "Works on the <compiler>.");
        assert_eq!(a.updates[0].note, "Met through Tom.");
        assert_eq!(
            (a.updates[1].name.as_str(), a.updates[1].note.as_str()),
            ("Rust", "")
        );
    }

    #[test]
    fn echoes_unclosed_tags_and_missing_names_are_passed_over() {
        let raw = format!(
            "<dossier_update name=\"X\">{DOSSIER_PLACEHOLDER}</dossier_update>\
             <dossier_update>no name</dossier_update><dossier_update name=\"Y\">never closed"
        );
        assert_eq!(parse_dossiers(&raw), DossierAnswer::default());
        assert_eq!(
            parse_dossiers("<dossier_check>maybe</dossier_check>").check,
            None
        );
        let many = "<dossier_update name=\"a\">x</dossier_update>".repeat(10);
        assert_eq!(parse_dossiers(&many).updates.len(), MAX_UPDATES);
    }

    #[test]
    fn a_fallback_reply_never_shows_the_dossier_steps() {
        let raw = "Hi there.\n<dossier_check>true</dossier_check><DOSSIER_UPDATE name=\"x\">secret notes</DOSSIER_UPDATE>\n<dossier_change_note>n</dossier_change_note> Bye.<dossier_update name=\"y\">cut off";
        assert_eq!(without_dossiers(raw), "Hi there.\n\n Bye.");
        let c = crate::parse::parse_response(raw, 500);
        assert!(
            !c.reply.contains("secret") && !c.reply.contains("dossier"),
            "{}",
            c.reply
        );
    }

    proptest::proptest! {
        #[test]
        fn never_panics(raw in "\\PC{0,300}") {
            let _ = parse_dossiers(&raw);
            let _ = parse_dossiers(&format!("<dossier_update name=\"{raw}\">{raw}</dossier_update>"));
        }
    }
}
