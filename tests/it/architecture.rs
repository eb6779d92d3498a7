//! The house rules, checked rather than remembered: which part may name which. A message
//! crosses the parts in one direction (cli → daemon → slack → router → engine → {process,
//! prompt, llm, parse, memory}); the pure parts do no I/O; nothing but `main` names `cli`.
//!
//! Reads every `crate::…` path in `src/` (grouped imports included) and every use of an I/O
//! crate, and fails naming the file and line of each forbidden edge.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Every part a shared leaf (config, the TOML checker) must not name.
const PARTS: &[&str] = &[
    "slack",
    "router",
    "engine",
    "daemon",
    "llm",
    "prompt",
    "parse",
    "memory",
    "process",
    "ism",
    "states",
    "psyche",
    "soul",
    "assistant",
    "admin",
    "metrics",
];

/// (part, parts it must not name, why).
const FORBIDDEN: &[(&str, &[&str], &str)] = &[
    (
        "parse",
        &[
            "slack", "llm", "memory", "engine", "router", "daemon", "prompt", "process", "tools",
        ],
        "parse is pure: model text in, Cognition out",
    ),
    (
        "prompt",
        &[
            "slack", "llm", "memory", "engine", "router", "daemon", "soul", "states", "config",
            "tools",
        ],
        "prompt is pure and takes its own input types",
    ),
    (
        "process",
        &[
            "engine", "memory", "slack", "router", "daemon", "llm", "tools",
        ],
        "the process machine is pure",
    ),
    (
        "llm",
        &[
            "slack", "prompt", "engine", "router", "daemon", "memory", "parse",
        ],
        "llm knows nothing of Slack or prompts",
    ),
    (
        "memory",
        &["prompt", "slack", "engine", "router", "daemon", "llm"],
        "memory holds no prompt text and no Slack words",
    ),
    (
        "router",
        &["slack", "daemon", "llm", "prompt", "parse"],
        "the router knows nothing of Slack",
    ),
    (
        "slack",
        &["engine", "llm", "prompt", "parse", "process", "daemon"],
        "slack knows nothing of models",
    ),
    (
        "engine",
        &["slack", "router", "daemon"],
        "the engine knows nothing of where a perception came from",
    ),
    (
        "ism",
        &[
            "slack", "llm", "memory", "engine", "router", "daemon", "prompt", "parse", "process",
            "tools",
        ],
        "the ISM loop's core is pure: it decides, the engine calls the model and the tools",
    ),
    (
        "states",
        &[
            "slack", "llm", "memory", "engine", "router", "daemon", "process", "ism", "admin",
        ],
        "the cognitive-state machine is pure: it decides, the daemon and engine carry it out",
    ),
    (
        "psyche",
        &[
            "slack", "llm", "memory", "engine", "router", "daemon", "prompt", "parse", "process",
            "ism", "states", "admin", "config",
        ],
        "the psychology substrate is pure: numbers in, numbers and words out",
    ),
    (
        "steps",
        &[
            "slack", "llm", "memory", "engine", "router", "daemon", "prompt", "parse",
        ],
        "the step catalogue is shared and depends on nothing",
    ),
    (
        "config",
        PARTS,
        "the configuration is read by the parts and names none of them",
    ),
    (
        "toml_file",
        PARTS,
        "the TOML checker knows no file's meaning",
    ),
    (
        "toml_file",
        &["config"],
        "the TOML checker knows no file's meaning: config uses it, not the other way",
    ),
    (
        "soul",
        &[
            "slack", "router", "engine", "daemon", "llm", "prompt", "parse", "memory", "process",
            "ism", "admin", "metrics",
        ],
        "the soul's files are read here and used elsewhere",
    ),
    (
        "assistant",
        &[
            "slack", "router", "engine", "daemon", "llm", "prompt", "parse", "memory", "process",
            "ism", "states", "psyche", "admin", "metrics",
        ],
        "the assistant's words are the soul's; Slack shows them",
    ),
    (
        "admin",
        &[
            "slack", "router", "engine", "daemon", "llm", "prompt", "parse", "process", "ism",
        ],
        "admin carries out an operator's command on the store; the doors call it",
    ),
    (
        "metrics",
        &[
            "slack",
            "router",
            "engine",
            "daemon",
            "llm",
            "prompt",
            "parse",
            "process",
            "ism",
            "states",
            "psyche",
            "admin",
            "soul",
            "assistant",
            "tools",
        ],
        "every part counts into metrics, so metrics names none of them",
    ),
    (
        "tools",
        &[
            "slack",
            "router",
            "engine",
            "daemon",
            "llm",
            "prompt",
            "parse",
            "memory",
            "process",
            "ism",
            "states",
            "psyche",
            "soul",
            "assistant",
            "admin",
            "metrics",
        ],
        "tools knows nothing of Slack, prompts, the store or the engine: the engine calls it",
    ),
];

/// Crates and std modules that do I/O, which the pure parts must not use.
const IO: &[&str] = &[
    "std::fs",
    "std::net",
    "std::process",
    "std::io",
    "tokio",
    "reqwest",
    "rusqlite",
    "git2",
    "hyper",
    "axum",
    "slack_morphism",
];
const PURE: &[&str] = &["parse", "prompt", "ism", "states", "psyche"];

/// What only memory may name: the database crates and the blocking SQLite store. Everything
/// else reaches the store through its faces (`memory::Store`), whatever the backend.
const BACKEND: &[&str] = &[
    "rusqlite",
    "tokio_postgres",
    "deadpool_postgres",
    "postgres_types",
    "tokio_postgres_rustls",
    "SqliteStore",
];

/// Whether `name` occurs in `code` as a whole word.
fn names(code: &str, name: &str) -> bool {
    code.match_indices(name).any(|(i, _)| {
        let before = code[..i].chars().last();
        let after = code[i + name.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

struct Edge {
    line: usize,
    to: String,
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level part a file belongs to: `src/router/mod.rs` → `router`, `src/tls.rs` → `tls`.
fn part_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap();
    let first = rel
        .components()
        .next()
        .unwrap()
        .as_os_str()
        .to_string_lossy();
    first.trim_end_matches(".rs").to_string()
}

/// The code of a file without comments, and without test modules when `tests` is false.
fn code_lines(text: &str, tests: bool) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        if !tests && t.starts_with("#[cfg(test)]") {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        let code = line.split(" //").next().unwrap_or(line);
        out.push((i + 1, code.to_string()));
    }
    out
}

/// Every part named by a `crate::` path on these lines (`crate::a::b`, `crate::{a, b::c}`).
fn crate_edges(lines: &[(usize, String)]) -> Vec<Edge> {
    let mut edges = Vec::new();
    let joined: Vec<(usize, char)> = lines
        .iter()
        .flat_map(|(n, l)| l.chars().chain(std::iter::once('\n')).map(move |c| (*n, c)))
        .collect();
    let text: String = joined.iter().map(|(_, c)| *c).collect();
    let mut from = 0;
    while let Some(at) = text[from..].find("crate::") {
        let start = from + at + "crate::".len();
        let line = joined[text[..start].chars().count() - 1].0;
        let rest = &text[start..];
        let names: Vec<String> = if let Some(group) = rest.strip_prefix('{') {
            // Top-level names of the group, nested braces skipped.
            let mut depth = 0;
            let mut names = Vec::new();
            let mut current = String::new();
            let mut at_name = true;
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => at_name = true,
                    c if depth == 0 && at_name && (c.is_alphanumeric() || c == '_') => {
                        current.push(c)
                    }
                    _ if depth == 0 && at_name && !current.is_empty() => {
                        names.push(std::mem::take(&mut current));
                        at_name = false;
                    }
                    _ => {}
                }
            }
            if !current.is_empty() {
                names.push(current);
            }
            names
        } else {
            vec![rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect()]
        };
        for to in names.into_iter().filter(|n| !n.is_empty()) {
            edges.push(Edge { line, to });
        }
        from = start;
    }
    edges
}

fn violations(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut found = Vec::new();
    for file in &files {
        let part = part_of(src, file);
        let text = std::fs::read_to_string(file).unwrap();
        let shown = file.strip_prefix(src).unwrap_or(file).display().to_string();
        for edge in crate_edges(&code_lines(&text, true)) {
            if edge.to == "cli" && part != "main" && part != "cli" {
                found.push(format!(
                    "{shown}:{}: names cli (only main may: the command line is the door, not a library)",
                    edge.line
                ));
            }
            for (p, forbidden, why) in FORBIDDEN {
                if *p == part && forbidden.contains(&edge.to.as_str()) {
                    found.push(format!(
                        "{shown}:{}: {part} names {} ({why})",
                        edge.line, edge.to
                    ));
                }
            }
        }
        if part != "memory" {
            for (line, code) in code_lines(&text, true) {
                for name in BACKEND.iter().filter(|n| names(&code, n)) {
                    found.push(format!(
                        "{shown}:{line}: {part} names {name} (only memory knows the backends: use the store's faces)"
                    ));
                }
            }
        }
        let is_test_file = file.file_name().is_some_and(|n| n == "tests.rs");
        if PURE.contains(&part.as_str()) && !is_test_file {
            for (line, code) in code_lines(&text, false) {
                for io in IO {
                    if names(&code, io) {
                        found.push(format!(
                            "{shown}:{line}: {part} uses {io} ({part} does no I/O)"
                        ));
                    }
                }
            }
        }
    }
    found
}

#[test]
fn every_part_names_only_what_it_may() {
    let src = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"));
    let found = violations(src);
    assert!(found.is_empty(), "forbidden edges:\n{}", found.join("\n"));
}

#[test]
fn the_check_sees_a_forbidden_edge_in_every_form() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("router")).unwrap();
    std::fs::create_dir_all(src.join("parse")).unwrap();
    std::fs::write(
        src.join("router/mod.rs"),
        "//! use crate::slack in a comment is fine\nuse crate::{memory::Store, slack::api::{A, B}};\n",
    )
    .unwrap();
    std::fs::write(
        src.join("router/x.rs"),
        "fn f() { crate::slack::post(); }\n",
    )
    .unwrap();
    std::fs::write(
        src.join("parse/mod.rs"),
        "use std::fs;\nuse crate::steps::Step;\n",
    )
    .unwrap();
    std::fs::write(src.join("daemon.rs"), "use crate::cli::Failure;\n").unwrap();
    std::fs::create_dir_all(src.join("engine")).unwrap();
    std::fs::write(
        src.join("engine/x.rs"),
        "fn f(s: &memory::SqliteStore) {}\nfn g(c: &rusqlite::Connection) {}\nfn h(s: &memory::Store) {}\n",
    )
    .unwrap();
    std::fs::write(
        src.join("main.rs"),
        "fn main() { anima::cli::run(); crate::cli::x(); }\n",
    )
    .unwrap();
    let found = violations(&src);
    let lines: BTreeSet<String> = found
        .iter()
        .map(|f| f.split(" (").next().unwrap().to_string())
        .collect();
    assert_eq!(
        lines,
        BTreeSet::from([
            "router/mod.rs:2: router names slack".to_string(),
            "router/x.rs:1: router names slack".to_string(),
            "parse/mod.rs:1: parse uses std::fs".to_string(),
            "daemon.rs:1: names cli".to_string(),
            "engine/x.rs:1: engine names SqliteStore".to_string(),
            "engine/x.rs:2: engine names rusqlite".to_string(),
        ]),
        "{found:#?}"
    );
}

/// The most lines a source file may have before its tests: one concept to a file.
const MAX_LINES: usize = 600;

#[test]
fn no_source_file_is_over_600_lines_before_its_tests() {
    let src = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"));
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let long: Vec<String> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "tests.rs"))
        .filter_map(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            // The tests begin at an inline `#[cfg(test)]` module; a test-only item or a tests
            // file declared above the code does not end the count.
            let lines = (0..lines.len())
                .find(|&i| {
                    lines[i].trim_start().starts_with("#[cfg(test)]")
                        && lines[i + 1..]
                            .iter()
                            .find(|l| !l.trim_start().starts_with("#["))
                            .is_some_and(|l| {
                                let l = l.trim_start();
                                l.starts_with("mod ") && l.ends_with('{')
                            })
                })
                .unwrap_or(lines.len());
            (lines > MAX_LINES).then(|| format!("{}: {lines} lines", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "split by concept (at most {MAX_LINES} lines before the tests):\n{}",
        long.join("\n")
    );
}
