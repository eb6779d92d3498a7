//! The soul's files: `soul.md` (the personality, required), `skills.md` (optional),
//! `play.md` (optional: how the soul's instructions change in PLAY) and `template.toml`
//! (optional: its cognitive state behaviours, checked by `states::template`) and `psyche.toml`
//! (optional: the constants of its psychology substrate, checked by `psyche::def`).
//!
//! Owns reading and checking them; every error names the path (and, for the template, the
//! line). The text reaches the prompt
//! verbatim: nothing here rewrites it. The shipped soul is compiled into the binary, so an
//! installed `anima` works without the clone: it is the soul when no soul folder exists.

use std::path::{Path, PathBuf};

use crate::psyche::{self, Psyche};
use crate::states::{template, Template, SHIPPED_TEMPLATE};
use crate::toml_file::Problem;

/// What the built-in soul and processes give as their folder.
pub const BUILT_IN: &str = "(built in)";

/// The shipped `soul/soul.md`, compiled in.
pub const SHIPPED_SOUL_MD: &str = include_str!("../soul/soul.md");
/// The shipped `soul/skills.md`, compiled in.
pub const SHIPPED_SKILLS_MD: &str = include_str!("../soul/skills.md");
/// The shipped `soul/play.md`, compiled in: also the wording of PLAY for a soul folder
/// without one.
pub const SHIPPED_PLAY_MD: &str = include_str!("../soul/play.md");

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SoulFiles {
    pub soul_md: String,
    pub skills_md: Option<String>,
    pub play_md: Option<String>,
    pub dir: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum SoulError {
    #[error("cannot read the soul file {path}: {source}; set [paths] soul_dir to the folder holding soul.md")]
    Unreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the soul file {path} is empty; write the soul's Persona and Speaking Style into it")]
    Empty { path: PathBuf },
    #[error("cannot read the skills file {path}: {source}")]
    SkillsUnreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("cannot read {path}: {source}")]
    OptionalUnreadable {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the template is invalid: {}", .0.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; "))]
    Template(Vec<Problem>),
    #[error("the psyche file is invalid: {}", .0.iter().map(|p| p.to_string()).collect::<Vec<_>>().join("; "))]
    Psyche(Vec<Problem>),
}

impl SoulFiles {
    /// Reads `soul.md` and, if present, `skills.md` from `dir`.
    pub fn load(dir: &Path) -> Result<SoulFiles, SoulError> {
        let soul_path = dir.join("soul.md");
        let soul_md =
            std::fs::read_to_string(&soul_path).map_err(|source| SoulError::Unreadable {
                path: soul_path.clone(),
                source,
            })?;
        if soul_md.trim().is_empty() {
            return Err(SoulError::Empty { path: soul_path });
        }
        let skills_path = dir.join("skills.md");
        let skills_md = optional(&skills_path).map_err(|source| SoulError::SkillsUnreadable {
            path: skills_path,
            source,
        })?;
        let play_path = dir.join("play.md");
        let play_md = optional(&play_path).map_err(|source| SoulError::OptionalUnreadable {
            path: play_path,
            source,
        })?;
        Ok(SoulFiles {
            soul_md,
            skills_md,
            play_md,
            dir: dir.to_path_buf(),
        })
    }

    /// How the soul's instructions change in PLAY: `play.md`, else the shipped wording.
    pub fn play_words(&self) -> &str {
        self.play_md.as_deref().unwrap_or(SHIPPED_PLAY_MD).trim()
    }

    /// The shipped soul, from the binary.
    pub fn built_in() -> SoulFiles {
        SoulFiles {
            soul_md: SHIPPED_SOUL_MD.to_string(),
            skills_md: Some(SHIPPED_SKILLS_MD.to_string()),
            play_md: Some(SHIPPED_PLAY_MD.to_string()),
            dir: PathBuf::from(BUILT_IN),
        }
    }

    /// Whether this is the soul compiled into the binary.
    pub fn is_built_in(&self) -> bool {
        self.dir == Path::new(BUILT_IN)
    }

    /// The soul in `dir`; the built-in soul when `dir` does not exist. A folder that exists
    /// but holds no usable soul.md is an error, as ever.
    pub fn load_or_built_in(dir: &Path) -> Result<SoulFiles, SoulError> {
        if dir.exists() {
            Self::load(dir)
        } else {
            Ok(Self::built_in())
        }
    }

    /// The soul's name: the first `# ` heading of soul.md, else "the soul".
    pub fn name(&self) -> &str {
        self.soul_md
            .lines()
            .find_map(|l| l.strip_prefix("# "))
            .map(|n| n.split([',', '—']).next().unwrap_or(n).trim())
            .filter(|n| !n.is_empty())
            .unwrap_or("the soul")
    }
}

/// An optional text file: `None` when it is missing or blank.
fn optional(path: &Path) -> Result<Option<String>, std::io::Error> {
    match std::fs::read_to_string(path) {
        Ok(s) if s.trim().is_empty() => Ok(None),
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// The soul's template: `template.toml` in `dir`; the shipped one when `dir` does not exist
/// (the built-in soul); the seed's defaults when the folder has no template.
pub fn load_template(dir: &Path) -> Result<Template, SoulError> {
    if !dir.exists() {
        return Ok(built_in_template());
    }
    let path = dir.join(template::FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => template::parse(&text, &path).map_err(SoulError::Template),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Template::default()),
        Err(source) => Err(SoulError::OptionalUnreadable { path, source }),
    }
}

/// The soul's psychology constants: `psyche.toml` in `dir`; the shipped one when `dir` does not
/// exist (the built-in soul) or has no psyche file.
pub fn load_psyche(dir: &Path) -> Result<Psyche, SoulError> {
    let path = dir.join(psyche::FILE);
    if !dir.exists() {
        return Ok(Psyche::shipped());
    }
    match std::fs::read_to_string(&path) {
        Ok(text) => psyche::def::parse(&text, &path).map_err(SoulError::Psyche),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Psyche::shipped()),
        Err(source) => Err(SoulError::OptionalUnreadable { path, source }),
    }
}

/// The shipped template, from the binary.
pub fn built_in_template() -> Template {
    template::parse(SHIPPED_TEMPLATE, &Path::new(BUILT_IN).join(template::FILE))
        .expect("the shipped template is valid (tested)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_soul_loads_with_its_sections() {
        let soul =
            SoulFiles::load(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/soul"))).unwrap();
        assert_eq!(soul.name(), "Wren");
        for section in ["## Persona", "## Speaking Style", "## Emotional States"] {
            assert!(soul.soul_md.contains(section), "{section}");
        }
        assert!(soul.skills_md.is_some());
    }

    #[test]
    fn the_built_in_soul_is_the_shipped_folder() {
        let shipped =
            SoulFiles::load(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/soul"))).unwrap();
        let built_in = SoulFiles::built_in();
        assert_eq!(built_in.soul_md, shipped.soul_md);
        assert_eq!(built_in.skills_md, shipped.skills_md);
        assert!(built_in.is_built_in() && !shipped.is_built_in());
        let names: Vec<String> = std::fs::read_dir(&shipped.dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        let mut names = names;
        names.sort();
        assert_eq!(
            names,
            [
                "assistant.toml",
                "play.md",
                "psyche.toml",
                "skills.md",
                "soul.md",
                "template.toml",
                "templates"
            ],
            "every shipped soul file is compiled in"
        );
        assert_eq!(built_in.play_md, shipped.play_md);
        assert_eq!(
            load_template(&shipped.dir).unwrap().behaviors,
            built_in_template().behaviors
        );
        let psyche = load_psyche(&shipped.dir).unwrap();
        assert_eq!(psyche.drives, Psyche::shipped().drives);
        assert_eq!(psyche.stances, Psyche::shipped().stances);
    }

    #[test]
    fn a_bad_psyche_file_is_refused_with_its_line_and_a_missing_one_is_the_shipped() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            load_psyche(dir.path()).unwrap().drives,
            Psyche::shipped().drives
        );
        std::fs::write(
            dir.path().join("psyche.toml"),
            psyche::SHIPPED_PSYCHE.replace("baseline = 0.4", "baseline = 4"),
        )
        .unwrap();
        let err = load_psyche(dir.path()).unwrap_err().to_string();
        let path = dir.path().join("psyche.toml").display().to_string();
        assert!(err.contains(&format!("{path}:")), "{err}");
        assert!(err.contains("drives.relatedness.baseline"), "{err}");
    }

    #[test]
    fn a_missing_folder_is_the_built_in_soul_and_an_empty_one_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let soul = SoulFiles::load_or_built_in(&dir.path().join("nowhere")).unwrap();
        assert!(soul.is_built_in());
        let err = SoulFiles::load_or_built_in(dir.path())
            .unwrap_err()
            .to_string();
        assert!(err.contains("soul.md"), "{err}");
    }

    #[test]
    fn a_folder_without_a_template_has_the_defaults_and_a_bad_one_is_refused_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("soul.md"), "# Kit\n").unwrap();
        assert_eq!(load_template(dir.path()).unwrap(), Template::default());
        let soul = SoulFiles::load(dir.path()).unwrap();
        assert_eq!(
            soul.play_words(),
            SHIPPED_PLAY_MD.trim(),
            "the shipped wording"
        );
        std::fs::write(
            dir.path().join("template.toml"),
            "[cognitive_state_behaviors.shutdown]\nmode = \"instant\"\n",
        )
        .unwrap();
        let err = load_template(dir.path()).unwrap_err().to_string();
        let path = dir.path().join("template.toml").display().to_string();
        assert!(err.contains(&format!("{path}:2")), "{err}");
    }

    #[test]
    fn a_missing_soul_names_its_path() {
        let dir = tempfile::tempdir().unwrap();
        let err = SoulFiles::load(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains(&dir.path().join("soul.md").display().to_string()),
            "{err}"
        );
        std::fs::write(dir.path().join("soul.md"), "  \n").unwrap();
        let err = SoulFiles::load(dir.path()).unwrap_err().to_string();
        assert!(err.contains("is empty"), "{err}");
    }
}
