//! Relationships over time, on the inner-life page: each person's warmth, trust, tension and
//! comfort, as the psyche's samples hold them (`relationships` in a sample: the people seen
//! most recently when it was taken), one SVG chart per person. Bounded: the `SHOWN` people
//! most recently sampled are drawn, the next ones up to `LISTED` are named with a link that
//! draws one (`/inspect/inner?person=ID`). Pure drawing from the samples; names come from
//! the caller.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::Value;

use super::charts::{svg, thin, Series};
use super::escape::{cut, escape, query_value};
use crate::memory::PsycheSample;

/// The people drawn at once.
pub const SHOWN: usize = 6;
/// The people named on the page at most.
pub const LISTED: usize = 50;
/// The characters of a name shown.
const NAME_CHARS: usize = 80;
/// A sample's key holding the relationships.
pub const KEY: &str = "relationships";

/// Each person's series (warmth, trust, tension, comfort over time), and the people, the most
/// recently sampled first.
pub fn of(samples: &[PsycheSample]) -> (BTreeMap<String, Vec<Series>>, Vec<String>) {
    let mut points: BTreeMap<String, BTreeMap<String, Vec<(i64, f64)>>> = BTreeMap::new();
    let mut last: BTreeMap<String, i64> = BTreeMap::new();
    for s in samples {
        let Ok(value) = serde_json::from_str::<Value>(&s.body) else {
            continue;
        };
        let Some(people) = value.get(KEY).and_then(Value::as_object) else {
            continue;
        };
        for (person, values) in people {
            let Some(values) = values.as_object() else {
                continue;
            };
            for (name, v) in values {
                if let Some(v) = v.as_f64().filter(|v| v.is_finite()) {
                    let series = points.entry(person.clone()).or_default();
                    series.entry(name.clone()).or_default().push((s.at, v));
                }
            }
            let at = last.entry(person.clone()).or_default();
            *at = (*at).max(s.at);
        }
    }
    let mut people: Vec<String> = last.keys().cloned().collect();
    people.sort_by_key(|p| (std::cmp::Reverse(last[p]), p.clone()));
    let series = points
        .into_iter()
        .map(|(person, by_name)| {
            let series = by_name
                .into_iter()
                .map(|(name, p)| (name, thin(p)))
                .collect();
            (person, series)
        })
        .collect();
    (series, people)
}

/// The section: the chosen person's chart (`chosen`), or the `SHOWN` most recent people's,
/// and the others named with links. `names` gives a person's display name where known.
pub fn section(
    samples: &[PsycheSample],
    chosen: Option<&str>,
    names: &BTreeMap<String, String>,
) -> String {
    let (series, people) = of(samples);
    let name = |p: &str| {
        let n = names.get(p).map_or(p, String::as_str);
        let (head, more) = cut(n, NAME_CHARS);
        format!("{}{}", escape(head), if more { "…" } else { "" })
    };
    let mut out = String::from("<h3>Relationships</h3>");
    if people.is_empty() {
        out.push_str("<p class=\"empty\" id=\"relationships\">No relationship sampled yet.</p>");
        return out;
    }
    let drawn: Vec<&String> = match chosen {
        Some(c) => people.iter().filter(|p| *p == c).collect(),
        None => people.iter().take(SHOWN).collect(),
    };
    if drawn.is_empty() {
        out.push_str("<p class=\"empty\">No samples of this person's relationship.</p>");
    }
    for person in &drawn {
        let _ = write!(
            out,
            "<section class=\"relationship\" data-person=\"{}\"><h4 class=\"person\">{}</h4>{}</section>",
            escape(person),
            name(person),
            svg(&format!("relationship-{person}"), &series[*person])
        );
    }
    let _ = write!(
        out,
        "<p class=\"people\">{} people sampled; draw one: ",
        people.len()
    );
    for person in people.iter().take(LISTED) {
        let _ = write!(
            out,
            "<a class=\"person\" href=\"/inspect/inner?person={}\">{}</a> ",
            escape(&query_value(person)),
            name(person)
        );
    }
    if people.len() > LISTED {
        let _ = write!(out, "(the {LISTED} most recently sampled)");
    }
    out.push_str("</p>");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: i64, people: &[(&str, f64)]) -> PsycheSample {
        let map: serde_json::Map<String, Value> = people
            .iter()
            .map(|(p, w)| {
                let v =
                    serde_json::json!({"warmth": w, "trust": 0.1, "tension": 0.2, "comfort": 0.3});
                (p.to_string(), v)
            })
            .collect();
        PsycheSample {
            at,
            body: serde_json::json!({"valence": 0.1, KEY: map}).to_string(),
        }
    }

    #[test]
    fn each_person_is_a_chart_of_their_values_the_most_recent_first() {
        let samples = [
            sample(1_000, &[("U1", 0.1), ("U2", 0.2)]),
            sample(2_000, &[("U1", 0.4), ("<script>", -0.5)]),
            sample(3_000, &[("U2", 0.3)]),
        ];
        let (series, people) = of(&samples);
        assert_eq!(people, ["U2", "<script>", "U1"]);
        let warmth = &series["U1"].iter().find(|(n, _)| n == "warmth").unwrap().1;
        assert_eq!(warmth, &[(1_000, 0.1), (2_000, 0.4)]);
        let names = BTreeMap::from([("U1".to_string(), "Ada <b>".to_string())]);
        let html = section(&samples, None, &names);
        assert_eq!(html.matches("<section class=\"relationship\"").count(), 3);
        assert_eq!(html.matches("<polyline").count(), 12, "four values each");
        assert!(
            html.contains("Ada &lt;b&gt;") && !html.contains("<b>"),
            "{html}"
        );
        assert!(!html.contains("<script>") && html.contains("&lt;script&gt;"));
        let one = section(&samples, Some("U1"), &names);
        assert_eq!(one.matches("<section class=\"relationship\"").count(), 1);
        assert!(one.contains("id=\"chart-relationship-U1\""), "{one}");
        assert!(section(&samples, Some("nobody"), &names).contains("No samples of this person"));
        assert!(section(&[], None, &names).contains("No relationship sampled yet"));
    }

    #[test]
    fn many_people_are_bounded() {
        let samples: Vec<_> = (0..200)
            .map(|n| sample(n, &[(&format!("P{n:03}"), 0.5)]))
            .collect();
        let html = section(&samples, None, &BTreeMap::new());
        assert_eq!(
            html.matches("<section class=\"relationship\"").count(),
            SHOWN
        );
        assert_eq!(html.matches("<a class=\"person\"").count(), LISTED);
        assert!(html.contains("200 people sampled"));
        assert!(html.contains("P199") && !html.contains("P000"));
    }
}
