//! People's records, and the slug that names their user model's file.

/// The file name of a user model: the display name lower-cased, runs of characters other
/// than a–z and 0–9 replaced by one `-`, trimmed; empty → the user id (made safe the same way).
pub fn slug(display_name: &str, user_id: &str) -> String {
    let s = slugify(display_name);
    if s.is_empty() {
        let id = slugify(user_id);
        if id.is_empty() {
            "user".to_string()
        } else {
            id
        }
    } else {
        s
    }
}

fn slugify(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.to_lowercase().chars() {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserRecord {
    pub user_id: String,
    pub display_name: String,
    pub slug: String,
    /// This user's completed turns, all threads.
    pub turns: i64,
    /// `turns` when the model was last shown to the model provider.
    pub injected_at_turn: Option<i64>,
    pub model: Option<String>,
    pub model_version: i64,
    pub exported_version: i64,
}

impl UserRecord {
    pub fn new(user_id: &str, display_name: &str) -> Self {
        UserRecord {
            user_id: user_id.to_string(),
            display_name: display_name.to_string(),
            slug: slug(display_name, user_id),
            turns: 0,
            injected_at_turn: None,
            model: None,
            model_version: 0,
            exported_version: 0,
        }
    }
}
