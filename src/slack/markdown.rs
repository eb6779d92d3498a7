//! Replies in Slack's Markdown. A reply goes out as `markdown_text`, which Slack renders
//! itself (standard Markdown: bold, italics, links, headings, lists, code), so nothing is
//! converted: broadcasts are neutralised unless allowed, long replies are split on paragraph
//! boundaries, and a streamed reply's text is released only where no markup token can be
//! cut in two, so that what streams is exactly what the whole reply renders to.
//!
//! Pure text functions; never fails.

/// The most characters one message carries: Slack takes `markdown_text` up to 12,000.
pub const MESSAGE_LIMIT: usize = 12_000;

/// Neutralises broadcasts and splits the reply into messages of at most `limit` characters.
pub fn render(reply: &str, allow_broadcast: bool, limit: usize) -> Vec<String> {
    split(&neutralise(reply, allow_broadcast), limit)
}

/// The broadcasts a reply must not make unless allowed.
const BROADCAST_WORDS: [&str; 3] = ["here", "channel", "everyone"];

/// Makes broadcasts notify nobody (unless `allow_broadcast`): Slack's tokens (`<!here>`,
/// `<!channel>`, `<!everyone>`, `<!subteam^…|@devs>`) become their plain label, any other `<!`
/// gets a word joiner (no token can form around it), and the words `@here`, `@channel`,
/// `@everyone` get a word joiner after the `@`. Reads no character
/// before a `<` or `@`, so the text of a stream neutralised piece by piece (cut where
/// [`ready`] allows) is the whole text neutralised.
pub fn neutralise(text: &str, allow_broadcast: bool) -> String {
    if allow_broadcast {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 8);
    let mut rest = text;
    while let Some(p) = rest.find(['<', '@']) {
        out.push_str(&rest[..p]);
        let at = &rest[p..];
        if let Some(token) = broadcast_token(at) {
            let inner = &token[2..token.len() - 1];
            let name = inner.split(['|', '^']).next().unwrap_or(inner);
            let label = inner
                .split_once('|')
                .map_or(name, |(_, l)| l.trim_start_matches('@'));
            out.push_str("@\u{2060}");
            // A label holds no `<`: only its broadcast words are left to neutralise.
            out.push_str(&neutralise(label, false));
            rest = &at[token.len()..];
            continue;
        }
        if let Some(after) = at.strip_prefix("<!") {
            // Not a whole token here, but it could close into one around other text.
            out.push_str("<\u{2060}!");
            rest = after;
            continue;
        }
        if let Some(word) = broadcast_word(at) {
            out.push_str("@\u{2060}");
            out.push_str(&at[1..=word]);
            rest = &at[word + 1..];
            continue;
        }
        out.push_str(&at[..1]);
        rest = &at[1..];
    }
    out.push_str(rest);
    out
}

/// `<!…>` at the start of `s`, on one line.
fn broadcast_token(s: &str) -> Option<&str> {
    let inner = s.strip_prefix("<!")?;
    let end = inner.find(['>', '<', '\n'])?;
    (inner.as_bytes()[end] == b'>').then(|| &s[..end + 3])
}

/// `@here`, `@channel` or `@everyone` (any case) at the start of `s`, not followed by a
/// letter or digit: the byte index of its last character.
fn broadcast_word(s: &str) -> Option<usize> {
    let after = s.strip_prefix('@')?;
    BROADCAST_WORDS.iter().find_map(|w| {
        let head = after.get(..w.len())?;
        let next = after[w.len()..].chars().next();
        (head.eq_ignore_ascii_case(w) && !next.is_some_and(char::is_alphanumeric))
            .then_some(w.len())
    })
}

/// How much of a streamed text can be released now: all of it but a trailing fragment that
/// could still become a markup token (`<` not yet closed on its line) or a broadcast word
/// (`@` followed by a few letters).
pub fn ready(text: &str) -> usize {
    let mut cut = text.len();
    if let Some(lt) = text.rfind('<') {
        if !text[lt..].contains(['>', '\n']) {
            cut = lt;
        }
    }
    if let Some(at) = text[..cut].rfind('@') {
        let tail = &text[at + 1..cut];
        let could_be = |w: &&str| {
            w.get(..tail.len())
                .is_some_and(|head| head.eq_ignore_ascii_case(tail))
        };
        if BROADCAST_WORDS.iter().any(could_be) {
            cut = at;
        }
    }
    cut
}

/// Splits on paragraph boundaries, then lines, then characters; a code fence cut in two is
/// closed and reopened so each message renders. A line cut by characters is never cut
/// inside an entity (`&amp;`) nor inside a Slack markup token (`<@U123>`, `<https://x|y>`)
/// that fits in one message.
pub fn split(text: &str, limit: usize) -> Vec<String> {
    let limit = limit.max(16);
    if text.chars().count() <= limit {
        return vec![text.to_string()];
    }
    // A code fence cut in two is closed and reopened: every part leaves room for that.
    let limit = if text.contains("```") {
        limit - FENCE_ROOM
    } else {
        limit
    };
    let mut parts: Vec<String> = Vec::new();
    let mut current = String::new();
    let push_piece = |current: &mut String, parts: &mut Vec<String>, piece: &str, sep: &str| {
        let len = |s: &str| s.chars().count();
        if !current.is_empty() && len(current) + len(sep) + len(piece) > limit {
            parts.push(std::mem::take(current));
        }
        if !current.is_empty() {
            current.push_str(sep);
        }
        current.push_str(piece);
    };
    for para in text.split("\n\n") {
        if para.chars().count() <= limit {
            push_piece(&mut current, &mut parts, para, "\n\n");
            continue;
        }
        for line in para.split('\n') {
            if line.chars().count() <= limit {
                push_piece(&mut current, &mut parts, line, "\n");
                continue;
            }
            for (i, chunk) in chunk_line(line, limit).into_iter().enumerate() {
                // The line goes on in the next message: no newline where it had none.
                if i > 0 && !current.is_empty() {
                    parts.push(std::mem::take(&mut current));
                }
                push_piece(&mut current, &mut parts, chunk, "\n");
            }
        }
    }
    if !current.is_empty() {
        parts.push(current);
    }
    balance_fences(parts)
}

/// The longest entity a cut steps back over (`&#x10FFFF;` is ten characters).
const ENTITY_MAX: usize = 10;

/// Cuts a line into pieces of at most `limit` characters, each cut moved back to the start
/// of an entity or markup token it would fall inside.
fn chunk_line(line: &str, limit: usize) -> Vec<&str> {
    let chars: Vec<char> = line.chars().collect();
    // The byte offset of each character, and of the end.
    let offsets: Vec<usize> = line
        .char_indices()
        .map(|(i, _)| i)
        .chain([line.len()])
        .collect();
    let mut pieces = Vec::new();
    let mut start = 0;
    while chars.len() - start > limit {
        let mut cut = start + limit;
        let in_markup = |c: char| !matches!(c, '<' | '>' | '\n');
        if let Some(open) = enclosing(&chars, start, cut, ('<', '>'), limit, in_markup) {
            cut = open;
        }
        let in_entity = |c: char| c.is_ascii_alphanumeric() || c == '#';
        if let Some(amp) = enclosing(&chars, start, cut, ('&', ';'), ENTITY_MAX, in_entity) {
            cut = amp;
        }
        pieces.push(&line[offsets[start]..offsets[cut]]);
        start = cut;
    }
    pieces.push(&line[offsets[start]..]);
    pieces
}

/// Where a span `open … close` of at most `max` characters, its inside all `inner`, starts,
/// when a cut before `chars[cut]` would fall inside it and it starts after `start` (so
/// cutting before it still makes progress).
fn enclosing(
    chars: &[char],
    start: usize,
    cut: usize,
    (open, close): (char, char),
    max: usize,
    inner: impl Fn(char) -> bool,
) -> Option<usize> {
    let from = (start + 1).max((cut + 1).saturating_sub(max));
    let first = (from..cut).rev().find(|&i| !inner(chars[i]))?;
    if chars[first] != open {
        return None;
    }
    let end = chars.len().min(first + max);
    let last = (cut..end).find(|&i| !inner(chars[i]))?;
    (chars[last] == close).then_some(first)
}

/// What re-fencing adds to a part at most: "```\n" before it and "\n```" after it.
const FENCE_ROOM: usize = 8;

/// Closes a fence left open at a part's end and reopens it in the next part; `split` has
/// left [`FENCE_ROOM`] characters free for that.
fn balance_fences(parts: Vec<String>) -> Vec<String> {
    let mut out = Vec::with_capacity(parts.len());
    let mut open = false;
    for part in parts {
        let mut p = String::new();
        if open {
            p.push_str("```\n");
        }
        p.push_str(&part);
        let fences = part
            .lines()
            .filter(|l| l.trim_start().starts_with("```"))
            .count();
        if fences % 2 == 1 {
            open = !open;
        }
        if open {
            p.push_str("\n```");
        }
        out.push(p);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arbitrary;
    use proptest::prelude::*;

    #[test]
    fn markdown_is_left_for_slack_to_render() {
        let md = "**bold** and *it* and ~~gone~~\n## Next steps\n- one\n  - two\n[docs](https://x.test/a?b=1) `Vec<T>` a < b & c";
        assert_eq!(render(md, false, MESSAGE_LIMIT), vec![md]);
        assert_eq!(
            render("ask <@U123> in <#C456|general>", false, MESSAGE_LIMIT),
            vec!["ask <@U123> in <#C456|general>"]
        );
    }

    #[test]
    fn broadcasts_are_neutralised_unless_allowed() {
        for (b, label) in [
            ("<!channel>", "channel"),
            ("<!here>", "here"),
            ("<!everyone>", "everyone"),
            ("<!subteam^S123|@devs>", "devs"),
            ("@here", "here"),
            ("@Channel", "Channel"),
            ("@everyone", "everyone"),
        ] {
            let out = neutralise(&format!("hey {b}, look"), false);
            assert_eq!(out, format!("hey @\u{2060}{label}, look"));
            assert_eq!(neutralise(&format!("hey {b}"), true), format!("hey {b}"));
        }
        // Not broadcasts: other words, unclosed tokens, addresses.
        for plain in ["@heretic", "mail me@herewith.test", "@ here"] {
            assert_eq!(neutralise(plain, false), plain);
        }
        // An unclosed `<!` cannot close into a token around a neutralised one.
        assert_eq!(neutralise("<!here", false), "<\u{2060}!here");
        assert_eq!(neutralise("<!here\n>", false), "<\u{2060}!here\n>");
        assert_eq!(
            neutralise("<!a|<!here>>", false),
            "<\u{2060}!a|@\u{2060}here>"
        );
    }

    #[test]
    fn multi_byte_text_passes_untouched() {
        for reply in [
            "¡Hola!",
            "Ça va",
            "Über **alles**",
            "日本語 & more",
            "🦀 <@U1>",
            "👩\u{200d}💻 *busy*",
        ] {
            assert_eq!(render(reply, false, MESSAGE_LIMIT), vec![reply]);
        }
        assert_eq!(neutralise("日本<!here>語", false), "日本@\u{2060}here語");
    }

    #[test]
    fn a_stream_holds_back_only_what_could_still_become_a_token() {
        assert_eq!(ready("hello <!he"), "hello ".len());
        assert_eq!(ready("hello <!here> you"), "hello <!here> you".len());
        assert_eq!(ready("a < b\nc"), "a < b\nc".len());
        assert_eq!(ready("ping @ever"), "ping ".len());
        assert_eq!(ready("ping @everyone"), "ping ".len());
        assert_eq!(ready("ping @everyone!"), "ping @everyone!".len());
        assert_eq!(ready("mail x@example"), "mail x@example".len());
        assert_eq!(ready("日本<"), "日本".len());
    }

    #[test]
    fn long_replies_split_on_paragraphs_within_the_limit() {
        let para = "word ".repeat(30);
        let text = [para.trim(); 10].join("\n\n");
        let parts = split(&text, 400);
        assert!(parts.len() > 1);
        assert!(parts.iter().all(|p| p.chars().count() <= 400), "{parts:?}");
        assert_eq!(
            parts.join("\n\n"),
            text,
            "nothing lost, split only between paragraphs"
        );
        let huge = "x".repeat(1000);
        let parts = split(&huge, 300);
        assert_eq!(parts.concat().replace('\n', ""), huge);
    }

    #[test]
    fn a_limit_too_small_for_an_entity_still_loses_nothing() {
        // Found by the property test: with fences taking their room, a part of 8 characters
        // cannot hold `&#x110000;` whole; it is cut, and nothing is lost.
        let text = "é```[x](https://x.test/&#x110000;[label](https://x.test/a?b=1)";
        let parts = render(text, false, 0);
        assert!(parts.len() > 1);
        assert!(parts.iter().all(|p| p.chars().count() <= 16), "{parts:?}");
        let joined: String = parts.concat().split_whitespace().collect();
        assert!(joined.replace("```", "").contains("#x110000;"), "{parts:?}");
    }

    #[test]
    fn a_long_line_is_never_cut_inside_an_entity_or_a_markup_token() {
        // `…&` / `amp;…` was seen in posts: the line is cut by characters.
        let text = "fish &amp; chips <@U123> ".repeat(600);
        assert!(!text.contains('\n'), "one long line");
        for limit in [16, 17, 50, 333, MESSAGE_LIMIT] {
            let parts = split(&text, limit);
            assert!(parts.len() > 1);
            for p in &parts {
                assert!(p.chars().count() <= limit, "{p:?}");
                let after_amp = p.rsplit_once('&').map_or(";", |(_, t)| t);
                let after_lt = p.rsplit_once('<').map_or(">", |(_, t)| t);
                assert!(
                    after_amp.contains(';') && after_lt.contains('>'),
                    "a part ends inside an entity or token: {p:?} (limit {limit})"
                );
            }
            assert_eq!(parts.join(""), text, "nothing lost, no newline added");
        }
        let link = "<https://x.test/a?b=1&amp;c=2|the docs> ".repeat(100);
        for p in split(&link, 60) {
            assert!(p.starts_with("<https://"), "{p:?}");
            assert!(p.trim_end().ends_with("docs>"), "{p:?}");
        }
    }

    #[test]
    fn a_markup_token_longer_than_a_message_is_still_cut() {
        let token = format!("<https://x.test/{}>", "a".repeat(100));
        let parts = split(&token, 40);
        assert!(parts.iter().all(|p| p.chars().count() <= 40), "{parts:?}");
        assert_eq!(parts.concat(), token);
    }

    #[test]
    fn a_fence_cut_in_two_is_closed_and_reopened() {
        let code = (0..60)
            .map(|i| format!("line {i}"))
            .collect::<Vec<_>>()
            .join("\n");
        let parts = split(&format!("```\n{code}\n```"), 200);
        assert!(parts.len() > 1);
        for p in &parts {
            assert_eq!(p.matches("```").count() % 2, 0, "{p}");
            assert!(
                p.chars().count() <= 200,
                "re-fenced parts stay within the limit: {p}"
            );
        }
        let long_line = format!("```\n{}\n```", "x".repeat(500));
        for p in split(&long_line, 100) {
            assert!(p.chars().count() <= 100, "{p}");
        }
    }

    /// The characters that carry meaning: no whitespace, no fence backticks.
    fn visible(s: &str) -> String {
        s.chars()
            .filter(|c| !c.is_whitespace() && *c != '`')
            .collect()
    }

    /// Whether `a`'s end and `b`'s start are the halves of one entity.
    fn entity_cut(a: &str, b: &str) -> bool {
        let a = a.strip_suffix("\n```").unwrap_or(a);
        let b = b.strip_prefix("```\n").unwrap_or(b);
        let Some((_, tail)) = a.rsplit_once('&') else {
            return false;
        };
        let is_name = |s: &str| s.chars().all(|c| c.is_ascii_alphanumeric() || c == '#');
        let Some((head, _)) = b.split_once(';') else {
            return false;
        };
        tail.len() < 9 && is_name(tail) && is_name(head) && tail.len() + head.len() < 9
    }

    fn fence_lines(part: &str) -> usize {
        part.lines()
            .filter(|l| l.trim_start().starts_with("```"))
            .count()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(1000))]

        #[test]
        fn a_stream_cut_where_ready_allows_renders_as_the_whole(
            text in arbitrary::text(),
            cuts in proptest::collection::vec(0usize..64, 0..8),
        ) {
            // Feed the text in pieces; release what `ready` allows, neutralising each release.
            let mut pending = String::new();
            let mut streamed = String::new();
            let mut rest = text.as_str();
            for c in cuts {
                let mut at = c.min(rest.len());
                while !rest.is_char_boundary(at) {
                    at -= 1;
                }
                pending.push_str(&rest[..at]);
                rest = &rest[at..];
                let n = ready(&pending);
                prop_assert!(pending.is_char_boundary(n));
                streamed.push_str(&neutralise(&pending[..n], false));
                pending.drain(..n);
            }
            pending.push_str(rest);
            streamed.push_str(&neutralise(&pending, false));
            prop_assert_eq!(streamed, neutralise(&text, false));
        }

        #[test]
        fn no_broadcast_survives_neutralising(text in arbitrary::text()) {
            let out = neutralise(&text, false);
            prop_assert!(!out.contains("<!"), "{:?} → {:?}", text, out);
            for w in BROADCAST_WORDS {
                let at = format!("@{w}");
                let lower = out.to_lowercase();
                let mut from = 0;
                while let Some(p) = lower[from..].find(&at) {
                    let end = from + p + at.len();
                    let next = lower[end..].chars().next();
                    prop_assert!(next.is_some_and(char::is_alphanumeric), "{:?} → {:?}", text, out);
                    from = end;
                }
            }
        }

        #[test]
        fn rendered_parts_fit_lose_nothing_and_cut_no_entity(
            text in arbitrary::text(),
            limit in 0usize..120,
        ) {
            let whole = neutralise(&text, false);
            let parts = render(&text, false, limit);
            prop_assert!(!parts.is_empty());
            for p in &parts {
                // Re-fenced parts too: split leaves room for the fences.
                prop_assert!(p.chars().count() <= limit.max(16), "{:?}", p);
                prop_assert!(!p.contains("<!"), "{:?}", p);
                if parts.len() > 1 {
                    prop_assert_eq!(fence_lines(p) % 2, 0, "unbalanced fence in {:?}", p);
                }
            }
            // An entity is kept whole when it fits in a part beside the fences (in real use
            // a part holds thousands of characters).
            if limit.max(16) >= ENTITY_MAX + FENCE_ROOM {
                for pair in parts.windows(2) {
                    prop_assert!(!entity_cut(&pair[0], &pair[1]), "entity cut: {:?}", pair);
                }
            }
            prop_assert_eq!(visible(&parts.concat()), visible(&whole));
        }

        #[test]
        fn split_parts_fit_and_lose_no_visible_character(
            text in arbitrary::text(),
            limit in 0usize..120,
        ) {
            let parts = split(&text, limit);
            for p in &parts {
                prop_assert!(p.chars().count() <= limit.max(16), "{:?}", p);
            }
            prop_assert_eq!(visible(&parts.concat()), visible(&text));
        }

        #[test]
        fn a_line_is_cut_outside_every_entity_and_fitting_token(
            line in arbitrary::text(),
            limit in 16usize..48,
        ) {
            let chunks = chunk_line(&line, limit);
            prop_assert_eq!(chunks.concat(), line.clone());
            let chars: Vec<char> = line.chars().collect();
            // Spans that must not be cut: (first, last) character indices.
            let mut spans = Vec::new();
            for (a, c) in chars.iter().enumerate() {
                let (close, max, inner): (char, usize, fn(char) -> bool) = match c {
                    '<' => ('>', limit, |c| !matches!(c, '<' | '>' | '\n')),
                    '&' => (';', ENTITY_MAX, |c| c.is_ascii_alphanumeric() || c == '#'),
                    _ => continue,
                };
                if let Some(b) = (a + 1..chars.len()).find(|&i| !inner(chars[i])) {
                    if chars[b] == close && b - a < max {
                        spans.push((a, b));
                    }
                }
            }
            let mut cut = 0;
            for chunk in &chunks[..chunks.len() - 1] {
                let n = chunk.chars().count();
                prop_assert!(n > 0 && n <= limit, "{:?}", chunk);
                cut += n;
                for (a, b) in &spans {
                    prop_assert!(!(*a < cut && cut <= *b), "cut at {} inside {:?}", cut, &chars[*a..=*b]);
                }
            }
            prop_assert!(chunks[chunks.len() - 1].chars().count() <= limit);
        }
    }
}
