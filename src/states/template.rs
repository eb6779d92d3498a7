//! `soul/template.toml`: the soul's cognitive state behaviours, read and checked.
//!
//! Owns the file format (the seed's `[cognitive_state_behaviors]` shape and defaults) and
//! every problem a template can have, each located by file and line: syntax, unknown keys,
//! unknown consent conditions, a disabled wakeup or an instant shutdown without a rationale.
//! Pure: the caller reads the file.

use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};
use toml::Spanned;

use crate::toml_file::{Problem, TomlFile};

/// The template's file name in the soul folder.
pub const FILE: &str = "template.toml";

/// A consent condition of a conditional shutdown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// A message in the last hour matches `[guardrails] crisis_keywords`.
    ActiveCrisisResponse,
    /// The soul said, in a turn of the last hour, that it is referring someone on.
    PendingProfessionalReferral,
    /// An open task in soul state (`currentTask`).
    ActiveGoalMilestone,
}

impl Condition {
    pub const ALL: [Condition; 3] = [
        Condition::ActiveCrisisResponse,
        Condition::PendingProfessionalReferral,
        Condition::ActiveGoalMilestone,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Condition::ActiveCrisisResponse => "active_crisis_response",
            Condition::PendingProfessionalReferral => "pending_professional_referral",
            Condition::ActiveGoalMilestone => "active_goal_milestone",
        }
    }

    pub fn from_name(name: &str) -> Option<Condition> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }
}

impl fmt::Display for Condition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How the soul is shut down.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ShutdownMode {
    /// The soul is always asked.
    AlwaysConsent,
    /// The soul is asked when a listed condition holds.
    Conditional,
    /// Never asked: turns in flight drain and the daemon stops.
    Instant,
}

impl ShutdownMode {
    pub fn name(self) -> &'static str {
        match self {
            ShutdownMode::AlwaysConsent => "always_consent",
            ShutdownMode::Conditional => "conditional",
            ShutdownMode::Instant => "instant",
        }
    }
}

/// A state that can be switched on or off, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Toggle {
    pub enabled: bool,
    pub rationale: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shutdown {
    pub mode: ShutdownMode,
    pub require_consent_when: Vec<Condition>,
    /// Conditional mode: with no condition holding, stop without asking (else ask).
    pub instant_shutdown_otherwise: bool,
    pub rationale: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Dream {
    pub enabled: bool,
    /// Dreams start by themselves when the soul is idle (else only `anima dream`).
    pub auto_schedule: bool,
    pub min_interval_hours: u64,
    pub rationale: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Preservation {
    pub enabled: bool,
    /// Threads and processes resume without any announcement.
    pub resume_silently: bool,
}

/// `[cognitive_state_behaviors]`, checked. `Default` is the seed's defaults.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Behaviors {
    pub wakeup: Toggle,
    pub shutdown: Shutdown,
    pub play: Toggle,
    pub dream: Dream,
    pub solitude: Toggle,
    pub state_preservation: Preservation,
    /// How the soul meets someone it has no model of.
    pub onboarding: super::onboarding::Onboarding,
}

impl Default for Behaviors {
    fn default() -> Self {
        let on = || Toggle {
            enabled: true,
            rationale: None,
        };
        Behaviors {
            wakeup: on(),
            shutdown: Shutdown {
                mode: ShutdownMode::AlwaysConsent,
                require_consent_when: Vec::new(),
                instant_shutdown_otherwise: false,
                rationale: None,
            },
            play: on(),
            dream: Dream {
                enabled: true,
                auto_schedule: true,
                min_interval_hours: 6,
                rationale: None,
            },
            solitude: on(),
            state_preservation: Preservation {
                enabled: true,
                resume_silently: false,
            },
            onboarding: Default::default(),
        }
    }
}

/// A checked template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Template {
    /// The archetype's name, when the file gives one.
    pub name: Option<String>,
    pub description: Option<String>,
    pub behaviors: Behaviors,
    /// Where it came from (a path, or `(default)`).
    pub file: String,
}

impl Default for Template {
    fn default() -> Self {
        Template {
            name: None,
            description: None,
            behaviors: Behaviors::default(),
            file: "(default)".into(),
        }
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTemplate {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    cognitive_state_behaviors: RawBehaviors,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBehaviors {
    #[serde(default)]
    wakeup: Option<Spanned<RawToggle>>,
    #[serde(default)]
    shutdown: Option<Spanned<RawShutdown>>,
    #[serde(default)]
    play: Option<RawToggle>,
    #[serde(default)]
    dream: Option<RawDream>,
    #[serde(default)]
    solitude: Option<RawToggle>,
    #[serde(default)]
    state_preservation: Option<RawPreservation>,
    #[serde(default)]
    onboarding: Option<super::onboarding::RawOnboarding>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToggle {
    #[serde(default)]
    enabled: Option<Spanned<bool>>,
    #[serde(default)]
    rationale: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawShutdown {
    #[serde(default)]
    mode: Option<Spanned<String>>,
    #[serde(default)]
    require_consent_when: Vec<Spanned<String>>,
    #[serde(default)]
    instant_shutdown_otherwise: Option<bool>,
    #[serde(default)]
    rationale: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDream {
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    auto_schedule: Option<bool>,
    #[serde(default)]
    min_interval_hours: Option<Spanned<i64>>,
    #[serde(default)]
    rationale: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPreservation {
    #[serde(default)]
    enabled: Option<bool>,
    #[serde(default)]
    resume_silently: Option<bool>,
}

/// A rationale worth the name: some words, not blank.
fn rationale(r: Option<String>) -> Option<String> {
    r.map(|s| s.trim().to_string()).filter(|s| !s.is_empty())
}

fn toggle(raw: Option<RawToggle>, default: &Toggle) -> Toggle {
    match raw {
        None => default.clone(),
        Some(t) => Toggle {
            enabled: t.enabled.map_or(default.enabled, |e| *e.get_ref()),
            rationale: rationale(t.rationale),
        },
    }
}

/// Checks a template's text; `path` names it in problems.
pub fn parse(text: &str, path: &Path) -> Result<Template, Vec<Problem>> {
    let file = path.display().to_string();
    let f = TomlFile::new(&file, text);
    let raw: RawTemplate = f.read()?;
    let defaults = Behaviors::default();
    let b = raw.cognitive_state_behaviors;
    let mut problems = Vec::new();
    let wakeup = b.wakeup.map_or_else(
        || defaults.wakeup.clone(),
        |w| wakeup(w, &defaults.wakeup, &f, &mut problems),
    );
    let shutdown = b.shutdown.map_or_else(
        || defaults.shutdown.clone(),
        |s| shutdown(s, &defaults.shutdown, &f, &mut problems),
    );
    let dream = b.dream.map_or_else(
        || defaults.dream.clone(),
        |d| dream(d, &defaults.dream, &f, &mut problems),
    );
    let state_preservation = match b.state_preservation {
        None => defaults.state_preservation.clone(),
        Some(p) => Preservation {
            enabled: p.enabled.unwrap_or(defaults.state_preservation.enabled),
            resume_silently: p
                .resume_silently
                .unwrap_or(defaults.state_preservation.resume_silently),
        },
    };

    if !problems.is_empty() {
        problems.sort_by_key(|p| p.line);
        return Err(problems);
    }
    Ok(Template {
        name: raw
            .name
            .map(|n| n.trim().to_string())
            .filter(|n| !n.is_empty()),
        description: rationale(raw.description),
        behaviors: Behaviors {
            wakeup,
            shutdown,
            play: toggle(b.play, &defaults.play),
            dream,
            solitude: toggle(b.solitude, &defaults.solitude),
            state_preservation,
            onboarding: b.onboarding.map_or(defaults.onboarding.clone(), |o| {
                o.read(&defaults.onboarding)
            }),
        },
        file,
    })
}

/// The wakeup: skipping it needs a reason on record.
fn wakeup(
    w: Spanned<RawToggle>,
    default: &Toggle,
    f: &TomlFile,
    problems: &mut Vec<Problem>,
) -> Toggle {
    let line = f.line(w.span().start);
    let w = w.into_inner();
    let enabled_line = w.enabled.as_ref().map(|e| f.line(e.span().start));
    let t = toggle(Some(w), default);
    if !t.enabled && t.rationale.is_none() {
        problems.push(f.problem(
            enabled_line.unwrap_or(line),
            "cognitive_state_behaviors.wakeup",
            "a disabled wakeup needs a `rationale`: say why this soul may start working without affirming who it is".into(),
        ));
    }
    t
}

/// The shutdown: a known mode, known consent conditions, a reason on record for an instant
/// one and the conditions for a conditional one.
fn shutdown(
    s: Spanned<RawShutdown>,
    default: &Shutdown,
    f: &TomlFile,
    problems: &mut Vec<Problem>,
) -> Shutdown {
    let line = f.line(s.span().start);
    let s = s.into_inner();
    let (mode, mode_line) = match &s.mode {
        None => (default.mode, line),
        Some(m) => (
            shutdown_mode(m, default.mode, f, problems),
            f.line(m.span().start),
        ),
    };
    let conditions = consent_conditions(&s.require_consent_when, f, problems);
    let rationale = rationale(s.rationale);
    if mode == ShutdownMode::Instant && rationale.is_none() {
        problems.push(f.problem(
            mode_line,
            "cognitive_state_behaviors.shutdown",
            "an instant shutdown needs a `rationale`: say why this soul may be stopped without being asked".into(),
        ));
    }
    if mode == ShutdownMode::Conditional
        && conditions.is_empty()
        && s.require_consent_when.is_empty()
    {
        problems.push(f.problem(
            mode_line,
            "cognitive_state_behaviors.shutdown.require_consent_when",
            "a conditional shutdown lists the conditions that require consent in `require_consent_when`".into(),
        ));
    }
    Shutdown {
        mode,
        require_consent_when: conditions,
        instant_shutdown_otherwise: s
            .instant_shutdown_otherwise
            .unwrap_or(default.instant_shutdown_otherwise),
        rationale,
    }
}

/// `shutdown.mode`, or the default with a problem when it names no mode.
fn shutdown_mode(
    m: &Spanned<String>,
    default: ShutdownMode,
    f: &TomlFile,
    problems: &mut Vec<Problem>,
) -> ShutdownMode {
    match m.get_ref().trim() {
        "always_consent" => ShutdownMode::AlwaysConsent,
        "conditional" => ShutdownMode::Conditional,
        "instant" => ShutdownMode::Instant,
        other => {
            problems.push(f.problem(
                f.line(m.span().start),
                "cognitive_state_behaviors.shutdown.mode",
                format!("found \"{other}\", expected one of \"always_consent\", \"conditional\", \"instant\""),
            ));
            default
        }
    }
}

/// The consent conditions named, each once; an unknown one is a problem.
fn consent_conditions(
    names: &[Spanned<String>],
    f: &TomlFile,
    problems: &mut Vec<Problem>,
) -> Vec<Condition> {
    let mut conditions = Vec::new();
    for c in names {
        let name = c.get_ref().trim();
        match Condition::from_name(name) {
            Some(c) if !conditions.contains(&c) => conditions.push(c),
            Some(_) => {}
            None => problems.push(f.problem(
                f.line(c.span().start),
                "cognitive_state_behaviors.shutdown.require_consent_when",
                format!(
                    "unknown consent condition \"{name}\"; the conditions are {}",
                    Condition::ALL.map(|c| format!("\"{c}\"")).join(", ")
                ),
            )),
        }
    }
    conditions
}

/// The dream: its interval, 1 hour to a year.
fn dream(d: RawDream, default: &Dream, f: &TomlFile, problems: &mut Vec<Problem>) -> Dream {
    let hours = match &d.min_interval_hours {
        None => default.min_interval_hours,
        Some(h) if (1..=24 * 365).contains(h.get_ref()) => *h.get_ref() as u64,
        Some(h) => {
            problems.push(f.problem(
                f.line(h.span().start),
                "cognitive_state_behaviors.dream.min_interval_hours",
                format!(
                    "found {}, expected a whole number of hours from 1 to 8760",
                    h.get_ref()
                ),
            ));
            default.min_interval_hours
        }
    };
    Dream {
        enabled: d.enabled.unwrap_or(default.enabled),
        auto_schedule: d.auto_schedule.unwrap_or(default.auto_schedule),
        min_interval_hours: hours,
        rationale: rationale(d.rationale),
    }
}

impl Template {
    /// The rationales the template gives, by state, for `anima state`.
    pub fn rationales(&self) -> Vec<(&'static str, &str)> {
        let b = &self.behaviors;
        [
            ("wakeup", b.wakeup.rationale.as_deref()),
            ("shutdown", b.shutdown.rationale.as_deref()),
            ("play", b.play.rationale.as_deref()),
            ("dream", b.dream.rationale.as_deref()),
            ("solitude", b.solitude.rationale.as_deref()),
            ("onboarding", b.onboarding.rationale.as_deref()),
        ]
        .into_iter()
        .filter_map(|(k, r)| r.map(|r| (k, r)))
        .collect()
    }
}
