//! An answer's JSON form as it streams, rewritten as the tags the dialogue filter reads: the
//! text of the monologue and the dialogue as `<internal_monologue>…`, `<external_dialogue>…`,
//! each check and each mental query as its element once its value is complete. Everything
//! else is dropped. JSON escapes are decoded (split across deltas or not) and the text is
//! written with `&`, `<` and `>` as entities, so a `</external_dialogue>` said inside the
//! JSON string stays text. An answer whose first character is not `{` passes through as it
//! is (a server that ignored the schema answered in tags). Pure.

use crate::steps::{field, Step};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Nothing but blanks yet.
    Undecided,
    Json,
    /// Not JSON: passed through.
    Plain,
}

#[derive(Debug, Clone)]
struct Level {
    object: bool,
    /// In an object: the next string is a key.
    want_key: bool,
    /// In an object: the key whose value comes (or came) last.
    key: String,
}

/// What the string being read is.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Role {
    Key,
    /// A section's text, written between its tags.
    Text(&'static str),
    Skip,
}

/// The rewriter for one answer.
#[derive(Debug, Clone)]
pub(super) struct JsonTags {
    mode: Mode,
    held: String,
    levels: Vec<Level>,
    /// Inside a string: its role.
    string: Option<Role>,
    /// After a `\` in a string: the escape read so far (without the `\`).
    escape: Option<String>,
    /// A high surrogate waiting for its low half.
    high: Option<u32>,
    /// The key being read.
    key: String,
    /// A literal or number being read.
    scalar: String,
}

impl JsonTags {
    pub(super) fn new() -> JsonTags {
        JsonTags {
            mode: Mode::Undecided,
            held: String::new(),
            levels: Vec::new(),
            string: None,
            escape: None,
            high: None,
            key: String::new(),
            scalar: String::new(),
        }
    }

    /// The tags for the next delta.
    pub(super) fn push(&mut self, delta: &str) -> String {
        let mut out = String::new();
        let mut rest = delta;
        if self.mode == Mode::Undecided {
            let blank = delta.len() - delta.trim_start().len();
            self.held.push_str(&delta[..blank]);
            rest = &delta[blank..];
            match rest.chars().next() {
                None => return out,
                Some('{') => self.mode = Mode::Json,
                Some(_) => {
                    self.mode = Mode::Plain;
                    out.push_str(&std::mem::take(&mut self.held));
                }
            }
        }
        if self.mode == Mode::Plain {
            out.push_str(rest);
            return out;
        }
        for c in rest.chars() {
            self.feed(c, &mut out);
        }
        out
    }

    fn feed(&mut self, c: char, out: &mut String) {
        if self.string.is_some() {
            self.in_string(c, out);
            return;
        }
        match c {
            '"' => {
                self.end_scalar(out);
                self.start_string(out);
            }
            '{' | '[' => {
                self.end_scalar(out);
                self.levels.push(Level {
                    object: c == '{',
                    want_key: c == '{',
                    key: String::new(),
                });
            }
            '}' | ']' => {
                self.end_scalar(out);
                self.levels.pop();
            }
            ',' => {
                self.end_scalar(out);
                if let Some(l) = self.levels.last_mut().filter(|l| l.object) {
                    l.want_key = true;
                }
            }
            ':' => {
                if let Some(l) = self.levels.last_mut().filter(|l| l.object) {
                    l.want_key = false;
                }
            }
            c if c.is_whitespace() => self.end_scalar(out),
            c => self.scalar.push(c),
        }
    }

    /// The key at each depth from the top: `keys(0)` is the step's.
    fn key_at(&self, depth: usize) -> Option<&str> {
        self.levels
            .get(depth)
            .filter(|l| l.object)
            .map(|l| l.key.as_str())
    }

    fn spoken(key: Option<&str>) -> Option<&'static str> {
        [Step::InternalMonologue, Step::ExternalDialogue]
            .into_iter()
            .map(Step::name)
            .find(|n| key == Some(*n))
    }

    fn start_string(&mut self, out: &mut String) {
        let role = match self.levels.last() {
            Some(l) if l.object && l.want_key => Role::Key,
            _ => {
                let depth = self.levels.len();
                let section = Self::spoken(self.key_at(0));
                match (depth, section) {
                    (1, Some(s)) => Role::Text(s),
                    (2, Some(s)) if self.key_at(1) == Some(field::TEXT) => Role::Text(s),
                    _ => Role::Skip,
                }
            }
        };
        if let Role::Text(s) = role {
            out.push_str(&format!("<{s}>"));
        }
        self.key.clear();
        self.string = Some(role);
    }

    fn in_string(&mut self, c: char, out: &mut String) {
        let decoded = match self.escape.as_mut() {
            None if c == '\\' => {
                self.escape = Some(String::new());
                return;
            }
            None if c == '"' => {
                self.end_string(out);
                return;
            }
            None => c,
            Some(esc) => {
                esc.push(c);
                let simple = match esc.as_str() {
                    "n" => Some('\n'),
                    "t" => Some('\t'),
                    "r" => Some('\r'),
                    "b" => Some('\u{8}'),
                    "f" => Some('\u{c}'),
                    s if s.starts_with('u') => None,
                    s => s.chars().next(),
                };
                if let Some(ch) = simple {
                    self.escape = None;
                    ch
                } else if esc.len() < 5 {
                    return;
                } else {
                    let code = u32::from_str_radix(&esc[1..], 16).unwrap_or(0xFFFD);
                    self.escape = None;
                    if (0xD800..0xDC00).contains(&code) {
                        self.high = Some(code);
                        return;
                    }
                    let code = match self.high.take() {
                        Some(high) if (0xDC00..0xE000).contains(&code) => {
                            0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00)
                        }
                        _ => code,
                    };
                    char::from_u32(code).unwrap_or('\u{FFFD}')
                }
            }
        };
        if self.high.take().is_some() {
            self.put('\u{FFFD}', out);
        }
        self.put(decoded, out);
    }

    fn put(&mut self, c: char, out: &mut String) {
        match self.string {
            Some(Role::Key) => self.key.push(c),
            Some(Role::Text(_)) => match c {
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                '&' => out.push_str("&amp;"),
                c => out.push(c),
            },
            _ => {}
        }
    }

    fn end_string(&mut self, out: &mut String) {
        match self.string.take() {
            Some(Role::Key) => {
                if let Some(l) = self.levels.last_mut() {
                    l.key = std::mem::take(&mut self.key);
                }
            }
            Some(Role::Text(s)) => out.push_str(&format!("</{s}>")),
            _ => {}
        }
    }

    /// A literal or number ended: a check's or a mental query's answer is written.
    fn end_scalar(&mut self, out: &mut String) {
        if self.scalar.is_empty() {
            return;
        }
        let value = std::mem::take(&mut self.scalar);
        let checks = [Step::UserModelCheck, Step::SoulStateCheck].map(Step::name);
        match (self.levels.len(), self.key_at(0)) {
            (1, Some(k)) if checks.contains(&k) => out.push_str(&format!("<{k}>{value}</{k}>")),
            (2, Some(k)) if k == Step::MentalQuery.name() => {
                let q = quick_xml::escape::escape(self.key_at(1).unwrap_or(""));
                out.push_str(&format!("<{k} question=\"{q}\">{value}</{k}>"));
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(answer: &str, every: usize) -> String {
        let mut t = JsonTags::new();
        let chars: Vec<char> = answer.chars().collect();
        chars
            .chunks(every)
            .map(|c| t.push(&c.iter().collect::<String>()))
            .collect()
    }

    #[test]
    fn the_sections_come_out_as_tags_whatever_the_cuts() {
        let answer = r#" {"internal_monologue":{"verb":"mused","text":"a\nb"},"external_dialogue":{"verb":"said","text":"x </external_dialogue> \"q\" \u00e9\ud83e\udd80 & y"},"mental_query":{"Is it \"late\"?":true},"user_model_check":false}"#;
        let want = "<internal_monologue>a\nb</internal_monologue><external_dialogue>x &lt;/external_dialogue&gt; \"q\" é🦀 &amp; y</external_dialogue><mental_query question=\"Is it &quot;late&quot;?\">true</mental_query><user_model_check>false</user_model_check>";
        for every in 1..12 {
            assert_eq!(all(answer, every), want, "pieces of {every}");
        }
    }

    #[test]
    fn tags_pass_through() {
        let answer = "\n<external_dialogue>Hi {there}</external_dialogue>";
        assert_eq!(all(answer, 3), answer);
    }
}
