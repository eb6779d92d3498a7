//! `classify`, `facts` and the phrase search as they were before the lexicon was indexed by
//! first word, kept to prove that the faster code gives the same answers, to the last bit (a
//! different order of the same additions can change a sum's last bit).

use super::*;
use crate::psyche::text::words;

fn psyche() -> Psyche {
    Psyche::shipped()
}

fn reference_classify(text: &str, psyche: &Psyche) -> Classification {
    let w = words(text);
    let mut sum = [0.0f64; 5];
    let mut strongest = 0.0f64;
    for (phrase, weights) in LEXICON {
        for i in reference_phrase_starts(&w, phrase) {
            let negated = w[i.saturating_sub(2)..i]
                .iter()
                .any(|p| NEGATIONS.contains(&p.as_str()));
            let sign = if negated { -1.0 } else { 1.0 };
            for (s, x) in sum.iter_mut().zip(weights) {
                *s += sign * x;
            }
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
    let requests = REQUESTS
        .iter()
        .filter(|r| reference_has_phrase(&w, r))
        .count();
    let demand = Unit::new(
        if question { 0.3 } else { 0.0 } + 0.2 * requests as f64 + w.len() as f64 / 200.0,
    );

    let arcs: Vec<usize> = psyche
        .arcs
        .iter()
        .enumerate()
        .filter(|(_, a)| a.keywords.iter().any(|k| reference_has_phrase(&w, k)))
        .map(|(i, _)| i)
        .collect();
    let facts = reference_facts(text);
    let small_talk = w.iter().any(|x| SMALL_TALK.contains(&x.as_str()));
    let trivial = strongest < 1.0 / 3.0
        && arcs.is_empty()
        && facts.is_empty()
        && (w.len() <= 4 || small_talk);
    Classification {
        dims,
        trivial,
        demand,
        arcs,
        facts,
        question,
    }
}

fn reference_facts(text: &str) -> Vec<Fact> {
    let lowered = |s: &str| {
        let l = s.to_lowercase();
        if l.contains('’') {
            l.replace('’', "'")
        } else {
            l
        }
    };
    let mut out: Vec<Fact> = Vec::new();
    for clause in text.split(['.', '!', '?', ',', ';', '\n', '。', '！', '？', '、']) {
        let raw: Vec<&str> = clause
            .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’' || c == '-'))
            .filter(|s| !s.is_empty())
            .collect();
        let lower: Vec<String> = raw.iter().map(|s| lowered(s)).collect();
        for (pattern, kind) in FACT_PATTERNS {
            if out.iter().any(|f| f.kind == *kind) {
                continue;
            }
            for i in 0..lower.len() {
                let end = i + pattern.len();
                if end > lower.len()
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
                        .is_some_and(|n| NOT_A_JOB.contains(&n.as_str()))
                {
                    continue;
                }
                let value: Vec<&str> = raw[end..]
                    .iter()
                    .zip(&lower[end..])
                    .take_while(|(_, l)| !VALUE_ENDS.contains(&l.as_str()))
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

fn reference_has_phrase(words: &[String], phrase: &str) -> bool {
    reference_phrase_starts(words, phrase).next().is_some()
}

fn reference_phrase_starts<'a>(
    words: &'a [String],
    phrase: &'a str,
) -> impl Iterator<Item = usize> + 'a {
    let n = phrase.split(' ').count();
    let first = phrase.split(' ').next().unwrap_or_default();
    // The first word alone rules out nearly every place, without splitting the phrase again.
    (0..(words.len() + 1).saturating_sub(n)).filter(move |&i| {
        words[i] == first && phrase.split(' ').zip(&words[i..i + n]).all(|(p, w)| w == p)
    })
}

/// Every number as its bits (`==` would take -0.0 for 0.0), the rest as it is.
type Exact = ([u64; 5], bool, u64, Vec<usize>, Vec<Fact>, bool);

fn exactly(c: &Classification) -> Exact {
    let Classification {
        dims,
        trivial,
        demand,
        arcs,
        facts,
        question,
    } = c;
    (
        dims.all().map(|d| d.get().to_bits()),
        *trivial,
        demand.get().to_bits(),
        arcs.clone(),
        facts.clone(),
        *question,
    )
}

/// The shipped psyche, or with more keywords of several words, some of them the
/// lexicon's and the fact patterns' own.
fn psyche_with(more_keywords: bool) -> Psyche {
    let mut p = psyche();
    if more_keywords {
        for (arc, k) in [
            (0, "well done"),
            (0, "leave me alone"),
            (1, "i'm a"),
            (1, "can you"),
            (1, "not"),
        ] {
            p.arcs[arc].keywords.push(k.to_string());
        }
    }
    p
}

/// Text made mostly of what `classify` and `facts` read: the lexicon, negations, requests,
/// small talk, the arcs' keywords and the fact patterns, with punctuation, capitals, emoji
/// and words of other scripts between.
fn lexicon_heavy() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    let mut pieces: Vec<String> = LEXICON.iter().map(|(p, _)| p.to_string()).collect();
    for list in [NEGATIONS, REQUESTS, SMALL_TALK, NOT_A_JOB, VALUE_ENDS] {
        pieces.extend(list.iter().map(|w| w.to_string()));
    }
    pieces.extend(psyche_with(true).arcs.into_iter().flat_map(|a| a.keywords));
    pieces.extend(SYMBOLS.iter().map(|(c, _)| c.to_string()));
    pieces.extend(
        [
            "my name is",
            "call me",
            "I'm a",
            "i’m an",
            "I am a",
            "I am an",
            "I work as a",
            "I live in",
            "I work at",
            "I work for",
            "I'm from",
            "I am from",
            "don’t",
            "Zoé",
            "São Paulo",
            "東京",
            "日本語",
            "café",
            "naïve",
            "Привет",
            "e\u{301}te\u{301}",
            "İ",
            "ß",
            "'",
            "’",
            "-",
            "the",
            "a",
            "very",
            "nurse",
        ]
        .map(String::from),
    );
    let separators = [
        " ", " ", " ", " ", "  ", ", ", ". ", "! ", "? ", "？", "。", "\n", ";", "-", "",
    ];
    let part = (
        proptest::sample::select(pieces),
        0..3u8,
        proptest::sample::select(separators.to_vec()),
    );
    proptest::collection::vec(part, 0..40).prop_map(|parts| {
        let mut text = String::new();
        for (piece, case, separator) in parts {
            match case {
                0 => text.push_str(&piece),
                1 => {
                    let mut chars = piece.chars();
                    text.extend(chars.next().into_iter().flat_map(char::to_uppercase));
                    text.push_str(chars.as_str());
                }
                _ => text.push_str(&piece.to_uppercase()),
            }
            text.push_str(separator);
        }
        text
    })
}

#[test]
fn the_lexicon_adds_up_in_its_own_order_and_then_the_text_s() {
    // In the text's order alone, affection would come out one bit off.
    let text = "hate thanks hurt";
    assert_eq!(
        exactly(&classify(text, &psyche())),
        exactly(&reference_classify(text, &psyche()))
    );
}

/// `classify` and `facts` answer `text` as the reference does, to the bit.
fn same_as_reference(
    text: &str,
    more_keywords: bool,
) -> Result<(), proptest::test_runner::TestCaseError> {
    let p = psyche_with(more_keywords);
    proptest::prop_assert_eq!(
        exactly(&classify(text, &p)),
        exactly(&reference_classify(text, &p))
    );
    proptest::prop_assert_eq!(facts(text), reference_facts(text));
    Ok(())
}

proptest::proptest! {
    #[test]
    fn classify_gives_the_reference_s_answer_to_the_bit_on_any_text(
        text in crate::arbitrary::text(),
        more_keywords in proptest::bool::ANY,
    ) {
        same_as_reference(&text, more_keywords)?;
    }
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]
    #[test]
    fn classify_gives_the_reference_s_answer_to_the_bit_on_lexicon_heavy_text(
        text in lexicon_heavy(),
        more_keywords in proptest::bool::ANY,
    ) {
        same_as_reference(&text, more_keywords)?;
    }
}
