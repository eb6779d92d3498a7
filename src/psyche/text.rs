//! Words out of people's text, for the lexicon, arc matching and retrieval. Unicode-safe:
//! letters of any script are letters, case is folded with the full Unicode rules, and scripts
//! written without spaces (CJK, Thai…) give one token per character so that they can still
//! match. Never slices a string at a byte offset it did not get from a char boundary.

/// Lower-cased words: runs of letters, digits and apostrophes (`I'm`, `don't`), with any other
/// character a separator. Curly apostrophes count as straight ones.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    each_word(text, |w| out.push(w.to_string()));
    out
}

/// The words `words` gives, one at a time and without a `String` for each: retrieval reads every
/// candidate's text for each turn.
pub fn each_word(text: &str, mut f: impl FnMut(&str)) {
    let mut current = String::new();
    let mut flush = |current: &mut String| {
        let w = current.trim_matches('\'');
        if !w.is_empty() {
            f(w);
        }
        current.clear();
    };
    for c in text.chars() {
        let c = if c == '’' || c == '‘' { '\'' } else { c };
        if c.is_ascii() {
            // The common case, without the Unicode tables (same answers for ASCII).
            if c.is_ascii_alphanumeric() || c == '\'' {
                current.push(c.to_ascii_lowercase());
            } else {
                flush(&mut current);
            }
        } else if unspaced(c) {
            flush(&mut current);
            current.push(c);
            flush(&mut current);
        } else if c.is_alphanumeric() || is_mark(c) {
            current.extend(c.to_lowercase());
        } else {
            flush(&mut current);
        }
    }
    flush(&mut current);
}

/// Whether `phrase` (words joined by single spaces) occurs in `words` as consecutive words.
pub fn has_phrase(words: &[String], phrase: &str) -> bool {
    phrase_starts(words, phrase).next().is_some()
}

/// Where `phrase` (words joined by single spaces) occurs in `words`: the index of its first
/// word, for each time it does.
pub fn phrase_starts<'a>(words: &'a [String], phrase: &'a str) -> impl Iterator<Item = usize> + 'a {
    let (first, rest) = match phrase.split_once(' ') {
        Some((first, rest)) => (first, Some(rest)),
        None => (phrase, None),
    };
    // The first word alone rules out nearly every place; the others are split out only where
    // the first occurs.
    (0..words.len())
        .filter(move |&i| words[i] == first)
        .filter(move |&i| rest.is_none_or(|rest| begins_with(&words[i + 1..], rest.split(' '))))
}

/// Whether `words` begins with `phrase`'s words, in order.
pub fn begins_with<'p>(words: &[String], phrase: impl IntoIterator<Item = &'p str>) -> bool {
    let mut words = words.iter();
    phrase
        .into_iter()
        .all(|p| words.next().is_some_and(|w| w == p))
}

/// Characters of scripts written without spaces between words.
fn unspaced(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF   // hiragana, katakana
        | 0x3400..=0x4DBF // CJK extension A
        | 0x4E00..=0x9FFF // CJK unified
        | 0xF900..=0xFAFF // CJK compatibility
        | 0x0E00..=0x0E7F // Thai
        | 0x20000..=0x2FA1F)
}

/// Combining marks (so `e` + U+0301 stays one word).
fn is_mark(c: char) -> bool {
    matches!(c as u32, 0x0300..=0x036F | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF | 0x20D0..=0x20FF | 0xFE20..=0xFE2F)
}

/// The first `max` characters of `text`, with `…` when cut (never splits a character).
pub fn clip(text: &str, max: usize) -> String {
    let mut out: String = text.chars().take(max).collect();
    if text.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_fold_case_and_keep_apostrophes_and_accents() {
        assert_eq!(
            words("I’m in LYON, Ça va?"),
            ["i'm", "in", "lyon", "ça", "va"]
        );
        assert_eq!(words("日本語 ok"), ["日", "本", "語", "ok"]);
        assert_eq!(words("e\u{301}te\u{301}"), ["e\u{301}te\u{301}"]);
        assert!(words("🦀 -- 👍🏽").is_empty());
    }

    proptest::proptest! {
        #[test]
        fn words_and_clips_hold_on_any_text(text in crate::arbitrary::text(), max in 0usize..40) {
            let w = words(&text);
            for word in &w {
                proptest::prop_assert!(!word.is_empty());
                proptest::prop_assert!(!word.chars().any(char::is_whitespace), "{word:?}");
            }
            if let Some(first) = w.first() {
                proptest::prop_assert!(has_phrase(&w, first));
            }
            let c = clip(&text, max);
            proptest::prop_assert!(c.chars().count() <= max + 1);
            proptest::prop_assert!(text.starts_with(c.trim_end_matches('…')));
        }
    }

    proptest::proptest! {
        #[test]
        fn phrase_starts_are_where_the_phrase_s_words_follow_each_other(
            text in crate::arbitrary::text(),
            pick in proptest::collection::vec(0usize..8, 0..4),
            spaces in proptest::collection::vec(proptest::sample::select(vec![" ", "  "]), 0..4),
            trailing in proptest::bool::ANY,
        ) {
            let w = words(&text);
            // A phrase of the text's own words (or of words it lacks), joined by one space or
            // more, maybe with one at the end: the plain definition, position by position.
            let mut phrase = String::new();
            for (k, &p) in pick.iter().enumerate() {
                if k > 0 {
                    phrase.push_str(spaces.get(k).copied().unwrap_or(" "));
                }
                phrase.push_str(w.get(p).map_or("zzz", String::as_str));
            }
            if trailing {
                phrase.push(' ');
            }
            let parts: Vec<&str> = phrase.split(' ').collect();
            let plain: Vec<usize> = (0..w.len())
                .filter(|&i| {
                    i + parts.len() <= w.len() && parts.iter().zip(&w[i..]).all(|(p, x)| x == p)
                })
                .collect();
            proptest::prop_assert_eq!(phrase_starts(&w, &phrase).collect::<Vec<_>>(), plain);
        }
    }

    #[test]
    fn phrases_match_whole_words_in_order() {
        let w = words("please help me now");
        assert!(has_phrase(&w, "help me"));
        assert!(!has_phrase(&w, "me help"));
        assert!(!has_phrase(&w, "hel"));
    }
}
