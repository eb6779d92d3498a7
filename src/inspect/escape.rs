//! Text from outside, made safe for HTML: `escape` for text and attribute values (the one
//! function every page calls), `cut` for a text too long to show whole.

/// `text` for HTML text or a quoted attribute value: `& < > " '` as entities, everything else
/// as it is (multi-byte text untouched).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + text.len() / 8);
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// The first `max` characters of `text`, and whether anything was left out.
pub fn cut(text: &str, max: usize) -> (&str, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (&text[..at], true),
        None => (text, false),
    }
}

/// A percent-encoded query value (for links that carry a thread id).
pub fn query_value(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Reads entities back: what a browser shows for escaped text.
    fn unescape(s: &str) -> String {
        s.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&#39;", "'")
            .replace("&amp;", "&")
    }

    #[test]
    fn markup_becomes_text() {
        assert_eq!(
            escape("<img src=x onerror=alert(1)>"),
            "&lt;img src=x onerror=alert(1)&gt;"
        );
        assert_eq!(
            escape("</script><script>alert('1')</script>"),
            "&lt;/script&gt;&lt;script&gt;alert(&#39;1&#39;)&lt;/script&gt;"
        );
        assert_eq!(escape("a \"b\" & c"), "a &quot;b&quot; &amp; c");
    }

    #[test]
    fn cut_counts_characters_not_bytes() {
        assert_eq!(cut("日本語のテキスト", 3), ("日本語", true));
        assert_eq!(cut("🌍🌍", 2), ("🌍🌍", false));
        assert_eq!(cut("", 0), ("", false));
    }

    #[test]
    fn query_values_are_percent_encoded() {
        assert_eq!(query_value("C1:1.0 &x"), "C1%3A1.0%20%26x");
        assert_eq!(query_value("é"), "%C3%A9");
    }

    proptest! {
        #[test]
        fn escaped_text_has_no_markup_and_reads_back(
            text in "(\\PC|[<>&\"'/= ]|<script>|</script>|é|🌍|日本){0,40}"
        ) {
            let e = escape(&text);
            prop_assert!(!e.contains('<') && !e.contains('>'));
            prop_assert!(!e.contains('"') && !e.contains('\''));
            prop_assert_eq!(unescape(&e), text);
        }

        #[test]
        fn a_cut_is_a_prefix_on_a_character_boundary(text in "\\PC{0,30}", max in 0usize..40) {
            let (head, more) = cut(&text, max);
            prop_assert!(text.starts_with(head));
            prop_assert_eq!(more, text.chars().count() > max);
            prop_assert_eq!(head.chars().count(), max.min(text.chars().count()));
        }
    }
}
