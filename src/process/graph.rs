//! The process graph, drawn from the files: Mermaid or Graphviz dot.

use std::collections::BTreeMap;
use std::fmt::Write;

use super::ProcessDef;

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
    }
    out.push_str("}\n");
    out
}
