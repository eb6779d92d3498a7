//! The soul's files: `soul.md` (the personality, required) and `skills.md` (optional).
//!
//! Owns reading and checking them; every error names the path. The text reaches the prompt
//! verbatim: nothing here rewrites it. The shipped soul is compiled into the binary, so an
//! installed `anima` works without the clone: it is the soul when no soul folder exists.

use std::path::{Path, PathBuf};

/// What the built-in soul and processes give as their folder.
pub const BUILT_IN: &str = "(built in)";

/// The shipped `soul/soul.md`, compiled in.
pub const SHIPPED_SOUL_MD: &str = include_str!("../soul/soul.md");
/// The shipped `soul/skills.md`, compiled in.
pub const SHIPPED_SKILLS_MD: &str = include_str!("../soul/skills.md");

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SoulFiles {
    pub soul_md: String,
    pub skills_md: Option<String>,
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
        let skills_md = match std::fs::read_to_string(&skills_path) {
            Ok(s) if s.trim().is_empty() => None,
            Ok(s) => Some(s),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(SoulError::SkillsUnreadable {
                    path: skills_path,
                    source,
                })
            }
        };
        Ok(SoulFiles {
            soul_md,
            skills_md,
            dir: dir.to_path_buf(),
        })
    }

    /// The shipped soul, from the binary.
    pub fn built_in() -> SoulFiles {
        SoulFiles {
            soul_md: SHIPPED_SOUL_MD.to_string(),
            skills_md: Some(SHIPPED_SKILLS_MD.to_string()),
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
            ["skills.md", "soul.md"],
            "every shipped soul file is compiled in"
        );
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
