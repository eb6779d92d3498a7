//! How much of the conversations a state call quotes, and how: each message cut on a
//! character boundary and fenced as untrusted, the most important first, until a count or a
//! size is reached. Pure. Without bounds, a busy hour (hundreds of conversations, long
//! messages) would make a call of hundreds of thousands of characters, which a model refuses.
//!
//! The dream's batches are bounded where the engine reads them (`BATCH_CHARS`), not here.

use std::fmt::Write;

use crate::parse::text::truncate_chars;
use crate::prompt::fence;

/// The most conversations the consent call quotes. The soul is asked one question about
/// stopping, not to reread its day: twenty conversations tell it who is mid-conversation,
/// and the call says how many more there were.
pub const MAX_QUOTED_CONVERSATIONS: usize = 20;

/// The most messages the journal call quotes: enough to reflect on a day, as the solitude
/// has always read (the last twenty).
pub const MAX_QUOTED_MESSAGES: usize = 20;

/// The longest quoted message, in characters (the cut ends in `…`). A message may be as long
/// as working memory keeps (32,000 characters); its first few sentences say what it is
/// about. 700 lets [`MAX_QUOTED_CONVERSATIONS`] such messages, with their names and fences,
/// fit in [`MAX_QUOTED_CHARS`].
pub const MAX_QUOTE_CHARS: usize = 700;

/// The most characters the quoted part of one call may take, names and fences included.
/// Even where each character is a token (CJK, emoji) this is about 16,000 tokens: well within
/// any model's context, with room for soul.md and the answer.
pub const MAX_QUOTED_CHARS: usize = 16_000;

/// `text` as a call quotes it: at most [`MAX_QUOTE_CHARS`] characters, never split inside a
/// character, ending in `…` when cut.
pub fn cut(text: &str) -> String {
    truncate_chars(text, MAX_QUOTE_CHARS)
}

/// Text from outside (people, earlier turns) as the prompt shows it: no markup, fenced.
pub fn fenced(out: &mut String, text: &str) {
    let f = fence::fence_for(text);
    let _ = writeln!(out, "{f}\n{}\n{f}", fence::neutralise(text));
}

/// One quoted entry: `- label:` and the message, cut and fenced.
fn entry(label: &str, text: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "- {}:", fence::neutralise(label));
    fenced(&mut out, &cut(text));
    out
}

/// The entries a call shows, `(label, text)` in order of importance: at most `max` of
/// them and [`MAX_QUOTED_CHARS`] characters in all. Stops at the first that does not fit,
/// so what is shown is always the first ones; the caller says how many were left out.
pub fn entries<'a>(items: impl IntoIterator<Item = (&'a str, &'a str)>, max: usize) -> Vec<String> {
    let mut shown = Vec::new();
    let mut total = 0;
    for (label, text) in items.into_iter().take(max) {
        let e = entry(label, text);
        let size = e.chars().count();
        if total + size > MAX_QUOTED_CHARS {
            break;
        }
        total += size;
        shown.push(e);
    }
    shown
}

/// "1 earlier message", "292 more conversations".
pub fn count(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::arbitrary;

    #[test]
    fn a_long_message_is_cut_to_the_bound_with_an_ellipsis() {
        let long = "日本語🦀".repeat(1_000);
        let c = cut(&long);
        assert_eq!(c.chars().count(), MAX_QUOTE_CHARS);
        assert!(c.ends_with('…'));
        assert!(long.starts_with(c.trim_end_matches('…')));
        assert_eq!(cut("short é"), "short é");
    }

    #[test]
    fn the_entries_stop_at_the_first_that_does_not_fit() {
        // A label longer than the whole budget: nothing after it is shown either, so what
        // is shown stays the most important ones.
        let huge = "x".repeat(MAX_QUOTED_CHARS);
        let items = [("a", "one"), (huge.as_str(), "two"), ("c", "three")];
        let shown = entries(items, 10);
        assert_eq!(shown, vec!["- a:\n```\none\n```\n".to_string()]);
    }

    /// Long multi-byte text: arbitrary text repeated past the cut.
    fn long_text() -> impl Strategy<Value = String> {
        (arbitrary::text(), 1usize..400).prop_map(|(t, n)| t.repeat(n))
    }

    proptest! {
        #[test]
        fn the_cut_never_splits_a_character_nor_exceeds_its_bound(text in long_text()) {
            let c = cut(&text);
            prop_assert!(c.chars().count() <= MAX_QUOTE_CHARS, "{} chars", c.chars().count());
            if text.chars().count() <= MAX_QUOTE_CHARS {
                prop_assert_eq!(&c, &text);
            } else {
                // Whole characters of the start of `text`: a prefix on a boundary.
                let kept = c.strip_suffix('…');
                prop_assert!(kept.is_some_and(|k| text.starts_with(k) && text.is_char_boundary(k.len())));
            }
        }

        #[test]
        fn the_entries_never_exceed_the_bounds_and_keep_the_order(
            items in proptest::collection::vec((arbitrary::text(), long_text()), 0..40),
            max in 0usize..30,
        ) {
            let shown = entries(items.iter().map(|(l, t)| (l.as_str(), t.as_str())), max);
            prop_assert!(shown.len() <= max);
            let total: usize = shown.iter().map(|e| e.chars().count()).sum();
            prop_assert!(total <= MAX_QUOTED_CHARS, "{total} chars");
            for (e, (label, text)) in shown.iter().zip(&items) {
                prop_assert_eq!(e, &entry(label, text));
                prop_assert!(e.contains(&*fence::neutralise(&cut(text))));
            }
        }
    }
}
