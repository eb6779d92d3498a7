//! Server-sent events, read as the HTML standard says: bytes in any chunking → events. Lines
//! end with LF, CR or CRLF (a CRLF split across chunks is one ending); a leading BOM is
//! dropped; `:` starts a comment; `data` lines join with newlines; `event`, `id` and `retry`
//! are kept; an empty line dispatches the event (none without data); an event the stream
//! ends inside is dropped. A line longer than `MAX_LINE` is an error (a server that never
//! ends its line must not take all memory). Pure: no I/O.

/// The longest line kept (a record of a turn with a very long text stays well under this).
pub const MAX_LINE: usize = 8 * 1024 * 1024;

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Its type: `message` unless an `event` line named another.
    pub event: String,
    pub data: String,
}

/// The reader's state between chunks.
#[derive(Debug, Default)]
pub struct Parser {
    line: Vec<u8>,
    /// The last byte was a CR: an LF right after it ends nothing more.
    after_cr: bool,
    started: bool,
    data: String,
    has_data: bool,
    event: String,
    /// The last event id the server gave (sent back as `Last-Event-ID` on reconnecting).
    pub last_id: Option<String>,
    /// The reconnection time the server asked for, in ms.
    pub retry_ms: Option<u64>,
}

/// A line past `MAX_LINE`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TooLong;

impl Parser {
    /// Feeds bytes; returns the events they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<Event>, TooLong> {
        let mut events = Vec::new();
        let mut start = 0;
        for (i, &b) in bytes.iter().enumerate() {
            if b != b'\n' && b != b'\r' {
                continue;
            }
            let skip = b == b'\n' && self.after_cr && i == start && self.line.is_empty();
            self.after_cr = b == b'\r';
            if skip {
                start = i + 1;
                continue;
            }
            self.line.extend_from_slice(&bytes[start..i]);
            start = i + 1;
            let line = std::mem::take(&mut self.line);
            if let Some(e) = self.line_done(&line) {
                events.push(e);
            }
        }
        if start < bytes.len() {
            self.after_cr = false;
            self.line.extend_from_slice(&bytes[start..]);
        }
        if self.line.len() > MAX_LINE {
            self.line.clear();
            return Err(TooLong);
        }
        Ok(events)
    }

    /// A new connection: what the last one left unfinished goes; the last id and the
    /// reconnection time stay.
    pub fn reconnected(&mut self) {
        *self = Parser {
            last_id: self.last_id.take(),
            retry_ms: self.retry_ms,
            ..Parser::default()
        };
    }

    fn line_done(&mut self, raw: &[u8]) -> Option<Event> {
        let mut raw = raw;
        if !self.started {
            self.started = true;
            raw = raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw);
        }
        if raw.is_empty() {
            return self.dispatch();
        }
        let line = String::from_utf8_lossy(raw);
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = line.split_once(':').unwrap_or((&line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
                if self.data.len() > MAX_LINE {
                    // Many short data lines are as much as one long one.
                    self.data.clear();
                    self.has_data = false;
                }
            }
            "event" => self.event = value.to_string(),
            "id" if !value.contains('\0') => self.last_id = Some(value.to_string()),
            "retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry_ms = value.parse().ok();
            }
            _ => {}
        }
        None
    }

    fn dispatch(&mut self) -> Option<Event> {
        let event = std::mem::take(&mut self.event);
        if !std::mem::take(&mut self.has_data) {
            return None;
        }
        Some(Event {
            event: if event.is_empty() {
                "message".into()
            } else {
                event
            },
            data: std::mem::take(&mut self.data),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(bytes: &[u8]) -> Vec<Event> {
        Parser::default().push(bytes).unwrap()
    }

    fn message(data: &str) -> Event {
        Event {
            event: "message".into(),
            data: data.into(),
        }
    }

    #[test]
    fn data_lines_join_comments_are_skipped_and_an_empty_line_dispatches() {
        let got =
            all(b": hello\ndata: one\ndata:two\ndata\n\n: keep-alive\n\nevent: lag\ndata: {}\n\n");
        assert_eq!(
            got,
            vec![
                message("one\ntwo\n"),
                Event {
                    event: "lag".into(),
                    data: "{}".into()
                }
            ]
        );
    }

    #[test]
    fn every_line_ending_works_and_any_chunking_gives_the_same_events() {
        let stream = "\u{feff}data: a\r\n\r\ndata: é🦀\r\rid: 7\nretry: 250\ndata:  two spaces\n\ndata: cut at the end";
        let whole = all(stream.as_bytes());
        assert_eq!(
            whole,
            vec![message("a"), message("é🦀"), message(" two spaces")]
        );
        let bytes = stream.as_bytes();
        for split in 1..bytes.len() {
            let mut p = Parser::default();
            let mut got = p.push(&bytes[..split]).unwrap();
            got.extend(p.push(&bytes[split..]).unwrap());
            assert_eq!(got, whole, "split at {split}");
            assert_eq!(p.last_id.as_deref(), Some("7"));
            assert_eq!(p.retry_ms, Some(250));
        }
        let mut one_by_one = Parser::default();
        let got: Vec<Event> = bytes
            .iter()
            .flat_map(|b| one_by_one.push(&[*b]).unwrap())
            .collect();
        assert_eq!(got, whole);
    }

    #[test]
    fn an_event_without_data_is_not_dispatched_and_bad_fields_are_ignored() {
        let got = all(b"event: x\n\nretry: soon\nid: a\0b\nnonsense\ndata: y\n\n");
        assert_eq!(got, vec![message("y")]);
        let mut p = Parser::default();
        p.push(b"retry: soon\nid: a\0b\n\n").unwrap();
        assert_eq!((p.retry_ms, p.last_id), (None, None));
    }

    #[test]
    fn a_line_that_never_ends_is_an_error_not_all_memory() {
        let mut p = Parser::default();
        let chunk = vec![b'x'; 1024 * 1024];
        let mut failed = false;
        for _ in 0..9 {
            if p.push(&chunk).is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed);
        assert_eq!(p.push(b"data: fine\n\n").unwrap(), vec![message("fine")]);
    }
}
