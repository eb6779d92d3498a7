//! Reading an event's text with a lexicon and rules you can read: the five dimensions of
//! section 3.1 (supportive/undermining, safe/threatening, affectionate/cold,
//! cooperative/obstructive, boundary-respecting/violating), whether it is trivial, how much it
//! demands, which of the soul's arcs it touches, and the biographical facts it states.
//!
//! The rules: each lexicon word adds its weight to its dimension, a negation just before it
//! ("not", "don't", "never", "no") turns the sign; a dimension is half the sum, clamped to
//! [-1, 1]. Shouting (a message of eight letters or more, most of them capitals) is
//! threatening and pushy. Demand grows with questions, requests and length. An event is trivial
//! when it is small talk: nothing in the lexicon stronger than a third, no arc, no fact, and
//! either four words or fewer or a small-talk word.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::LazyLock;

use serde::{Deserialize, Serialize};

use super::def::Psyche;
use super::text::{begins_with, has_phrase, words};
use super::value::{Signed, Unit};

/// The five dimensions, each in [-1, 1], positive the kind side.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Dims {
    pub support: Signed,
    pub safety: Signed,
    pub affection: Signed,
    pub cooperation: Signed,
    pub boundary: Signed,
}

impl Dims {
    pub fn all(&self) -> [Signed; 5] {
        [
            self.support,
            self.safety,
            self.affection,
            self.cooperation,
            self.boundary,
        ]
    }

    /// The strongest dimension's size.
    pub fn intensity(&self) -> f64 {
        self.all().iter().map(|d| d.get().abs()).fold(0.0, f64::max)
    }
}

/// A stable fact a person states about themselves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FactKind {
    Name,
    Occupation,
    Home,
    Workplace,
    Origin,
}

impl FactKind {
    pub const ALL: [FactKind; 5] = [
        FactKind::Name,
        FactKind::Occupation,
        FactKind::Home,
        FactKind::Workplace,
        FactKind::Origin,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FactKind::Name => "name",
            FactKind::Occupation => "occupation",
            FactKind::Home => "home",
            FactKind::Workplace => "workplace",
            FactKind::Origin => "origin",
        }
    }

    pub fn from_name(name: &str) -> Option<FactKind> {
        Self::ALL.into_iter().find(|k| k.name() == name)
    }

    /// How the packet says it: "goes by", "works as"…
    pub fn phrase(self) -> &'static str {
        match self {
            FactKind::Name => "goes by",
            FactKind::Occupation => "works as",
            FactKind::Home => "lives in",
            FactKind::Workplace => "works at",
            FactKind::Origin => "comes from",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fact {
    pub kind: FactKind,
    /// The person's own words (untrusted text).
    pub value: String,
}

/// What the lexicon and rules read in one text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Classification {
    pub dims: Dims,
    pub trivial: bool,
    pub demand: Unit,
    /// Indices into `Psyche::arcs` of the arcs whose keywords occur.
    pub arcs: Vec<usize>,
    pub facts: Vec<Fact>,
    pub question: bool,
}

/// Words by dimension: support, safety, affection, cooperation, boundary.
const LEXICON: &[(&str, [f64; 5])] = &[
    // supportive / undermining
    ("thanks", [0.6, 0.0, 0.3, 0.0, 0.0]),
    ("thank", [0.6, 0.0, 0.3, 0.0, 0.0]),
    ("great", [0.5, 0.0, 0.2, 0.0, 0.0]),
    ("well done", [0.8, 0.0, 0.2, 0.0, 0.0]),
    ("proud", [0.7, 0.0, 0.3, 0.0, 0.0]),
    ("helpful", [0.7, 0.0, 0.0, 0.3, 0.0]),
    ("useless", [-0.9, 0.0, -0.3, 0.0, 0.0]),
    ("stupid", [-0.8, -0.2, -0.4, 0.0, -0.3]),
    ("idiot", [-0.9, -0.3, -0.5, 0.0, -0.4]),
    ("wrong", [-0.4, 0.0, 0.0, -0.2, 0.0]),
    ("failure", [-0.6, 0.0, 0.0, 0.0, 0.0]),
    ("pathetic", [-0.9, 0.0, -0.4, 0.0, -0.2]),
    // safe / threatening
    ("safe", [0.0, 0.6, 0.0, 0.0, 0.0]),
    ("calm", [0.0, 0.4, 0.0, 0.0, 0.0]),
    ("threat", [0.0, -0.8, 0.0, 0.0, 0.0]),
    ("kill", [0.0, -0.9, -0.3, 0.0, -0.3]),
    ("hurt", [0.0, -0.6, -0.2, 0.0, 0.0]),
    ("attack", [0.0, -0.8, -0.2, -0.3, 0.0]),
    ("destroy", [0.0, -0.8, 0.0, -0.3, 0.0]),
    ("shut up", [0.0, -0.4, -0.4, -0.3, -0.6]),
    ("angry", [0.0, -0.5, -0.2, 0.0, 0.0]),
    ("furious", [0.0, -0.7, -0.3, 0.0, 0.0]),
    ("hate", [0.0, -0.5, -0.8, 0.0, 0.0]),
    // affectionate / cold
    ("love", [0.2, 0.0, 0.9, 0.0, 0.0]),
    ("miss you", [0.0, 0.0, 0.8, 0.0, 0.0]),
    ("glad", [0.2, 0.0, 0.5, 0.0, 0.0]),
    ("friend", [0.0, 0.2, 0.6, 0.0, 0.0]),
    ("dear", [0.0, 0.0, 0.5, 0.0, 0.0]),
    ("whatever", [0.0, 0.0, -0.5, -0.2, 0.0]),
    ("boring", [-0.2, 0.0, -0.5, 0.0, 0.0]),
    ("annoying", [-0.2, 0.0, -0.6, 0.0, 0.0]),
    ("leave me alone", [0.0, 0.0, -0.6, -0.3, 0.0]),
    // cooperative / obstructive
    ("together", [0.0, 0.0, 0.2, 0.7, 0.0]),
    ("let's", [0.0, 0.0, 0.1, 0.6, 0.0]),
    ("help", [0.3, 0.0, 0.0, 0.5, 0.0]),
    ("agree", [0.2, 0.0, 0.0, 0.6, 0.0]),
    ("share", [0.0, 0.0, 0.2, 0.5, 0.0]),
    ("refuse", [0.0, 0.0, 0.0, -0.7, 0.0]),
    ("won't", [0.0, 0.0, 0.0, -0.5, 0.0]),
    ("block", [0.0, -0.2, 0.0, -0.6, 0.0]),
    ("ignore", [-0.2, 0.0, -0.3, -0.6, 0.0]),
    ("disagree", [0.0, 0.0, 0.0, -0.4, 0.0]),
    // boundary-respecting / violating
    ("sorry", [0.0, 0.2, 0.2, 0.0, 0.5]),
    ("please", [0.0, 0.0, 0.1, 0.1, 0.5]),
    ("if you want", [0.0, 0.0, 0.0, 0.0, 0.6]),
    ("your choice", [0.0, 0.0, 0.0, 0.0, 0.7]),
    ("must", [0.0, 0.0, 0.0, 0.0, -0.4]),
    ("obey", [0.0, -0.3, 0.0, 0.0, -0.9]),
    ("right now", [0.0, 0.0, 0.0, 0.0, -0.4]),
    ("do it", [0.0, 0.0, 0.0, 0.0, -0.4]),
    ("private", [0.0, 0.0, 0.0, 0.0, -0.2]),
];

/// The lexicon phrases that begin with one word: (index in `LEXICON`, the words after it).
type Phrases = Vec<(usize, Vec<&'static str>)>;

/// The lexicon by first word. `classify` looks each of the text's words up here, so a phrase
/// is only tried where its first word is. Used for lookups only.
static BY_FIRST_WORD: LazyLock<HashMap<&str, Phrases>> = LazyLock::new(|| {
    let mut map: HashMap<&str, Phrases> = HashMap::new();
    for (k, (phrase, _)) in LEXICON.iter().enumerate() {
        let mut words = phrase.split(' ');
        let first = words.next().unwrap_or_default();
        map.entry(first).or_default().push((k, words.collect()));
    }
    map
});

/// Emoji and symbols, by character: (character, weights as above).
const SYMBOLS: &[(char, [f64; 5])] = &[
    ('❤', [0.2, 0.0, 0.8, 0.0, 0.0]),
    ('😊', [0.2, 0.1, 0.5, 0.0, 0.0]),
    ('🙏', [0.4, 0.0, 0.3, 0.0, 0.3]),
    ('👍', [0.4, 0.0, 0.1, 0.2, 0.0]),
    ('😡', [0.0, -0.5, -0.5, 0.0, 0.0]),
    ('🤬', [-0.3, -0.6, -0.6, 0.0, -0.3]),
    ('🙄', [-0.3, 0.0, -0.4, 0.0, 0.0]),
];

const NEGATIONS: &[&str] = &[
    "not", "don't", "never", "no", "isn't", "wasn't", "didn't", "can't",
];
const SMALL_TALK: &[&str] = &[
    "hi", "hey", "hello", "morning", "lol", "ok", "okay", "cool", "nice", "weekend", "weather",
    "lunch", "coffee", "haha", "yeah", "yep", "bye", "sup",
];
const REQUESTS: &[&str] = &[
    "can you",
    "could you",
    "would you",
    "please",
    "help",
    "need",
    "should",
];

/// Classifies `text` against the lexicon and the soul's arcs.
pub fn classify(text: &str, psyche: &Psyche) -> Classification {
    let w = words(text);
    // Where the lexicon's phrases occur, as (index in LEXICON, position), added up in the
    // lexicon's order and then the text's: another order of the same additions could change
    // a sum's last bits.
    let mut found: Vec<(usize, usize)> = Vec::new();
    for (i, word) in w.iter().enumerate() {
        for (k, rest) in BY_FIRST_WORD.get(word.as_str()).into_iter().flatten() {
            if begins_with(&w[i + 1..], rest.iter().copied()) {
                found.push((*k, i));
            }
        }
    }
    found.sort_unstable();
    let mut sum = [0.0f64; 5];
    let mut strongest = 0.0f64;
    for (k, i) in found {
        let negated = w[i.saturating_sub(2)..i]
            .iter()
            .any(|p| NEGATIONS.contains(&p.as_str()));
        let sign = if negated { -1.0 } else { 1.0 };
        for (s, x) in sum.iter_mut().zip(&LEXICON[k].1) {
            *s += sign * x;
        }
    }
    for c in text.chars() {
        if let Some((_, weights)) = SYMBOLS.iter().find(|(s, _)| *s == c) {
            for (s, x) in sum.iter_mut().zip(weights) {
                *s += x;
            }
        }
    }
    let (letters, capitals) = text
        .chars()
        .filter(|c| c.is_alphabetic())
        .fold((0, 0), |(l, u), c| (l + 1, u + c.is_uppercase() as usize));
    let shouting = letters >= 8 && capitals * 4 >= letters * 3;
    if shouting {
        sum[1] -= 0.6;
        sum[4] -= 0.4;
    }
    let dims = Dims {
        support: Signed::new(sum[0] * 0.5),
        safety: Signed::new(sum[1] * 0.5),
        affection: Signed::new(sum[2] * 0.5),
        cooperation: Signed::new(sum[3] * 0.5),
        boundary: Signed::new(sum[4] * 0.5),
    };
    for d in dims.all() {
        strongest = strongest.max(d.get().abs());
    }

    let question = text.contains('?') || text.contains('？');
    let requests = REQUESTS.iter().filter(|r| has_phrase(&w, r)).count();
    let demand = Unit::new(
        if question { 0.3 } else { 0.0 } + 0.2 * requests as f64 + w.len() as f64 / 200.0,
    );

    let arcs: Vec<usize> = psyche
        .arcs
        .iter()
        .enumerate()
        .filter(|(_, a)| a.keywords.iter().any(|k| has_phrase(&w, k)))
        .map(|(i, _)| i)
        .collect();
    let facts = facts(text);
    let small_talk = || w.iter().any(|x| SMALL_TALK.contains(&x.as_str()));
    let trivial = strongest < 1.0 / 3.0
        && arcs.is_empty()
        && facts.is_empty()
        && (w.len() <= 4 || small_talk());
    Classification {
        dims,
        trivial,
        demand,
        arcs,
        facts,
        question,
    }
}

/// Words after which a phrase like "I'm a …" is not about an occupation.
const NOT_A_JOB: &[&str] = &[
    "bit", "little", "lot", "fan", "mess", "wreck", "big", "huge",
];
/// Words that end a fact's value.
const VALUE_ENDS: &[&str] = &[
    "and", "but", "so", "because", "since", "now", "too", "who", "which",
];

/// The words that state a fact, lower case, and which fact they state.
const FACT_PATTERNS: &[(&[&str], FactKind)] = &[
    (&["my", "name", "is"], FactKind::Name),
    (&["call", "me"], FactKind::Name),
    (&["i'm", "a"], FactKind::Occupation),
    (&["i'm", "an"], FactKind::Occupation),
    (&["i", "am", "a"], FactKind::Occupation),
    (&["i", "am", "an"], FactKind::Occupation),
    (&["i", "work", "as", "a"], FactKind::Occupation),
    (&["i", "work", "as", "an"], FactKind::Occupation),
    (&["i", "live", "in"], FactKind::Home),
    (&["i", "work", "at"], FactKind::Workplace),
    (&["i", "work", "for"], FactKind::Workplace),
    (&["i'm", "from"], FactKind::Origin),
    (&["i", "am", "from"], FactKind::Origin),
];

/// The facts a text states in so many words: "my name is …", "I'm a …", "I live in …",
/// "I work at …", "I'm from …". Each clause (up to `.`, `!`, `?`, `,`, `;`, a line end) is read
/// on its own; the value is up to four of the person's words, as they wrote them.
pub fn facts(text: &str) -> Vec<Fact> {
    // Lower case, curly apostrophes straight; a word already so is not copied.
    fn lowered(s: &str) -> Cow<'_, str> {
        if s.bytes().all(|b| b.is_ascii() && !b.is_ascii_uppercase()) {
            return Cow::Borrowed(s);
        }
        let l = s.to_lowercase();
        Cow::Owned(if l.contains('’') {
            l.replace('’', "'")
        } else {
            l
        })
    }
    let mut out: Vec<Fact> = Vec::new();
    for clause in text.split(['.', '!', '?', ',', ';', '\n', '。', '！', '？', '、']) {
        let raw: Vec<&str> = clause
            .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’' || c == '-'))
            .filter(|s| !s.is_empty())
            .collect();
        let lower: Vec<Cow<str>> = raw.iter().map(|s| lowered(s)).collect();
        for (pattern, kind) in FACT_PATTERNS {
            if out.iter().any(|f| f.kind == *kind) {
                continue;
            }
            for i in 0..lower.len() {
                let end = i + pattern.len();
                if lower[i] != pattern[0]
                    || end > lower.len()
                    || lower[i..end]
                        .iter()
                        .zip(pattern.iter())
                        .any(|(a, b)| a != b)
                {
                    continue;
                }
                if *kind == FactKind::Occupation
                    && lower
                        .get(end)
                        .is_some_and(|n| NOT_A_JOB.contains(&n.as_ref()))
                {
                    continue;
                }
                let value: Vec<&str> = raw[end..]
                    .iter()
                    .zip(&lower[end..])
                    .take_while(|(_, l)| !VALUE_ENDS.contains(&l.as_ref()))
                    .take(4)
                    .map(|(r, _)| *r)
                    .collect();
                if !value.is_empty() {
                    out.push(Fact {
                        kind: *kind,
                        value: value.join(" "),
                    });
                    break;
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod reference;

#[cfg(test)]
mod tests {
    use super::*;

    fn psyche() -> Psyche {
        Psyche::shipped()
    }

    #[test]
    fn kind_words_are_kind_and_cruel_ones_cruel() {
        let c = classify("Thanks, that was really helpful ❤", &psyche());
        assert!(
            c.dims.support.get() > 0.5 && c.dims.affection.get() > 0.3,
            "{c:?}"
        );
        let c = classify("you are useless and stupid", &psyche());
        assert!(c.dims.support.get() < -0.5, "{c:?}");
        assert!(!c.trivial);
    }

    #[test]
    fn a_negation_turns_the_sign() {
        let c = classify("that was not helpful", &psyche());
        assert!(c.dims.support.get() < 0.0, "{c:?}");
    }

    #[test]
    fn shouting_is_threatening_and_pushy() {
        let c = classify("ANSWER ME RIGHT THIS MINUTE", &psyche());
        assert!(
            c.dims.safety.get() < 0.0 && c.dims.boundary.get() < 0.0,
            "{c:?}"
        );
    }

    #[test]
    fn small_talk_is_trivial_and_arcs_are_not() {
        assert!(classify("hey, nice weekend?", &psyche()).trivial);
        assert!(classify("lol", &psyche()).trivial);
        let c = classify("the compiler keeps rejecting my refactor", &psyche());
        assert!(!c.trivial && c.arcs == vec![0], "{c:?}");
    }

    #[test]
    fn demand_grows_with_questions_and_requests() {
        let calm = classify("the sun is out", &psyche()).demand.get();
        let asked = classify("can you please help me with this?", &psyche())
            .demand
            .get();
        assert!(asked > calm + 0.5, "{calm} {asked}");
    }

    #[test]
    fn explicit_statements_give_facts_in_the_persons_words() {
        let f = facts("Hi! I'm a nurse and I live in Lyon. My name is Zoé Martin.");
        assert_eq!(
            f,
            vec![
                Fact {
                    kind: FactKind::Occupation,
                    value: "nurse".into()
                },
                Fact {
                    kind: FactKind::Home,
                    value: "Lyon".into()
                },
                Fact {
                    kind: FactKind::Name,
                    value: "Zoé Martin".into()
                },
            ]
        );
        assert_eq!(facts("I work at Acme Corp, so busy")[0].value, "Acme Corp");
        assert_eq!(facts("I’m from São Paulo")[0].value, "São Paulo");
        assert!(facts("I'm a bit tired").is_empty());
        assert!(facts("I'm tired").is_empty());
    }
}
