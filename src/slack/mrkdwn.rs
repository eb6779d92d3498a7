//! The model's Markdown → Slack mrkdwn: bold, italics, strikethrough, links, headings,
//! lists, code; `&`, `<`, `>` escaped except in Slack's own markup; broadcasts neutralised
//! unless allowed; replies over Slack's limit split on paragraph boundaries.
//!
//! Pure text functions; never fails.

/// The most characters one message carries. Slack truncates `text` at 40,000 characters and
/// advises staying under 4,000 for readable messages.
pub const MESSAGE_LIMIT: usize = 3_900;

/// Converts a reply to mrkdwn and splits it into messages of at most `limit` characters.
pub fn render(reply: &str, allow_broadcast: bool, limit: usize) -> Vec<String> {
    split(&to_mrkdwn(reply, allow_broadcast), limit)
}

/// Markdown → mrkdwn.
pub fn to_mrkdwn(text: &str, allow_broadcast: bool) -> String {
    let mut out = String::with_capacity(text.len() + 16);
    let mut in_fence = false;
    for (i, line) in text.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let trimmed = line.trim_start();
        if let Some(after) = trimmed.strip_prefix("```") {
            // Slack shows a fence's language as text: drop it.
            out.push_str(&line[..line.len() - trimmed.len()]);
            out.push_str("```");
            in_fence = !in_fence;
            if !in_fence {
                out.push_str(&escape(after.trim_start_matches('`')));
            }
            continue;
        }
        if in_fence {
            out.push_str(&escape(line));
            continue;
        }
        out.push_str(&block_line(line, allow_broadcast));
    }
    out
}

fn block_line(line: &str, allow_broadcast: bool) -> String {
    let indent_len = line.len() - line.trim_start().len();
    let (indent, body) = line.split_at(indent_len);
    // Headings become bold lines.
    let hashes = body.chars().take_while(|c| *c == '#').count();
    if (1..=6).contains(&hashes) && body[hashes..].starts_with(' ') {
        let title = body[hashes..].trim().trim_end_matches('#').trim();
        let inner = inline(title.trim_matches('*'), allow_broadcast);
        return format!("{indent}*{inner}*");
    }
    // Bullets become •, keeping their indentation.
    for bullet in ["- ", "* ", "+ "] {
        if let Some(rest) = body.strip_prefix(bullet) {
            if !rest.trim().is_empty() {
                return format!("{indent}• {}", inline(rest, allow_broadcast));
            }
        }
    }
    // A horizontal rule has no mrkdwn form.
    if matches!(body.trim(), "---" | "***" | "___") {
        return format!("{indent}──────────");
    }
    format!("{indent}{}", inline(body, allow_broadcast))
}

/// Inline spans: code is kept (escaped), links become `<url|text>`, emphasis is rewritten.
fn inline(text: &str, allow_broadcast: bool) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('`') {
            if let Some(end) = after.find('`') {
                out.push('`');
                out.push_str(&escape(&after[..end]));
                out.push('`');
                rest = &after[end + 1..];
                continue;
            }
        }
        if rest.starts_with('[') {
            if let Some((label, url, used)) = markdown_link(rest) {
                out.push('<');
                // The URL ends the token only at `|` or `>`; a `<` in it would open another.
                out.push_str(
                    &url.replace('|', "%7C")
                        .replace('<', "%3C")
                        .replace('>', "%3E"),
                );
                out.push('|');
                out.push_str(&escape(&emphasis(label)).replace('|', "∣"));
                out.push('>');
                rest = &rest[used..];
                continue;
            }
        }
        if rest.starts_with('<') {
            if let Some(end) = rest.find('>') {
                let tag = &rest[..=end];
                if let Some(kept) = slack_markup(tag, allow_broadcast) {
                    out.push_str(&kept);
                    rest = &rest[end + 1..];
                    continue;
                }
            }
        }
        // Plain text up to the next special character, stepping over the first character
        // whole: it may be several bytes long (`¡`, `日`, an emoji).
        let first = rest.chars().next().map_or(rest.len(), char::len_utf8);
        let next = rest[first..]
            .find(['`', '[', '<'])
            .map_or(rest.len(), |p| p + first);
        out.push_str(&escape(&emphasis(&rest[..next])));
        rest = &rest[next..];
    }
    out
}

/// `[label](url)` at the start of `s`: (label, url, bytes used).
fn markdown_link(s: &str) -> Option<(&str, &str, usize)> {
    let close = s.find("](")?;
    let label = &s[1..close];
    if label.contains('\n') || label.contains('[') {
        return None;
    }
    let url_start = close + 2;
    let url_end = url_start + s[url_start..].find(')')?;
    let url = s[url_start..url_end].trim();
    let ok = ["http://", "https://", "mailto:"]
        .iter()
        .any(|p| url.starts_with(p))
        && !url.contains(' ');
    ok.then_some((label, url, url_end + 1))
}

/// Slack's own markup that passes through: user, channel and link references. Broadcasts
/// (`<!here>`, `<!channel>`, `<!everyone>`, `<!subteam^…>`) pass only when allowed; otherwise
/// they become plain text that notifies nobody.
fn slack_markup(tag: &str, allow_broadcast: bool) -> Option<String> {
    let inner = &tag[1..tag.len() - 1];
    if inner.is_empty() || inner.contains('<') || inner.contains('\n') {
        return None;
    }
    let id_like = |s: &str| {
        s.chars().all(|c| {
            c.is_ascii_alphanumeric() || c == '|' || c == '-' || c == '_' || c == '.' || c == ' '
        })
    };
    if let Some(rest) = inner.strip_prefix('@').or_else(|| inner.strip_prefix('#')) {
        return id_like(rest).then(|| tag.to_string());
    }
    if let Some(rest) = inner.strip_prefix('!') {
        if allow_broadcast {
            return Some(tag.to_string());
        }
        let name = rest.split(['|', '^']).next().unwrap_or(rest);
        let label = rest
            .split_once('|')
            .map_or(name, |(_, l)| l.trim_start_matches('@'));
        return Some(format!("@\u{2060}{}", escape(label)));
    }
    if inner.starts_with("http://") || inner.starts_with("https://") || inner.starts_with("mailto:")
    {
        return Some(tag.to_string());
    }
    None
}

/// `**bold**`/`__bold__` → `*bold*`, `*it*` → `_it_`, `~~s~~` → `~s~`.
fn emphasis(text: &str) -> String {
    // Bold is marked with a character the text does not hold, so italics leave it alone.
    let mark = ('\u{e000}'..='\u{f8ff}')
        .find(|c| !text.contains(*c))
        .unwrap_or('\u{1}');
    let mut buf = [0; 4];
    let mark_str: &str = mark.encode_utf8(&mut buf);
    let bold = replace_pairs(text, "**", mark_str);
    let bold = replace_pairs(&bold, "__", mark_str);
    let italics = replace_pairs(&bold, "*", "_");
    let strike = replace_pairs(&italics, "~~", "~");
    strike.replace(mark, "*")
}

/// Replaces matched pairs of `marker` around non-blank text.
fn replace_pairs(text: &str, marker: &str, with: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(marker) {
        let after = &rest[start + marker.len()..];
        let Some(end) = after.find(marker) else { break };
        let inner = &after[..end];
        let tight = !inner.is_empty() && !inner.starts_with(' ') && !inner.ends_with(' ');
        // `*` between word characters (2*3*4) is arithmetic, not emphasis.
        let word_before = rest[..start]
            .chars()
            .last()
            .is_some_and(char::is_alphanumeric);
        if tight && !(marker == "*" && word_before) {
            out.push_str(&rest[..start]);
            out.push_str(with);
            out.push_str(inner);
            out.push_str(with);
            rest = &after[end + marker.len()..];
        } else {
            out.push_str(&rest[..start + marker.len()]);
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

/// Escapes what Slack requires: `&`, `<`, `>`. Broadcasts written as plain words (`@here`)
/// are left: without `link_names` they notify nobody.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
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

    fn m(s: &str) -> String {
        to_mrkdwn(s, false)
    }

    #[test]
    fn emphasis_links_headings_lists() {
        assert_eq!(
            m("**bold** and *it* and __b2__ and ~~gone~~"),
            "*bold* and _it_ and *b2* and ~gone~"
        );
        assert_eq!(
            m("see [the docs](https://x.test/a?b=1) now"),
            "see <https://x.test/a?b=1|the docs> now"
        );
        assert_eq!(m("## Next steps"), "*Next steps*");
        assert_eq!(
            m("- one\n  - two\n* three\n1. four"),
            "• one\n  • two\n• three\n1. four"
        );
        assert_eq!(m("2*3*4 = 24"), "2*3*4 = 24");
    }

    #[test]
    fn code_is_kept_and_escaped_and_fence_languages_dropped() {
        assert_eq!(m("use `Vec<T>` here"), "use `Vec&lt;T&gt;` here");
        assert_eq!(
            m("```rust\nif a < b && **c** {}\n```"),
            "```\nif a &lt; b &amp;&amp; **c** {}\n```"
        );
    }

    #[test]
    fn slack_markup_survives_and_text_is_escaped() {
        assert_eq!(
            m("ask <@U123> in <#C456|general>, see <https://x.test|x>"),
            "ask <@U123> in <#C456|general>, see <https://x.test|x>"
        );
        assert_eq!(
            m("a < b & c > d <b>not html</b>"),
            "a &lt; b &amp; c &gt; d &lt;b&gt;not html&lt;/b&gt;"
        );
    }

    #[test]
    fn a_link_url_cannot_open_a_token_and_text_keeps_every_character() {
        assert_eq!(
            m("[x](https://x.test/<!here>)"),
            "<https://x.test/%3C!here%3E|x>"
        );
        assert_eq!(m("\u{1}**b**\u{1}"), "\u{1}*b*\u{1}");
        assert_eq!(m("\u{e000}**b** *i*"), "\u{e000}*b* _i_");
    }

    #[test]
    fn broadcasts_are_neutralised_unless_allowed() {
        for b in [
            "<!channel>",
            "<!here>",
            "<!everyone>",
            "<!subteam^S123|@devs>",
        ] {
            let out = m(&format!("hey {b} look"));
            assert!(!out.contains("<!"), "{out}");
            assert!(out.contains('@'), "{out}");
            assert_eq!(to_mrkdwn(&format!("hey {b}"), true), format!("hey {b}"));
        }
    }

    #[test]
    fn lines_opening_with_a_multi_byte_character_render() {
        for (reply, want) in [
            ("¡Hola!", "¡Hola!"),
            ("¿Qué tal? a < b", "¿Qué tal? a &lt; b"),
            ("Ça va", "Ça va"),
            ("Über **alles**", "Über *alles*"),
            ("Привет, мир", "Привет, мир"),
            ("日本語のテキスト & more", "日本語のテキスト &amp; more"),
            ("🦀 crabs <@U1>", "🦀 crabs <@U1>"),
            ("👩\u{200d}💻 *busy*", "👩\u{200d}💻 _busy_"),
            ("`x`é", "`x`é"),
            ("<@U1>日本", "<@U1>日本"),
            ("line one\n¡two!\n- ¿three?", "line one\n¡two!\n• ¿three?"),
        ] {
            assert_eq!(render(reply, false, MESSAGE_LIMIT), vec![want], "{reply}");
        }
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
        let text = to_mrkdwn(&"fish & chips <@U123> ".repeat(400), false);
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

    /// Slack's escaping on mrkdwn: every `<` opens a markup token closed on its line (a
    /// broadcast only when allowed), every `>` closes one, and every `&` outside a token
    /// starts `&amp;`, `&lt;` or `&gt;`.
    fn check_escaped(out: &str, allow_broadcast: bool) -> Result<(), String> {
        let mut rest = out;
        while let Some(p) = rest.find(['<', '>', '&']) {
            let at = &rest[p..];
            if at.starts_with('>') {
                return Err(format!("a raw > at {at:?}"));
            }
            if let Some(after) = at.strip_prefix('&') {
                if !["amp;", "lt;", "gt;"].iter().any(|e| after.starts_with(e)) {
                    return Err(format!("a raw & at {at:?}"));
                }
                rest = after;
                continue;
            }
            let end = at.find('>').ok_or(format!("an unclosed < at {at:?}"))?;
            let inner = &at[1..end];
            let markup = ["@", "#", "http://", "https://", "mailto:"]
                .iter()
                .any(|p| inner.starts_with(p))
                || (allow_broadcast && inner.starts_with('!'));
            if !markup || inner.contains(['<', '\n']) {
                return Err(format!("a raw < at {at:?}"));
            }
            rest = &at[end + 1..];
        }
        Ok(())
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
        fn mrkdwn_is_escaped_and_broadcasts_only_pass_when_allowed(text in arbitrary::text()) {
            let out = to_mrkdwn(&text, false);
            prop_assert!(!out.contains("<!"), "{:?} → {:?}", text, out);
            if let Err(e) = check_escaped(&out, false) {
                prop_assert!(false, "{} in {:?} → {:?}", e, text, out);
            }
            let out = to_mrkdwn(&text, true);
            if let Err(e) = check_escaped(&out, true) {
                prop_assert!(false, "{} in {:?} → {:?}", e, text, out);
            }
        }

        #[test]
        fn rendered_parts_fit_lose_nothing_and_cut_no_entity(
            text in arbitrary::text(),
            limit in 0usize..120,
        ) {
            let whole = to_mrkdwn(&text, false);
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
