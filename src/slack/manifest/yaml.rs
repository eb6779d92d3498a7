//! A small YAML writer for a JSON value, enough for a manifest: block mappings and sequences,
//! every string double-quoted (so no word of a soul's can turn into a number, a boolean, a
//! comment or a new key), numbers, booleans and null as they are. Keys that are not plain
//! identifiers are quoted too. Pure.

use serde_json::{Map, Value};

/// `value` as a YAML document (block style, two-space indents, ending with a line feed).
pub fn to_yaml(value: &Value) -> String {
    let mut out = String::new();
    match value {
        Value::Object(m) if !m.is_empty() => mapping(&mut out, m, 0, false),
        Value::Array(a) if !a.is_empty() => sequence(&mut out, a, 0),
        other => {
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
    out
}

/// The entries of `m` at `indent`; with `inline`, the first goes on the current line (after
/// a sequence's `- `).
fn mapping(out: &mut String, m: &Map<String, Value>, indent: usize, inline: bool) {
    for (i, (k, v)) in m.iter().enumerate() {
        if !(inline && i == 0) {
            pad(out, indent);
        }
        out.push_str(&key(k));
        out.push(':');
        nested(out, v, indent);
    }
}

fn sequence(out: &mut String, a: &[Value], indent: usize) {
    for v in a {
        pad(out, indent);
        out.push('-');
        match v {
            Value::Object(m) if !m.is_empty() => {
                out.push(' ');
                mapping(out, m, indent + 2, true);
            }
            _ => nested(out, v, indent),
        }
    }
}

/// What follows `key:` or `-` at `indent`: a nested block on the next lines, or a scalar.
fn nested(out: &mut String, v: &Value, indent: usize) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            out.push('\n');
            mapping(out, m, indent + 2, false);
        }
        Value::Array(a) if !a.is_empty() => {
            out.push('\n');
            sequence(out, a, indent + 2);
        }
        other => {
            out.push(' ');
            out.push_str(&scalar(other));
            out.push('\n');
        }
    }
}

fn pad(out: &mut String, indent: usize) {
    out.extend(std::iter::repeat_n(' ', indent));
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => quoted(s),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

/// A key as it is when it is a plain identifier (`bot_events`), else quoted.
fn key(k: &str) -> String {
    let plain = k.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain
        && !matches!(
            k,
            "y" | "n" | "yes" | "no" | "on" | "off" | "true" | "false" | "null"
        )
    {
        k.to_string()
    } else {
        quoted(k)
    }
}

/// `s` as a YAML double-quoted scalar: `"` and `\` escaped, and every character YAML does
/// not print as itself (controls, DEL, the C1 range, line and paragraph separators, the byte
/// order mark, non-characters) written as an escape.
pub fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if printable(c) => out.push(c),
            c if (c as u32) <= 0xFFFF => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push_str(&format!("\\U{:08X}", c as u32)),
        }
    }
    out.push('"');
    out
}

/// YAML 1.2's printable characters, less the ones YAML 1.1 reads as line breaks.
fn printable(c: char) -> bool {
    matches!(c as u32,
        0x20..=0x7E | 0xA0..=0x2027 | 0x202A..=0xD7FF | 0xE000..=0xFEFE | 0xFF00..=0xFFFD | 0x10000..=0x10FFFF)
}
