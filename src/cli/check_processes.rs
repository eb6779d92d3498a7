//! `anima check`'s look at the process files and the names the configuration gives them:
//! every file's problems, every target and `[processes] initial` against the processes in force
//! (the folder's, or the shipped ones when it does not exist), with the name likely meant.
//! Reports; decides nothing about how a thread moves (that is `process`).

use std::collections::{BTreeMap, BTreeSet};

use crate::config;
use crate::process::{def, library, PROACTIVE};

/// The process files (or the shipped ones when the folder does not exist) and the names the
/// configuration gives them (`processes`). A file that does not load is its own problems
/// only: the processes naming it are not said to name a missing one. The folder's processes
/// that loaded, for the tool actions' check.
pub(super) fn check_processes(
    config: &config::Config,
    problems: &mut Vec<String>,
    notes: &mut Vec<String>,
    warnings: &mut Vec<String>,
) -> BTreeMap<String, def::ProcessDef> {
    let dir = &config.processes_dir;
    let (defs, broken) = if dir.exists() {
        let (defs, file_problems) = def::load_dir(dir);
        let broken = def::broken(dir, &defs);
        let set_problems = def::check_set_beside(&defs, &broken, dir);
        if file_problems.is_empty() && set_problems.is_empty() {
            notes.push(format!(
                "processes: {} ({})",
                dir.display(),
                defs.keys().cloned().collect::<Vec<_>>().join(", ")
            ));
        }
        problems.extend(
            file_problems
                .iter()
                .chain(&set_problems)
                .map(|p| p.to_string()),
        );
        (defs, broken)
    } else {
        warnings.push(format!(
            "processes: {} does not exist; using the processes built into anima ({}), which cannot be edited until `anima init` writes them out",
            dir.display(),
            library::shipped().keys().cloned().collect::<Vec<_>>().join(", ")
        ));
        (library::shipped(), BTreeSet::new())
    };
    process_names(config, &defs, &broken, problems, warnings);
    if dir.exists() {
        defs
    } else {
        BTreeMap::new()
    }
}

/// `[processes] initial` names a process there is (with what was likely meant), and the
/// follow-ups after a quiet spell have their `proactive` process.
fn process_names(
    config: &config::Config,
    defs: &BTreeMap<String, def::ProcessDef>,
    broken: &BTreeSet<String>,
    problems: &mut Vec<String>,
    warnings: &mut Vec<String>,
) {
    // A default naming no process is as documented: new threads start in `main`.
    let initial = &config.initial_process;
    let written = written_at(config, "processes", "initial");
    if let (Some(at), false) = (
        written,
        defs.contains_key(initial) || broken.contains(initial),
    ) {
        problems.push(format!(
            "{at}: key `processes.initial`: no process `{initial}` in {} ({}); new threads would start in `main`",
            processes_place(config),
            def::known(initial, defs)
        ));
    }
    if config.proactive_idle_minutes > 0
        && !defs.contains_key(PROACTIVE)
        && !broken.contains(PROACTIVE)
    {
        let near = crate::toml_file::nearest(PROACTIVE, defs.keys().map(String::as_str))
            .map_or(String::new(), |n| {
                format!(" (is `{n}` meant to be it? the name must be `{PROACTIVE}`)")
            });
        warnings.push(format!(
            "processes: no `{PROACTIVE}` process in {}{near}; quiet threads get no follow-up (`[processes] proactive_idle_minutes` in {})",
            processes_place(config),
            config.origin()
        ));
    }
}

/// The process folder, or the shipped processes when it does not exist.
fn processes_place(config: &config::Config) -> String {
    if config.processes_dir.exists() {
        config.processes_dir.display().to_string()
    } else {
        "the processes built into anima".into()
    }
}

/// "file:line" of `key` in `[section]` of the config file, if it is written there.
pub(super) fn written_at(config: &config::Config, section: &str, key: &str) -> Option<String> {
    let path = config.source.as_ref()?;
    let text = std::fs::read_to_string(path).ok()?;
    let mut inside = false;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line.trim_start_matches('[').trim_end_matches(']').trim() == section;
        } else if inside && line.split('=').next().is_some_and(|k| k.trim() == key) {
            return Some(format!("{}:{}", path.display(), i + 1));
        }
    }
    None
}
