//! The inner life plotted (`/inspect/inner`): each group of the psyche's samples (mood, drives,
//! energy: every number a sample's JSON holds, grouped by its top-level key) as an SVG chart
//! of polylines with their points, each person's relationship over time (`relations`), and
//! the gate's heard / thought / spoke counts by hour.
//! Pure drawing from the store's samples and gate log: no script needed to read them.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::response::Response;
use serde_json::Value;

use super::api::store_error;
use super::escape::escape;
use super::pages::{frame, time};
use super::Inspector;
use crate::memory::PsycheSample;

/// The samples a chart reads (the newest of the last week).
const SAMPLES: usize = 2_000;
/// The points a series draws at most (evenly chosen among the samples).
const POINTS: usize = 200;
/// The gate decisions the counts read.
const DECISIONS: usize = 5_000;
const WIDTH: f64 = 640.0;
const HEIGHT: f64 = 180.0;
const PAD: f64 = 24.0;

/// One line of a chart: its name and its (time, value) points, oldest first.
pub type Series = (String, Vec<(i64, f64)>);

/// Every number in `value`, by its dotted path under `prefix`.
fn leaves(prefix: &str, value: &Value, out: &mut Vec<(String, f64)>) {
    match value {
        Value::Number(n) => {
            if let Some(f) = n.as_f64().filter(|f| f.is_finite()) {
                out.push((prefix.to_string(), f));
            }
        }
        Value::Object(map) => {
            for (k, v) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaves(&path, v, out);
            }
        }
        _ => {}
    }
}

/// The samples as charts: top-level key → its series.
pub fn group(samples: &[PsycheSample]) -> BTreeMap<String, Vec<Series>> {
    let mut series: BTreeMap<String, Vec<(i64, f64)>> = BTreeMap::new();
    for s in samples {
        let Ok(value) = serde_json::from_str::<Value>(&s.body) else {
            continue;
        };
        let mut found = Vec::new();
        leaves("", &value, &mut found);
        // Each person's relationship is a chart of its own (`relations`).
        found.retain(|(path, _)| path.split('.').next() != Some(super::relations::KEY));
        for (path, v) in found {
            series.entry(path).or_default().push((s.at, v));
        }
    }
    let mut charts: BTreeMap<String, Vec<Series>> = BTreeMap::new();
    for (path, points) in series {
        let top = path.split('.').next().unwrap_or(&path).to_string();
        charts.entry(top).or_default().push((path, thin(points)));
    }
    charts
}

/// At most `POINTS` of `points`, evenly chosen, the last kept.
pub fn thin(points: Vec<(i64, f64)>) -> Vec<(i64, f64)> {
    if points.len() <= POINTS {
        return points;
    }
    let step = points.len() as f64 / POINTS as f64;
    let mut out: Vec<_> = (0..POINTS)
        .map(|i| points[(i as f64 * step) as usize])
        .collect();
    *out.last_mut().expect("POINTS > 0") = *points.last().expect("more than POINTS");
    out
}

/// An SVG chart of `series`, its id `chart-NAME`: a polyline and a circle per point each.
pub fn svg(name: &str, series: &[Series]) -> String {
    let all = series.iter().flat_map(|(_, p)| p.iter());
    let (mut t0, mut t1, mut lo, mut hi) = (i64::MAX, i64::MIN, f64::MAX, f64::MIN);
    for &(t, v) in all {
        (t0, t1, lo, hi) = (t0.min(t), t1.max(t), lo.min(v), hi.max(v));
    }
    if t0 > t1 {
        return format!(
            "<p class=\"empty\" id=\"chart-{}\">No samples yet.</p>",
            escape(name)
        );
    }
    if hi - lo < 1e-9 {
        (lo, hi) = (lo - 1.0, hi + 1.0);
    }
    let span = (t1 - t0).max(1) as f64;
    let x = |t: i64| PAD + (t - t0) as f64 / span * (WIDTH - 2.0 * PAD);
    let y = |v: f64| HEIGHT - PAD - (v - lo) / (hi - lo) * (HEIGHT - 2.0 * PAD);
    let mut out = format!(
        "<figure class=\"chart\"><figcaption>{name}</figcaption><svg id=\"chart-{name}\" class=\"chart\" \
         viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" role=\"img\" \
         xmlns=\"http://www.w3.org/2000/svg\"><text x=\"2\" y=\"12\">{hi:.2}</text>\
         <text x=\"2\" y=\"{}\">{lo:.2}</text>",
        HEIGHT - 4.0,
        name = escape(name)
    );
    for (n, (label, points)) in series.iter().enumerate() {
        let path: Vec<String> = points
            .iter()
            .map(|&(t, v)| format!("{:.1},{:.1}", x(t), y(v)))
            .collect();
        let _ = write!(
            out,
            "<g class=\"series s{}\" data-series=\"{}\"><title>{}</title><polyline points=\"{}\"/>",
            n % 8,
            escape(label),
            escape(label),
            path.join(" ")
        );
        for &(t, v) in points {
            let _ = write!(
                out,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2\"><title>{} {}: {v:.3}</title></circle>",
                x(t),
                y(v),
                time(t),
                escape(label)
            );
        }
        out.push_str("</g>");
    }
    out.push_str("</svg><ul class=\"legend\">");
    for (n, (label, _)) in series.iter().enumerate() {
        let _ = write!(out, "<li class=\"s{}\">{}</li>", n % 8, escape(label));
    }
    out.push_str("</ul></figure>");
    out
}

/// The gate's decisions by hour: heard (every event), thought (weighed: listened, not
/// trivial), spoke (answered or spoke up).
fn gate_series(decisions: &[crate::memory::psyche::LoggedDecision]) -> Vec<Series> {
    let mut hours: BTreeMap<i64, [f64; 3]> = BTreeMap::new();
    for d in decisions {
        let hour = d.at.div_euclid(3_600_000) * 3_600_000;
        let c = hours.entry(hour).or_default();
        c[0] += 1.0;
        if d.listened && !d.trivial {
            c[1] += 1.0;
        }
        if d.verdict == "answer" || d.verdict == "speak" {
            c[2] += 1.0;
        }
    }
    ["heard", "thought", "spoke"]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let points = hours.iter().map(|(&h, c)| (h, c[i])).collect();
            (name.to_string(), thin(points))
        })
        .collect()
}

#[derive(Debug, serde::Deserialize)]
pub struct InnerQuery {
    /// The person whose relationship to draw (else the most recent few).
    person: Option<String>,
}

/// The display names of the people a page names (those the store knows).
async fn names(s: &Inspector, people: &[String]) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for person in people {
        if let Ok(Some(u)) = s.store.user(person).await {
            names.insert(person.clone(), u.display_name);
        }
    }
    names
}

pub async fn page(State(s): State<Arc<Inspector>>, Query(q): Query<InnerQuery>) -> Response {
    let since = crate::memory::now_ms() - 7 * 24 * 3_600_000;
    let samples = match s.store.psyche_samples(since, SAMPLES).await {
        Ok(samples) => samples,
        Err(e) => return store_error(e),
    };
    let soul = s.engine.library().current().soul.name().to_string();
    let decisions = s
        .store
        .psyche_decisions(&soul, DECISIONS)
        .await
        .unwrap_or_default();
    let mut body =
        String::from("<h2>Inner life</h2><p class=\"note\">The last week's samples.</p>");
    let charts = group(&samples);
    if charts.is_empty() {
        body.push_str("<p class=\"empty\" id=\"chart-mood\">No samples yet.</p>");
    }
    for (name, series) in &charts {
        body.push_str(&svg(name, series));
    }
    let people = super::relations::of(&samples).1;
    let listed = &people[..people.len().min(super::relations::LISTED)];
    let names = names(&s, listed).await;
    let chosen = q.person.as_deref().filter(|p| !p.is_empty());
    body.push_str(&super::relations::section(&samples, chosen, &names));
    body.push_str("<h3>The gate, by hour</h3>");
    body.push_str(&svg("gate", &gate_series(&decisions)));
    frame("Inner life", &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(at: i64, body: &str) -> PsycheSample {
        PsycheSample {
            at,
            body: body.into(),
        }
    }

    #[test]
    fn samples_group_by_their_top_key_and_draw_every_point() {
        let samples = [
            sample(
                1_000,
                r#"{"mood": {"valence": 0.1, "arousal": 0.5}, "drives": {"curiosity": 0.3}, "energy": 0.9}"#,
            ),
            sample(
                2_000,
                r#"{"mood": {"valence": -0.2, "arousal": 0.4}, "drives": {"curiosity": 0.6}, "energy": 0.8}"#,
            ),
            sample(3_000, "not json"),
        ];
        let charts = group(&samples);
        assert_eq!(
            charts.keys().collect::<Vec<_>>(),
            ["drives", "energy", "mood"]
        );
        let mood = svg("mood", &charts["mood"]);
        assert_eq!(mood.matches("<circle").count(), 4, "{mood}");
        assert_eq!(mood.matches("<polyline").count(), 2);
        assert!(mood.contains("id=\"chart-mood\""));
    }

    #[test]
    fn many_samples_are_thinned_and_odd_ones_never_panic() {
        let many: Vec<_> = (0..10_000)
            .map(|i| sample(i, &format!("{{\"mood\": {i}}}")))
            .collect();
        let charts = group(&many);
        assert_eq!(charts["mood"][0].1.len(), POINTS);
        assert_eq!(charts["mood"][0].1.last().unwrap().0, 9_999);
        let flat = group(&[sample(5, r#"{"<script>": 1e308, "x": "s"}"#)]);
        let html = svg("<script>", &flat["<script>"]);
        assert!(!html.contains("<script>"), "{html}");
        assert!(svg("none", &[]).contains("No samples"));
    }
}
