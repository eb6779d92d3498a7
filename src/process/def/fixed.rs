//! A process's own parts, checked: its steps, the overrides of their instructions and its
//! transition rules. Every process file has them (an ISM's are those of its answering call);
//! a fixed process must not carry an ISM's fields. Pure: raw shapes in, checked parts and
//! problems out.

use std::collections::BTreeMap;

use super::raw::RawProcess;
use super::{Transition, ISM_STEPS, PROACTIVE};
use crate::process::when;
use crate::steps::Step;
use crate::toml_file::{Problem, TomlFile};

/// The steps of one model call, and the line problems about them point at.
pub(super) fn steps(
    raw: &RawProcess,
    is_ism: bool,
    f: &TomlFile,
    problems: &mut Vec<Problem>,
) -> (Vec<Step>, Option<usize>) {
    let steps_line = raw
        .steps
        .as_ref()
        .map_or(f.at(raw.name.span()), |s| f.at(s.span()));
    let mut steps = Vec::new();
    match &raw.steps {
        None if is_ism => steps = ISM_STEPS.to_vec(),
        None => problems.push(f.problem(
            steps_line,
            "steps",
            "missing `steps`: the cognitive steps of the process's model call".into(),
        )),
        Some(listed) => {
            for s in listed.get_ref() {
                match Step::from_name(s.trim()) {
                    Some(step) if steps.contains(&step) => problems.push(f.problem(
                        steps_line,
                        "steps",
                        format!("step `{s}` is listed twice"),
                    )),
                    Some(step) => steps.push(step),
                    None => problems.push(f.problem(
                        steps_line,
                        "steps",
                        format!(
                            "unknown step `{s}`; the steps are {}",
                            Step::ALL.map(|s| s.name()).join(", ")
                        ),
                    )),
                }
            }
        }
    }
    // Missing `steps` is reported above; a list, even an empty one, must answer.
    if raw.steps.is_some() && !steps.contains(&Step::ExternalDialogue) {
        problems.push(f.problem(
            steps_line,
            "steps",
            "a process needs `external_dialogue`: it is how the soul answers".into(),
        ));
    }
    (steps, steps_line)
}

/// The instructions a process writes for its own steps.
pub(super) fn overrides(
    raw: &RawProcess,
    steps: &[Step],
    f: &TomlFile,
    problems: &mut Vec<Problem>,
) -> BTreeMap<Step, String> {
    let mut overrides = BTreeMap::new();
    for (key, value) in &raw.overrides {
        match Step::from_name(key) {
            Some(step) if steps.contains(&step) => {
                overrides.insert(step, value.get_ref().clone());
            }
            Some(_) => problems.push(f.problem(
                f.at(value.span()),
                &format!("overrides.{key}"),
                format!("overrides `{key}`, which is not in steps"),
            )),
            None => problems.push(f.problem(
                f.at(value.span()),
                &format!("overrides.{key}"),
                format!("unknown step `{key}`"),
            )),
        }
    }
    overrides
}

/// The transition rules, and the mental-query questions their conditions read.
pub(super) fn transitions(
    raw: &RawProcess,
    f: &TomlFile,
    problems: &mut Vec<Problem>,
) -> (Vec<Transition>, Vec<String>) {
    let mut transitions = Vec::new();
    let mut queries = Vec::new();
    for (i, t) in raw.transitions.iter().enumerate() {
        let key = format!("transitions[{i}]");
        let to = t.to.get_ref().trim().to_string();
        if to.is_empty() {
            problems.push(f.problem(
                f.at(t.to.span()),
                &format!("{key}.to"),
                "names no process".into(),
            ));
        }
        let (when_text, when_line) = match &t.when {
            Some(w) => (w.get_ref().clone(), f.at(w.span())),
            None => ("true".to_string(), f.at(t.to.span())),
        };
        match when::parse(&when_text) {
            Ok(expr) => {
                expr.queries(&mut queries);
                let params = serde_json::to_value(&t.params)
                    .ok()
                    .and_then(|v| v.as_object().cloned())
                    .unwrap_or_default();
                transitions.push(Transition {
                    to,
                    when: expr,
                    when_text,
                    execute_now: t.execute_now,
                    params,
                    line: f.line(t.to.span().start),
                });
            }
            Err(e) => problems.push(f.problem(
                when_line,
                &format!("{key}.when"),
                format!("{e} in `{when_text}`"),
            )),
        }
    }
    (transitions, queries)
}

/// Orders the steps for the rules: the questions that decide an execute_now rule are asked
/// before the dialogue, so when the dialogue opens, whether it will stand (or be superseded
/// by the process handed to) is known, and it can be streamed.
pub(super) fn ask_before_answering(steps: &mut Vec<Step>, transitions: &[Transition]) {
    if transitions.iter().any(|t| {
        t.execute_now && {
            let mut q = Vec::new();
            t.when.queries(&mut q);
            !q.is_empty()
        }
    }) {
        if let (Some(query), Some(dialogue)) = (
            steps.iter().position(|s| *s == Step::MentalQuery),
            steps.iter().position(|s| *s == Step::ExternalDialogue),
        ) {
            if query > dialogue {
                let q = steps.remove(query);
                steps.insert(dialogue, q);
            }
        }
    }
}

/// What the rules and the process's role need from its steps.
pub(super) fn steps_serve_the_rules(
    name: &str,
    steps: &[Step],
    queries: &[String],
    steps_line: Option<usize>,
    f: &TomlFile,
    problems: &mut Vec<Problem>,
) {
    if !queries.is_empty() && !steps.contains(&Step::MentalQuery) {
        problems.push(f.problem(
            steps_line,
            "steps",
            format!(
                "its rules ask {} but steps lack `mental_query`",
                queries
                    .iter()
                    .map(|q| format!("query({q:?})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    if name == PROACTIVE && !steps.contains(&Step::MentalQuery) {
        problems.push(f.problem(
            steps_line,
            "steps",
            "the proactive process needs `mental_query`: it decides whether to follow up".into(),
        ));
    }
}

/// A fixed process must not carry an ISM's fields.
pub(super) fn fixed_only(raw: &RawProcess, f: &TomlFile, problems: &mut Vec<Problem>) {
    let mut stray = Vec::new();
    if let Some(g) = &raw.goal {
        stray.push(("goal", f.at(g.span())));
    }
    if let Some(p) = &raw.playbook {
        stray.push(("playbook", f.at(p.span())));
    }
    if let Some(m) = &raw.max_loops {
        stray.push(("max_loops", f.at(m.span())));
    }
    if let Some(a) = raw.actions.first() {
        stray.push(("actions", f.at(a.name.span())));
    }
    for (key, line) in stray {
        problems.push(f.problem(
            line,
            key,
            format!("`{key}` belongs to an ism process: add `kind = \"ism\"`"),
        ));
    }
}
