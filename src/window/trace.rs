//! A turn's trace: everything the window shows of one model-facing turn (a message's turn, a
//! proactive or autonomous thought, a state call, a dream), as the engine recorded it.
//!
//! The store keeps `TraceBody` as its JSON (`TraceBody::to_json`) beside the columns it is
//! found by (`memory::TraceRow`); readers take it back with `TraceBody::from_json`, which
//! names what is wrong with a body it cannot read. Every text here came from outside or from
//! the model: whoever shows it escapes it.

use serde::{Deserialize, Serialize};

/// In place of a prompt's piece the store no longer has.
pub const MISSING_PIECE: &str = "[the cached part of this prompt is not kept]";

/// What kind of turn a trace is of.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A person's message, answered.
    #[default]
    Message,
    /// A thought of the soul's own in a quiet conversation (proactive or autonomous).
    Thought,
    /// A cognitive state's call outside any conversation (wakeup, consent, journal).
    State,
    /// A dream's consolidation.
    Dream,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Message => "message",
            Kind::Thought => "thought",
            Kind::State => "state",
            Kind::Dream => "dream",
        }
    }
}

/// A part of a call's prompt, measured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Section {
    /// Its tag (`soul`, `skills`, `cognitive_steps`, `history`, `soul_state`, `inner_life`,
    /// `intuition`, `user_model`, `instructions`, `message` …).
    pub name: String,
    pub chars: u64,
    /// Estimated: a token for every four characters, rounded up.
    pub tokens: u64,
    /// Whether it sat in the prefix a provider may cache (the system part).
    pub cached: bool,
}

impl Section {
    /// A section of `text`, its tokens estimated.
    pub fn of(name: &str, text: &str, cached: bool) -> Section {
        let chars = text.chars().count() as u64;
        Section {
            name: name.to_string(),
            chars,
            tokens: chars.div_ceil(4),
            cached,
        }
    }
}

/// One call to the model, as sent and as answered.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelCall {
    /// What the call was for: `turn`, `selection`, `effect`, `closing`, `state`, `dream` ….
    pub purpose: String,
    pub sections: Vec<Section>,
    /// The whole prompt as sent, its parts in order. As stored, with `prefix`, only what
    /// follows the trace's piece of that number (`TraceBody::from_row` puts it back).
    pub prompt: String,
    /// Which of the trace's pieces the prompt begins with (its cached part), when kept apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<usize>,
    /// The model's answer before it was parsed (empty when the call failed).
    pub raw: String,
    pub model: String,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_creation_tokens: u64,
    /// From the request to the whole answer, retries included.
    pub latency_ms: u64,
    /// The provider's error, when the call failed.
    pub error: Option<String>,
}

/// One cognitive step the answer held.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CognitionStep {
    /// The step's tag (`internal_monologue`, `external_dialogue`, `user_model_check` …).
    pub step: String,
    /// Its verb (`thought`, `said` …), empty when it has none.
    pub verb: String,
    pub text: String,
}

/// Something the turn decided, in words: a process move, an ISM selection, a tool call, the
/// gate's verdict, a state move.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// `process`, `selection`, `tool`, `gate` or `state`.
    pub kind: String,
    pub text: String,
}

/// What the turn wrote to memory: `user_model` (with its new version), `soul_state`, …
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Written {
    pub what: String,
    pub detail: String,
}

/// Everything a trace holds beyond the columns it is found by.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceBody {
    pub kind: Kind,
    /// The message or stimulus the turn answered (a person's words: untrusted).
    pub stimulus: String,
    /// The processes that ran, in order, and where the thread stood after.
    pub processes: Vec<String>,
    pub calls: Vec<ModelCall>,
    pub cognition: Vec<CognitionStep>,
    pub decisions: Vec<Decision>,
    pub memory: Vec<Written>,
    pub errors: Vec<String>,
    /// The whole turn, from its begin to its commit.
    pub total_ms: u64,
    /// Texts kept apart from the body, which calls refer to by place (`ModelCall::prefix`):
    /// stored once however many traces share them (`memory::TraceRow::pieces`).
    #[serde(skip)]
    pub pieces: Vec<String>,
}

impl TraceBody {
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a trace body is plain data")
    }

    /// Reads a stored body back; what is wrong with it, in words, when it cannot. Prompts
    /// kept in pieces stay so: `from_row` puts them together.
    pub fn from_json(json: &str) -> Result<TraceBody, String> {
        serde_json::from_str(json).map_err(|e| format!("a trace body that cannot be read: {e}"))
    }

    /// A stored body with the pieces its row came with: each call's prompt whole again (a
    /// piece the store no longer has is named in its place).
    pub fn from_row(json: &str, pieces: &[String]) -> Result<TraceBody, String> {
        let mut body = TraceBody::from_json(json)?;
        for call in &mut body.calls {
            if let Some(n) = call.prefix.take() {
                match pieces.get(n) {
                    Some(head) => call.prompt.insert_str(0, head),
                    None => call.prompt.insert_str(0, MISSING_PIECE),
                }
            }
        }
        Ok(body)
    }

    /// `text`'s place among the pieces, added when it is not one yet.
    pub fn piece(&mut self, text: &str) -> usize {
        match self.pieces.iter().position(|p| p == text) {
            Some(n) => n,
            None => {
                self.pieces.push(text.to_string());
                self.pieces.len() - 1
            }
        }
    }

    /// The monologue: every internal monologue step's text, in order.
    pub fn monologue(&self) -> Vec<&str> {
        self.cognition
            .iter()
            .filter(|s| s.step == crate::window::trace::MONOLOGUE)
            .map(|s| s.text.as_str())
            .collect()
    }
}

/// The step whose text is the soul's private monologue.
pub const MONOLOGUE: &str = "internal_monologue";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_reads_back_as_written_with_multibyte_text() {
        let body = TraceBody {
            kind: Kind::Thought,
            stimulus: "Grüße, 世界 🌍 <script>".into(),
            processes: vec!["main".into()],
            calls: vec![ModelCall {
                purpose: "turn".into(),
                sections: vec![Section::of("soul", "ça va ✨", true)],
                prompt: "<soul>ça va ✨</soul>".into(),
                raw: "<internal_monologue>hm</internal_monologue>".into(),
                ..ModelCall::default()
            }],
            cognition: vec![CognitionStep {
                step: MONOLOGUE.into(),
                verb: "thought".into(),
                text: "ça 🌍".into(),
            }],
            ..TraceBody::default()
        };
        let back = TraceBody::from_json(&body.to_json()).unwrap();
        assert_eq!(back, body);
        assert_eq!(back.monologue(), vec!["ça 🌍"]);
    }

    #[test]
    fn a_section_counts_characters_not_bytes() {
        let s = Section::of("message", "日本語のテキスト", false);
        assert_eq!((s.chars, s.tokens), (8, 2));
    }

    #[test]
    fn a_damaged_body_is_named_not_a_panic() {
        let err = TraceBody::from_json("{\"kind\": \"nonsense\"").unwrap_err();
        assert!(err.contains("trace body"), "{err}");
    }
}
