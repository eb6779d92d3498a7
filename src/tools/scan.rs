//! One JSON-RPC message too long to keep, read as it streams past: its `id`, whether it is a
//! tool's result, and the start of that result's text, in memory bounded by the characters
//! shown, however long the message. [`super::stdio`] hands on what [`Scan::answer`] makes of
//! it in place of the message.
//!
//! Knows JSON's syntax only as far as it needs: strings and their escapes, nesting, and the
//! keys on the way to a result's text (`result.content[].text`). Never panics on what it
//! reads: a message that is not JSON, or has no usable `id`, gives no answer and is dropped.

/// The marker in a cut result's `_meta`: `{"chars": N, "bytes": B}`, what the whole had.
pub const CUT_META: &str = "anima/cut";

/// The longest key kept (longer ones match none of the keys looked for).
const MAX_KEY: usize = 32;
/// The longest `id` or `isError` value kept (a longer one is no usable id).
const MAX_SCALAR: usize = 256;

/// The scan of one message, fed its bytes in order.
pub struct Scan {
    max_chars: usize,
    stack: Vec<Frame>,
    in_string: bool,
    escape: Escape,
    /// The string being read is an object's key.
    reading_key: bool,
    key: Vec<u8>,
    /// The string being read is a text block of the result.
    in_text: bool,
    /// A value being captured whole (the top-level `id`, the result's `isError`), and the
    /// depth at which it ends.
    capture: Option<(Captured, usize)>,
    raw: Vec<u8>,
    id: Option<Vec<u8>>,
    is_error: bool,
    /// The top level has a `method`: a request or notification, not an answer.
    has_method: bool,
    tool_result: bool,
    /// The text kept (at most `max_chars` characters), and every character the result's text
    /// blocks had.
    text: Vec<u8>,
    kept: usize,
    /// Bytes of the last character kept still to come.
    tail: u8,
    chars: u64,
    texts: u64,
    bytes: u64,
}

#[derive(Clone, Copy, PartialEq)]
enum Captured {
    Id,
    IsError,
}

#[derive(Clone, Copy, PartialEq)]
enum Escape {
    None,
    Backslash,
    /// `\u` and the hex digits so far.
    Unicode(u8, u32),
}

struct Frame {
    array: bool,
    /// Its key in the object holding it (none in an array, or at the top).
    key: Option<String>,
    /// An object's key being given a value.
    current: Option<String>,
    expect_key: bool,
}

impl Scan {
    pub fn new(max_chars: usize) -> Scan {
        Scan {
            max_chars,
            stack: Vec::new(),
            in_string: false,
            escape: Escape::None,
            reading_key: false,
            key: Vec::new(),
            in_text: false,
            capture: None,
            raw: Vec::new(),
            id: None,
            is_error: false,
            has_method: false,
            tool_result: false,
            text: Vec::new(),
            kept: 0,
            tail: 0,
            chars: 0,
            texts: 0,
            bytes: 0,
        }
    }

    /// Whether the message is a tool's result (`result.content` or `result.structuredContent`
    /// has been seen).
    pub fn is_tool_result(&self) -> bool {
        self.tool_result
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Reads the next bytes of the message.
    pub fn feed(&mut self, mut bytes: &[u8]) {
        self.bytes += bytes.len() as u64;
        while !bytes.is_empty() {
            if self.in_string && self.escape == Escape::None && !self.keeping() {
                // The long stretch of a string nobody keeps: skipped to its next quote or
                // backslash, its characters counted when it is a text block.
                let end = bytes
                    .iter()
                    .position(|&b| b == b'"' || b == b'\\')
                    .unwrap_or(bytes.len());
                if self.in_text {
                    self.chars += chars_in(&bytes[..end]) as u64;
                }
                bytes = &bytes[end..];
                if bytes.is_empty() {
                    break;
                }
            }
            self.byte(bytes[0]);
            bytes = &bytes[1..];
        }
    }

    /// Whether the string being read is kept byte by byte.
    fn keeping(&self) -> bool {
        self.reading_key
            || self.capture.is_some()
            || (self.in_text && (self.kept < self.max_chars || self.tail > 0))
    }

    fn byte(&mut self, b: u8) {
        if self.capture.is_some() {
            self.capture_byte(b);
        }
        if self.in_string {
            self.string_byte(b);
            return;
        }
        match b {
            b'"' => self.open_string(),
            b'{' | b'[' => {
                let key = match self.stack.last() {
                    Some(f) if !f.array => f.current.clone(),
                    _ => None,
                };
                self.stack.push(Frame {
                    array: b == b'[',
                    key,
                    current: None,
                    expect_key: b == b'{',
                });
            }
            b'}' | b']' => {
                self.stack.pop();
            }
            b',' => {
                if let Some(f) = self.stack.last_mut() {
                    f.expect_key = !f.array;
                }
            }
            b':' => {
                if let Some(f) = self.stack.last_mut() {
                    f.expect_key = false;
                }
                self.start_capture();
            }
            _ => {}
        }
    }

    fn open_string(&mut self) {
        self.in_string = true;
        self.reading_key = self.stack.last().is_some_and(|f| !f.array && f.expect_key);
        self.key.clear();
        self.in_text = !self.reading_key && self.at_text();
        if self.in_text {
            self.texts += 1;
            if self.texts > 1 {
                self.chars += 1;
                self.keep_char("\n");
            }
        }
    }

    fn string_byte(&mut self, b: u8) {
        match self.escape {
            Escape::Backslash => {
                self.escape = Escape::None;
                let c = match b {
                    b'n' => '\n',
                    b't' => '\t',
                    b'r' => '\r',
                    b'b' => '\u{8}',
                    b'f' => '\u{c}',
                    b'u' => {
                        self.escape = Escape::Unicode(0, 0);
                        return;
                    }
                    other => other as char,
                };
                self.string_char(c);
            }
            Escape::Unicode(n, v) => {
                let digit = (b as char).to_digit(16).unwrap_or(0);
                let v = v * 16 + digit;
                if n < 3 {
                    self.escape = Escape::Unicode(n + 1, v);
                } else {
                    self.escape = Escape::None;
                    // A surrogate half is shown as U+FFFD (a pair as two of them).
                    self.string_char(char::from_u32(v).unwrap_or('\u{fffd}'));
                }
            }
            Escape::None => match b {
                b'\\' => self.escape = Escape::Backslash,
                b'"' => self.close_string(),
                _ => {
                    if self.reading_key {
                        if self.key.len() < MAX_KEY {
                            self.key.push(b);
                        }
                    } else if self.in_text {
                        if b & 0xC0 != 0x80 {
                            self.chars += 1;
                            self.tail = 0;
                            if self.kept < self.max_chars {
                                self.kept += 1;
                                self.tail = continuations(b);
                                self.text.push(b);
                            }
                        } else if self.tail > 0 {
                            self.tail -= 1;
                            self.text.push(b);
                        }
                    }
                }
            },
        }
    }

    /// A character of a string, from an escape.
    fn string_char(&mut self, c: char) {
        if self.reading_key {
            if self.key.len() < MAX_KEY {
                let mut buf = [0u8; 4];
                self.key
                    .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        } else if self.in_text {
            self.chars += 1;
            let mut buf = [0u8; 4];
            self.keep_char(c.encode_utf8(&mut buf));
        }
    }

    fn keep_char(&mut self, c: &str) {
        if self.kept < self.max_chars {
            self.kept += 1;
            self.text.extend_from_slice(c.as_bytes());
        }
    }

    fn close_string(&mut self) {
        self.in_string = false;
        self.in_text = false;
        if !self.reading_key {
            return;
        }
        self.reading_key = false;
        let key = String::from_utf8_lossy(&self.key).into_owned();
        let depth = self.stack.len();
        if depth == 1 && key == "method" {
            self.has_method = true;
        }
        if depth == 2
            && self.stack[1].key.as_deref() == Some("result")
            && (key == "content" || key == "structuredContent")
        {
            self.tool_result = true;
        }
        if let Some(f) = self.stack.last_mut() {
            f.current = Some(key);
        }
    }

    /// Whether a string value here is the text of one of the result's content blocks.
    fn at_text(&self) -> bool {
        let s = &self.stack;
        s.len() == 4
            && s[1].key.as_deref() == Some("result")
            && s[2].array
            && s[2].key.as_deref() == Some("content")
            && !s[3].array
            && s[3].current.as_deref() == Some("text")
    }

    /// After a `:`: the value of the top-level `id`, or of the result's `isError`, is kept.
    fn start_capture(&mut self) {
        let depth = self.stack.len();
        let key = self.stack.last().and_then(|f| f.current.as_deref());
        let what = match (depth, key) {
            (1, Some("id")) => Captured::Id,
            (2, Some("isError")) if self.stack[1].key.as_deref() == Some("result") => {
                Captured::IsError
            }
            _ => return,
        };
        self.raw.clear();
        self.capture = Some((what, depth));
    }

    /// A byte of a captured value; a `,` or the closing brace at its depth ends it.
    fn capture_byte(&mut self, b: u8) {
        let Some((what, depth)) = self.capture else {
            return;
        };
        let ends = !self.in_string && self.stack.len() == depth && (b == b',' || b == b'}');
        if !ends {
            if self.raw.len() <= MAX_SCALAR {
                self.raw.push(b);
            }
            return;
        }
        self.capture = None;
        let raw = self.raw.trim_ascii().to_vec();
        if raw.len() > MAX_SCALAR {
            return;
        }
        match what {
            Captured::Id => self.id = Some(raw),
            Captured::IsError => self.is_error = raw == b"true",
        }
    }

    /// The one line to hand on in the message's place (without its newline): for a tool's
    /// result, the result cut to its first characters, with [`CUT_META`] saying how long it
    /// was; for another answer, an error saying it was too long; nothing for a message with
    /// no usable `id`, or one that is not an answer.
    pub fn answer(&self, bound: usize) -> Option<String> {
        let raw = self.id.as_deref()?;
        let id: serde_json::Value = serde_json::from_slice(raw).ok()?;
        if !(id.is_string() || id.is_number()) || self.has_method {
            return None;
        }
        let message = if self.tool_result {
            let text = if self.texts == 0 {
                format!(
                    "[the result's structured content was {} bytes, too long to show]",
                    self.bytes
                )
            } else {
                String::from_utf8_lossy(&self.text).into_owned()
            };
            serde_json::json!({
                "jsonrpc": "2.0",
                "id": id,
                "result": {
                    "content": [{"type": "text", "text": text}],
                    "isError": self.is_error,
                    "_meta": {CUT_META: {"chars": self.chars, "bytes": self.bytes}},
                },
            })
        } else {
            serde_json::json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {
                    "code": -32603,
                    "message": format!(
                        "the server's answer was {} bytes, more than the {bound} anima reads",
                        self.bytes
                    ),
                },
            })
        };
        Some(message.to_string())
    }
}

/// How many bytes follow the UTF-8 lead byte `b`.
fn continuations(b: u8) -> u8 {
    match b {
        0xF0.. => 3,
        0xE0.. => 2,
        0xC0.. => 1,
        _ => 0,
    }
}

/// The characters in UTF-8 `bytes` (its bytes that start one).
fn chars_in(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b & 0xC0 != 0x80).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn scan(message: &str, max_chars: usize, piece: usize) -> Scan {
        let mut s = Scan::new(max_chars);
        for chunk in message.as_bytes().chunks(piece) {
            s.feed(chunk);
        }
        s
    }

    fn answer(message: &str, max_chars: usize) -> Value {
        let s = scan(message, max_chars, 7);
        serde_json::from_str(&s.answer(1000).expect("an answer")).unwrap()
    }

    #[test]
    fn a_long_result_is_cut_with_its_id_wherever_the_id_stands() {
        let long = "é".repeat(50);
        for message in [
            format!(
                r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"{long}"}}]}}}}"#
            ),
            format!(
                r#"{{"result":{{"isError":true,"content":[{{"text":"{long}","type":"text"}}]}},"jsonrpc":"2.0","id":"a\"b"}}"#
            ),
        ] {
            let a = answer(&message, 10);
            let result = &a["result"];
            assert_eq!(result["content"][0]["text"], "é".repeat(10), "{a}");
            assert_eq!(result["_meta"][CUT_META]["chars"], 50);
            assert_eq!(result["_meta"][CUT_META]["bytes"], message.len());
            assert!(a["id"] == 7 || a["id"] == "a\"b", "{a}");
            assert_eq!(result["isError"], a["id"] != 7);
        }
    }

    #[test]
    fn escapes_are_read_and_text_blocks_joined() {
        let message = r#"{"id":1,"result":{"content":[{"type":"text","text":"a\"\n\u00e9"},{"type":"image","data":"zzzz"},{"type":"text","text":"b"}]}}"#;
        let a = answer(message, 100);
        assert_eq!(a["result"]["content"][0]["text"], "a\"\né\nb");
        assert_eq!(a["result"]["_meta"][CUT_META]["chars"], 6);
    }

    #[test]
    fn another_answer_too_long_is_an_error_for_its_id_and_the_rest_is_dropped() {
        let list = r#"{"jsonrpc":"2.0","result":{"tools":[{"name":"x"}]},"id":3}"#;
        let a = answer(list, 10);
        assert_eq!(a["id"], 3);
        assert!(
            a["error"]["message"]
                .as_str()
                .unwrap()
                .contains("more than the 1000 anima reads"),
            "{a}"
        );
        for dropped in [
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"xxxx"}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"sampling/createMessage","params":{}}"#,
            r#"{"id":{"nested":1},"result":{"content":[]}}"#,
            "this is not json {{{",
            "",
        ] {
            assert_eq!(scan(dropped, 10, 3).answer(1000), None, "{dropped}");
        }
    }

    #[test]
    fn memory_stays_bounded_however_long_the_text() {
        let mut s = Scan::new(5);
        s.feed(br#"{"id":1,"result":{"content":[{"type":"text","text":""#);
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..20 {
            s.feed(&chunk);
        }
        s.feed(br#""}]}}"#);
        assert!(s.text.len() <= 5 * 4 && s.raw.capacity() <= 2 * MAX_SCALAR);
        let a: Value = serde_json::from_str(&s.answer(1).unwrap()).unwrap();
        assert_eq!(a["result"]["_meta"][CUT_META]["chars"], 20 << 20);
    }
}
