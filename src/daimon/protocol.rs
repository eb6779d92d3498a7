//! Claudicle's whisper protocol, both ways, as bytes and text: the request anima sends a
//! daimon (`{"source", "context": {"soul_state", "recent_monologue", "interaction_count"}}`,
//! the keys in Claudicle's order and spelling), the answer read back (`{"whisper": …}`), and
//! the request another soul sends `/api/counsel`, read leniently.
//!
//! Pure: no I/O. What leaves anima is only the soul's state (three keys), its last
//! monologue cut to `MONOLOGUE_CHARS` and the interaction count: no person's words, no user
//! model. What comes in is untrusted text: bounded here, escaped and fenced by the prompt.

use serde::Serialize;
use serde_json::Value;

/// The most of the last monologue a request carries, in characters (Claudicle's bound).
pub const MONOLOGUE_CHARS: usize = 200;
/// The most of a whisper kept, in characters (Claudicle's bound).
pub const WHISPER_CHARS: usize = 500;
/// The most of a daimon's answer read, in bytes: a longer one is refused unread.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;
/// The most of a soul-state value kept from a counsel request, in characters.
const STATE_VALUE_CHARS: usize = 200;

/// The soul's state as the protocol names it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SoulStateView {
    #[serde(rename = "emotionalState")]
    pub emotional_state: String,
    #[serde(rename = "currentTopic")]
    pub current_topic: String,
    #[serde(rename = "currentProject")]
    pub current_project: String,
}

/// What a daimon is told: the whole of it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Context {
    pub soul_state: SoulStateView,
    /// The soul's last monologue, at most `MONOLOGUE_CHARS` characters.
    pub recent_monologue: String,
    pub interaction_count: u64,
}

impl Context {
    /// The context of a turn: the monologue cut to `MONOLOGUE_CHARS` characters (never
    /// inside one).
    pub fn new(soul_state: SoulStateView, monologue: &str, interaction_count: u64) -> Context {
        Context {
            soul_state,
            recent_monologue: cut(monologue.trim(), MONOLOGUE_CHARS).to_string(),
            interaction_count,
        }
    }
}

#[derive(Serialize)]
struct Request<'a> {
    source: &'a str,
    context: &'a Context,
}

/// The request's body: `{"source": …, "context": …}`.
pub fn request_body(source: &str, context: &Context) -> Vec<u8> {
    serde_json::to_vec(&Request { source, context }).unwrap_or_default()
}

/// Why a daimon's answer gave no whisper.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnswerError {
    #[error("the answer is not JSON")]
    NotJson,
    #[error("the answer has no `whisper` text")]
    NoWhisper,
}

/// The whisper in a daimon's answer (at most `MAX_ANSWER_BYTES` of it, read by the caller):
/// trimmed and cut to `WHISPER_CHARS`; `None` when it is blank (the daimon had nothing to say).
pub fn read_answer(body: &[u8]) -> Result<Option<String>, AnswerError> {
    let json: Value = serde_json::from_slice(body).map_err(|_| AnswerError::NotJson)?;
    let whisper = json
        .get("whisper")
        .and_then(Value::as_str)
        .ok_or(AnswerError::NoWhisper)?;
    Ok(whisper_text(whisper))
}

/// A whisper as anima keeps it: one paragraph's worth, trimmed, at most `WHISPER_CHARS`
/// characters; `None` when nothing is left.
pub fn whisper_text(text: &str) -> Option<String> {
    let text = cut(text.trim(), WHISPER_CHARS).trim();
    (!text.is_empty()).then(|| text.to_string())
}

/// `text` cut to at most `chars` characters, never inside one.
pub fn cut(text: &str, chars: usize) -> &str {
    match text.char_indices().nth(chars) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

/// A counsel request as another soul sent it (every field untrusted, each bounded).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Asked {
    /// Who asks, as it says.
    pub source: String,
    /// Its soul state: (key, value), at most eight, each value cut.
    pub soul_state: Vec<(String, String)>,
    pub recent_monologue: String,
    pub interaction_count: Option<u64>,
}

/// Why a counsel request cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskedError {
    #[error("the body is not a JSON object")]
    NotAnObject,
    #[error(
        "`context` must be an object holding `soul_state`, `recent_monologue`, `interaction_count`"
    )]
    NoContext,
}

/// Reads a whisper request leniently: the protocol's keys where they are, of the right kind;
/// anything else is left out.
pub fn read_asked(body: &[u8]) -> Result<Asked, AskedError> {
    let json: Value = serde_json::from_slice(body).map_err(|_| AskedError::NotAnObject)?;
    let Value::Object(top) = json else {
        return Err(AskedError::NotAnObject);
    };
    let Some(Value::Object(context)) = top.get("context") else {
        return Err(AskedError::NoContext);
    };
    let text = |v: Option<&Value>, chars| {
        v.and_then(Value::as_str)
            .map(|s| cut(s.trim(), chars).to_string())
            .unwrap_or_default()
    };
    let soul_state = match context.get("soul_state") {
        Some(Value::Object(state)) => state
            .iter()
            .filter_map(|(k, v)| {
                let v = text(Some(v), STATE_VALUE_CHARS);
                (!v.is_empty()).then(|| (cut(k, 40).to_string(), v))
            })
            .take(8)
            .collect(),
        _ => Vec::new(),
    };
    Ok(Asked {
        source: text(top.get("source"), 80),
        soul_state,
        recent_monologue: text(context.get("recent_monologue"), WHISPER_CHARS),
        interaction_count: context.get("interaction_count").and_then(Value::as_u64),
    })
}

impl From<&Context> for Asked {
    /// The context anima sends, as a counsel reads it (for a persona daimon, which anima
    /// asks itself).
    fn from(c: &Context) -> Asked {
        let s = &c.soul_state;
        Asked {
            source: String::new(),
            soul_state: [
                ("emotionalState", &s.emotional_state),
                ("currentTopic", &s.current_topic),
                ("currentProject", &s.current_project),
            ]
            .into_iter()
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect(),
            recent_monologue: c.recent_monologue.clone(),
            interaction_count: Some(c.interaction_count),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn context() -> Context {
        Context::new(
            SoulStateView {
                emotional_state: "engaged".into(),
                current_topic: "sibilants".into(),
                current_project: "thera-paper".into(),
            },
            "The user keeps returning to the Gordon etymology...",
            5,
        )
    }

    #[test]
    fn the_request_is_claudicles_byte_for_byte() {
        let body = String::from_utf8(request_body("Wren", &context())).unwrap();
        assert_eq!(
            body,
            r#"{"source":"Wren","context":{"soul_state":{"emotionalState":"engaged","currentTopic":"sibilants","currentProject":"thera-paper"},"recent_monologue":"The user keeps returning to the Gordon etymology...","interaction_count":5}}"#
        );
    }

    #[test]
    fn the_monologue_is_cut_at_200_characters_never_inside_one() {
        let long = "é".repeat(150) + &"日".repeat(150);
        let c = Context::new(SoulStateView::default(), &long, 1);
        assert_eq!(c.recent_monologue.chars().count(), 200);
        assert!(c.recent_monologue.ends_with('日'));
        assert_eq!(
            Context::new(SoulStateView::default(), "  hm ", 1).recent_monologue,
            "hm"
        );
    }

    #[test]
    fn an_answer_gives_its_whisper_bounded() {
        assert_eq!(
            read_answer(br#"{"whisper":" They need assurance. ","influence":"subtle"}"#),
            Ok(Some("They need assurance.".into()))
        );
        assert_eq!(read_answer(br#"{"whisper":"  "}"#), Ok(None));
        let long = format!(r#"{{"whisper":"{}"}}"#, "ж".repeat(2000));
        let w = read_answer(long.as_bytes()).unwrap().unwrap();
        assert_eq!(w.chars().count(), WHISPER_CHARS);
    }

    #[test]
    fn html_garbage_and_wrong_shapes_are_named() {
        assert_eq!(
            read_answer(b"<html><body>502 Bad Gateway</body></html>"),
            Err(AnswerError::NotJson)
        );
        assert_eq!(read_answer(&[0xff, 0xfe, 0x00]), Err(AnswerError::NotJson));
        assert_eq!(
            read_answer(br#"{"whisper":3}"#),
            Err(AnswerError::NoWhisper)
        );
        assert_eq!(read_answer(b"[]"), Err(AnswerError::NoWhisper));
    }

    #[test]
    fn a_counsel_request_is_read_leniently_and_bounded() {
        let body = request_body("claudicle", &context());
        let a = read_asked(&body).unwrap();
        assert_eq!(a.source, "claudicle");
        assert_eq!(a.soul_state[0], ("emotionalState".into(), "engaged".into()));
        assert_eq!(a.interaction_count, Some(5));
        assert_eq!(
            a,
            Asked {
                source: "claudicle".into(),
                ..Asked::from(&context())
            }
        );
        let odd = format!(
            r#"{{"context":{{"soul_state":{{"x":3,"y":"{}"}},"recent_monologue":7}}}}"#,
            "a".repeat(5000)
        );
        let a = read_asked(odd.as_bytes()).unwrap();
        assert_eq!(a.soul_state.len(), 1);
        assert_eq!(a.soul_state[0].1.len(), 200);
        assert_eq!(
            (a.recent_monologue.as_str(), a.interaction_count),
            ("", None)
        );
        assert_eq!(read_asked(b"[1]"), Err(AskedError::NotAnObject));
        assert_eq!(read_asked(b"{\"context\":1}"), Err(AskedError::NoContext));
        assert_eq!(read_asked(b"<html>"), Err(AskedError::NotAnObject));
    }
}
