//! Secrets: read only from the environment, never printed.
//!
//! Owns the `Secret` newtype. Its `Debug` and `Display` print `[redacted]`, so a secret that
//! slips into a log line or an error message shows nothing.

use std::fmt;

/// A token or key. The only way to see the value is [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// Reads an environment variable; unset or blank is `None`.
    pub fn from_env(name: &str) -> Option<Self> {
        std::env::var(name)
            .ok()
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .map(Self)
    }

    /// The value, for the one place that sends it (an HTTP header).
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[redacted]")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_and_display_never_show_the_value() {
        let s = Secret::new("sk-ant-very-secret");
        assert_eq!(format!("{s:?}"), "[redacted]");
        assert_eq!(format!("{s}"), "[redacted]");
        assert_eq!(
            format!("{:?}", Some(&s)),
            "Some([redacted])",
            "nested Debug is redacted too"
        );
        assert_eq!(s.expose(), "sk-ant-very-secret");
    }
}
