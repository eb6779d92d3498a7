//! The dialogue as it streams: an incremental filter over a model's text deltas that passes
//! on only what is inside `<external_dialogue …>`, so a surface can show the reply while it
//! is written and never show a thought.
//!
//! Attributes are skipped and tags may be split across deltas: only a trailing fragment that
//! could still become the tag waited for (or an entity still being written) is held back.
//! The start is held until it can be told whether it is a `Name said:` prefix, as the final
//! parse strips it; entities are decoded, trailing blanks wait for what follows, the text
//! stops at the reply's length limit, and an echo of the instructions' placeholder is never
//! shown. What is passed on is a prefix of what `parse_response` makes the reply for the
//! same answer whenever the dialogue is plain text; anything else the final parse changes is
//! for the surface to correct. Pure: text in, text out.

use super::json_stream::JsonTags;
use super::text::{
    decode_entities, may_be_speaker_prefix, strip_speaker_prefix, strip_wrapping_quotes,
};
use crate::steps::Step;

/// Characters of the dialogue's start held back to tell a `Name said:` prefix.
const HEAD: usize = 64;
/// Characters of a dialogue that opens with a quote held back, in case the quotes wrap all of
/// it (the reply drops them): a short reply then streams as it will stand. Quotes around a
/// longer one are only known at its end, and the final message corrects it.
const QUOTED_HEAD: usize = 40;
/// The longest entity `decode_entities` reads (`&` + 12 + `;`).
const ENTITY: usize = 14;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Looking for the dialogue's opening tag.
    Outside,
    /// Inside the dialogue; its text begins at this byte of `raw`.
    Inside { body: usize },
    /// The dialogue closed (or the length limit was reached): nothing more is passed on.
    Done,
}

/// What one delta let through.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Passed {
    /// The dialogue's opening tag completed with this delta (before any of its text).
    pub opened: bool,
    /// Dialogue text to show now.
    pub text: String,
}

/// The filter for one model answer.
#[derive(Debug, Clone)]
pub struct DialogueStream {
    /// An answer asked for in its JSON form: rewritten as tags before it is filtered.
    json: Option<JsonTags>,
    raw: String,
    /// Bytes of `raw` already looked at (Outside) or passed on (Inside).
    pos: usize,
    state: State,
    /// Whether the dialogue's start has been decided (prefix stripped or not).
    head_done: bool,
    shown: String,
    shown_chars: usize,
    max_chars: usize,
}

impl DialogueStream {
    /// A filter whose text stops at `max_chars` characters (the reply's limit).
    pub fn new(max_chars: usize) -> DialogueStream {
        DialogueStream {
            json: None,
            raw: String::new(),
            pos: 0,
            state: State::Outside,
            head_done: false,
            shown: String::new(),
            shown_chars: 0,
            max_chars,
        }
    }

    /// A filter for an answer asked for in its JSON form (`parse::json`): its dialogue's
    /// text is passed on as it is written; an answer that came back in tags is filtered as
    /// [`DialogueStream::new`] filters it.
    pub fn json(max_chars: usize) -> DialogueStream {
        DialogueStream {
            json: Some(JsonTags::new()),
            ..DialogueStream::new(max_chars)
        }
    }

    /// A new filter of the same kind, for an answer that starts again.
    pub fn restart(&self) -> DialogueStream {
        DialogueStream {
            json: self.json.as_ref().map(|_| JsonTags::new()),
            ..DialogueStream::new(self.max_chars)
        }
    }

    /// Takes the next delta.
    pub fn push(&mut self, delta: &str) -> Passed {
        match self.json.as_mut() {
            Some(j) => {
                let tags = j.push(delta);
                self.raw.push_str(&tags);
            }
            None => self.raw.push_str(delta),
        }
        self.advance(false)
    }

    /// The answer is complete: passes on what was held back for a tag that never came (an
    /// open dialogue closes at the end, as the parser closes it).
    pub fn finish(&mut self) -> Passed {
        self.advance(true)
    }

    /// Everything received so far (for an answer in its JSON form, as tags).
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// Everything passed on so far.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Whether the dialogue has opened.
    pub fn opened(&self) -> bool {
        self.state != State::Outside
    }

    fn advance(&mut self, end: bool) -> Passed {
        let mut out = Passed::default();
        loop {
            match self.state {
                State::Outside => match self.find_open() {
                    Some(body) => {
                        self.state = State::Inside { body };
                        self.pos = body;
                        out.opened = true;
                    }
                    None => return out,
                },
                State::Inside { body } => {
                    let text = self.inside(body, end);
                    out.text.push_str(&text);
                    return out;
                }
                State::Done => return out,
            }
        }
    }

    /// The byte where the dialogue's text begins, once its opening tag is complete.
    fn find_open(&mut self) -> Option<usize> {
        let tag = Step::ExternalDialogue.name();
        let lower = self.raw.to_ascii_lowercase();
        let open = format!("<{tag}");
        let mut from = self.pos;
        while let Some(i) = lower[from..].find(&open) {
            let at = from + i;
            let after = at + open.len();
            match lower.as_bytes().get(after) {
                // Not complete yet: look again from here when more comes.
                None => {
                    self.pos = at;
                    return None;
                }
                Some(b'>' | b' ' | b'\t' | b'\n' | b'\r' | b'/') => {}
                // `<external_dialogues>` or the like: not the tag.
                Some(_) => {
                    from = after;
                    continue;
                }
            }
            return match lower[after..].find('>') {
                Some(gt) => Some(after + gt + 1),
                None => {
                    self.pos = at;
                    None
                }
            };
        }
        // Keep only a tail that could still begin the tag.
        self.pos = self.raw.len() - partial_suffix(&lower[from..], &open);
        None
    }

    /// Passes on the dialogue's text from `self.pos`, holding back what could still be the
    /// closing tag, an unfinished entity, trailing blanks, or the undecided start.
    fn inside(&mut self, body: usize, end: bool) -> String {
        let close = format!("</{}>", Step::ExternalDialogue.name());
        let lower = self.raw.to_ascii_lowercase();
        let (limit, closed) = match lower[self.pos..].find(&close) {
            Some(i) => (self.pos + i, true),
            None if end => (self.raw.len(), true),
            None => (
                self.raw.len() - partial_suffix(&lower[self.pos..], &close),
                false,
            ),
        };
        if !self.head_done {
            let head = &self.raw[body..limit];
            if !closed && head.chars().count() < HEAD && undecided(head) {
                return String::new();
            }
            self.head_done = true;
            let trimmed = head.trim_start();
            let mut stripped = strip_speaker_prefix(trimmed);
            if closed {
                // The whole dialogue is here: quotes around all of it go, as in the reply.
                let inner = strip_wrapping_quotes(stripped);
                if inner.len() < stripped.trim().len() {
                    let start = inner.as_ptr() as usize - self.raw.as_ptr() as usize;
                    self.pos = start;
                    self.state = State::Done;
                    return self.emit(inner.to_string());
                }
                stripped = stripped.trim_start();
            }
            self.pos = limit - stripped.len();
            if closed && is_placeholder(stripped) {
                // An echo of the instructions' example: look for the real dialogue.
                self.state = State::Outside;
                self.head_done = false;
                self.pos = limit;
                return String::new();
            }
        }
        let mut upto = limit;
        if !closed {
            upto = hold_entity(&self.raw, self.pos, upto);
        }
        // Trailing blanks wait for what follows them (the final reply is trimmed).
        let segment = &self.raw[self.pos..upto];
        let kept = segment.trim_end().len();
        let text = self.raw[self.pos..self.pos + kept].to_string();
        self.pos += kept;
        if closed {
            self.state = State::Done;
        }
        self.emit(text)
    }

    /// Passes `raw` text on, decoded, within the reply's length limit.
    fn emit(&mut self, text: String) -> String {
        let mut text = if text.contains('&') {
            decode_entities(&text)
        } else {
            text
        };
        let room = self.max_chars.saturating_sub(self.shown_chars);
        if text.chars().count() > room {
            text = text.chars().take(room).collect();
            self.state = State::Done;
        }
        self.shown_chars += text.chars().count();
        self.shown.push_str(&text);
        text
    }
}

/// The length of the longest suffix of `text` that is a proper prefix of `tag` (both ASCII
/// lowered): the bytes that could still become the tag.
fn partial_suffix(text: &str, tag: &str) -> usize {
    (1..tag.len().min(text.len() + 1))
        .rev()
        .find(|&n| text.is_char_boundary(text.len() - n) && text.ends_with(&tag[..n]))
        .unwrap_or(0)
}

/// Where to stop so that an entity still being written (`&am`) is not passed on half.
fn hold_entity(raw: &str, from: usize, upto: usize) -> usize {
    let window = &raw[from..upto];
    match window.rfind('&') {
        Some(i) if !window[i..].contains(';') && window[i..].len() < ENTITY => from + i,
        _ => upto,
    }
}

/// The dialogue example's placeholder, which a model that copies the instructions writes.
/// Whether the dialogue's start must still be held back: it may become a `Name said:` prefix
/// (decided once something follows the colon, or as soon as the words cannot make one), or
/// an echo of the instructions' example text.
fn undecided(head: &str) -> bool {
    let t = head.trim_start();
    let example = crate::steps::EXAMPLE_TEXTS.iter().any(|e| e.starts_with(t));
    let prefix = match t.find(':') {
        None => may_be_speaker_prefix(t),
        Some(c) => {
            may_be_speaker_prefix(&t[..c])
                && t[c + 1..]
                    .trim_start_matches(['*', '_'])
                    .trim_start()
                    .is_empty()
        }
    };
    let quoted = t.starts_with(['"', '\'', '“', '‘']) && t.chars().count() < QUOTED_HEAD;
    example || prefix || quoted
}

fn is_placeholder(text: &str) -> bool {
    crate::steps::EXAMPLE_TEXTS.contains(&text.trim())
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::parse::parse_response;

    /// Feeds `answer` cut at the given byte positions (moved to character boundaries).
    fn streamed(answer: &str, cuts: &[usize], max: usize) -> (String, usize) {
        let mut f = DialogueStream::new(max);
        let mut at = 0;
        let mut opened = 0;
        let mut shown = String::new();
        let mut cuts: Vec<usize> = cuts
            .iter()
            .map(|&c| {
                let mut c = c.min(answer.len());
                while !answer.is_char_boundary(c) {
                    c -= 1;
                }
                c
            })
            .collect();
        cuts.sort();
        for c in cuts.into_iter().chain([answer.len()]) {
            if c < at {
                continue;
            }
            let p = f.push(&answer[at..c]);
            opened += usize::from(p.opened);
            shown.push_str(&p.text);
            at = c;
        }
        let p = f.finish();
        opened += usize::from(p.opened);
        shown.push_str(&p.text);
        assert_eq!(shown, f.shown());
        (shown, opened)
    }

    const ANSWER: &str = "<internal_monologue verb=\"pondered\">Secret &amp; private.</internal_monologue>\n<external_dialogue verb=\"explained\">\nWren said: The port is at 93% &amp; rising.\n\nNext: the loader.\n</external_dialogue>\n<user_model_check>false</user_model_check>";

    #[test]
    fn only_the_dialogue_passes_whatever_the_cuts() {
        let whole = parse_response(ANSWER, 3000).reply;
        assert_eq!(whole, "The port is at 93% & rising.\n\nNext: the loader.");
        for cut in 0..=ANSWER.len() {
            let (shown, opened) = streamed(ANSWER, &[cut], 3000);
            assert_eq!(shown, whole, "cut at {cut}");
            assert_eq!(opened, 1);
        }
        // Every byte its own delta.
        let every: Vec<usize> = (0..ANSWER.len()).collect();
        assert_eq!(streamed(ANSWER, &every, 3000).0, whole);
    }

    #[test]
    fn text_comes_as_it_is_written_holding_back_only_what_may_be_a_tag() {
        let mut f = DialogueStream::new(3000);
        assert_eq!(
            f.push("<internal_monologue>x</internal_monologue><external_dia"),
            Passed::default()
        );
        let p = f.push("logue verb=\"said\">");
        assert!(p.opened);
        assert_eq!(p.text, "");
        let long = "This is a long enough opening line that it cannot be a speaker prefix at all";
        assert_eq!(f.push(long).text, long);
        assert_eq!(f.push(" and more </exter").text, " and more");
        assert_eq!(f.push("nal_dialogue> after").text, "");
        assert_eq!(f.finish().text, "");
    }

    #[test]
    fn an_echoed_placeholder_is_skipped_and_an_unclosed_dialogue_ends_with_the_answer() {
        let echo = "<external_dialogue verb=\"VERB\">\nwhat you say\n</external_dialogue>\n<external_dialogue>Real.</external_dialogue>";
        assert_eq!(streamed(echo, &[20, 40], 3000).0, "Real.");
        assert_eq!(
            streamed("<external_dialogue>Open to the end", &[], 3000).0,
            "Open to the end"
        );
        assert_eq!(streamed("no tags at all", &[3], 3000).0, "");
    }

    #[test]
    fn a_json_answer_streams_its_dialogue_as_the_final_parse_reads_it() {
        let answer = r#"{"internal_monologue":{"verb":"mused","text":"secret"},"external_dialogue":{"verb":"said","text":"Wren said: a </external_dialogue> b \u00e9 &amp;"},"user_model_check":false}"#;
        let whole = crate::parse::json::parse_json_response(answer, 3000).reply;
        assert_eq!(whole, "a </external_dialogue> b é &amp;");
        for cut in 0..=answer.len() {
            if !answer.is_char_boundary(cut) {
                continue;
            }
            let mut f = DialogueStream::json(3000);
            let mut shown = f.push(&answer[..cut]).text;
            shown += &f.push(&answer[cut..]).text;
            shown += &f.finish().text;
            assert_eq!(shown, whole, "cut at {cut}");
            assert!(!f.raw().contains("secret</external"), "{}", f.raw());
        }
        let mut tags = DialogueStream::json(3000).restart();
        assert_eq!(
            tags.push("<external_dialogue>Tags.</external_dialogue>")
                .text,
            "Tags."
        );
    }

    #[test]
    fn the_length_limit_holds_in_the_stream() {
        let answer = format!(
            "<external_dialogue>{}</external_dialogue>",
            "é".repeat(5000)
        );
        let (shown, _) = streamed(&answer, &[100, 4000], 300);
        assert_eq!(shown.chars().count(), 300);
    }

    proptest! {
        #[test]
        fn plain_dialogue_streams_as_the_final_reply_and_thoughts_never(
            dialogue in "[^<>&\\p{C}]{1,200}",
            thought in "[^<>&\\p{C}]{1,50}",
            cuts in proptest::collection::vec(0usize..600, 0..8),
        ) {
            let thought = format!("THOUGHT {thought}");
            let answer = format!(
                "<internal_monologue>{thought}</internal_monologue><external_dialogue verb=\"said\">{dialogue}</external_dialogue><user_model_check>true</user_model_check>"
            );
            let reply = parse_response(&answer, 3000);
            let (shown, _) = streamed(&answer, &cuts, 3000);
            prop_assume!(reply.reply_source == crate::parse::ReplySource::Dialogue);
            // Quotes around a long dialogue are only known to wrap it at its end: the final
            // message corrects that one (see the surfaces).
            prop_assume!(dialogue.chars().count() < QUOTED_HEAD || !dialogue.trim().starts_with(['"', '\'', '“', '‘']));
            // The final parse may still tidy (quotes, blank lines); what streamed is where
            // it starts, and never the thought.
            prop_assert!(!shown.contains("THOUGHT"), "{}", shown);
            let tidy: String = reply.reply.split_whitespace().collect();
            let got: String = shown.split_whitespace().collect();
            prop_assert!(tidy.starts_with(&got) || got == tidy, "{:?} vs {:?}", shown, reply.reply);
        }

        #[test]
        fn any_answer_cut_anywhere_never_panics(
            answer in crate::arbitrary::tagged(),
            cuts in proptest::collection::vec(0usize..400, 0..10),
        ) {
            let (a, _) = streamed(&answer, &cuts, 3000);
            let (b, _) = streamed(&answer, &[], 3000);
            prop_assert_eq!(a, b, "the cuts change nothing");
        }
    }
}
