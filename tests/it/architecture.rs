//! The house rules, checked rather than remembered: every part of `src` (a top-level module, a
//! folder or a file) is declared here with the parts it may name, and names no other; a part
//! not declared is refused until it is. The pure parts do no I/O; only memory names the
//! database crates; no source file is over 600 lines before its tests; docs/architecture.md
//! names every folder of `src`; the integration tests are one binary.
//!
//! Reads every `crate::…` path in `src/` (grouped imports included), every `super::…` path
//! that climbs out of its part, and every use of an I/O crate, and fails naming the file and
//! line of each edge the table does not allow.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Every part of `src`, the parts it may name (besides itself), and what it is. A message
/// crosses the parts in one direction (cli → daemon → slack → router → engine → {process,
/// prompt, llm, parse, memory}); the shared leaves name little or nothing; only `main` names
/// `cli`, and through `anima::`, not `crate::`. Derived from the tree's imports: a new edge is
/// a decision, taken here.
const PARTS: &[(&str, &[&str], &str)] = &[
    (
        "main",
        &[],
        "the binary: parses the command line, calls cli::run",
    ),
    ("lib", &[], "the modules, in the order a message flows"),
    (
        "cli",
        &[
            "admin",
            "assistant",
            "config",
            "daemon",
            "daimon",
            "dossier",
            "engine",
            "eval",
            "inspect",
            "ism",
            "llm",
            "memory",
            "process",
            "psyche",
            "service",
            "slack",
            "soul",
            "states",
            "telemetry",
            "tls",
            "toml_file",
            "tools",
            "window",
        ],
        "the commands: the door, wiring everything",
    ),
    (
        "eval",
        &[
            "config",
            "engine",
            "ism",
            "llm",
            "memory",
            "steps",
            "toml_file",
        ],
        "soul evaluations: eval files read, one run in a throwaway home, results reported",
    ),
    (
        "daemon",
        &[
            "admin",
            "assistant",
            "config",
            "daimon",
            "engine",
            "failpoint",
            "inspect",
            "memory",
            "metrics",
            "process",
            "router",
            "slack",
            "states",
            "window",
        ],
        "`anima run`: wiring, signals, the states' protocols carried out",
    ),
    (
        "inspect",
        &[
            "config", "engine", "ism", "memory", "process", "psyche", "states", "window",
        ],
        "the inspector: the soul's window in a browser (pages, JSON API, stream, chat pane)",
    ),
    (
        "slack",
        &[
            "admin",
            "arbitrary",
            "assistant",
            "config",
            "files",
            "memory",
            "metrics",
            "router",
            "window",
        ],
        "the doors in and the reply surface; knows nothing of models",
    ),
    (
        "router",
        &["engine", "failpoint", "files", "memory", "metrics", "psyche"],
        "the inbox and one worker per conversation; knows nothing of Slack",
    ),
    (
        "engine",
        &[
            "admin", "config", "daimon", "dossier", "files", "ism", "llm", "memory", "metrics",
            "parse", "process", "prompt", "psyche", "soul", "states", "steps", "tools", "window",
        ],
        "one perception through the stages; knows nothing of where it came from",
    ),
    (
        "process",
        &["ism", "psyche", "soul", "states", "steps", "toml_file"],
        "the process machine, pure",
    ),
    (
        "ism",
        &[],
        "the ISM loop's pure core: it decides, the engine calls",
    ),
    (
        "states",
        &["arbitrary", "parse", "prompt", "toml_file"],
        "the cognitive-state machine, pure: it decides, daemon and engine carry it out",
    ),
    (
        "psyche",
        &["arbitrary", "toml_file"],
        "the inner life, pure: numbers in, numbers and words out",
    ),
    (
        "prompt",
        &["arbitrary", "parse", "process", "psyche", "steps"],
        "the prompt and the answer's shape, pure, with its own input types",
    ),
    (
        "llm",
        &["config", "tls"],
        "the providers; knows nothing of Slack or prompts",
    ),
    (
        "parse",
        &["arbitrary", "steps"],
        "model text in, Cognition out, pure",
    ),
    (
        "memory",
        &["config", "process", "psyche", "steps", "tls"],
        "the store's faces and backends; no prompt text, no Slack words",
    ),
    (
        "daimon",
        &["config", "llm", "prompt"],
        "other souls asked for a whisper (HTTP or a persona), and anima's own counsel's call",
    ),
    (
        "tools",
        &["config"],
        "MCP tool servers; the engine decides what a result means",
    ),
    ("steps", &[], "the cognitive step catalogue, shared"),
    (
        "files",
        &[],
        "shared files, pure: what a surface says of one, the fetch it implements, what the soul is told",
    ),
    (
        "dossier",
        &["arbitrary"],
        "dossiers, pure: their file form, slugs, detection before a call, recall in a budget",
    ),
    (
        "window",
        &[],
        "the soul's window: a turn's trace and the live soul stream, types and the hub",
    ),
    (
        "config",
        &["toml_file"],
        "the configuration, read by the parts, naming none",
    ),
    (
        "toml_file",
        &[],
        "the TOML checker: knows no file's meaning",
    ),
    (
        "soul",
        &["psyche", "states", "toml_file"],
        "the soul's files, read here and used elsewhere",
    ),
    (
        "assistant",
        &["soul", "toml_file"],
        "the assistant's words, the soul's; Slack shows them",
    ),
    (
        "admin",
        &["memory", "states"],
        "an operator's command on the store; the doors call it",
    ),
    (
        "service",
        &["config"],
        "service units and their secrets file",
    ),
    (
        "metrics",
        &["memory"],
        "every part counts into it, so it names none of them",
    ),
    ("telemetry", &[], "logging"),
    ("tls", &[], "the TLS provider"),
    ("failpoint", &[], "test-only named panics"),
    ("arbitrary", &[], "test-only proptest strategies"),
];

/// The parts `part` may name, or `None` when it is not declared.
fn allowed(part: &str) -> Option<&'static [&'static str]> {
    PARTS
        .iter()
        .find(|(p, _, _)| *p == part)
        .map(|(_, a, _)| *a)
}

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
const PURE: &[&str] = &[
    "parse", "prompt", "ism", "states", "psyche", "files", "dossier",
];

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

/// How many modules deep a file's code is: `src/lib.rs` 0, `src/tls.rs` and
/// `src/router/mod.rs` 1, `src/router/worker.rs` 2.
fn depth_of(src: &Path, file: &Path) -> usize {
    let rel = file.strip_prefix(src).unwrap();
    let n = rel.components().count();
    match rel.file_name().and_then(|n| n.to_str()) {
        Some("mod.rs") => n - 1,
        Some("lib.rs" | "main.rs") if n == 1 => 0,
        _ => n,
    }
}

/// The code of a file without comments, and without test modules when `tests` is false:
/// each line with its number and how many inline modules (`mod tests {`) it is in.
fn code_lines(text: &str, tests: bool) -> Vec<(usize, usize, String)> {
    let mut out = Vec::new();
    // The indentation of each inline module open here: it ends at a `}` so indented.
    let mut open: Vec<usize> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        let indent = line.len() - t.len();
        if !tests && t.starts_with("#[cfg(test)]") {
            break;
        }
        if t.starts_with("//") {
            continue;
        }
        if t == "}" && open.last() == Some(&indent) {
            open.pop();
        }
        let code = line.split(" //").next().unwrap_or(line);
        out.push((i + 1, open.len(), code.to_string()));
        let declared = t
            .strip_prefix("pub ")
            .or_else(|| t.strip_prefix("pub(crate) "))
            .unwrap_or(t);
        if declared.starts_with("mod ") && t.ends_with('{') {
            open.push(indent);
        }
    }
    out
}

/// The names a path goes on to after its prefix: `a::b` → `[a]`, `{a, b::c}` → `[a, b]`.
fn names_after(rest: &str) -> Vec<String> {
    let Some(group) = rest.strip_prefix('{') else {
        return vec![rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()];
    };
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
            c if depth == 0 && at_name && (c.is_alphanumeric() || c == '_') => current.push(c),
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
}

/// Every part named on these lines: by a `crate::` path (`crate::a::b`, `crate::{a, b::c}`),
/// or by a `super::` path that climbs to the crate's root from a file `depth` modules deep.
fn crate_edges(lines: &[(usize, usize, String)], depth: usize) -> Vec<Edge> {
    let mut edges = Vec::new();
    let joined: Vec<(usize, usize, char)> = lines
        .iter()
        .flat_map(|(n, inline, l)| {
            l.chars()
                .chain(std::iter::once('\n'))
                .map(move |c| (*n, *inline, c))
        })
        .collect();
    let text: String = joined.iter().map(|(_, _, c)| *c).collect();
    let starts_word = |at: usize| {
        !text[..at]
            .chars()
            .last()
            .is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
    };
    let mut from = 0;
    while let Some(at) = text[from..].find("crate::").map(|i| from + i) {
        let start = at + "crate::".len();
        let line = joined[text[..start].chars().count() - 1].0;
        for to in names_after(&text[start..]) {
            edges.push(Edge { line, to });
        }
        from = start;
    }
    let mut from = 0;
    while let Some(at) = text[from..].find("super::").map(|i| from + i) {
        let mut start = at;
        let mut climbs = 0;
        while text[start..].starts_with("super::") {
            start += "super::".len();
            climbs += 1;
        }
        from = start;
        let (line, inline, _) = joined[text[..start].chars().count() - 1];
        if starts_word(at) && climbs == depth + inline {
            for to in names_after(&text[start..]) {
                edges.push(Edge { line, to });
            }
        }
    }
    edges.retain(|e| !e.to.is_empty() && e.to != "*");
    edges
}

fn violations(src: &Path) -> Vec<String> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    files.sort();
    let mut found = Vec::new();
    let mut undeclared = BTreeSet::new();
    for file in &files {
        let part = part_of(src, file);
        let text = std::fs::read_to_string(file).unwrap();
        let shown = file.strip_prefix(src).unwrap_or(file).display().to_string();
        let Some(allowed) = allowed(&part) else {
            if undeclared.insert(part.clone()) {
                found.push(format!(
                    "{shown}: {part} is not declared (a new part of src: add it to PARTS in \
                     tests/it/architecture.rs with the parts it may name)"
                ));
            }
            continue;
        };
        for edge in crate_edges(&code_lines(&text, true), depth_of(src, file)) {
            if edge.to != part && !allowed.contains(&edge.to.as_str()) {
                found.push(format!(
                    "{shown}:{}: {part} names {} (not among the parts it may name: PARTS in \
                     tests/it/architecture.rs)",
                    edge.line, edge.to
                ));
            }
        }
        if part != "memory" {
            for (line, _, code) in code_lines(&text, true) {
                for name in BACKEND.iter().filter(|n| names(&code, n)) {
                    found.push(format!(
                        "{shown}:{line}: {part} names {name} (only memory knows the backends: use the store's faces)"
                    ));
                }
            }
        }
        let is_test_file = file.file_name().is_some_and(|n| n == "tests.rs");
        if PURE.contains(&part.as_str()) && !is_test_file {
            for (line, _, code) in code_lines(&text, false) {
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

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn every_part_names_only_what_it_may() {
    let found = violations(&src());
    assert!(found.is_empty(), "edges not allowed:\n{}", found.join("\n"));
}

#[test]
fn every_declared_part_is_in_src() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let parts: BTreeSet<String> = files.iter().map(|f| part_of(&src(), f)).collect();
    let gone: Vec<&str> = PARTS
        .iter()
        .map(|(p, _, _)| *p)
        .filter(|p| !parts.contains(*p))
        .collect();
    assert!(gone.is_empty(), "declared in PARTS, not in src: {gone:?}");
    for (part, may, _) in PARTS {
        for to in *may {
            assert!(
                allowed(to).is_some(),
                "{part} may name {to}, which is not a declared part"
            );
        }
    }
}

#[test]
fn the_check_sees_a_forbidden_edge_in_every_form() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    for folder in ["router", "parse", "engine", "newpart"] {
        std::fs::create_dir_all(src.join(folder)).unwrap();
    }
    let files = [
        (
            "router/mod.rs",
            "//! use crate::slack in a comment is fine\nuse crate::{memory::Store, slack::api::{A, B}};\n",
        ),
        ("router/x.rs", "fn f() { crate::slack::post(); }\n"),
        // Climbing within the part is not an edge, in a file or in its inline test module.
        (
            "router/y.rs",
            "use super::worker::W;\nfn f() {}\n\n#[cfg(test)]\nmod tests {\n    use super::super::surface::S;\n    use super::super::super::llm::P;\n}\n",
        ),
        (
            "parse/mod.rs",
            "use std::fs;\nuse crate::steps::Step;\nuse super::llm::Provider;\n",
        ),
        ("daemon.rs", "use crate::cli::Failure;\n"),
        (
            "engine/x.rs",
            "fn f(s: &memory::SqliteStore) {}\nfn g(c: &rusqlite::Connection) {}\nfn h(s: &memory::Store) {}\nuse super::super::{router, memory::Store};\n",
        ),
        ("main.rs", "fn main() { anima::cli::run(); }\n"),
        ("newpart/mod.rs", "use crate::memory::Store;\n"),
        ("newpart/more.rs", "use crate::memory::Store;\n"),
    ];
    for (path, text) in files {
        std::fs::write(src.join(path), text).unwrap();
    }
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
            "router/y.rs:7: router names llm".to_string(),
            "parse/mod.rs:1: parse uses std::fs".to_string(),
            "parse/mod.rs:3: parse names llm".to_string(),
            "daemon.rs:1: daemon names cli".to_string(),
            "engine/x.rs:1: engine names SqliteStore".to_string(),
            "engine/x.rs:2: engine names rusqlite".to_string(),
            "engine/x.rs:4: engine names router".to_string(),
            "newpart/mod.rs: newpart is not declared".to_string(),
        ]),
        "{found:#?}"
    );
}

/// The entries of docs/architecture.md's layout of `src/`: each top-level name (`cli/`,
/// `tls.rs`) with the text that describes it.
fn layout(doc: &str) -> Vec<(String, String)> {
    let block = doc
        .split("## Layout")
        .nth(1)
        .and_then(|s| s.split("```").nth(1))
        .expect("docs/architecture.md has a Layout section with a code block");
    let mut entries: Vec<(String, String)> = Vec::new();
    for line in block.lines().skip_while(|l| l.trim() != "src/").skip(1) {
        let indent = line.len() - line.trim_start().len();
        if indent == 0 && !line.trim().is_empty() {
            break;
        }
        match (indent, entries.last_mut()) {
            (2, _) => {
                let (name, text) = line.trim().split_once(' ').unwrap_or((line.trim(), ""));
                entries.push((name.to_string(), text.to_string()));
            }
            (_, Some((_, text))) => {
                text.push(' ');
                text.push_str(line.trim());
            }
            (_, None) => {}
        }
    }
    entries
}

/// What docs/architecture.md's layout leaves out of `src`, or names that `src` does not have:
/// every top-level file and folder is an entry, and every folder below is named (`shape/`) in
/// its top-level folder's entry.
fn undocumented(src: &Path, doc: &str) -> Vec<String> {
    let entries = layout(doc);
    let entry = |name: &str| entries.iter().find(|(n, _)| n == name).map(|(_, t)| t);
    let mut found = Vec::new();
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut named = BTreeSet::new();
    for file in &files {
        let rel = file.strip_prefix(src).unwrap();
        let parts: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts.len() == 1 {
            named.insert(parts[0].clone());
            continue;
        }
        let top = format!("{}/", parts[0]);
        named.insert(top.clone());
        for folder in &parts[1..parts.len() - 1] {
            let said =
                entry(&top).is_some_and(|t| names(t, folder) && t.contains(&format!("{folder}/")));
            if !said
                && !found
                    .iter()
                    .any(|f: &String| f.ends_with(&format!("{top}{folder}/")))
            {
                found.push(format!(
                    "the entry of {top} does not name src/{top}…{folder}/"
                ));
            }
        }
    }
    for name in &named {
        if entry(name).is_none() {
            found.push(format!("no entry for src/{name}"));
        }
    }
    for (name, _) in &entries {
        if !named.contains(name) {
            found.push(format!("an entry for src/{name}, which src does not have"));
        }
    }
    found.sort();
    found.dedup();
    found
}

#[test]
fn the_architecture_doc_names_every_folder_and_file_of_src() {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md"))
            .unwrap();
    let found = undocumented(&src(), &doc);
    assert!(
        found.is_empty(),
        "docs/architecture.md's layout and src differ:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_doc_check_sees_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    for folder in ["router", "prompt/shape", "prompt/shape/deeper", "llm"] {
        std::fs::create_dir_all(src.join(folder)).unwrap();
    }
    for file in [
        "lib.rs",
        "tls.rs",
        "router/mod.rs",
        "prompt/mod.rs",
        "prompt/shape/mod.rs",
        "prompt/shape/deeper/x.rs",
        "llm/mod.rs",
    ] {
        std::fs::write(src.join(file), "").unwrap();
    }
    let doc = "# A\n\n## Layout\n\n```\nsrc/\n  lib.rs    the modules\n  router/   the router;\n            worker.rs\n  prompt/   plan.rs, deeper/ (not shape's)\n  gone/     a part that left\nsoul/       the soul\n```\n";
    assert_eq!(
        undocumented(&src, doc),
        vec![
            "an entry for src/gone/, which src does not have".to_string(),
            "no entry for src/llm/".to_string(),
            "no entry for src/tls.rs".to_string(),
            "the entry of prompt/ does not name src/prompt/…shape/".to_string(),
        ]
    );
}

/// The integration tests are one binary (`tests/it/main.rs`): a file `tests/x.rs` or a
/// `tests/x/main.rs` would be a binary of its own, linking the whole crate again.
#[test]
fn the_integration_tests_are_one_binary() {
    let tests = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut binaries = Vec::new();
    for entry in std::fs::read_dir(&tests).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if path.extension().is_some_and(|e| e == "rs") {
            binaries.push(name);
        } else if path.join("main.rs").exists() {
            binaries.push(format!("{name}/main.rs"));
        }
    }
    assert_eq!(
        binaries,
        vec!["it/main.rs".to_string()],
        "a suite is a module of tests/it/main.rs"
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
