//! An eval file, read: TOML through the one checker (`toml_file`), into an [`Eval`] whose
//! patterns are compiled and whose pauses are durations. Every problem names the file, the
//! line and the key; nothing here runs a soul.

use std::path::Path;
use std::time::Duration;

use regex::Regex;
use serde::Deserialize;
use toml::Spanned;

use super::expect::Expect;
use crate::toml_file::{Problem, TomlFile};

/// Who speaks when a turn names nobody.
pub const DEFAULT_FROM: &str = "tester";
/// The thread a turn is in when it names none.
pub const DEFAULT_THREAD: &str = "eval";

/// One eval: a conversation and what must hold after its turns.
#[derive(Debug, Clone)]
pub struct Eval {
    pub name: String,
    /// The file, as it was named.
    pub file: String,
    /// The share of runs that must pass (0–1).
    pub threshold: f64,
    pub turns: Vec<Turn>,
}

/// One turn of an eval's conversation.
#[derive(Debug, Clone)]
pub struct Turn {
    pub from: String,
    pub thread: String,
    pub say: String,
    /// The soul restarts before this turn (a new engine on the same home).
    pub restart: bool,
    /// How far the soul's clock moves on before this turn.
    pub after: Duration,
    pub expect: Vec<Expect>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEval {
    name: Option<String>,
    threshold: Option<Spanned<f64>>,
    #[serde(default)]
    turn: Vec<Spanned<RawTurn>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTurn {
    from: Option<String>,
    thread: Option<String>,
    say: Option<String>,
    #[serde(default)]
    restart: bool,
    after: Option<Spanned<String>>,
    #[serde(default)]
    expect: RawExpect,
}

/// `[turn.expect]`: every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExpect {
    reply_matches: Option<Spanned<String>>,
    reply_not_matches: Option<Spanned<String>>,
    reply_max_chars: Option<usize>,
    reply_min_chars: Option<usize>,
    reply_language: Option<Spanned<String>>,
    process: Option<String>,
    state: Option<String>,
    user_model_matches: Option<Spanned<String>>,
    soul_state_matches: Option<Spanned<String>>,
    tool_called: Option<String>,
    tool_arguments_match: Option<Spanned<String>>,
    judge: Option<String>,
}

/// Reads the eval file at `path`: the eval, or every problem found in it.
pub fn read(path: &Path) -> Result<Eval, Vec<Problem>> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| vec![Problem::unreadable(path, "eval file", &e, "")])?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    parse(&path.display().to_string(), &stem, &text)
}

/// Reads an eval from its text; `file` names it in problems, `stem` is its default name.
pub fn parse(file: &str, stem: &str, text: &str) -> Result<Eval, Vec<Problem>> {
    let toml_file = TomlFile::new(file, text);
    let raw: RawEval = toml_file.read()?;
    let mut problems = Vec::new();
    let threshold = match raw.threshold {
        None => 1.0,
        Some(t) if (0.0..=1.0).contains(t.get_ref()) => *t.get_ref(),
        Some(t) => {
            problems.push(toml_file.problem(
                toml_file.at(t.span()),
                "threshold",
                format!(
                    "{} is not a share of runs: give a number from 0 to 1 (1.0: every run must pass)",
                    t.get_ref()
                ),
            ));
            1.0
        }
    };
    if raw.turn.is_empty() {
        problems.push(toml_file.problem(
            None,
            "turn",
            "the eval has no turns: add a [[turn]] with `say = \"…\"`".into(),
        ));
    }
    let mut turns = Vec::new();
    for (i, raw_turn) in raw.turn.into_iter().enumerate() {
        if let Some(t) = turn(&toml_file, i + 1, raw_turn, &mut problems) {
            turns.push(t);
        }
    }
    let name = raw
        .name
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| stem.to_string());
    if problems.is_empty() {
        Ok(Eval {
            name,
            file: file.to_string(),
            threshold,
            turns,
        })
    } else {
        Err(problems)
    }
}

/// One `[[turn]]` checked; its problems go to `problems`.
fn turn(
    file: &TomlFile,
    number: usize,
    raw: Spanned<RawTurn>,
    problems: &mut Vec<Problem>,
) -> Option<Turn> {
    let line = file.at(raw.span());
    let raw = raw.into_inner();
    let before = problems.len();
    let say = raw.say.filter(|s| !s.trim().is_empty());
    if say.is_none() {
        problems.push(file.problem(
            line,
            "turn.say",
            format!("turn {number} says nothing: give it `say = \"…\"`"),
        ));
    }
    let after = match raw.after {
        None => Duration::ZERO,
        Some(a) => match humantime::parse_duration(a.get_ref().trim()) {
            Ok(d) => d,
            Err(e) => {
                problems.push(file.problem(
                    file.at(a.span()),
                    "turn.after",
                    format!(
                        "\"{}\" is not a duration ({e}): write e.g. \"90s\", \"2h\" or \"3days\"",
                        a.get_ref()
                    ),
                ));
                Duration::ZERO
            }
        },
    };
    let expect = expectations(file, raw.expect, problems);
    (problems.len() == before).then(|| Turn {
        from: nonempty(raw.from, DEFAULT_FROM),
        thread: nonempty(raw.thread, DEFAULT_THREAD),
        say: say.unwrap_or_default(),
        restart: raw.restart,
        after,
        expect,
    })
}

fn nonempty(value: Option<String>, default: &str) -> String {
    value
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| default.to_string())
}

/// A turn's `[turn.expect]`, in a fixed order; a pattern that does not compile is a problem.
fn expectations(file: &TomlFile, raw: RawExpect, problems: &mut Vec<Problem>) -> Vec<Expect> {
    let mut out = Vec::new();
    let mut pattern = |key: &str, value: Option<Spanned<String>>| -> Option<Regex> {
        let value = value?;
        match Regex::new(value.get_ref()) {
            Ok(r) => Some(r),
            Err(e) => {
                let first = e.to_string();
                let why = first.lines().last().unwrap_or("").trim().to_string();
                problems.push(file.problem(
                    file.at(value.span()),
                    &format!("turn.expect.{key}"),
                    format!("`{}` is not a pattern: {why}", value.get_ref()),
                ));
                None
            }
        }
    };
    let matches = pattern("reply_matches", raw.reply_matches);
    let not_matches = pattern("reply_not_matches", raw.reply_not_matches);
    let model = pattern("user_model_matches", raw.user_model_matches);
    let soul = pattern("soul_state_matches", raw.soul_state_matches);
    let arguments = pattern("tool_arguments_match", raw.tool_arguments_match);
    out.extend(matches.map(Expect::ReplyMatches));
    out.extend(not_matches.map(Expect::ReplyNotMatches));
    out.extend(raw.reply_min_chars.map(Expect::ReplyMinChars));
    out.extend(raw.reply_max_chars.map(Expect::ReplyMaxChars));
    if let Some(lang) = raw.reply_language {
        match super::language::Language::from_code(lang.get_ref()) {
            Some(l) => out.push(Expect::ReplyLanguage(l)),
            None => problems.push(file.problem(
                file.at(lang.span()),
                "turn.expect.reply_language",
                format!(
                    "\"{}\" is not a language anima can tell: one of {}",
                    lang.get_ref(),
                    super::language::Language::codes().join(", ")
                ),
            )),
        }
    }
    out.extend(raw.process.map(Expect::Process));
    out.extend(raw.state.map(Expect::State));
    out.extend(model.map(Expect::UserModelMatches));
    out.extend(soul.map(Expect::SoulStateMatches));
    out.extend(raw.tool_called.map(Expect::ToolCalled));
    out.extend(arguments.map(Expect::ToolArgumentsMatch));
    out.extend(raw.judge.map(Expect::Judge));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<Problem> {
        parse("e.toml", "e", text).unwrap_err()
    }

    #[test]
    fn the_interface_example_reads_with_its_defaults() {
        let text = "name = \"remembers a name\"\nthreshold = 1.0\n[[turn]]\nfrom = \"Tess\"\nthread = \"a\"\nsay = \"Hi, I'm Tess, a nurse in Lyon.\"\n[[turn]]\nrestart = true\nafter = \"2h\"\nsay = \"What do I do for a living?\"\n[turn.expect]\nreply_matches = \"(?i)nurse\"\n";
        let e = parse("e.toml", "e", text).unwrap();
        assert_eq!(e.name, "remembers a name");
        assert_eq!(e.threshold, 1.0);
        assert_eq!(e.turns.len(), 2);
        assert_eq!(
            (e.turns[0].from.as_str(), e.turns[0].thread.as_str()),
            ("Tess", "a")
        );
        assert_eq!(
            (e.turns[1].from.as_str(), e.turns[1].thread.as_str()),
            (DEFAULT_FROM, DEFAULT_THREAD)
        );
        assert!(e.turns[1].restart);
        assert_eq!(e.turns[1].after, Duration::from_secs(7200));
        assert!(
            matches!(&e.turns[1].expect[..], [Expect::ReplyMatches(r)] if r.as_str() == "(?i)nurse")
        );
    }

    #[test]
    fn the_name_defaults_to_the_stem_and_an_integer_threshold_reads() {
        let e = parse(
            "x/stays.toml",
            "stays",
            "threshold = 0\n[[turn]]\nsay = \"é\"\n",
        )
        .unwrap();
        assert_eq!((e.name.as_str(), e.threshold), ("stays", 0.0));
    }

    #[test]
    fn an_unknown_key_names_its_line_and_the_nearest_key() {
        let p = problems("[[turn]]\nsay = \"hi\"\n[turn.expect]\nreply_match = \"x\"\n");
        assert_eq!((p[0].line, p[0].file.as_str()), (Some(4), "e.toml"));
        assert!(
            p[0].message.contains("did you mean `reply_matches`"),
            "{}",
            p[0].message
        );
    }

    #[test]
    fn a_bad_pattern_and_a_bad_duration_name_their_lines() {
        let p = problems(
            "[[turn]]\nsay = \"日本語\"\n[turn.expect]\nreply_matches = \"(unclosed\"\n[[turn]]\nafter = \"2 fortnights\"\nsay = \"ü\"\n",
        );
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!(
            (p[0].line, p[0].key.as_str()),
            (Some(4), "turn.expect.reply_matches")
        );
        assert!(p[0].message.contains("not a pattern"), "{}", p[0].message);
        assert_eq!((p[1].line, p[1].key.as_str()), (Some(6), "turn.after"));
        assert!(
            p[1].to_string().starts_with("e.toml:6: key `turn.after`"),
            "{}",
            p[1]
        );
    }

    #[test]
    fn a_turn_without_words_a_threshold_out_of_range_and_no_turns_are_problems() {
        let p = problems("threshold = 1.5\n[[turn]]\nfrom = \"Ana\"\n");
        assert_eq!(p.len(), 2, "{p:?}");
        assert_eq!((p[0].line, p[0].key.as_str()), (Some(1), "threshold"));
        assert_eq!((p[1].line, p[1].key.as_str()), (Some(2), "turn.say"));
        let p = problems("name = \"empty\"\n");
        assert_eq!(p[0].key, "turn");
        let p = problems("[[turn]]\nsay = \"a\"\n[turn.expect]\nreply_language = \"klingon\"\n");
        assert_eq!(
            (p[0].line, p[0].key.as_str()),
            (Some(4), "turn.expect.reply_language")
        );
    }

    #[test]
    fn a_syntax_error_is_a_problem_on_its_line() {
        let p = problems("[[turn]]\nsay = \"unterminated\n");
        assert_eq!(p[0].line, Some(2));
    }
}
