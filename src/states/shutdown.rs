//! Whether a shutdown asks the soul's consent, and which condition decided it. Pure: the
//! daemon gathers the circumstances and carries the decision out.

use serde::Serialize;

use super::template::{Condition, Shutdown, ShutdownMode};

/// The mental query by which the soul records a referral: asked on every message while the
/// template's conditional shutdown lists `pending_professional_referral`; its latest answer
/// in a thread, if yes and within the last hour, is a pending referral.
pub const REFERRAL_QUESTION: &str =
    "Am I referring this person to a professional (a doctor, counsellor, lawyer or crisis line)?";

/// What "recent" means for the conditions and the closing notes: the last hour. A dream
/// leaves a conversation's working memory of that hour whole, so the conditions still read it.
pub const RECENT_MS: i64 = 60 * 60 * 1000;

/// What the conditions read, gathered when the shutdown begins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Circumstances {
    /// The crisis keyword a message of the last hour matched.
    pub crisis_keyword: Option<String>,
    /// The soul said it is referring someone on, in a turn of the last hour.
    pub referral: bool,
    /// The open task in soul state.
    pub open_task: Option<String>,
}

/// What the shutdown does, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub mode: &'static str,
    /// Ask the soul before stopping.
    pub ask_consent: bool,
    /// The listed conditions that held (conditional mode).
    pub fired: Vec<Condition>,
    /// In words: which rule decided.
    pub why: String,
}

impl Circumstances {
    /// Whether `c` holds, and what showed it.
    pub fn holds(&self, c: Condition) -> Option<String> {
        match c {
            Condition::ActiveCrisisResponse => self
                .crisis_keyword
                .as_ref()
                .map(|k| format!("a message of the last hour mentions \"{k}\"")),
            Condition::PendingProfessionalReferral => self
                .referral
                .then(|| "the soul is referring someone to a professional".to_string()),
            Condition::ActiveGoalMilestone => self
                .open_task
                .as_ref()
                .map(|t| format!("an open task: {t}")),
        }
    }
}

/// The seed's evaluator: always_consent asks, instant never does, conditional asks when a
/// listed condition holds, and otherwise unless `instant_shutdown_otherwise`.
pub fn decide(s: &Shutdown, c: &Circumstances) -> Decision {
    let mode = s.mode.name();
    match s.mode {
        ShutdownMode::AlwaysConsent => Decision {
            mode,
            ask_consent: true,
            fired: Vec::new(),
            why: "always_consent: the soul is always asked".into(),
        },
        ShutdownMode::Instant => Decision {
            mode,
            ask_consent: false,
            fired: Vec::new(),
            why: "instant: the soul is not asked".into(),
        },
        ShutdownMode::Conditional => {
            let mut fired = Vec::new();
            let mut shown = Vec::new();
            for cond in &s.require_consent_when {
                if let Some(what) = c.holds(*cond) {
                    fired.push(*cond);
                    shown.push(format!("{cond} ({what})"));
                }
            }
            if fired.is_empty() {
                let ask = !s.instant_shutdown_otherwise;
                Decision {
                    mode,
                    ask_consent: ask,
                    fired,
                    why: if ask {
                        "conditional: no condition holds, and instant_shutdown_otherwise is false"
                            .into()
                    } else {
                        "conditional: no condition holds".into()
                    },
                }
            } else {
                Decision {
                    mode,
                    ask_consent: true,
                    fired,
                    why: format!("conditional: {}", shown.join("; ")),
                }
            }
        }
    }
}

/// The first keyword found in `text`, ignoring case (blank keywords never match).
pub fn crisis_keyword<'k>(keywords: &'k [String], text: &str) -> Option<&'k str> {
    let text = text.to_lowercase();
    keywords
        .iter()
        .map(|k| k.trim())
        .filter(|k| !k.is_empty())
        .find(|k| text.contains(&k.to_lowercase()))
}
