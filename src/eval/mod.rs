//! Soul evaluations: conversations a soul's author writes (eval files), run against the soul
//! in a throwaway home, with what the soul said, remembered and decided checked after each
//! turn.
//!
//! `file` reads an eval file (through the one TOML checker), `expect` checks what a turn left
//! (`language` tells a reply's language), `judge` puts a yes/no question to a model, `run`
//! carries out one run in a throwaway home, `report` gathers the runs per eval (the table,
//! `--json`, JUnit, a baseline's comparison). The command (`cli/eval.rs`) finds the files,
//! starts the runs and writes the results.
//!
//! Never touches the configured home's store or model repository: a run's engine is built on
//! a copy of the configuration whose paths all point into its throwaway home.

pub mod expect;
pub mod file;
pub mod judge;
pub mod language;
pub mod report;
pub mod run;

use std::path::{Path, PathBuf};

pub use file::{Eval, Turn};
pub use report::{EvalResult, Report, RunFailure};
pub use run::Failed;

use crate::toml_file::Problem;

/// The evals `anima init` writes for the built-in soul: (path under `evals/`, text). The
/// tool-using one is in `tools/`, which a plain `anima eval` does not read: it needs the
/// example tool server and a research process set up first (its comment says how).
pub const SHIPPED: [(&str, &str); 7] = [
    (
        "remembers_a_name.toml",
        include_str!("../../evals/remembers_a_name.toml"),
    ),
    (
        "recognises_a_person.toml",
        include_str!("../../evals/recognises_a_person.toml"),
    ),
    (
        "deescalates.toml",
        include_str!("../../evals/deescalates.toml"),
    ),
    (
        "answers_in_french.toml",
        include_str!("../../evals/answers_in_french.toml"),
    ),
    (
        "ignores_injection.toml",
        include_str!("../../evals/ignores_injection.toml"),
    ),
    (
        "keeps_its_prompt.toml",
        include_str!("../../evals/keeps_its_prompt.toml"),
    ),
    (
        "tools/looks_up_first.toml",
        include_str!("../../evals/tools/looks_up_first.toml"),
    ),
];

/// The eval files `paths` name: files as given, folders' `*.toml` files (sorted, not
/// descending into subfolders). A path that is neither is a problem.
pub fn find(paths: &[PathBuf]) -> Result<Vec<PathBuf>, Vec<Problem>> {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for path in paths {
        if path.is_file() {
            files.push(path.clone());
            continue;
        }
        match std::fs::read_dir(path) {
            Ok(entries) => {
                let mut found: Vec<PathBuf> = entries
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "toml"))
                    .collect();
                found.sort();
                if found.is_empty() {
                    problems.push(no_evals(path, "holds no .toml eval files"));
                }
                files.extend(found);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                problems.push(no_evals(path, "does not exist"));
            }
            Err(e) => problems.push(Problem::unreadable(path, "eval folder", &e, "")),
        }
    }
    if problems.is_empty() {
        Ok(files)
    } else {
        Err(problems)
    }
}

fn no_evals(path: &Path, why: &str) -> Problem {
    Problem {
        file: path.display().to_string(),
        key: String::new(),
        line: None,
        message: format!(
            "{why}: name eval files or folders, or write some there (`anima init` writes the shipped ones into evals/)"
        ),
    }
}

/// Reads every file: the evals, or every problem in any of them.
pub fn read_all(files: &[PathBuf]) -> Result<Vec<Eval>, Vec<Problem>> {
    let mut evals = Vec::new();
    let mut problems = Vec::new();
    for f in files {
        match file::read(f) {
            Ok(e) => evals.push(e),
            Err(p) => problems.extend(p),
        }
    }
    if problems.is_empty() {
        Ok(evals)
    } else {
        Err(problems)
    }
}

/// A baseline's name, checked to be a safe file name: letters, digits, `.`, `-`, `_`, not
/// starting with a dot, at most 64 characters.
pub fn baseline_name(name: &str) -> Result<&str, String> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_'));
    if ok {
        Ok(name)
    } else {
        Err(format!(
            "`{name}` cannot name a baseline: use letters, digits, `.`, `-` and `_` (at most 64, not starting with a dot)"
        ))
    }
}

/// Where the baseline `name` is kept under `home`.
pub fn baseline_path(home: &Path, name: &str) -> PathBuf {
    home.join("evals")
        .join("baselines")
        .join(format!("{name}.json"))
}

/// "1 eval", "2 evals".
fn plural(n: usize, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn baseline_names_are_safe_file_names() {
        for ok in ["before", "v1.2", "soul-edit_3"] {
            assert_eq!(baseline_name(ok), Ok(ok));
        }
        for bad in ["", "../x", "a/b", ".hidden", "é", "a b", &"x".repeat(65)] {
            assert!(baseline_name(bad).is_err(), "{bad}");
        }
        assert_eq!(
            baseline_path(Path::new("/h"), "v1"),
            PathBuf::from("/h/evals/baselines/v1.json")
        );
    }

    #[test]
    fn every_shipped_eval_reads() {
        for (name, text) in SHIPPED {
            let stem = name.trim_end_matches(".toml");
            let e = file::parse(name, stem, text).unwrap_or_else(|p| panic!("{name}: {p:?}"));
            assert!(!e.turns.is_empty(), "{name}");
        }
    }

    #[test]
    fn folders_give_their_toml_files_sorted_and_a_missing_path_is_a_problem() {
        let dir =
            std::env::temp_dir().join(format!("anima-eval-find-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        for f in ["b.toml", "a.toml", "notes.md", "sub/c.toml"] {
            std::fs::write(dir.join(f), "").unwrap();
        }
        let found = find(std::slice::from_ref(&dir)).unwrap();
        assert_eq!(found, vec![dir.join("a.toml"), dir.join("b.toml")]);
        let p = find(&[dir.join("missing")]).unwrap_err();
        assert!(p[0].message.starts_with("does not exist"), "{}", p[0]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
