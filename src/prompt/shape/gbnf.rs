//! A shape as a GBNF grammar (the grammar language of llama.cpp, which llama-cpp-python and
//! vLLM's xgrammar backend read as well).
//!
//! The grammar admits exactly the answer the instructions describe: the sections asked for,
//! in order, one per line; each spoken or thought section with one of its verbs; each mental
//! query with the question attribute the instructions show, answered `true` or `false`; a
//! user-model or soul-state update only after its check said `true` (and then required).
//! Inside a section the text is any Unicode but `<`, bounded in length, and starts with
//! something other than a blank: so a `<` can only begin the section's own closing tag, and a
//! section can neither close early nor be empty.

use std::fmt::Write;

use super::budget::Bounds;
use super::{limits, Shape};
use crate::prompt::fence;
use crate::steps::{
    Step, ACTION, ACTION_SELECTION, DIALOGUE_VERBS, EMOTIONAL_STATES, MODEL_CHANGE_NOTE,
    MONOLOGUE_VERBS, REASONING, SOUL_STATE_KEYS,
};

/// The grammar of `shape`, its texts held to `b`; its first rule is `root`.
pub fn grammar(shape: &Shape, b: &Bounds) -> String {
    let mut g = Grammar::default();
    match shape {
        Shape::Turn {
            steps, questions, ..
        } => turn(&mut g, steps, questions, b),
        Shape::Selection { actions } => selection(&mut g, actions, b),
        Shape::Wakeup => {
            g.text("affirmation-text", b.affirmation);
            g.rule(
                "root",
                "\"<affirmation>\" affirmation-text \"</affirmation>\"".into(),
            );
        }
        Shape::Journal => {
            g.text("journal-text", b.journal);
            g.rule("root", "\"<journal>\" journal-text \"</journal>\"".into());
        }
        Shape::Consent => consent(&mut g, b),
        Shape::Dream { people } => dream(&mut g, people, b),
    }
    g.finish()
}

/// A text's first character: not `<`, and not white space as Unicode (and `str::trim`)
/// counts it.
const FIRST: &str =
    "[^<\\x09-\\x0D\\x20\\x85\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]";

/// The longest repetition a grammar writes. llama.cpp's grammar parser refuses a repetition
/// above 2,000 (`{0,2999}` included: "number of repetitions exceeds sane defaults"), and
/// with it the whole grammar; a longer text is written in pieces.
pub const PIECE: usize = 1_000;

/// Rules in the order written, `root` first when written.
#[derive(Default)]
struct Grammar {
    rules: Vec<(String, String)>,
}

impl Grammar {
    fn rule(&mut self, name: &str, body: String) {
        if !self.rules.iter().any(|(n, _)| n == name) {
            self.rules.push((name.to_string(), body));
        }
    }

    /// A section's text: a first character that is neither `<` nor white space (so the
    /// trimmed text is never empty), then up to `max - 1` more that are not `<`; an opening
    /// line break is allowed.
    fn text(&mut self, name: &str, max: usize) {
        let rest = self.run(name, max.max(1) - 1);
        self.rule(name, format!("\"\\n\"? {FIRST} {rest}"));
    }

    /// Up to `n` characters that are not `<`, as an expression: `[^<]{0,n}`, or past
    /// [`PIECE`] a chain of rules `name-1`, `name-2` … each either a piece and the next, or
    /// less than a piece (`name-1 ::= [^<]{1000} name-2 | [^<]{0,999}`), the last up to what
    /// is left: the same texts, and no repetition above a piece.
    fn run(&mut self, name: &str, n: usize) -> String {
        if n <= PIECE {
            return format!("[^<]{{0,{n}}}");
        }
        let (mut left, mut i) = (n, 1);
        while left > PIECE {
            self.rule(
                &format!("{name}-{i}"),
                format!("[^<]{{{PIECE}}} {name}-{} | [^<]{{0,{}}}", i + 1, PIECE - 1),
            );
            left -= PIECE;
            i += 1;
        }
        self.rule(&format!("{name}-{i}"), format!("[^<]{{0,{left}}}"));
        format!("{name}-1")
    }

    /// One of `words`, as literals.
    fn choice<S: AsRef<str>>(&mut self, name: &str, words: &[S]) {
        let body = words
            .iter()
            .map(|w| literal(w.as_ref()))
            .collect::<Vec<_>>()
            .join(" | ");
        self.rule(name, body);
    }

    fn finish(mut self) -> String {
        if let Some(at) = self.rules.iter().position(|(n, _)| n == "root") {
            let root = self.rules.remove(at);
            self.rules.insert(0, root);
        }
        let mut out =
            String::with_capacity(self.rules.iter().map(|(n, b)| n.len() + b.len() + 6).sum());
        for (name, body) in &self.rules {
            let _ = writeln!(out, "{name} ::= {body}");
        }
        out
    }
}

/// `text` as a GBNF string literal.
pub fn literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn open(name: &str) -> String {
    format!("<{name}>")
}

fn close(name: &str) -> String {
    format!("</{name}>")
}

fn turn(g: &mut Grammar, steps: &[Step], questions: &[String], b: &Bounds) {
    let dialogue_only = [Step::ExternalDialogue];
    let steps = if steps.is_empty() {
        &dialogue_only[..]
    } else {
        steps
    };
    let plan = Plan { steps, questions };
    let root = plan.sequence(0, None, None, true);
    g.rule("root", root);
    for step in steps {
        element(g, *step, questions, b);
    }
}

/// Writes the rules of one step's section.
fn element(g: &mut Grammar, step: Step, questions: &[String], b: &Bounds) {
    let name = step.name();
    match step {
        Step::InternalMonologue | Step::ExternalDialogue => {
            let (rule, verbs, max): (&str, &[&str], usize) = if step == Step::InternalMonologue {
                ("monologue", &MONOLOGUE_VERBS, b.monologue)
            } else {
                ("dialogue", &DIALOGUE_VERBS, b.dialogue)
            };
            g.choice(&format!("{rule}-verb"), verbs);
            g.text(&format!("{rule}-text"), max);
            g.rule(
                rule,
                format!(
                    "{} {rule}-verb \"\\\">\" {rule}-text {}",
                    literal(&format!("<{name} verb=\"")),
                    literal(&close(name))
                ),
            );
        }
        Step::MentalQuery => {
            if questions.is_empty() {
                return;
            }
            g.choice("bool", &["true", "false"]);
            let mut all = Vec::new();
            for (i, q) in questions.iter().enumerate() {
                let rule = format!("query-{}", i + 1);
                g.rule(
                    &rule,
                    format!(
                        "{} bool {}",
                        literal(&format!("<{name} question=\"{}\">", fence::attribute(q))),
                        literal(&close(name))
                    ),
                );
                all.push(rule);
            }
            g.rule("queries", all.join(" \"\\n\" "));
        }
        Step::UserModelCheck | Step::SoulStateCheck => {
            g.choice("bool", &["true", "false"]);
            g.rule(
                check_rule(step),
                format!("{} bool {}", literal(&open(name)), literal(&close(name))),
            );
        }
        Step::UserModelUpdate => {
            g.text("user-model-text", b.user_model);
            g.text("note-text", b.note);
            g.rule(
                "user-model-update",
                format!(
                    "{} user-model-text {} note-text {}",
                    literal(&open(name)),
                    literal(&format!("{}\n{}", close(name), open(MODEL_CHANGE_NOTE))),
                    literal(&close(MODEL_CHANGE_NOTE))
                ),
            );
        }
        Step::SoulStateUpdate => {
            let others: Vec<&str> = SOUL_STATE_KEYS[1..].to_vec();
            g.choice("emotional-state", &EMOTIONAL_STATES);
            g.choice("state-key", &others);
            g.rule("state-value", format!("[^<\\n\\r]{{0,{}}}", b.state_value));
            g.rule(
                "state-line",
                format!(
                    "( {} emotional-state | state-key \": \" state-value ) \"\\n\"",
                    literal(&format!("{}: ", SOUL_STATE_KEYS[0]))
                ),
            );
            g.rule(
                "soul-state-update",
                format!(
                    "{} state-line{{1,{}}} {}",
                    literal(&format!("{}\n", open(name))),
                    SOUL_STATE_KEYS.len(),
                    literal(&close(name))
                ),
            );
        }
    }
}

fn check_rule(step: Step) -> &'static str {
    if step == Step::UserModelCheck {
        "user-model-check"
    } else {
        "soul-state-check"
    }
}

/// The steps of a turn, read into a sequence with a branch at each check whose update comes
/// later: `true` then the update, or `false` and no update.
struct Plan<'a> {
    steps: &'a [Step],
    questions: &'a [String],
}

impl Plan<'_> {
    fn later(&self, i: usize, step: Step) -> bool {
        self.steps[i + 1..].contains(&step)
    }

    /// The expression for the steps from `i`; `um` and `ss` are what the user-model and
    /// soul-state checks said on this branch; `first`: nothing was written before.
    fn sequence(&self, i: usize, um: Option<bool>, ss: Option<bool>, first: bool) -> String {
        let Some(&step) = self.steps.get(i) else {
            return "\"\"".into();
        };
        let sep = if first { "" } else { "\"\\n\" " };
        let rest = |um, ss| self.sequence(i + 1, um, ss, false);
        let skip = |um, ss| self.sequence(i + 1, um, ss, first);
        let check = |update: Step, set: &dyn Fn(bool) -> (Option<bool>, Option<bool>)| {
            let name = step.name();
            if !self.later(i, update) {
                let (u, s) = (um, ss);
                return format!("{sep}{} {}", check_rule(step), rest(u, s));
            }
            let branch = |answer: bool| {
                let (u, s) = set(answer);
                format!(
                    "{sep}{} {}",
                    literal(&format!("<{name}>{answer}</{name}>")),
                    rest(u, s)
                )
            };
            format!("( {} | {} )", branch(true), branch(false))
        };
        let update = |said: Option<bool>, rule: &str| match said {
            Some(true) => format!("{sep}{rule} {}", rest(um, ss)),
            Some(false) => skip(um, ss),
            // No check before it: the update may come or not.
            None => format!("( {sep}{rule} {} | {} )", rest(um, ss), skip(um, ss)),
        };
        match step {
            Step::InternalMonologue => format!("{sep}monologue {}", rest(um, ss)),
            Step::ExternalDialogue => format!("{sep}dialogue {}", rest(um, ss)),
            Step::MentalQuery if self.questions.is_empty() => skip(um, ss),
            Step::MentalQuery => format!("{sep}queries {}", rest(um, ss)),
            Step::UserModelCheck => check(Step::UserModelUpdate, &|a| (Some(a), ss)),
            Step::SoulStateCheck => check(Step::SoulStateUpdate, &|a| (um, Some(a))),
            Step::UserModelUpdate => update(um, "user-model-update"),
            Step::SoulStateUpdate => update(ss, "soul-state-update"),
        }
    }
}

fn selection(g: &mut Grammar, actions: &[String], b: &Bounds) {
    let most = actions.len().clamp(1, limits::ACTIONS);
    g.rule(
        "root",
        format!(
            "{} reasoning-text {} action ( \"\\n\" action ){{0,{}}} {}",
            literal(&format!("{}\n{}", open(ACTION_SELECTION), open(REASONING))),
            literal(&format!("{}\n", close(REASONING))),
            most - 1,
            literal(&format!("\n{}", close(ACTION_SELECTION)))
        ),
    );
    g.text("reasoning-text", b.reasoning);
    g.rule(
        "action",
        format!(
            "{} action-name {}",
            literal(&open(ACTION)),
            literal(&close(ACTION))
        ),
    );
    let names: Vec<String> = actions
        .iter()
        .map(|a| fence::neutralise(a).into_owned())
        .collect();
    if names.is_empty() {
        // No action to choose: nothing can be said but a reasoning, which the loop reads as
        // no choice.
        g.rule("action-name", "\"\"".into());
    } else {
        g.choice("action-name", &names);
    }
}

fn consent(g: &mut Grammar, b: &Bounds) {
    g.rule(
        "root",
        "\"<consent>yes</consent>\" closing? | \"<consent>no</consent>\\n<reason>\" note-text \"</reason>\" closing?"
            .into(),
    );
    g.rule(
        "closing",
        "\"\\n<closing_note>\" note-text \"</closing_note>\"".into(),
    );
    g.text("note-text", b.consent_note);
}

fn dream(g: &mut Grammar, people: &[String], b: &Bounds) {
    let mut root = format!(
        "\"<summary>\" summary-text \"</summary>\" memory{{0,{}}}",
        limits::MEMORIES
    );
    if !people.is_empty() {
        let _ = write!(root, " person{{0,{}}}", people.len());
    }
    g.rule("root", root);
    g.text("summary-text", b.summary);
    g.text("memory-text", b.memory);
    g.rule(
        "memory",
        "\"\\n<memory importance=\\\"\" importance \"\\\">\" memory-text \"</memory>\"".into(),
    );
    g.rule("importance", "[1-9] | \"10\"".into());
    if !people.is_empty() {
        let ids: Vec<String> = people
            .iter()
            .map(|p| fence::attribute(p).into_owned())
            .collect();
        g.choice("person-id", &ids);
        g.rule(
            "person",
            "\"\\n<person id=\\\"\" person-id \"\\\">\" memory-text \"</person>\"".into(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::library::MAIN_STEPS;

    #[test]
    fn literals_escape_what_gbnf_reads_specially() {
        assert_eq!(literal("a\"b\\c\nd\te"), "\"a\\\"b\\\\c\\nd\\te\"");
        assert_eq!(literal("é🦀"), "\"é🦀\"");
        assert_eq!(literal("\u{1}"), "\"\\x01\"");
    }

    #[test]
    fn the_main_turn_branches_on_its_checks() {
        let g = grammar(
            &Shape::Turn {
                steps: MAIN_STEPS.to_vec(),
                questions: vec![],
                reply_chars: 3000,
            },
            &Bounds::largest(3000),
        );
        let root = g.lines().next().unwrap();
        assert!(root.starts_with("root ::= monologue \"\\n\" dialogue ( \"\\n\" \"<user_model_check>true</user_model_check>\" \"\\n\" user-model-update"), "{root}");
        assert_eq!(root.matches("soul-state-update").count(), 2, "{root}");
        assert!(
            g.contains(&format!(
                "dialogue-text ::= \"\\n\"? {FIRST} dialogue-text-1\n"
            )),
            "{g}"
        );
        for (rule, body) in [
            (
                "dialogue-text-1",
                "[^<]{1000} dialogue-text-2 | [^<]{0,999}",
            ),
            (
                "dialogue-text-2",
                "[^<]{1000} dialogue-text-3 | [^<]{0,999}",
            ),
            ("dialogue-text-3", "[^<]{0,999}"),
            (
                "monologue-text-1",
                "[^<]{1000} monologue-text-2 | [^<]{0,999}",
            ),
            ("monologue-text-2", "[^<]{0,999}"),
        ] {
            assert!(g.contains(&format!("\n{rule} ::= {body}\n")), "{rule}: {g}");
        }
        assert!(
            g.contains("\nnote-text ::= \"\\n\"? ") && g.contains(" [^<]{0,299}\n"),
            "{g}"
        );
        assert!(
            g.contains("monologue-verb ::= \"thought\" | \"mused\""),
            "{g}"
        );
    }
}
