//! The process graph as SVG (`/inspect/process`): the process files' definitions laid out in
//! layers by a breadth-first walk from the initial process (the unreachable last), each rule
//! or ISM transition action an arrow, how often each was taken (counted from the process
//! moves the newest kept traces recorded as decisions: a move within one turn counts, a
//! restart invents none), and how many of the traced conversations stand in each process now. Deterministic: the same definitions and
//! counts draw the same picture.

use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write;
use std::sync::Arc;

use axum::extract::State;
use axum::response::Response;

use super::api::store_error;
use super::escape::escape;
use super::pages::frame;
use super::{Inspector, MAX_LIMIT};
use crate::process::ProcessDef;

const NODE_W: f64 = 150.0;
const NODE_H: f64 = 40.0;
const GAP_X: f64 = 40.0;
const GAP_Y: f64 = 70.0;
/// The pages of traces whose decisions are read to count transitions (`MAX_LIMIT` each).
const TRACE_PAGES: usize = 5;

/// Every edge: (from, to, label, chosen by the soul).
fn edges(defs: &BTreeMap<String, ProcessDef>) -> Vec<(String, String, String, bool)> {
    let mut out = Vec::new();
    for (name, def) in defs {
        for t in &def.transitions {
            out.push((
                name.clone(),
                t.to.clone(),
                t.when_text.trim().to_string(),
                false,
            ));
        }
        for a in def.actions() {
            if let crate::ism::Effect::Transition { to, .. } = &a.effect {
                out.push((name.clone(), to.clone(), format!("action {}", a.name), true));
            }
        }
    }
    out
}

/// Each process's layer: its distance from `initial` (the unreachable after the deepest).
pub fn layers(defs: &BTreeMap<String, ProcessDef>, initial: &str) -> BTreeMap<String, usize> {
    let edges = edges(defs);
    let mut layer = BTreeMap::new();
    let mut queue = VecDeque::new();
    if defs.contains_key(initial) {
        layer.insert(initial.to_string(), 0);
        queue.push_back(initial.to_string());
    }
    while let Some(at) = queue.pop_front() {
        let next = layer[&at] + 1;
        for (_, to, _, _) in edges
            .iter()
            .filter(|(f, t, _, _)| *f == at && defs.contains_key(t))
        {
            if !layer.contains_key(to) {
                layer.insert(to.clone(), next);
                queue.push_back(to.clone());
            }
        }
    }
    let last = layer.values().max().map_or(0, |m| m + 1);
    for name in defs.keys() {
        layer.entry(name.clone()).or_insert(last);
    }
    layer
}

/// The graph: `taken` counts per (from, to), `standing` conversations per process.
pub fn svg(
    defs: &BTreeMap<String, ProcessDef>,
    initial: &str,
    taken: &BTreeMap<(String, String), u64>,
    standing: &BTreeMap<String, u64>,
) -> String {
    let layer = layers(defs, initial);
    let mut rows: BTreeMap<usize, Vec<&String>> = BTreeMap::new();
    for (name, l) in &layer {
        rows.entry(*l).or_default().push(name);
    }
    let widest = rows.values().map(Vec::len).max().unwrap_or(1) as f64;
    let width = widest * (NODE_W + GAP_X) + GAP_X;
    let height = rows.len() as f64 * (NODE_H + GAP_Y) + GAP_Y;
    let mut at = BTreeMap::new();
    for (l, names) in &rows {
        let offset = (width - names.len() as f64 * (NODE_W + GAP_X) + GAP_X) / 2.0;
        for (i, name) in names.iter().enumerate() {
            let x = offset + i as f64 * (NODE_W + GAP_X);
            let y = GAP_Y / 2.0 + *l as f64 * (NODE_H + GAP_Y);
            at.insert(name.as_str(), (x, y));
        }
    }
    let mut out = format!(
        "<svg id=\"process-graph\" class=\"graph\" viewBox=\"0 0 {width:.0} {height:.0}\" width=\"{width:.0}\" \
         height=\"{height:.0}\" xmlns=\"http://www.w3.org/2000/svg\"><defs><marker id=\"arrow\" \
         viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\">\
         <path d=\"M0,0 L10,5 L0,10 z\"/></marker></defs>"
    );
    for (from, to, label, chosen) in edges(defs) {
        let (Some(&(x1, y1)), Some(&(x2, y2))) = (at.get(from.as_str()), at.get(to.as_str()))
        else {
            continue;
        };
        let count = taken.get(&(from.clone(), to.clone())).copied().unwrap_or(0);
        let (sx, sy, ex, ey) = if from == to {
            (x1 + NODE_W, y1 + 10.0, x1 + NODE_W, y1 + NODE_H - 10.0)
        } else if y2 > y1 {
            (x1 + NODE_W / 2.0, y1 + NODE_H, x2 + NODE_W / 2.0, y2)
        } else {
            (
                x1 + NODE_W / 2.0 + 8.0,
                y1,
                x2 + NODE_W / 2.0 + 8.0,
                y2 + NODE_H,
            )
        };
        let path = if from == to {
            format!(
                "M{sx:.1},{sy:.1} C{:.1},{sy:.1} {:.1},{ey:.1} {ex:.1},{ey:.1}",
                sx + 30.0,
                ex + 30.0
            )
        } else {
            format!("M{sx:.1},{sy:.1} L{ex:.1},{ey:.1}")
        };
        let _ = write!(
            out,
            "<g class=\"edge{}\" data-from=\"{}\" data-to=\"{}\" data-taken=\"{count}\"><title>{}</title>\
             <path d=\"{path}\" marker-end=\"url(#arrow)\"/>",
            if chosen { " chosen" } else { "" },
            escape(&from),
            escape(&to),
            escape(&label)
        );
        if count > 0 {
            let _ = write!(
                out,
                "<text x=\"{:.1}\" y=\"{:.1}\" class=\"taken\">×{count}</text>",
                (sx + ex) / 2.0 + 4.0,
                (sy + ey) / 2.0
            );
        }
        out.push_str("</g>");
    }
    for (name, &(x, y)) in &at {
        let here = standing.get(*name).copied().unwrap_or(0);
        let _ =
            write!(
            out,
            "<g class=\"node{}\" data-process=\"{n}\" data-standing=\"{here}\"><title>{}</title>\
             <rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{NODE_W}\" height=\"{NODE_H}\" rx=\"6\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\">{n}{}</text></g>",
            if *name == initial { " initial" } else { "" },
            escape(&defs[*name].description),
            x + 8.0,
            y + 25.0,
            if here > 0 { format!(" ● {here}") } else { String::new() },
            n = escape(name),
        );
    }
    out.push_str("</svg>");
    out
}

/// The process move a decision records: `from → to (why…)`, as the engine words it (the
/// `process` decisions); `None` for any other text.
pub fn moved(text: &str) -> Option<(String, String)> {
    let (from, rest) = text.split_once(" → ")?;
    let to = rest.split_once(" (").map_or(rest, |(to, _)| to).trim();
    let from = from.trim();
    (!from.is_empty() && !to.is_empty() && !to.contains(char::is_whitespace))
        .then(|| (from.to_string(), to.to_string()))
}

/// The decisions of a trace's body, and nothing else of it.
#[derive(serde::Deserialize)]
struct Decided {
    #[serde(default)]
    decisions: Vec<crate::window::Decision>,
}

/// How often each move was taken, from the process decisions of the newest `TRACE_PAGES`
/// pages of traces (a trace that cannot be read counts nothing).
async fn taken(s: &Inspector) -> Result<BTreeMap<(String, String), u64>, Response> {
    let mut taken: BTreeMap<(String, String), u64> = BTreeMap::new();
    let mut before = None;
    for _ in 0..TRACE_PAGES {
        let page = s
            .store
            .trace_bodies(before, MAX_LIMIT)
            .await
            .map_err(store_error)?;
        for row in page
            .iter()
            .filter(|t| t.kind == "message" || t.kind == "thought")
        {
            let Ok(body) = serde_json::from_str::<Decided>(&row.body) else {
                continue;
            };
            for d in body.decisions.iter().filter(|d| d.kind == "process") {
                if let Some(pair) = moved(&d.text) {
                    *taken.entry(pair).or_default() += 1;
                }
            }
        }
        match page.last() {
            Some(last) if page.len() == MAX_LIMIT => before = Some(last.at),
            _ => break,
        }
    }
    Ok(taken)
}

pub async fn page(State(s): State<Arc<Inspector>>) -> Response {
    let taken = match taken(&s).await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let mut standing: BTreeMap<String, u64> = BTreeMap::new();
    let conversations = s
        .store
        .traced_conversations(None, MAX_LIMIT)
        .await
        .unwrap_or_default();
    let traced: Vec<String> = (conversations.iter())
        .filter(|c| !c.thread.is_empty())
        .map(|c| c.thread.clone())
        .collect();
    let stand = s.store.standing(&traced).await.unwrap_or_default();
    for (_, current) in &stand {
        *standing.entry(current.clone()).or_default() += 1;
    }
    let threads = stand.len();
    let lib = s.engine.library().current();
    let initial = &s.engine.config().initial_process;
    let body = format!(
        "<h2>The process graph</h2><p class=\"note\">Layered from the initial process \
         (<code>{}</code>); ×N: moves the newest kept turns recorded; ● N: of the {} most recently \
         traced conversations, how many stand there.</p>{}",
        escape(initial),
        threads,
        svg(&lib.processes, initial, &taken, &standing)
    );
    frame("Process graph", &body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_decision_reads_as_its_move_and_nothing_else_does() {
        let pair = |a: &str, b: &str| Some((a.to_string(), b.to_string()));
        assert_eq!(
            moved("main → deep_work (rule 0)"),
            pair("main", "deep_work")
        );
        assert_eq!(
            moved("deep_work → main (the action rest, at once; the execute_now chain's bound was reached)"),
            pair("deep_work", "main")
        );
        assert_eq!(moved("a → b"), pair("a", "b"));
        assert_eq!(moved("main stays main"), None);
        assert_eq!(moved(" → b (rule 1)"), None);
        assert_eq!(moved("a → (rule 1)"), None);
    }

    #[test]
    fn the_shipped_processes_draw_the_same_layered_graph_every_time() {
        let defs = crate::process::library::shipped();
        let layer = layers(&defs, "main");
        assert_eq!(layer["main"], 0);
        assert_eq!(layer.len(), defs.len());
        let taken = BTreeMap::from([(("main".to_string(), "deep_work".to_string()), 3)]);
        let standing = BTreeMap::from([("main".to_string(), 2)]);
        let a = svg(&defs, "main", &taken, &standing);
        assert_eq!(a, svg(&defs, "main", &taken, &standing));
        assert_eq!(a.matches("<g class=\"node").count(), defs.len());
        assert!(
            a.contains("data-process=\"main\" data-standing=\"2\""),
            "{a}"
        );
        assert!(a.contains("×3"));
        let nothing = svg(&defs, "no_such", &BTreeMap::new(), &BTreeMap::new());
        assert_eq!(nothing.matches("<g class=\"node").count(), defs.len());
    }
}
