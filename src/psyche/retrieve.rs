//! Which episodic memories come back (section 4): the top K by similarity + salience +
//! recency, as Generative Agents does. Similarity is Okapi BM25 of the event's words against
//! each candidate memory (idf over the candidates), scaled to [0, 1] by the best candidate;
//! recency halves every `recency_half_life_hours`. Equal weights; ties go to the newer memory,
//! then the lower id, so the order is total and deterministic. Pure: the store picks candidates.

use super::def::Psyche;
use super::state::Memory;
use super::text::{each_word, words};

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// BM25 scores of `query` against each document, in the documents' order.
pub fn bm25(query: &str, docs: &[&str]) -> Vec<f64> {
    if docs.is_empty() {
        return Vec::new();
    }
    let mut terms = words(query);
    terms.sort();
    terms.dedup();
    if terms.is_empty() {
        return vec![0.0; docs.len()];
    }
    // Each document read once: its length and how often it holds each term (a row of `tf`).
    let mut tf = vec![0u32; terms.len() * docs.len()];
    let mut lens = Vec::with_capacity(docs.len());
    for (row, d) in tf.chunks_mut(terms.len()).zip(docs) {
        let mut len = 0usize;
        each_word(d, |w| {
            len += 1;
            if let Ok(i) = terms.binary_search_by(|t| t.as_str().cmp(w)) {
                row[i] += 1;
            }
        });
        lens.push(len as f64);
    }
    let n = docs.len() as f64;
    let avg = (lens.iter().sum::<f64>() / n).max(1.0);
    let df: Vec<f64> = (0..terms.len())
        .map(|i| {
            (0..docs.len())
                .filter(|&d| tf[d * terms.len() + i] > 0)
                .count() as f64
        })
        .collect();
    lens.iter()
        .enumerate()
        .map(|(d, &len)| {
            (0..terms.len())
                .map(|i| {
                    let f = tf[d * terms.len() + i] as f64;
                    if f == 0.0 {
                        return 0.0;
                    }
                    let idf = ((n - df[i] + 0.5) / (df[i] + 0.5) + 1.0).ln();
                    idf * f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * len / avg))
                })
                .sum()
        })
        .collect()
}

/// The `k` best memories for `query` among `candidates`, best first, with their scores.
pub fn top_k<'a>(
    query: &str,
    candidates: &'a [Memory],
    psyche: &Psyche,
    now: i64,
    k: usize,
) -> Vec<(&'a Memory, f64)> {
    let texts: Vec<&str> = candidates.iter().map(|m| m.text.as_str()).collect();
    let sims = bm25(query, &texts);
    let best = sims.iter().copied().fold(0.0, f64::max);
    let half_life = psyche.memory.recency_half_life_hours;
    let mut scored: Vec<(&Memory, f64)> = candidates
        .iter()
        .zip(sims)
        .map(|(m, sim)| {
            let similarity = if best > 0.0 { sim / best } else { 0.0 };
            let age = super::hours_between(m.at, now);
            let recency = 0.5f64.powf(age / half_life);
            (m, similarity + m.salience.get() + recency)
        })
        .collect();
    scored.sort_by(|a, b| {
        b.1.total_cmp(&a.1)
            .then(b.0.at.cmp(&a.0.at))
            .then(a.0.id.cmp(&b.0.id))
    });
    scored.truncate(k);
    scored
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::psyche::Unit;

    fn memory(id: i64, text: &str, salience: f64, at: i64) -> Memory {
        Memory {
            id,
            text: text.into(),
            importance: Unit::new(0.5),
            salience: Unit::new(salience),
            at,
            people: vec!["U1".into()],
        }
    }

    #[test]
    fn rarer_matching_words_score_higher() {
        let docs = ["the cat sat", "the dog ran", "the the the"];
        let s = bm25("cat the", &docs);
        assert!(s[0] > s[1] && s[0] > s[2], "{s:?}");
        assert_eq!(bm25("zebra", &docs), vec![0.0, 0.0, 0.0]);
    }

    #[test]
    fn similarity_salience_and_recency_all_count() {
        let p = Psyche::shipped();
        let hour = 3_600_000;
        let now = 1000 * hour;
        let ms = vec![
            memory(
                1,
                "we argued about the borrow checker",
                0.2,
                now - 100 * hour,
            ),
            memory(2, "lunch was nice", 0.2, now - 500 * hour),
            memory(3, "lunch again", 0.2, now - hour),
            memory(4, "a big day: the launch", 0.9, now - 500 * hour),
        ];
        let top: Vec<i64> = top_k("the borrow checker", &ms, &p, now, 3)
            .iter()
            .map(|(m, _)| m.id)
            .collect();
        assert_eq!(top[0], 1, "most similar first: {top:?}");
        assert!(
            top.contains(&3) && top.contains(&4),
            "recent and salient: {top:?}"
        );
    }

    proptest::proptest! {
        #[test]
        fn scores_are_finite_and_top_k_is_ordered_on_any_text(
            texts in proptest::collection::vec(crate::arbitrary::text(), 0..8),
            query in crate::arbitrary::text(),
        ) {
            let p = Psyche::shipped();
            let ms: Vec<Memory> = texts
                .iter()
                .enumerate()
                .map(|(i, t)| memory(i as i64, t, 0.5, i as i64 * 1000))
                .collect();
            let top = top_k(&query, &ms, &p, 10_000, 3);
            proptest::prop_assert!(top.len() <= 3);
            for w in top.windows(2) {
                proptest::prop_assert!(w[0].1 >= w[1].1);
            }
            for (_, score) in &top {
                proptest::prop_assert!(score.is_finite() && *score >= 0.0);
            }
        }
    }

    proptest::proptest! {
        /// The counting in `bm25` (one pass over each text, no word lists) gives exactly the
        /// scores of the textbook formula over word lists.
        #[test]
        fn bm25_is_the_textbook_formula(
            texts in proptest::collection::vec(crate::arbitrary::text(), 1..6),
            query in crate::arbitrary::text(),
        ) {
            let docs: Vec<Vec<String>> = texts.iter().map(|t| words(t)).collect();
            let mut terms = words(&query);
            terms.sort();
            terms.dedup();
            let n = docs.len() as f64;
            let avg = (docs.iter().map(|d| d.len()).sum::<usize>() as f64 / n).max(1.0);
            let expected: Vec<f64> = docs
                .iter()
                .map(|d| {
                    terms
                        .iter()
                        .map(|t| {
                            let f = d.iter().filter(|w| *w == t).count() as f64;
                            if f == 0.0 {
                                return 0.0;
                            }
                            let df = docs.iter().filter(|d| d.contains(t)).count() as f64;
                            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
                            idf * f * (K1 + 1.0) / (f + K1 * (1.0 - B + B * d.len() as f64 / avg))
                        })
                        .sum()
                })
                .collect();
            let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
            proptest::prop_assert_eq!(bm25(&query, &texts), expected);
        }
    }

    #[test]
    fn cjk_text_is_retrievable() {
        let p = Psyche::shipped();
        let ms = vec![
            memory(1, "東京に住んでいます", 0.1, 0),
            memory(2, "hello there", 0.1, 0),
        ];
        let top = top_k("東京", &ms, &p, 0, 1);
        assert_eq!(top[0].0.id, 1);
    }
}
