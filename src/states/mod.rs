//! Cognitive states: WAKEUP, WORK, PLAY, DREAM, SOLITUDE, SHUTDOWN, as the soul's template
//! (`soul/template.toml`) shapes them.
//!
//! `template` reads and checks the template; `machine` is the pure transition map (which
//! moves a template allows, and why one is refused); `shutdown` decides whether a shutdown
//! asks the soul's consent and which condition fired; `calls` builds the text of the calls
//! the states make (wakeup, consent, journal) and reads their answers; `quote` bounds what
//! those calls quote of the conversations; `dream` decides when a
//! dream is due and writes and reads its consolidation call; `onboarding` what the soul asks
//! someone new. Pure: no I/O, no
//! store, no model. The daemon carries the states out; the store persists every move.

pub mod calls;
pub mod dream;
pub mod machine;
pub mod onboarding;
pub mod quote;
pub mod shutdown;
pub mod template;

pub use machine::{Map, Refused, State};
pub use template::{Behaviors, Condition, ShutdownMode, Template};

/// The shipped `soul/template.toml`, compiled in.
pub const SHIPPED_TEMPLATE: &str = include_str!("../../soul/template.toml");

/// The shipped archetypes (`soul/templates/*.toml`), compiled in: file name and text. A test
/// keeps this list equal to the folder.
pub const ARCHETYPES: [(&str, &str); 3] = [
    ("ally.toml", include_str!("../../soul/templates/ally.toml")),
    ("echo.toml", include_str!("../../soul/templates/echo.toml")),
    (
        "scout.toml",
        include_str!("../../soul/templates/scout.toml"),
    ),
];

#[cfg(test)]
mod tests;
