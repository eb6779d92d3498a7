//! The process graph, drawn from the files: Mermaid or Graphviz dot. A rule's transition is
//! a solid edge labelled with its condition; an ISM's transition action, which the soul may
//! choose, a dashed edge labelled with the action's name (bold or thick for execute_now).

use std::collections::BTreeMap;
use std::fmt::Write;

use super::ProcessDef;

/// An ISM's transition actions: (action, target, execute_now).
fn chosen_edges(def: &ProcessDef) -> impl Iterator<Item = (&str, &str, bool)> {
    def.actions().filter_map(|a| match &a.effect {
        crate::ism::Effect::Transition {
            to, execute_now, ..
        } => Some((a.name.as_str(), to.as_str(), *execute_now)),
        _ => None,
    })
}

fn label(def: &super::Transition) -> String {
    let mut l = if def.when_text.trim() == "true" {
        "always".to_string()
    } else {
        def.when_text.trim().to_string()
    };
    if def.execute_now {
        l.push_str(" [execute_now]");
    }
    l
}

pub fn mermaid(defs: &BTreeMap<String, ProcessDef>) -> String {
    let mut out = String::from("flowchart TD\n");
    for (name, def) in defs {
        let desc = if def.description.is_empty() {
            name.clone()
        } else {
            format!("{name}: {}", def.description)
        };
        let _ = writeln!(out, "    {name}[\"{}\"]", desc.replace('"', "#quot;"));
    }
    for (name, def) in defs {
        for t in &def.transitions {
            let arrow = if t.execute_now { "==>" } else { "-->" };
            let _ = writeln!(
                out,
                "    {name} {arrow}|\"{}\"| {}",
                label(t).replace('"', "#quot;"),
                t.to
            );
        }
        for (action, to, now) in chosen_edges(def) {
            let _ = writeln!(
                out,
                "    {name} -. \"action {}{}\" .-> {to}",
                action.replace('"', "#quot;"),
                if now { " [execute_now]" } else { "" }
            );
        }
    }
    out
}

pub fn dot(defs: &BTreeMap<String, ProcessDef>) -> String {
    let esc = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
    let mut out = String::from("digraph processes {\n    rankdir=TB;\n    node [shape=box];\n");
    for (name, def) in defs {
        let _ = writeln!(
            out,
            "    \"{}\" [tooltip=\"{}\"];",
            esc(name),
            esc(&def.description)
        );
    }
    for (name, def) in defs {
        for t in &def.transitions {
            let style = if t.execute_now { ", style=bold" } else { "" };
            let _ = writeln!(
                out,
                "    \"{}\" -> \"{}\" [label=\"{}\"{style}];",
                esc(name),
                esc(&t.to),
                esc(&label(t))
            );
        }
        for (action, to, now) in chosen_edges(def) {
            let now = if now {
                " [execute_now]\", style=\"dashed,bold"
            } else {
                "\", style=\"dashed"
            };
            let _ = writeln!(
                out,
                "    \"{}\" -> \"{}\" [label=\"action {}{now}\"];",
                esc(name),
                esc(to),
                esc(action)
            );
        }
    }
    out.push_str("}\n");
    out
}
