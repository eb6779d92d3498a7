//! A tolerant scanner for the cognitive tags in model output.
//!
//! Only known tag names are structure; anything else starting with `<` is text (Slack's
//! `<@U123>`, `a < b`, an unknown `<response>`). An open element is closed by its own closing
//! tag, by any other known tag, or by the end of the text. A closing tag with nothing open
//! claims the text before it (a missing opening tag). Pure: no I/O, never panics.

use crate::steps::{Step, MODEL_CHANGE_NOTE};

/// The tags the scanner recognises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tag {
    Monologue,
    Dialogue,
    MentalQuery,
    UserModelCheck,
    UserModelUpdate,
    ModelChangeNote,
    SoulStateCheck,
    SoulStateUpdate,
}

impl Tag {
    const ALL: [Tag; 8] = [
        Tag::Monologue,
        Tag::Dialogue,
        Tag::MentalQuery,
        Tag::UserModelCheck,
        Tag::UserModelUpdate,
        Tag::ModelChangeNote,
        Tag::SoulStateCheck,
        Tag::SoulStateUpdate,
    ];

    /// The tag's name, as the step catalogue spells it.
    pub fn name(self) -> &'static str {
        match self {
            Tag::Monologue => Step::InternalMonologue.name(),
            Tag::Dialogue => Step::ExternalDialogue.name(),
            Tag::MentalQuery => Step::MentalQuery.name(),
            Tag::UserModelCheck => Step::UserModelCheck.name(),
            Tag::UserModelUpdate => Step::UserModelUpdate.name(),
            Tag::ModelChangeNote => MODEL_CHANGE_NOTE,
            Tag::SoulStateCheck => Step::SoulStateCheck.name(),
            Tag::SoulStateUpdate => Step::SoulStateUpdate.name(),
        }
    }
}

/// Other spellings models write for a tag (after normalising: lower case, `-` → `_`).
const VARIANTS: [(&str, Tag); 4] = [
    ("internal_monolog", Tag::Monologue),
    ("external_dialog", Tag::Dialogue),
    ("user_model_change_note", Tag::ModelChangeNote),
    ("soul_state_updates", Tag::SoulStateUpdate),
];

/// Every spelling the scanner takes for a tag, normalised: each tag's name, then the variants.
pub fn spellings() -> impl Iterator<Item = (&'static str, Tag)> {
    Tag::ALL.into_iter().map(|t| (t.name(), t)).chain(VARIANTS)
}

pub fn tag_named(name: &str) -> Option<Tag> {
    let norm = normalise(name);
    spellings().find(|(n, _)| *n == norm).map(|(_, t)| t)
}

fn normalise(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c == '-' {
                '_'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

type Attrs = Vec<(String, String)>;

/// One element found in the text. `content` is raw: entities and CDATA are not yet decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element<'a> {
    pub tag: Tag,
    pub attrs: Vec<(String, String)>,
    pub content: &'a str,
}

impl Element<'_> {
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// What a scan found: the elements in order, and the text outside all of them.
#[derive(Debug, Default)]
pub struct Scan<'a> {
    pub elements: Vec<Element<'a>>,
    pub outside: String,
}

#[derive(Debug)]
enum Token {
    Open {
        tag: Tag,
        attrs: Vec<(String, String)>,
        self_closing: bool,
    },
    Close,
    /// A tag cut off by the end of the text (`<external_dia`): dropped.
    Truncated,
}

pub fn scan(text: &str) -> Scan<'_> {
    let mut out = Scan::default();
    // The element being read: its tag, attributes and where its content starts.
    let mut open: Option<(Tag, Attrs, usize)> = None;
    // Start of the text not yet assigned to an element or to `outside`.
    let mut seg = 0;
    let mut i = 0;
    while let Some(rel) = text[i..].find('<') {
        let lt = i + rel;
        let Some((token, end)) = read_tag(text, lt) else {
            i = lt + 1;
            continue;
        };
        match token {
            Token::Open {
                tag,
                attrs,
                self_closing,
            } => {
                if let Some((t, a, start)) = open.take() {
                    out.elements.push(element(t, a, &text[start..lt]));
                } else {
                    out.outside.push_str(&text[seg..lt]);
                }
                if self_closing {
                    out.elements.push(element(tag, attrs, ""));
                } else {
                    open = Some((tag, attrs, end));
                }
            }
            Token::Close => {
                if let Some((t, a, start)) = open.take() {
                    out.elements.push(element(t, a, &text[start..lt]));
                } else if let Some(tag) = closing_tag(text, lt) {
                    // A closing tag with no opening one claims the text before it.
                    out.elements.push(element(tag, Vec::new(), &text[seg..lt]));
                }
            }
            Token::Truncated => {
                if let Some((t, a, start)) = open.take() {
                    out.elements.push(element(t, a, &text[start..lt]));
                } else {
                    out.outside.push_str(&text[seg..lt]);
                }
            }
        }
        seg = end;
        i = end;
    }
    match open {
        Some((t, a, start)) => out.elements.push(element(t, a, &text[start..])),
        None => out.outside.push_str(&text[seg..]),
    }
    out
}

fn element(tag: Tag, attrs: Vec<(String, String)>, content: &str) -> Element<'_> {
    Element {
        tag,
        attrs,
        content,
    }
}

fn closing_tag(text: &str, lt: usize) -> Option<Tag> {
    let name: String = text[lt + 2..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == '-')
        .collect();
    tag_named(&name)
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Reads a known tag starting at `lt` (which holds `<`); `None` means "this `<` is text".
fn read_tag(text: &str, lt: usize) -> Option<(Token, usize)> {
    let rest = &text[lt + 1..];
    let (closing, rest) = match rest.strip_prefix('/') {
        Some(r) => (true, r.trim_start()),
        None => (false, rest),
    };
    let name_len = rest.find(|c: char| !is_name_char(c)).unwrap_or(rest.len());
    let name = &rest[..name_len];
    let after_name = &rest[name_len..];
    let name_start = text.len() - rest.len();
    if name.is_empty() {
        return None;
    }
    let Some(tag) = tag_named(name) else {
        // `<external_dia` at the very end: a known tag cut off mid-name.
        let norm = normalise(name);
        let cut = after_name.is_empty()
            && norm.len() >= 3
            && spellings().any(|(n, _)| n.starts_with(&norm));
        return cut.then_some((Token::Truncated, text.len()));
    };
    if let Some(c) = after_name.chars().next() {
        if !(c.is_whitespace() || c == '>' || c == '/') {
            return None;
        }
    }
    let attrs_start = name_start + name_len;
    if closing {
        let end = match text[attrs_start..].find(['>', '<', '\n']) {
            Some(p) if text[attrs_start + p..].starts_with('>') => attrs_start + p + 1,
            Some(p) => attrs_start + p,
            None => text.len(),
        };
        return Some((Token::Close, end));
    }
    let (attrs, self_closing, end) = read_attrs(text, attrs_start);
    Some((
        Token::Open {
            tag,
            attrs,
            self_closing,
        },
        end,
    ))
}

/// Reads attributes up to `>` (or `/>`); a newline, a `<` or the end also end the tag, so a
/// missing `>` or an unterminated quote cannot swallow the content.
fn read_attrs(text: &str, mut j: usize) -> (Vec<(String, String)>, bool, usize) {
    let mut attrs = Vec::new();
    loop {
        let rest = &text[j..];
        let trimmed = rest.trim_start_matches([' ', '\t', '\r']);
        j += rest.len() - trimmed.len();
        let Some(c) = trimmed.chars().next() else {
            return (attrs, false, j);
        };
        match c {
            '>' => return (attrs, false, j + 1),
            '/' if trimmed[1..].starts_with('>') => return (attrs, true, j + 2),
            '\n' | '<' => return (attrs, false, j),
            _ => {}
        }
        let name_len = trimmed
            .find(|c: char| c.is_whitespace() || matches!(c, '=' | '>' | '<' | '/'))
            .unwrap_or(trimmed.len());
        if name_len == 0 {
            // A stray `/` or `=`: skip it.
            j += c.len_utf8();
            continue;
        }
        let name = trimmed[..name_len].to_ascii_lowercase();
        j += name_len;
        let rest = &text[j..];
        let after = rest.trim_start_matches([' ', '\t']);
        if let Some(v) = after.strip_prefix('=') {
            j += rest.len() - v.len();
            let v_trim = v.trim_start_matches([' ', '\t']);
            j += v.len() - v_trim.len();
            let (value, used) = read_value(v_trim);
            j += used;
            attrs.push((name, value));
        } else {
            attrs.push((name, String::new()));
        }
    }
}

/// Reads one attribute value: quoted with `"`, `'`, smart quotes or `\"`, or bare.
/// Returns the value and the bytes used.
fn read_value(s: &str) -> (String, usize) {
    let (open_len, closers): (usize, &[&str]) = if s.starts_with("\\\"") {
        (2, &["\\\"", "\""])
    } else if s.starts_with('"') {
        (1, &["\""])
    } else if s.starts_with('\'') {
        (1, &["'"])
    } else if s.starts_with('“') || s.starts_with('”') {
        ('“'.len_utf8(), &["”", "“", "\""])
    } else if s.starts_with('‘') || s.starts_with('’') {
        ('‘'.len_utf8(), &["’", "‘", "'"])
    } else {
        let len = s
            .find(|c: char| c.is_whitespace() || c == '>' || c == '<')
            .unwrap_or(s.len());
        let len = if s[..len].ends_with('/') && s[len..].starts_with('>') {
            len - 1
        } else {
            len
        };
        return (s[..len].to_string(), len);
    };
    let body = &s[open_len..];
    // An unterminated quote ends at `>`, a newline or `<`, which are left for the tag.
    let stop = body.find(['>', '\n', '<']).unwrap_or(body.len());
    let close = closers
        .iter()
        .filter_map(|c| body[..stop].find(c).map(|p| (p, c.len())))
        .min();
    match close {
        Some((p, len)) => (body[..p].to_string(), open_len + p + len),
        None => (body[..stop].to_string(), open_len + stop),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tags(text: &str) -> Vec<(Tag, String)> {
        scan(text)
            .elements
            .into_iter()
            .map(|e| (e.tag, e.content.to_string()))
            .collect()
    }

    #[test]
    fn unknown_tags_and_slack_markup_are_text() {
        let s = scan("see <@U123> and <https://x.test|x>, a < b, <b>bold</b>");
        assert!(s.elements.is_empty());
        assert_eq!(
            s.outside,
            "see <@U123> and <https://x.test|x>, a < b, <b>bold</b>"
        );
    }

    #[test]
    fn an_open_element_closes_at_the_next_known_tag() {
        assert_eq!(
            tags("<internal_monologue>hmm<external_dialogue>hi</external_dialogue>"),
            vec![(Tag::Monologue, "hmm".into()), (Tag::Dialogue, "hi".into())]
        );
    }

    #[test]
    fn a_closing_tag_without_an_opening_claims_the_text_before_it() {
        assert_eq!(
            tags("<internal_monologue>a</internal_monologue> hello </external_dialogue>"),
            vec![
                (Tag::Monologue, "a".into()),
                (Tag::Dialogue, " hello ".into())
            ]
        );
    }

    #[test]
    fn attribute_quoting_variants() {
        let cases = [
            (r#"<external_dialogue verb="said">"#, "said"),
            (r#"<external_dialogue verb='said'>"#, "said"),
            (r#"<external_dialogue verb=said>"#, "said"),
            (r#"<external_dialogue verb=“said”>"#, "said"),
            (r#"<external_dialogue verb=\"said\">"#, "said"),
            (r#"<external_dialogue verb="said>"#, "said"),
            (r#"<external_dialogue tone="warm" verb = "said" x>"#, "said"),
        ];
        for (text, verb) in cases {
            let s = scan(text);
            assert_eq!(s.elements.len(), 1, "{text}");
            assert_eq!(s.elements[0].attr("verb"), Some(verb), "{text}");
            assert_eq!(s.elements[0].content, "", "{text}");
        }
    }

    #[test]
    fn a_tag_cut_mid_name_at_the_end_is_dropped() {
        let s = scan("<external_dialogue>Hello</external_dialogue><user_mod");
        assert_eq!(s.outside, "");
        assert_eq!(s.elements.len(), 1);
    }
}
