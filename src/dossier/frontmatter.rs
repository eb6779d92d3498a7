//! A dossier's file: a frontmatter between two `---` lines (`name`, `aliases`, `kind`), then
//! the markdown. Read strictly (an unknown key, a missing name, a kind that is neither
//! `person` nor `subject` is an error naming its line) and written back one value a line.

use std::fmt;

use super::{Kind, MAX_ALIASES};

/// A dossier's frontmatter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub name: String,
    pub aliases: Vec<String>,
    pub kind: Kind,
}

/// What is wrong with a dossier's file, and on which line (1-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrontmatterError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for FrontmatterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.message)
    }
}

impl std::error::Error for FrontmatterError {}

fn at(line: usize, message: impl Into<String>) -> FrontmatterError {
    FrontmatterError {
        line,
        message: message.into(),
    }
}

/// Reads a dossier's file: its head and the markdown after it.
pub fn parse(text: &str) -> Result<(Head, &str), FrontmatterError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut lines = text.split_inclusive('\n');
    let first = lines.next().unwrap_or("");
    if first.trim_end() != "---" {
        return Err(at(
            1,
            "a dossier starts with a `---` line, then `name:`, `aliases:` and `kind:`, then `---`",
        ));
    }
    let mut offset = first.len();
    let (mut name, mut aliases, mut kind) = (None::<String>, Vec::new(), None::<Kind>);
    let mut in_list = false;
    let mut closed = false;
    for (i, raw) in lines.enumerate() {
        let n = i + 2;
        offset += raw.len();
        let line = raw.trim_end();
        if line == "---" {
            closed = true;
            break;
        }
        if line.trim().is_empty() {
            continue;
        }
        if let Some(item) = line.trim_start().strip_prefix("- ") {
            if !in_list {
                return Err(at(n, "a `- ` item outside `aliases:`"));
            }
            push_alias(&mut aliases, item, n)?;
            continue;
        }
        in_list = false;
        let Some((key, value)) = line.split_once(':') else {
            return Err(at(n, format!("expected `key: value`, found {line:?}")));
        };
        let value = value.trim();
        match key.trim() {
            "name" => {
                let v = unquote(value);
                if v.is_empty() {
                    return Err(at(n, "`name` is empty"));
                }
                name = Some(v.to_string());
            }
            "kind" => {
                kind = Some(Kind::from_name(unquote(value)).ok_or_else(|| {
                    at(n, format!("`kind` is {value:?}; use `person` or `subject`"))
                })?);
            }
            "aliases" => match value.strip_prefix('[') {
                Some(rest) => {
                    let inner = rest
                        .strip_suffix(']')
                        .ok_or_else(|| at(n, "`aliases: [` is not closed by `]` on its line"))?;
                    for item in inner.split(',').filter(|s| !s.trim().is_empty()) {
                        push_alias(&mut aliases, item, n)?;
                    }
                }
                None if value.is_empty() => in_list = true,
                None => push_alias(&mut aliases, value, n)?,
            },
            other => {
                return Err(at(
                    n,
                    format!("unknown key `{other}`; a dossier has `name`, `aliases` and `kind`"),
                ))
            }
        }
    }
    if !closed {
        return Err(at(1, "the frontmatter is not closed by a `---` line"));
    }
    let name = name.ok_or_else(|| at(1, "the frontmatter has no `name`"))?;
    Ok((
        Head {
            name,
            aliases,
            kind: kind.unwrap_or(Kind::Subject),
        },
        &text[offset.min(text.len())..],
    ))
}

fn push_alias(aliases: &mut Vec<String>, item: &str, line: usize) -> Result<(), FrontmatterError> {
    let item = unquote(item.trim());
    if item.is_empty() {
        return Ok(());
    }
    if aliases.len() >= MAX_ALIASES {
        return Err(at(line, format!("more than {MAX_ALIASES} aliases")));
    }
    aliases.push(item.to_string());
    Ok(())
}

fn unquote(v: &str) -> &str {
    let v = v.trim();
    for q in ['"', '\''] {
        if let Some(inner) = v.strip_prefix(q).and_then(|s| s.strip_suffix(q)) {
            return inner.trim();
        }
    }
    v
}

/// One value on one line: line breaks become spaces (a name from outside cannot add a key or
/// close the frontmatter).
fn one_line(v: &str) -> String {
    v.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A dossier's file: its head, then the markdown.
pub fn render(head: &Head, body: &str) -> String {
    let mut out = format!(
        "---\nname: {}\nkind: {}\n",
        one_line(&head.name),
        head.kind.name()
    );
    let aliases: Vec<String> = head
        .aliases
        .iter()
        .map(|a| one_line(a))
        .filter(|a| !a.is_empty())
        .collect();
    if !aliases.is_empty() {
        out.push_str("aliases:\n");
        for a in aliases {
            out.push_str("  - ");
            out.push_str(&a);
            out.push('\n');
        }
    }
    out.push_str("---\n");
    out.push_str(body.trim());
    out.push('\n');
    out
}
