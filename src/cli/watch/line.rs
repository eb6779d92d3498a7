//! A soul-stream record as one terminal line: its time, phase, thread and text, every text
//! from the stream made harmless to a terminal (control characters and direction overrides
//! shown escaped, so a model cannot move the cursor, recolour or retitle the terminal) and
//! cut to the width. Pure.

use crate::window::Record;

/// A text with every control character (C0, DEL, C1: escape sequences start there) and
/// every bidirectional override shown as an escape (`\n`, `\t`, `\u{1b}` …).
pub fn harmless(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() || is_bidi_control(c) => {
                out.push_str(&format!("\\u{{{:x}}}", c as u32));
            }
            c => out.push(c),
        }
    }
    out
}

/// The characters that reorder text on a terminal that honours them.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{61c}')
}

/// The wall-clock time of `at` (unix ms), UTC: `15:04:05.123`.
fn time_of(at: i64) -> String {
    let ms = at.rem_euclid(86_400_000);
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        ms / 3_600_000,
        ms / 60_000 % 60,
        ms / 1000 % 60,
        ms % 1000
    )
}

/// The line for `record`: `time [daemon] phase thread text`, at most `width` characters
/// (the text is cut, marked with `…`; the rest is never cut). The thread is `-` for a call
/// outside any conversation.
pub fn human(record: &Record, daemon: Option<&str>, width: usize) -> String {
    let mut head = time_of(record.at);
    if let Some(d) = daemon {
        head.push_str(&format!(" [{}]", harmless(d)));
    }
    let thread = if record.thread.is_empty() {
        "-".to_string()
    } else {
        harmless(&record.thread)
    };
    head.push_str(&format!(" {:<9} {thread} ", record.phase.as_str()));
    let text = harmless(&record.text);
    let room = width.saturating_sub(head.chars().count()).max(1);
    let text = match text.char_indices().nth(room) {
        Some(_) => {
            let keep: String = text.chars().take(room.saturating_sub(1)).collect();
            format!("{keep}…")
        }
        None => text,
    };
    format!("{head}{text}").trim_end().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::window::Phase;

    fn record(text: &str) -> Record {
        Record {
            phase: Phase::Cognition,
            trace: "t".into(),
            thread: "D1".into(),
            at: 1_700_000_000_123,
            text: text.into(),
            data: serde_json::Value::Null,
        }
    }

    #[test]
    fn a_line_has_the_time_phase_thread_and_text() {
        assert_eq!(
            human(&record("thought: hm"), None, 80),
            "22:13:20.123 cognition D1 thought: hm"
        );
        assert_eq!(
            human(&record("x"), Some("host pid 7"), 80),
            "22:13:20.123 [host pid 7] cognition D1 x"
        );
        let mut outside = record("a state call");
        outside.thread.clear();
        assert!(human(&outside, None, 80).contains(" - a state call"));
    }

    #[test]
    fn escape_sequences_and_overrides_never_reach_the_terminal_raw() {
        let line = human(
            &record("\u{1b}[2J\u{1b}]0;owned\u{7}\u{9b}31m\r\nnext\u{202e}txt"),
            None,
            200,
        );
        assert!(!line.chars().any(|c| c.is_control()), "{line:?}");
        assert!(
            line.contains("\\u{1b}[2J\\u{1b}]0;owned\\u{7}\\u{9b}31m\\r\\nnext\\u{202e}txt"),
            "{line}"
        );
        let mut thread = record("x");
        thread.thread = "D1\u{1b}[31m".into();
        assert!(human(&thread, Some("h\u{1b}"), 80).contains("[h\\u{1b}] cognition D1\\u{1b}[31m"));
    }

    #[test]
    fn the_text_is_cut_to_the_width_on_a_character() {
        let line = human(&record(&"日本語".repeat(50)), None, 40);
        assert_eq!(line.chars().count(), 40, "{line}");
        assert!(line.ends_with('…'));
        assert_eq!(time_of(-1), "23:59:59.999");
    }
}
