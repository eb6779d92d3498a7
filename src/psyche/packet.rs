//! The context packet (section 4): the substrate in words, for a prompt section. Mood, the
//! drives that press, the relationship with each person present, live arcs, energy, the top-K
//! episodic memories, relevant biographical facts, current intentions.
//!
//! Words only: every number is turned into a word band here and no number is ever formatted,
//! so no digit of the state can reach a prompt (a property test renders random states and
//! searches for digits). People's text (names, memories, facts, intention targets) is untrusted:
//! `render` passes each piece through the caller's `quote`, which fences it.

use super::classify::Fact;
use super::def::{Drive, Psyche};
use super::retrieve::top_k;
use super::state::{Intention, Memory, Relationship, Substrate};
use super::words::Words;

/// A person present at the event.
#[derive(Debug, Clone)]
pub struct Present<'a> {
    pub id: &'a str,
    /// Display name (untrusted).
    pub name: &'a str,
    pub relationship: Option<&'a Relationship>,
    pub facts: &'a [Fact],
}

/// Everything the packet is made from.
pub struct Input<'a> {
    pub substrate: &'a Substrate,
    pub psyche: &'a Psyche,
    pub people: &'a [Present<'a>],
    /// What was just said: the query for memories.
    pub query: &'a str,
    /// Candidate memories (the store's pick); the packet keeps the top K.
    pub memories: &'a [Memory],
    pub intentions: &'a [Intention],
    pub now: i64,
}

/// A piece of a sentence: the daemon's own words, or someone's text to be fenced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    Own(String),
    Quoted(String),
}

/// The packet: sentences made of pieces, and the words the model may answer with.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Packet {
    pub sentences: Vec<Vec<Piece>>,
    /// The stance vocabulary (`[stances]` of psyche.toml).
    pub stances: Vec<String>,
    /// The intention types (`[intentions]`).
    pub intention_types: Vec<String>,
    /// The state in single words, for process rules (with the first person present).
    pub words: Words,
}

fn own(s: impl Into<String>) -> Piece {
    Piece::Own(s.into())
}

fn quoted(s: impl Into<String>) -> Piece {
    Piece::Quoted(s.into())
}

/// Mood as two words: how it feels and how stirred.
pub fn mood_words(valence: f64, arousal: f64) -> (&'static str, &'static str) {
    let v = match valence {
        v if v <= -0.6 => "miserable",
        v if v <= -0.2 => "low",
        v if v < 0.2 => "even",
        v if v < 0.6 => "content",
        _ => "happy",
    };
    let a = match arousal {
        a if a < 0.3 => "calm",
        a if a < 0.6 => "alert",
        _ => "stirred up",
    };
    (v, a)
}

pub fn energy_word(energy: f64) -> &'static str {
    match energy {
        e if e < 0.25 => "exhausted",
        e if e < 0.5 => "tired",
        e if e < 0.8 => "steady",
        _ => "full of energy",
    }
}

/// The personality's activation for this event (seed 3.2.7): how the soul's usual self is
/// tilted right now by its mood, energy, drives and the relationships at hand, as a phrase.
/// Derived afresh for each event, never stored, no model.
pub fn activation(s: &Substrate, present: &[Option<&Relationship>]) -> &'static str {
    let tense = present
        .iter()
        .flatten()
        .any(|r| r.tension.get() >= 0.5 || r.trust.get() <= -0.3);
    let close = present
        .iter()
        .flatten()
        .any(|r| r.comfort.get() >= 0.5 && r.warmth.get() >= 0.3);
    let (v, a, e) = (s.valence.get(), s.arousal.get(), s.energy.get());
    if tense || (v <= -0.4 && a >= 0.6) {
        "guarded: slower to give ground, careful with every word"
    } else if e < 0.25 {
        "spent: brief, asking little of anyone"
    } else if s.drive(Drive::Safety).get() >= 0.7 {
        "wary: checking before trusting what you hear"
    } else if v >= 0.4 && a >= 0.5 {
        "playful: quick to joke and to offer ideas"
    } else if close || (v >= 0.3 && s.drive(Drive::Relatedness).get() >= 0.6) {
        "open: sharing more of what you think and feel"
    } else if s.drive(Drive::Novelty).get() >= 0.7 {
        "restless: drawn to tangents and new angles"
    } else if s.drive(Drive::Competence).get() >= 0.7 {
        "driven: keen to get things right and finished"
    } else {
        "your usual self"
    }
}

fn drive_need(d: Drive) -> &'static str {
    match d {
        Drive::Relatedness => "company and connection",
        Drive::Autonomy => "room to decide for yourself",
        Drive::Competence => "to feel capable and useful",
        Drive::Novelty => "something new",
        Drive::Safety => "reassurance that things are safe",
    }
}

/// The relationship in words: "warm toward", "wary of"…
pub fn relationship_words(r: &Relationship) -> Vec<&'static str> {
    let mut out = vec![match r.warmth.get() {
        w if w <= -0.5 => "cold toward",
        w if w < -0.15 => "cool toward",
        w if w < 0.15 => "neutral toward",
        w if w < 0.5 => "warm toward",
        _ => "fond of",
    }];
    out.push(match r.trust.get() {
        t if t <= -0.3 => "wary of",
        t if t < 0.3 => "unsure how far to trust",
        _ => "trusting of",
    });
    if r.tension.get() >= 0.5 {
        out.push("strained with");
    } else if r.tension.get() >= 0.2 {
        out.push("a little tense with");
    }
    if r.comfort.get() >= 0.5 {
        out.push("at ease with");
    }
    out
}

fn age_words(hours: f64) -> &'static str {
    match hours {
        h if h < 24.0 => "today",
        h if h < 24.0 * 7.0 => "recently",
        h if h < 24.0 * 60.0 => "a while ago",
        _ => "long ago",
    }
}

/// A sentence: pieces in order.
type Sentence = Vec<Piece>;

impl Packet {
    /// The packet's sentences in order: the soul itself (mood, activation, needs, energy,
    /// arcs), the people present, the memories that come back, the intentions held.
    pub fn build(input: &Input) -> Packet {
        let s = input.substrate;
        let p = input.psyche;
        let mut out: Vec<Sentence> = self_sentences(input);
        for person in input.people {
            out.extend(person_sentences(person));
        }
        out.extend(memory_sentences(input));
        out.extend(intention_sentences(input));
        Packet {
            sentences: out,
            stances: p.stances.keys().cloned().collect(),
            intention_types: p.intentions.keys().cloned().collect(),
            words: Words::of(s, input.people.first().and_then(|p| p.relationship)),
        }
    }

    /// One sentence a line; quoted pieces pass through `quote` (the caller's fence).
    pub fn render(&self, quote: &dyn Fn(&str) -> String) -> String {
        let mut text = String::new();
        for s in &self.sentences {
            for piece in s {
                match piece {
                    Piece::Own(w) => text.push_str(w),
                    Piece::Quoted(q) => text.push_str(&quote(q)),
                }
            }
            text.push('\n');
        }
        text
    }
}

/// The soul itself: mood, activation, the needs that press, energy, the arcs on its mind.
fn self_sentences(input: &Input) -> Vec<Sentence> {
    let s = input.substrate;
    let mut out: Vec<Sentence> = Vec::new();
    let (v, a) = mood_words(s.valence.get(), s.arousal.get());
    out.push(vec![own(format!("You feel {v} and {a}."))]);
    let present: Vec<Option<&Relationship>> = input.people.iter().map(|p| p.relationship).collect();
    out.push(vec![own(format!(
        "Right now you are {}.",
        activation(s, &present)
    ))]);
    let mut pressing: Vec<(Drive, f64)> = Drive::ALL
        .into_iter()
        .map(|d| (d, s.drive(d).get()))
        .filter(|(_, l)| *l >= 0.6)
        .collect();
    pressing.sort_by(|x, y| y.1.total_cmp(&x.1).then(x.0.cmp(&y.0)));
    if pressing.is_empty() {
        out.push(vec![own("No need presses on you.")]);
    }
    for (d, level) in pressing {
        let how = if level >= 0.8 { "badly" } else { "" };
        let words = if how.is_empty() {
            format!("You want {}.", drive_need(d))
        } else {
            format!("You {how} want {}.", drive_need(d))
        };
        out.push(vec![own(words)]);
    }
    out.push(vec![own(format!(
        "You are {}.",
        energy_word(s.energy.get())
    ))]);
    for arc in &input.psyche.arcs {
        let i = s.arc(&arc.topic).get();
        if i >= 0.6 {
            out.push(vec![own(format!(
                "{} is much on your mind.",
                capital(&arc.topic)
            ))]);
        } else if i >= 0.2 {
            out.push(vec![own(format!(
                "{} is on your mind.",
                capital(&arc.topic)
            ))]);
        }
    }
    out
}

/// One person present: how the soul stands with them, and the facts it knows of them.
fn person_sentences(person: &Present) -> Vec<Sentence> {
    let mut out: Vec<Sentence> = Vec::new();
    match person.relationship.filter(|r| r.exchanges > 0) {
        None => out.push(vec![
            own("You have not talked with "),
            quoted(person.name),
            own(" before."),
        ]),
        Some(r) => {
            let mut sentence = vec![own("You are ")];
            let words = relationship_words(r);
            for (i, w) in words.iter().enumerate() {
                if i > 0 {
                    sentence.push(own(if i + 1 == words.len() { " and " } else { ", " }));
                }
                sentence.push(own(format!("{w} ")));
                sentence.push(quoted(person.name));
            }
            if r.exchanges < 3 {
                sentence.push(own(", whom you barely know"));
            }
            sentence.push(own("."));
            out.push(sentence);
        }
    }
    for f in person.facts {
        out.push(vec![
            quoted(person.name),
            own(format!(" {} ", f.kind.phrase())),
            quoted(&f.value),
            own("."),
        ]);
    }
    out
}

/// The top-K memories the words just said bring back, with who said them when known.
fn memory_sentences(input: &Input) -> Vec<Sentence> {
    let p = input.psyche;
    let mut out: Vec<Sentence> = Vec::new();
    for (m, _) in top_k(input.query, input.memories, p, input.now, p.memory.top_k) {
        let when = age_words(super::hours_between(m.at, input.now));
        let who = m
            .people
            .iter()
            .find_map(|id| input.people.iter().find(|x| x.id == id));
        let mut sentence = vec![own(format!("You remember, from {when}"))];
        if let Some(who) = who {
            sentence.push(own(", "));
            sentence.push(quoted(who.name));
            sentence.push(own(" saying "));
        } else {
            sentence.push(own(", someone saying "));
        }
        sentence.push(quoted(&m.text));
        sentence.push(own("."));
        out.push(sentence);
    }
    out
}

/// The three strongest live intentions, with whom or what about.
fn intention_sentences(input: &Input) -> Vec<Sentence> {
    let mut intentions: Vec<&Intention> = input
        .intentions
        .iter()
        .filter(|i| i.expires_at > input.now && i.priority.get() >= 0.3)
        .collect();
    intentions.sort_by(|x, y| {
        y.priority
            .get()
            .total_cmp(&x.priority.get())
            .then(x.kind.cmp(&y.kind))
    });
    let mut out: Vec<Sentence> = Vec::new();
    for i in intentions.into_iter().take(3) {
        let firm = if i.priority.get() >= 0.7 {
            "firmly "
        } else {
            ""
        };
        let mut sentence = vec![own(format!(
            "You {firm}mean to {}",
            i.kind.replace('_', " ")
        ))];
        if let Some(t) = &i.target {
            match input.people.iter().find(|x| x.id == t) {
                Some(x) => {
                    sentence.push(own(" with "));
                    sentence.push(quoted(x.name));
                }
                None => {
                    sentence.push(own(" about "));
                    sentence.push(quoted(t));
                }
            }
        }
        sentence.push(own("."));
        out.push(sentence);
    }
    out
}

fn capital(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_uppercase().chain(c).collect(),
        None => String::new(),
    }
}
