//! Process files: one TOML file per mental process in `processes/`, read and checked.
//!
//! Owns the file format and every problem a file can have (syntax, unknown steps, bad
//! conditions, missing targets, execute_now cycles, an ISM's actions), each located by file
//! and line. A file is a fixed process (its `steps`, one model call a run) or, with
//! `kind = "ism"`, an implicit semantic machine (a goal, a playbook and actions the soul
//! chooses from; `steps` are then those of its answering call).

mod fixed;
mod ism;
mod raw;
mod set;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::when::Expr;
use crate::ism::{Action, Ism};
use crate::steps::Step;
use crate::toml_file::{Problem, TomlFile};
pub use ism::split_tool;
use raw::RawProcess;
pub use set::{check_set, check_set_beside, known};

/// The process every thread falls back to.
pub const MAIN: &str = "main";
/// The process of the idle-timer perception.
pub const PROACTIVE: &str = "proactive";

/// The steps of an ISM's answering call when its file names none.
pub const ISM_STEPS: [Step; 5] = [
    Step::ExternalDialogue,
    Step::UserModelCheck,
    Step::UserModelUpdate,
    Step::SoulStateCheck,
    Step::SoulStateUpdate,
];

/// A checked process.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessDef {
    pub name: String,
    pub description: String,
    pub steps: Vec<Step>,
    pub instructions: Option<String>,
    pub overrides: BTreeMap<Step, String>,
    pub transitions: Vec<Transition>,
    /// The mental-query questions its rules read, asked by its `mental_query` step.
    pub queries: Vec<String>,
    /// `kind = "ism"`: its goal, playbook and actions.
    pub ism: Option<Ism>,
    pub file: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub to: String,
    pub when: Expr,
    /// The condition as written, for graphs and logs.
    pub when_text: String,
    pub execute_now: bool,
    pub params: serde_json::Map<String, serde_json::Value>,
    /// The line of `to` in the file.
    pub line: usize,
}

/// Reads and checks one file on its own (targets are checked across files by [`check_set`]).
pub fn load_file(path: &Path) -> Result<ProcessDef, Vec<Problem>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| vec![Problem::unreadable(path, "file", &e, "")])?;
    parse(&text, path)
}

/// Checks one process file's text; `path` names it (and its stem must be the process name).
pub fn parse(text: &str, path: &Path) -> Result<ProcessDef, Vec<Problem>> {
    let file = path.display().to_string();
    let f = TomlFile::new(&file, text);
    let raw: RawProcess = f.read()?;
    let mut problems = Vec::new();

    let name = raw.name.get_ref().trim().to_string();
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    {
        problems.push(f.problem(
            f.at(raw.name.span()),
            "name",
            format!("`{name}` is not a process name: use a–z, 0–9, `_` and `-`"),
        ));
    } else if name != stem {
        problems.push(f.problem(
            f.at(raw.name.span()),
            "name",
            format!("`{name}` must match the file name `{stem}.toml`"),
        ));
    }

    let is_ism = match &raw.kind {
        None => false,
        Some(k) => match k.get_ref().trim() {
            "fixed" => false,
            "ism" => true,
            other => {
                problems.push(f.problem(
                    f.at(k.span()),
                    "kind",
                    format!("unknown kind `{other}`: a process is `fixed` (the default) or `ism`"),
                ));
                false
            }
        },
    };
    let (mut steps, steps_line) = fixed::steps(&raw, is_ism, &f, &mut problems);
    let ism = if is_ism {
        ism::ism_part(&raw, &f, &mut problems)
    } else {
        fixed::fixed_only(&raw, &f, &mut problems);
        None
    };
    let overrides = fixed::overrides(&raw, &steps, &f, &mut problems);
    let (transitions, queries) = fixed::transitions(&raw, &f, &mut problems);
    fixed::ask_before_answering(&mut steps, &transitions);
    fixed::steps_serve_the_rules(&name, &steps, &queries, steps_line, &f, &mut problems);
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(ProcessDef {
        name,
        description: raw.description.trim().to_string(),
        steps,
        instructions: raw.instructions.filter(|s| !s.trim().is_empty()),
        overrides,
        transitions,
        queries,
        ism,
        file: path.to_path_buf(),
    })
}

impl ProcessDef {
    /// An ISM's actions (none for a fixed process).
    pub fn actions(&self) -> impl Iterator<Item = &Action> {
        self.ism.iter().flat_map(|i| i.actions.iter())
    }
}

/// The processes of `dir` whose file did not load (by its name: the file's stem).
pub fn broken(dir: &Path, defs: &BTreeMap<String, ProcessDef>) -> BTreeSet<String> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return BTreeSet::new();
    };
    entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .filter_map(|p| p.file_stem().and_then(|s| s.to_str()).map(str::to_string))
        .filter(|name| !defs.contains_key(name))
        .collect()
}

/// Reads every `*.toml` in `dir`: the good definitions and every problem.
pub fn load_dir(dir: &Path) -> (BTreeMap<String, ProcessDef>, Vec<Problem>) {
    let mut defs = BTreeMap::new();
    let mut problems = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            problems.push(Problem::unreadable(
                dir,
                "processes folder",
                &e,
                "; set [paths] processes_dir",
            ));
            return (defs, problems);
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    for path in paths {
        match load_file(&path) {
            Ok(def) => {
                defs.insert(def.name.clone(), def);
            }
            Err(p) => problems.extend(p),
        }
    }
    (defs, problems)
}
