//! The checks across a folder of process files: `main` exists, every target exists, and
//! execute_now rules do not loop. Pure: the definitions in, problems out.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::{ProcessDef, MAIN};
use crate::ism::Effect;
use crate::toml_file::Problem;

/// Problems across files: `main` must exist, targets must exist, execute_now must not loop.
pub fn check_set(defs: &BTreeMap<String, ProcessDef>, dir: &Path) -> Vec<Problem> {
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
                if !defs.contains_key(to) {
                    problems.push(Problem {
                        file: def.file.display().to_string(),
                        key: format!("actions[{i}].to"),
                        line: Some(a.line),
                        message: format!(
                            "action `{}` hands over to a missing process `{to}` (known: {})",
                            a.name,
                            defs.keys().cloned().collect::<Vec<_>>().join(", ")
                        ),
                    });
                }
            }
        }
        for (i, t) in def.transitions.iter().enumerate() {
            if !t.to.is_empty() && !defs.contains_key(&t.to) {
                problems.push(Problem {
                    file: def.file.display().to_string(),
                    key: format!("transitions[{i}].to"),
                    line: Some(t.line),
                    message: format!(
                        "names a missing process `{}` (known: {})",
                        t.to,
                        defs.keys().cloned().collect::<Vec<_>>().join(", ")
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
