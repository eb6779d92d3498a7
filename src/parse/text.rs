//! Small text clean-ups for model output: reasoning blocks, whole-answer fences, echoed
//! prompt sections, CDATA, entities, `Name said:` prefixes, wrapping quotes, booleans,
//! truncation.
//!
//! Pure functions on strings; each is tolerant and never panics.

use super::scan::{self, Tag};
use crate::steps::{DIALOGUE_VERBS, MONOLOGUE_VERBS, PROMPT_SECTIONS};

/// Removes `<think>…</think>` / `<thinking>…</thinking>` blocks. An unclosed block runs to
/// the next cognitive tag or to the end; a lone `</think>` ends reasoning that began at the
/// start (as some reasoning models print it).
pub fn strip_reasoning(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let lower = text.to_ascii_lowercase();
    // A leading reasoning block whose opening tag was never printed.
    let mut i = 0;
    for close in ["</think>", "</thinking>"] {
        if let Some(p) = lower.find(close) {
            let open = lower[..p].contains("<think");
            if !open {
                i = p + close.len();
                break;
            }
        }
    }
    while let Some(rel) = lower[i..].find("<think") {
        let start = i + rel;
        let after = &lower[start + "<think".len()..];
        let name_end = if after.starts_with("ing>") {
            "<thinking>".len()
        } else if after.starts_with('>') {
            "<think>".len()
        } else {
            out.push_str(&text[i..start + 1]);
            i = start + 1;
            continue;
        };
        out.push_str(&text[i..start]);
        let body = start + name_end;
        let close = ["</think>", "</thinking>"]
            .iter()
            .filter_map(|c| lower[body..].find(c).map(|p| body + p + c.len()))
            .min();
        i = match close {
            Some(end) => end,
            None => next_cognitive_tag(&lower, body).unwrap_or(text.len()),
        };
    }
    out.push_str(&text[i..]);
    out
}

/// Where the next monologue or dialogue tag opens in `lower` (lower-cased text), in any
/// spelling the scanner takes, with `_` or `-`.
fn next_cognitive_tag(lower: &str, from: usize) -> Option<usize> {
    scan::spellings()
        .filter(|(_, tag)| matches!(tag, Tag::Monologue | Tag::Dialogue))
        .flat_map(|(name, _)| [format!("<{name}"), format!("<{}", name.replace('_', "-"))])
        .filter_map(|t| lower[from..].find(&t).map(|p| from + p))
        .min()
}

/// Unwraps a ``` fence (with or without a language) that wraps the whole answer.
pub fn unwrap_fence(text: &str) -> &str {
    let t = text.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return text;
    };
    let Some(inner) = rest.strip_suffix("```") else {
        return text;
    };
    // The opening fence's info string runs to the end of its line.
    let body = match inner.find('\n') {
        Some(nl) if !inner[..nl].contains('<') => &inner[nl + 1..],
        _ => inner,
    };
    if body.contains("```") {
        // More than one fenced block: not a single wrapper.
        return text;
    }
    body
}

/// Removes lines that are only a fence marker (```` ``` ```` or ```` ```xml ````), left over
/// when fences wrapped the tags but prose stood outside them.
pub fn drop_fence_lines(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in text.split_inclusive('\n') {
        let t = line.trim();
        let marker = t.starts_with("```") && t[3..].chars().all(|c| c.is_ascii_alphanumeric());
        if !marker {
            out.push_str(line);
        }
    }
    out
}

/// Removes echoed prompt sections ([`PROMPT_SECTIONS`]: `<soul>`, `<user_model name="…">` …)
/// with their content, by the scanner's rules for cognitive tags: a section runs to its
/// closing tag, to the next section tag or to the end; a closing tag with nothing open
/// claims the text before it. A tag needs its `>` unless the text ends inside it.
pub fn drop_prompt_sections(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut inside = false;
    // Start of the text not yet kept or dropped.
    let mut seg = 0;
    let mut i = 0;
    while let Some(rel) = text[i..].find('<') {
        let lt = i + rel;
        let Some((kind, end)) = section_tag(text, lt) else {
            i = lt + 1;
            continue;
        };
        if !inside && kind != SectionTag::Close {
            out.push_str(&text[seg..lt]);
        }
        match kind {
            SectionTag::Open => inside = true,
            SectionTag::Close => inside = false,
            SectionTag::SelfClosing => {}
        }
        seg = end;
        i = end;
    }
    if !inside {
        out.push_str(&text[seg..]);
    }
    out
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SectionTag {
    Open,
    Close,
    SelfClosing,
}

/// A prompt section tag starting at `lt` (which holds `<`), and where it ends.
fn section_tag(text: &str, lt: usize) -> Option<(SectionTag, usize)> {
    let rest = &text[lt + 1..];
    let (closing, rest) = match rest.strip_prefix('/') {
        Some(r) => (true, r.trim_start()),
        None => (false, rest),
    };
    let name_len = rest
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '-'))
        .unwrap_or(rest.len());
    let name = rest[..name_len].to_ascii_lowercase().replace('-', "_");
    if !PROMPT_SECTIONS.contains(&name.as_str()) {
        return None;
    }
    let after = &rest[name_len..];
    if after
        .chars()
        .next()
        .is_some_and(|c| !(c.is_whitespace() || c == '>' || c == '/'))
    {
        return None;
    }
    let after_start = text.len() - after.len();
    match after.find(['>', '<', '\n']) {
        Some(p) if after[p..].starts_with('>') => {
            let kind = if closing {
                SectionTag::Close
            } else if after[..p].trim_end().ends_with('/') {
                SectionTag::SelfClosing
            } else {
                SectionTag::Open
            };
            Some((kind, after_start + p + 1))
        }
        Some(_) => None,
        None if closing => Some((SectionTag::Close, text.len())),
        None => Some((SectionTag::Open, text.len())),
    }
}

/// Decodes element content: CDATA sections verbatim, entities elsewhere.
pub fn decode_content(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(p) = rest.find("<![CDATA[") {
        decode_entities_into(&rest[..p], &mut out);
        let body = &rest[p + "<![CDATA[".len()..];
        match body.find("]]>") {
            Some(end) => {
                out.push_str(&body[..end]);
                rest = &body[end + 3..];
            }
            None => {
                out.push_str(body);
                rest = "";
            }
        }
    }
    decode_entities_into(rest, &mut out);
    out
}

/// Decodes `&lt;`, `&amp;`, `&#39;`, `&#x27;` and HTML's named entities; anything that is not
/// a known entity (a bare `&`, `&foo;`) stays as written.
pub fn decode_entities(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    decode_entities_into(s, &mut out);
    out
}

fn decode_entities_into(s: &str, out: &mut String) {
    let mut rest = s;
    while let Some(p) = rest.find('&') {
        out.push_str(&rest[..p]);
        let after = &rest[p + 1..];
        let semi = after.char_indices().take(12).find(|(_, c)| *c == ';');
        let decoded = semi.and_then(|(end, _)| {
            let name = &after[..end];
            resolve_entity(name).map(|s| (s, end + 1))
        });
        match decoded {
            Some((text, used)) => {
                out.push_str(&text);
                rest = &after[used..];
            }
            None => {
                out.push('&');
                rest = after;
            }
        }
    }
    out.push_str(rest);
}

fn resolve_entity(name: &str) -> Option<String> {
    if let Some(num) = name.strip_prefix('#') {
        let code = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse().ok()?,
        };
        return char::from_u32(code)
            .filter(|c| *c != '\0')
            .map(String::from);
    }
    quick_xml::escape::resolve_predefined_entity(name)
        .or_else(|| quick_xml::escape::resolve_html5_entity(name))
        .map(str::to_string)
}

/// Removes a leading `Wren said:` / `Wren Ashby explained:` prefix (one or two capitalised
/// words, then `said` or a known verb, then a colon).
pub fn strip_speaker_prefix(text: &str) -> &str {
    let t = text.trim_start();
    let Some(colon) = t.find(':') else {
        return text;
    };
    let head = &t[..colon];
    if head.len() > 60 || head.contains('\n') {
        return text;
    }
    let head = head.trim_matches(|c: char| c == '*' || c == '_' || c.is_whitespace());
    let words: Vec<&str> = head.split_whitespace().collect();
    let is_verb = |v: &str| {
        let v = v.to_lowercase();
        v == "said" || DIALOGUE_VERBS.contains(&v.as_str()) || MONOLOGUE_VERBS.contains(&v.as_str())
    };
    let capitalised = |w: &str| w.chars().next().is_some_and(char::is_uppercase);
    let matches = (1..=2).any(|n| {
        words.len() > n
            && words.len() <= n + 2
            && words[..n].iter().all(|w| capitalised(w))
            && is_verb(&words[n..].join(" "))
    });
    if matches {
        t[colon + 1..].trim_start_matches(['*', '_']).trim_start()
    } else {
        text
    }
}

/// Whether the start of a dialogue written so far (no colon yet) can still become a prefix
/// that [`strip_speaker_prefix`] removes: one or two capitalised words, then `said` or a verb
/// from the lists, then a colon. A stream holds the start back only while this is true.
pub fn may_be_speaker_prefix(start: &str) -> bool {
    let t = start.trim_start();
    if t.contains(['\n', ':']) || t.len() > 60 {
        return false;
    }
    let t = t.trim_start_matches(['*', '_']);
    let words: Vec<&str> = t.split_whitespace().collect();
    // The last word may go on unless blank follows it.
    let open = !t.is_empty() && !t.ends_with(char::is_whitespace);
    let capitalised = |w: &str| w.chars().next().is_some_and(char::is_uppercase);
    let verbs = || {
        std::iter::once("said")
            .chain(DIALOGUE_VERBS)
            .chain(MONOLOGUE_VERBS)
    };
    (1..=2).any(|n| {
        if words.len() <= n {
            return words.iter().all(|w| capitalised(w));
        }
        if !words[..n].iter().all(|w| capitalised(w)) || words.len() > n + 2 {
            return false;
        }
        let typed = words[n..]
            .join(" ")
            .trim_end_matches(['*', '_'])
            .to_lowercase();
        verbs().any(|v| {
            if open {
                v.starts_with(&typed)
            } else {
                v == typed || v.starts_with(&format!("{typed} "))
            }
        })
    })
}

/// Removes quotes that wrap the whole text (and appear nowhere inside it).
pub fn strip_wrapping_quotes(text: &str) -> &str {
    let t = text.trim();
    for (open, close) in [('"', '"'), ('“', '”'), ('\'', '\''), ('‘', '’')] {
        if let Some(inner) = t.strip_prefix(open).and_then(|r| r.strip_suffix(close)) {
            if !inner.contains(open) && !inner.contains(close) && !inner.trim().is_empty() {
                return inner.trim();
            }
        }
    }
    t
}

/// Reads a boolean the way models write them: `true`, `True`, `yes`, `"true"`, `true.`,
/// `**false**`. Anything else is `None`.
pub fn parse_bool(text: &str) -> Option<bool> {
    let word: String = text
        .trim()
        .trim_start_matches(|c: char| !c.is_alphanumeric())
        .chars()
        .take_while(|c| c.is_alphanumeric())
        .collect::<String>()
        .to_lowercase();
    match word.as_str() {
        "true" | "yes" | "y" | "1" => Some(true),
        "false" | "no" | "n" | "0" => Some(false),
        _ => None,
    }
}

/// Reads `key: value` lines (bullets, bold and wrapping quotes tolerated).
pub fn parse_key_values(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let line = line.trim().trim_start_matches(['-', '*', '•']).trim();
            let (k, v) = line.split_once(':')?;
            let key = k.trim().trim_matches(['*', '`', '_', '"']).trim();
            if key.is_empty() || key.contains(' ') {
                return None;
            }
            let value = strip_wrapping_quotes(v.trim().trim_matches('*').trim());
            Some((key.to_string(), value.to_string()))
        })
        .collect()
}

/// Cuts text to at most `max` characters, on a character boundary, ending with `…` when cut
/// (nothing at all when `max` is zero).
pub fn truncate_chars(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    if max == 0 {
        return String::new();
    }
    let keep = max.saturating_sub(1);
    let end = text.char_indices().nth(keep).map_or(text.len(), |(i, _)| i);
    let mut out = text[..end].trim_end().to_string();
    out.push('…');
    out
}

/// Collapses three or more newlines to two and trims.
pub fn tidy(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut newlines = 0;
    for c in text.trim().chars() {
        if c == '\n' {
            newlines += 1;
            if newlines > 2 {
                continue;
            }
        } else if c != '\r' {
            newlines = 0;
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_speaker_prefix_is_told_from_the_first_words() {
        for maybe in [
            "",
            "Wren",
            "Wren ",
            "Wren sa",
            "Wren said",
            "**Wren said",
            "Wren Ash explai",
            "Élodie said",
        ] {
            assert!(may_be_speaker_prefix(maybe), "{maybe:?}");
        }
        for not in [
            "the port",
            "Token3 word1",
            "Wren ate",
            "Wren Ash explained more",
            "日本 said",
            "Wren\nsaid",
            "Wren said: hi",
        ] {
            assert!(!may_be_speaker_prefix(not), "{not:?}");
        }
    }

    proptest! {
        #[test]
        fn a_prefix_the_reply_strips_is_never_decided_too_early(
            names in "(Wren|Élodie|Ash|bob|日本)( (Ash|Lee|x))?",
            verb in "(said|explained|ate|Said|replied softly)",
            rest in crate::arbitrary::text(),
        ) {
            let text = format!("{names} {verb}: {rest}");
            if strip_speaker_prefix(&text).len() < text.len() {
                let colon = text.find(':').unwrap();
                for (i, _) in text[..colon].char_indices() {
                    prop_assert!(may_be_speaker_prefix(&text[..i]), "{:?} of {:?}", &text[..i], text);
                }
            }
        }
    }

    #[test]
    fn entities_decode_and_unknown_ones_stay() {
        assert_eq!(
            decode_entities("a &lt; b &amp;&amp; c &gt; d"),
            "a < b && c > d"
        );
        assert_eq!(decode_entities("&#39;hi&#x27; &quot;x&quot;"), "'hi' \"x\"");
        assert_eq!(
            decode_entities("fish & chips &bogus; &"),
            "fish & chips &bogus; &"
        );
        assert_eq!(decode_entities("caf&eacute;&nbsp;!"), "café\u{a0}!");
    }

    #[test]
    fn an_unclosed_reasoning_block_ends_at_any_spelling_of_a_spoken_tag() {
        for tag in [
            "<internal_monologue>",
            "<Internal-Monolog>",
            "<external_dialog verb=\"said\">",
            "<EXTERNAL-DIALOGUE>",
        ] {
            let text = format!("<think>hmm {tag}x");
            assert_eq!(strip_reasoning(&text), format!("{tag}x"), "{tag}");
        }
        assert_eq!(strip_reasoning("<think>hmm <user_model_check>true"), "");
    }

    #[test]
    fn prompt_sections_are_dropped_with_their_content() {
        assert_eq!(drop_prompt_sections("a<soul>b</soul>c"), "ac");
        assert_eq!(
            drop_prompt_sections("<User-Model name=\"T\">b</ user_model >c"),
            "c"
        );
        assert_eq!(drop_prompt_sections("a<quiet/>b"), "ab");
        assert_eq!(
            drop_prompt_sections("a <soul_stateful> b"),
            "a <soul_stateful> b"
        );
        assert_eq!(drop_prompt_sections("kept</skills>x<instructions"), "x");
    }

    #[test]
    fn booleans_in_every_spelling() {
        for t in [
            "true", "True", "TRUE", "yes", "\"true\"", "true.", "**true**", " true\n",
        ] {
            assert_eq!(parse_bool(t), Some(true), "{t}");
        }
        for t in ["false", "No", "'false'", "false."] {
            assert_eq!(parse_bool(t), Some(false), "{t}");
        }
        assert_eq!(parse_bool("maybe"), None);
        assert_eq!(parse_bool(""), None);
    }

    #[test]
    fn speaker_prefixes_are_removed_but_ordinary_colons_stay() {
        assert_eq!(strip_speaker_prefix("Wren said: hello"), "hello");
        assert_eq!(strip_speaker_prefix("Wren Ashby explained: hello"), "hello");
        assert_eq!(strip_speaker_prefix("Wren pointed out: hello"), "hello");
        assert_eq!(strip_speaker_prefix("Note: this stays"), "Note: this stays");
        assert_eq!(
            strip_speaker_prefix("the time is 10:30"),
            "the time is 10:30"
        );
    }

    #[test]
    fn truncation_is_on_a_character_boundary() {
        assert_eq!(truncate_chars("héllo wörld", 6), "héllo…");
        assert_eq!(truncate_chars("short", 10), "short");
        assert_eq!(truncate_chars("🦀🦀🦀", 2), "🦀…");
        assert_eq!(truncate_chars("🦀🦀🦀", 1), "…");
        assert_eq!(truncate_chars("é", 0), "", "zero characters means none");
    }

    #[test]
    fn key_value_lines() {
        let kv =
            parse_key_values("- emotionalState: engaged\n**currentTopic**: \"Rust\"\nnot a pair\n");
        assert_eq!(
            kv,
            vec![
                ("emotionalState".into(), "engaged".into()),
                ("currentTopic".into(), "Rust".into())
            ]
        );
    }
}
