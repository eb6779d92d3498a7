//! The person the soul is talking to, as the prompt shows them: their model, or the
//! blueprint a model starts from when the soul has not written one yet.

/// The person this turn is with, when the gate lets their model in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserModel<'a> {
    /// Their display name (untrusted).
    pub name: &'a str,
    /// The model the soul has written of them (untrusted); `None` shows the blueprint.
    pub model: Option<&'a str>,
}

/// The seven sections a user model starts with (a starting shape, not a cage).
pub const BLUEPRINT_SECTIONS: [&str; 7] = [
    "Persona",
    "Speaking Style",
    "Conversational Context",
    "Worldview",
    "Interests & Domains",
    "Working Patterns",
    "Most Potent Memories",
];

/// The model shown for someone the soul has not modelled yet.
pub fn blueprint(display_name: &str) -> String {
    let mut out = format!("# {display_name}\n");
    for section in BLUEPRINT_SECTIONS {
        out.push_str(&format!("\n## {section}\nNot known yet.\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_blueprint_has_the_seven_sections() {
        let b = blueprint("Tom");
        assert!(b.starts_with("# Tom\n"));
        for s in BLUEPRINT_SECTIONS {
            assert!(b.contains(&format!("## {s}\n")), "{s}");
        }
    }
}
