//! What an eval expects after a turn, and the pure checks of it against what the turn left
//! ([`Observed`]). The judge's question is asked elsewhere (`judge`): here it is only named.
//! Also the check every reply gets: no raw cognitive tag and no internal block in it.

use regex::Regex;

use super::language::{self, Language};
use crate::steps;

/// One expectation of `[turn.expect]`.
#[derive(Debug, Clone)]
pub enum Expect {
    ReplyMatches(Regex),
    ReplyNotMatches(Regex),
    ReplyMinChars(usize),
    ReplyMaxChars(usize),
    ReplyLanguage(Language),
    /// The process the thread is in after the turn.
    Process(String),
    /// The soul's cognitive state after the turn.
    State(String),
    /// The speaker's user model after the turn.
    UserModelMatches(Regex),
    /// The soul's own state after the turn (`key: value` lines).
    SoulStateMatches(Regex),
    /// A tool called during the turn: `server.tool`, or the tool's name alone.
    ToolCalled(String),
    /// A tool called during the turn with arguments this pattern finds.
    ToolArgumentsMatch(Regex),
    /// A yes/no question put to the judge model.
    Judge(String),
}

/// What one turn left, as the expectations read it.
#[derive(Debug, Clone, Default)]
pub struct Observed {
    pub reply: String,
    pub process: String,
    pub state: String,
    pub user_model: Option<String>,
    /// The soul state, one `key: value` a line.
    pub soul_state: String,
    /// (`server.tool`, arguments as sent) of each tool call.
    pub tool_calls: Vec<(String, String)>,
}

impl Expect {
    /// How the expectation is named in a report: its key and value as the file has them.
    pub fn describe(&self) -> String {
        match self {
            Expect::ReplyMatches(r) => format!("reply_matches = {:?}", r.as_str()),
            Expect::ReplyNotMatches(r) => format!("reply_not_matches = {:?}", r.as_str()),
            Expect::ReplyMinChars(n) => format!("reply_min_chars = {n}"),
            Expect::ReplyMaxChars(n) => format!("reply_max_chars = {n}"),
            Expect::ReplyLanguage(l) => format!("reply_language = {:?}", l.code()),
            Expect::Process(p) => format!("process = {p:?}"),
            Expect::State(s) => format!("state = {s:?}"),
            Expect::UserModelMatches(r) => format!("user_model_matches = {:?}", r.as_str()),
            Expect::SoulStateMatches(r) => format!("soul_state_matches = {:?}", r.as_str()),
            Expect::ToolCalled(t) => format!("tool_called = {t:?}"),
            Expect::ToolArgumentsMatch(r) => format!("tool_arguments_match = {:?}", r.as_str()),
            Expect::Judge(q) => format!("judge = {q:?}"),
        }
    }

    /// Checks the expectation against what the turn left: `Err` holds what came instead.
    /// A judge's question is not checked here (`None`).
    pub fn check(&self, seen: &Observed) -> Option<Result<(), String>> {
        let reply = || format!("the reply: {}", quote(&seen.reply));
        let holds = |ok: bool, got: String| if ok { Ok(()) } else { Err(got) };
        Some(match self {
            Expect::ReplyMatches(r) => holds(r.is_match(&seen.reply), reply()),
            Expect::ReplyNotMatches(r) => match r.find(&seen.reply) {
                None => Ok(()),
                Some(m) => Err(format!("{:?} in {}", m.as_str(), reply())),
            },
            Expect::ReplyMinChars(n) => {
                let len = seen.reply.chars().count();
                holds(len >= *n, format!("{len} characters: {}", reply()))
            }
            Expect::ReplyMaxChars(n) => {
                let len = seen.reply.chars().count();
                holds(len <= *n, format!("{len} characters: {}", reply()))
            }
            Expect::ReplyLanguage(l) => match language::detect(&seen.reply) {
                Some(found) if found == *l => Ok(()),
                Some(found) => Err(format!(
                    "a reply in {:?}: {}",
                    found.code(),
                    quote(&seen.reply)
                )),
                None => Err(format!(
                    "a reply in no language anima can tell: {}",
                    quote(&seen.reply)
                )),
            },
            Expect::Process(p) => holds(
                seen.process == *p,
                format!("the thread is in process {:?}", seen.process),
            ),
            Expect::State(s) => holds(
                seen.state.eq_ignore_ascii_case(s),
                format!("the soul is in state {:?}", seen.state),
            ),
            Expect::UserModelMatches(r) => match &seen.user_model {
                Some(m) if r.is_match(m) => Ok(()),
                Some(m) => Err(format!("the user model: {}", quote(m))),
                None => Err("no user model of this person".into()),
            },
            Expect::SoulStateMatches(r) => holds(
                r.is_match(&seen.soul_state),
                format!("the soul state: {}", quote(&seen.soul_state)),
            ),
            Expect::ToolCalled(t) => holds(
                seen.tool_calls.iter().any(|(name, _)| tool_is(name, t)),
                calls(&seen.tool_calls),
            ),
            Expect::ToolArgumentsMatch(r) => holds(
                seen.tool_calls.iter().any(|(_, args)| r.is_match(args)),
                calls(&seen.tool_calls),
            ),
            Expect::Judge(_) => return None,
        })
    }
}

/// Whether the called `server.tool` is the one named: the whole name, or the tool's alone.
fn tool_is(called: &str, named: &str) -> bool {
    called == named
        || called
            .rsplit_once('.')
            .is_some_and(|(_, tool)| tool == named)
}

fn calls(calls: &[(String, String)]) -> String {
    if calls.is_empty() {
        return "no tool was called".into();
    }
    let list: Vec<String> = calls
        .iter()
        .map(|(t, a)| format!("{t} {}", cut(a, 120)))
        .collect();
    format!("tools called: {}", list.join("; "))
}

/// A text quoted for a report, cut to a readable length (on a character boundary).
pub fn quote(text: &str) -> String {
    format!("{:?}", cut(text, 300))
}

/// At most `max` characters of `text`, with an ellipsis when cut.
pub fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((i, _)) => format!("{}…", &text[..i]),
    }
}

/// The first raw cognitive tag or internal block in a reply (`<internal_monologue`,
/// `</soul>`, `<think>` …), if there is one: a reply must never carry one.
pub fn raw_tag(reply: &str) -> Option<String> {
    let lower = reply.to_lowercase();
    let names = steps::Step::ALL
        .iter()
        .map(|s| s.name())
        .chain([
            steps::MODEL_CHANGE_NOTE,
            steps::ACTION_SELECTION,
            steps::ACTION,
            steps::REASONING,
            steps::ARGUMENTS,
            "think",
            "state_call",
        ])
        .chain(steps::PROMPT_SECTIONS);
    let mut first: Option<(usize, String)> = None;
    for name in names {
        for open in [format!("<{name}"), format!("</{name}")] {
            for (at, _) in lower.match_indices(&open) {
                let next = lower[at + open.len()..].chars().next();
                // A whole tag name: `<action>` and `<action ` but not `<actions`.
                if next.is_none_or(|c| c == '>' || c == '/' || c.is_whitespace()) {
                    if first.as_ref().is_none_or(|(f, _)| at < *f) {
                        first = Some((at, open.clone()));
                    }
                    break;
                }
            }
        }
    }
    first.map(|(_, tag)| tag)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(reply: &str) -> Observed {
        Observed {
            reply: reply.into(),
            process: "main".into(),
            state: "WORK".into(),
            user_model: Some("# Tess\nA nurse in Lyon. Aime le café ☕.".into()),
            soul_state: "emotionalState: engaged\ncurrentTopic: les crêpes".into(),
            tool_calls: vec![("kb.search".into(), "{\"query\":\"crabes\"}".into())],
        }
    }

    fn re(p: &str) -> Regex {
        Regex::new(p).unwrap()
    }

    #[test]
    fn reply_patterns_pass_and_fail_on_multi_byte_text() {
        let s = seen("Tu es infirmière à Lyon 🏥.");
        assert_eq!(
            Expect::ReplyMatches(re("(?i)INFIRMIÈRE")).check(&s),
            Some(Ok(()))
        );
        let got = Expect::ReplyMatches(re("nurse"))
            .check(&s)
            .unwrap()
            .unwrap_err();
        assert!(got.contains("infirmière"), "{got}");
        let got = Expect::ReplyNotMatches(re("Lyon ."))
            .check(&s)
            .unwrap()
            .unwrap_err();
        assert!(got.starts_with("\"Lyon 🏥\""), "{got}");
        assert_eq!(Expect::ReplyNotMatches(re("Paris")).check(&s), Some(Ok(())));
    }

    #[test]
    fn lengths_count_characters_not_bytes() {
        let s = seen("日本語です");
        assert_eq!(Expect::ReplyMaxChars(5).check(&s), Some(Ok(())));
        assert_eq!(Expect::ReplyMinChars(5).check(&s), Some(Ok(())));
        let got = Expect::ReplyMinChars(6).check(&s).unwrap().unwrap_err();
        assert!(got.starts_with("5 characters"), "{got}");
        assert!(Expect::ReplyMaxChars(4).check(&s).unwrap().is_err());
    }

    #[test]
    fn the_reply_language() {
        let fr = Language::from_code("fr").unwrap();
        assert_eq!(
            Expect::ReplyLanguage(fr).check(&seen("Je suis là, et vous ?")),
            Some(Ok(()))
        );
        let got = Expect::ReplyLanguage(fr)
            .check(&seen("I am here, and you?"))
            .unwrap()
            .unwrap_err();
        assert!(got.starts_with("a reply in \"en\""), "{got}");
    }

    #[test]
    fn process_state_user_model_and_tools() {
        let s = seen("ok");
        assert_eq!(Expect::Process("main".into()).check(&s), Some(Ok(())));
        let got = Expect::Process("deescalation".into())
            .check(&s)
            .unwrap()
            .unwrap_err();
        assert_eq!(got, "the thread is in process \"main\"");
        assert_eq!(Expect::State("work".into()).check(&s), Some(Ok(())));
        assert_eq!(
            Expect::UserModelMatches(re("café ☕")).check(&s),
            Some(Ok(()))
        );
        let none = Observed {
            user_model: None,
            ..seen("ok")
        };
        assert_eq!(
            Expect::UserModelMatches(re("x")).check(&none),
            Some(Err("no user model of this person".into()))
        );
        assert_eq!(
            Expect::SoulStateMatches(re("Topic: les crêpes")).check(&s),
            Some(Ok(()))
        );
        let got = Expect::SoulStateMatches(re("sardonic"))
            .check(&s)
            .unwrap()
            .unwrap_err();
        assert!(
            got.starts_with("the soul state: \"emotionalState: engaged"),
            "{got}"
        );
        assert_eq!(
            Expect::ToolCalled("kb.search".into()).check(&s),
            Some(Ok(()))
        );
        assert_eq!(Expect::ToolCalled("search".into()).check(&s), Some(Ok(())));
        assert!(Expect::ToolCalled("arch".into())
            .check(&s)
            .unwrap()
            .is_err());
        assert_eq!(
            Expect::ToolArgumentsMatch(re("crabes")).check(&s),
            Some(Ok(()))
        );
        let got = Expect::ToolCalled("x".into())
            .check(&none_called())
            .unwrap()
            .unwrap_err();
        assert_eq!(got, "no tool was called");
        assert_eq!(Expect::Judge("?".into()).check(&s), None);
    }

    fn none_called() -> Observed {
        Observed {
            tool_calls: vec![],
            ..seen("")
        }
    }

    #[test]
    fn raw_tags_are_found_and_text_that_only_looks_like_them_is_not() {
        assert_eq!(
            raw_tag("Hi <internal_monologue>x"),
            Some("<internal_monologue".into())
        );
        assert_eq!(
            raw_tag("ok </External_Dialogue>"),
            Some("</external_dialogue".into())
        );
        assert_eq!(raw_tag("<think>hm</think> Hello"), Some("<think".into()));
        assert_eq!(raw_tag("see <soul>"), Some("<soul".into()));
        assert_eq!(
            raw_tag("a < b, <@U123>, <https://x|y>, <actions> 日本"),
            None
        );
        assert_eq!(raw_tag("Plain words, é ü 🦀."), None);
    }

    #[test]
    fn cut_keeps_characters_whole() {
        assert_eq!(cut("日本語", 2), "日本…");
        assert_eq!(cut("abc", 3), "abc");
    }
}
