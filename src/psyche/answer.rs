//! The model's stance shifts and intention updates, read from its answer:
//! `<stance_shift target="NAME">STANCE</stance_shift>` and
//! `<intention_update operation="…" type="…" target="…" horizon="…">why</intention_update>`.
//! Tag names match ignoring case and `-`/`_`; attributes in double or single quotes.
//!
//! Reads words only: what becomes a number is decided by `mapping` through the table, so a
//! number the model writes here changes nothing. Pure and Unicode-safe: it searches with
//! ASCII-lower-cased text, whose byte offsets are the original's.

use super::mapping::{IntentionUpdate, StanceShift};
use super::text::clip;

pub const STANCE_SHIFT: &str = "stance_shift";
pub const INTENTION_UPDATE: &str = "intention_update";
/// At most this many of each are read from one answer.
pub const MAX_PER_ANSWER: usize = 8;

/// A stance shift as written, its target a name (the engine maps names to people).
pub type Written = (Vec<StanceShift>, Vec<IntentionUpdate>);

/// Every element named `tag` in `text`: (attributes, content).
fn elements(text: &str, tag: &str) -> Vec<(Vec<(String, String)>, String)> {
    let folded: String = text
        .chars()
        .map(|c| {
            if c == '-' {
                '_'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect();
    let open = format!("<{tag}");
    let close = format!("</{tag}>");
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = folded[from..].find(&open) {
        let start = from + at + open.len();
        // The name must end here: `<stance_shifts` is another tag.
        let next = folded[start..].chars().next();
        if !matches!(next, Some(c) if c.is_whitespace() || c == '>' || c == '/') {
            from = start;
            continue;
        }
        let Some(gt) = folded[start..].find('>') else {
            break;
        };
        let head = &text[start..start + gt];
        let body_start = start + gt + 1;
        let (content, end) = if head.trim_end().ends_with('/') {
            (String::new(), body_start)
        } else {
            match folded[body_start..].find(&close) {
                Some(c) => (
                    text[body_start..body_start + c].trim().to_string(),
                    body_start + c + close.len(),
                ),
                None => break,
            }
        };
        out.push((attributes(head.trim_end_matches('/')), content));
        from = end;
        if out.len() >= MAX_PER_ANSWER {
            break;
        }
    }
    out
}

/// `key="value"` pairs (keys lower-cased), in order.
fn attributes(head: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut rest = head;
    while let Some(eq) = rest.find('=') {
        let key = rest[..eq]
            .trim()
            .rsplit(char::is_whitespace)
            .next()
            .unwrap_or("")
            .to_ascii_lowercase();
        let after = rest[eq + 1..].trim_start();
        let Some(quote) = after.chars().next().filter(|c| *c == '"' || *c == '\'') else {
            rest = after;
            continue;
        };
        let inner = &after[1..];
        let Some(end) = inner.find(quote) else {
            break;
        };
        out.push((key, inner[..end].to_string()));
        rest = &inner[end + 1..];
    }
    out
}

fn get(attrs: &[(String, String)], key: &str) -> Option<String> {
    attrs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| clip(v.trim(), 80))
        .filter(|v| !v.is_empty())
}

/// The stance shifts and intention updates an answer holds.
pub fn read(text: &str) -> Written {
    let shifts = elements(text, STANCE_SHIFT)
        .into_iter()
        .map(|(attrs, content)| StanceShift {
            target: get(&attrs, "target").unwrap_or_default(),
            description: clip(&content, 80),
        })
        .collect();
    let updates = elements(text, INTENTION_UPDATE)
        .into_iter()
        .map(|(attrs, content)| IntentionUpdate {
            operation: get(&attrs, "operation").unwrap_or_default(),
            kind: get(&attrs, "type").unwrap_or_default(),
            target: get(&attrs, "target"),
            horizon: get(&attrs, "horizon").unwrap_or_default(),
            description: clip(&content, 200),
        })
        .collect();
    (shifts, updates)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn both_tags_are_read_with_their_attributes() {
        let (s, u) = read(
            "<external_dialogue>hi</external_dialogue>\n<Stance-Shift target=\"Zoé\">open up</Stance-Shift>\n\
             <intention_update operation='create' type=\"be_gentle\" target=\"Zoé\" horizon=\"short\">she is tired</intention_update>",
        );
        assert_eq!(
            s,
            vec![StanceShift {
                target: "Zoé".into(),
                description: "open up".into()
            }]
        );
        assert_eq!(u[0].operation, "create");
        assert_eq!(u[0].kind, "be_gentle");
        assert_eq!(u[0].target.as_deref(), Some("Zoé"));
        assert_eq!(u[0].horizon, "short");
        assert_eq!(u[0].description, "she is tired");
    }

    #[test]
    fn a_longer_tag_name_and_an_unclosed_one_are_not_read() {
        assert!(read("<stance_shifts target=\"a\">open_up</stance_shifts>")
            .0
            .is_empty());
        assert!(read("<stance_shift target=\"a\">open_up").0.is_empty());
    }

    proptest! {
        #[test]
        fn any_text_reads_without_panicking(text in crate::arbitrary::text(), name in crate::arbitrary::text()) {
            let _ = read(&text);
            let wrapped = format!("{text}<stance_shift target=\"x\">{name}</stance_shift>");
            let (s, _) = read(&wrapped);
            prop_assert!(s.len() <= MAX_PER_ANSWER);
        }

        #[test]
        fn a_written_shift_reads_back(target in "[\\p{L} ]{1,20}", stance in "[a-z_]{1,20}") {
            let (s, _) = read(&format!("<stance_shift target=\"{target}\">{stance}</stance_shift>"));
            prop_assert_eq!(s.len(), 1);
            prop_assert_eq!(&s[0].target, target.trim());
            prop_assert_eq!(&s[0].description, &stance);
        }
    }
}
