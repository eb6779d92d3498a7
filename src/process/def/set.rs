//! The checks across a folder of process files: `main` exists, every target exists (or names
//! what was likely meant), and execute_now rules do not loop. Pure: the definitions in,
//! problems out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{ProcessDef, MAIN};
use crate::ism::Effect;
use crate::toml_file::{nearest, Problem};

/// Problems across files: `main` must exist, targets must exist, execute_now must not loop.
pub fn check_set(defs: &BTreeMap<String, ProcessDef>, dir: &Path) -> Vec<Problem> {
    check_set_beside(defs, &BTreeSet::new(), dir)
}

/// [`check_set`] beside the files of `dir` that did not load (`broken`, by name): a target
/// naming one of them is not missing (that file's own problems say what is wrong with it).
pub fn check_set_beside(
    defs: &BTreeMap<String, ProcessDef>,
    broken: &BTreeSet<String>,
    dir: &Path,
) -> Vec<Problem> {
    let exists = |name: &str| defs.contains_key(name) || broken.contains(name);
    let mut problems = Vec::new();
    if !defs.contains_key(MAIN) {
        problems.push(Problem {
            file: dir.join("main.toml").display().to_string(),
            key: String::new(),
            line: None,
            message: "there is no `main` process; every thread falls back to it".into(),
        });
    }
    for def in defs.values() {
        for (i, a) in def.actions().enumerate() {
            if let Effect::Transition { to, .. } = &a.effect {
                if !exists(to) {
                    problems.push(Problem {
                        file: def.file.display().to_string(),
                        key: format!("actions[{i}].to"),
                        line: Some(a.line),
                        message: format!(
                            "action `{}` hands over to a missing process `{to}` ({})",
                            a.name,
                            known(to, defs)
                        ),
                    });
                }
            }
        }
        for (i, t) in def.transitions.iter().enumerate() {
            if !t.to.is_empty() && !exists(&t.to) {
                problems.push(Problem {
                    file: def.file.display().to_string(),
                    key: format!("transitions[{i}].to"),
                    line: Some(t.line),
                    message: format!(
                        "names a missing process `{}` ({})",
                        t.to,
                        known(&t.to, defs)
                    ),
                });
            }
        }
    }
    if let Some(cycle) = execute_now_cycle(defs) {
        let first = &defs[&cycle[0]];
        let t = first
            .transitions
            .iter()
            .find(|t| t.execute_now && t.to == cycle[1]);
        problems.push(Problem {
            file: first.file.display().to_string(),
            key: "transitions".into(),
            line: t.map(|t| t.line),
            message: format!("execute_now rules form a cycle: {}", cycle.join(" → ")),
        });
    }
    problems
}

/// What a name that is no process may have meant: "did you mean `x`? known: …", or the known
/// names alone.
pub fn known(name: &str, defs: &BTreeMap<String, ProcessDef>) -> String {
    let all = defs.keys().cloned().collect::<Vec<_>>().join(", ");
    match nearest(name, defs.keys().map(String::as_str)) {
        Some(near) => format!("did you mean `{near}`? known: {all}"),
        None => format!("known: {all}"),
    }
}

/// A cycle of execute_now transitions, as process names with the first repeated at the end.
fn execute_now_cycle(defs: &BTreeMap<String, ProcessDef>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        defs: &BTreeMap<String, ProcessDef>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(pos) = path.iter().position(|p| p == node) {
            let mut cycle = path[pos..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        if let Some(def) = defs.get(node) {
            for t in def.transitions.iter().filter(|t| t.execute_now) {
                if let Some(c) = visit(&t.to, defs, path, done) {
                    return Some(c);
                }
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for name in defs.keys() {
        if let Some(c) = visit(name, defs, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}
