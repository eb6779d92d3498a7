//! The corpus of malformed model outputs in tests/corpus/: each file is `reply: <expected>`,
//! a `---` line, then the raw output. Every one must parse to its expected reply and never
//! show a cognitive tag, a prompt section tag or the internal monologue.

use std::path::Path;

use anima::parse::parse_response;
use anima::steps::PROMPT_SECTIONS;

#[test]
fn every_corpus_output_parses_to_its_expected_reply() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 17, "the corpus covers every malformation");
    let mut failures = Vec::new();
    for path in files {
        let text = std::fs::read_to_string(&path).unwrap();
        let (head, raw) = text.split_once("\n---\n").expect("reply line, ---, output");
        let expected = head.strip_prefix("reply: ").expect("reply: line");
        let c = parse_response(raw, 3000);
        let lower = c.reply.to_lowercase();
        let leaked = [
            "<internal_monologue",
            "<external_dialog",
            "<user_model",
            "<soul_state",
            "</",
        ]
        .iter()
        .any(|t| lower.contains(t))
            || PROMPT_SECTIONS
                .iter()
                .any(|s| lower.contains(&format!("<{s}>")) || lower.contains(&format!("<{s} ")));
        let monologue_shown = c
            .monologue
            .as_ref()
            .is_some_and(|m| !m.text.is_empty() && c.reply.contains(&m.text));
        if c.reply != expected || leaked || monologue_shown {
            failures.push(format!(
                "{}: got {:?}, want {:?}",
                path.display(),
                c.reply,
                expected
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
