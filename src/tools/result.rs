//! A tool's result as text: its text blocks joined, other blocks named, structured content
//! when there is nothing else, cut at the server's `max_result_chars` on a character boundary.
//! A result already cut as it was read (too long to read whole) says how long it was.

use rmcp::model::{CallToolResult, ContentBlock};

use super::scan::CUT_META;

/// The result's text, at most `max_chars` characters (and a note when cut).
pub fn text(r: &CallToolResult, max_chars: usize) -> String {
    let mut parts: Vec<String> = Vec::new();
    for block in &r.content {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::Image(_) => parts.push("[an image]".into()),
            ContentBlock::Audio(_) => parts.push("[a sound]".into()),
            _ => parts.push("[a resource]".into()),
        }
        if parts.iter().map(String::len).sum::<usize>() > max_chars.saturating_mul(4) {
            break;
        }
    }
    let mut text = parts.join("\n");
    if text.trim().is_empty() {
        if let Some(s) = &r.structured_content {
            text = s.to_string();
        }
    }
    let whole = r.meta.as_ref().and_then(|m| m.0.get(CUT_META));
    let of = |key: &str| {
        whole
            .and_then(|c| c.get(key))
            .and_then(serde_json::Value::as_u64)
    };
    match (of("chars"), of("bytes")) {
        (Some(chars), _) if chars > max_chars as u64 && text.chars().count() <= max_chars => {
            format!("{text}\n{}", note(chars, max_chars))
        }
        (Some(_), Some(bytes)) if text.chars().count() <= max_chars => {
            format!("{text}\n[cut: the result was {bytes} bytes; only its text is shown]")
        }
        _ => cut(&text, max_chars),
    }
}

fn note(chars: u64, max_chars: usize) -> String {
    format!("[cut: the result had {chars} characters; only the first {max_chars} are shown]")
}

/// `text` cut to at most `max_chars` characters, on a character boundary, with a note saying
/// how long it was.
pub fn cut(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_string(),
        Some((at, _)) => format!(
            "{}\n{}",
            &text[..at],
            note(text.chars().count() as u64, max_chars)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_result_is_cut_on_a_character_boundary() {
        assert_eq!(cut("héllo", 10), "héllo");
        let c = cut("ééééé", 2);
        assert!(
            c.starts_with("éé\n[cut: the result had 5 characters"),
            "{c}"
        );
    }
}
