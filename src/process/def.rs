//! Process files: one TOML file per mental process in `processes/`, read and checked.
//!
//! Owns the file format and every problem a file can have (syntax, unknown steps, bad
//! conditions, missing targets, execute_now cycles, an ISM's actions), each located by file
//! and line. A file is a fixed process (its `steps`, one model call a run) or, with
//! `kind = "ism"`, an implicit semantic machine (a goal, a playbook and actions the soul
//! chooses from; `steps` are then those of its answering call).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::Deserialize;
use toml::Spanned;

use super::when::{self, Expr};
use crate::config::{line_of, read_toml, Problem};
use crate::ism::{Action, Effect, Ism};
use crate::steps::{Step, EXAMPLE_ACTION};

/// The process every thread falls back to.
pub const MAIN: &str = "main";
/// The process of the idle-timer perception.
pub const PROACTIVE: &str = "proactive";

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProcess {
    name: Spanned<String>,
    #[serde(default)]
    kind: Option<Spanned<String>>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    steps: Option<Spanned<Vec<String>>>,
    #[serde(default)]
    goal: Option<Spanned<String>>,
    #[serde(default)]
    playbook: Option<Spanned<String>>,
    #[serde(default)]
    max_loops: Option<Spanned<i64>>,
    #[serde(default)]
    actions: Vec<RawAction>,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default)]
    overrides: BTreeMap<String, Spanned<String>>,
    #[serde(default)]
    transitions: Vec<RawTransition>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTransition {
    to: Spanned<String>,
    #[serde(default)]
    when: Option<Spanned<String>>,
    #[serde(default)]
    execute_now: bool,
    #[serde(default)]
    params: toml::Table,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAction {
    name: Spanned<String>,
    #[serde(default)]
    description: String,
    effect: Spanned<String>,
    #[serde(default)]
    question: Option<Spanned<String>>,
    #[serde(default, rename = "continue")]
    keep_going: Option<Spanned<bool>>,
    #[serde(default)]
    to: Option<Spanned<String>>,
    #[serde(default)]
    params: Option<Spanned<toml::Table>>,
    #[serde(default)]
    execute_now: Option<Spanned<bool>>,
}

/// The steps of an ISM's answering call when its file names none.
pub const ISM_STEPS: [Step; 5] = [
    Step::ExternalDialogue,
    Step::UserModelCheck,
    Step::UserModelUpdate,
    Step::SoulStateCheck,
    Step::SoulStateUpdate,
];

/// A checked process.
#[derive(Debug, Clone, PartialEq)]
pub struct ProcessDef {
    pub name: String,
    pub description: String,
    pub steps: Vec<Step>,
    pub instructions: Option<String>,
    pub overrides: BTreeMap<Step, String>,
    pub transitions: Vec<Transition>,
    /// The mental-query questions its rules read, asked by its `mental_query` step.
    pub queries: Vec<String>,
    /// `kind = "ism"`: its goal, playbook and actions.
    pub ism: Option<Ism>,
    pub file: PathBuf,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Transition {
    pub to: String,
    pub when: Expr,
    /// The condition as written, for graphs and logs.
    pub when_text: String,
    pub execute_now: bool,
    pub params: serde_json::Map<String, serde_json::Value>,
    /// The line of `to` in the file.
    pub line: usize,
}

/// Reads and checks one file on its own (targets are checked across files by [`check_set`]).
pub fn load_file(path: &Path) -> Result<ProcessDef, Vec<Problem>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        vec![Problem {
            file: path.display().to_string(),
            key: String::new(),
            line: None,
            message: format!("cannot read the file: {e}"),
        }]
    })?;
    parse(&text, path)
}

/// Checks one process file's text; `path` names it (and its stem must be the process name).
pub fn parse(text: &str, path: &Path) -> Result<ProcessDef, Vec<Problem>> {
    let file = path.display().to_string();
    let problem = |line: Option<usize>, key: &str, message: String| Problem {
        file: file.clone(),
        key: key.to_string(),
        line,
        message,
    };
    let raw: RawProcess = read_toml(text, &file)?;
    let mut problems = Vec::new();
    let at = |span: std::ops::Range<usize>| Some(line_of(text, span.start));

    let name = raw.name.get_ref().trim().to_string();
    let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    {
        problems.push(problem(
            at(raw.name.span()),
            "name",
            format!("`{name}` is not a process name: use a–z, 0–9, `_` and `-`"),
        ));
    } else if name != stem {
        problems.push(problem(
            at(raw.name.span()),
            "name",
            format!("`{name}` must match the file name `{stem}.toml`"),
        ));
    }

    let is_ism = match &raw.kind {
        None => false,
        Some(k) => match k.get_ref().trim() {
            "fixed" => false,
            "ism" => true,
            other => {
                problems.push(problem(
                    at(k.span()),
                    "kind",
                    format!("unknown kind `{other}`: a process is `fixed` (the default) or `ism`"),
                ));
                false
            }
        },
    };
    let steps_line = raw
        .steps
        .as_ref()
        .map_or(at(raw.name.span()), |s| at(s.span()));
    let mut steps = Vec::new();
    match &raw.steps {
        None if is_ism => steps = ISM_STEPS.to_vec(),
        None => problems.push(problem(
            steps_line,
            "steps",
            "missing `steps`: the cognitive steps of the process's model call".into(),
        )),
        Some(listed) => {
            for s in listed.get_ref() {
                match Step::from_name(s.trim()) {
                    Some(step) if steps.contains(&step) => problems.push(problem(
                        steps_line,
                        "steps",
                        format!("step `{s}` is listed twice"),
                    )),
                    Some(step) => steps.push(step),
                    None => problems.push(problem(
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
        problems.push(problem(
            steps_line,
            "steps",
            "a process needs `external_dialogue`: it is how the soul answers".into(),
        ));
    }
    let ism = if is_ism {
        ism_part(&raw, text, &mut problems, &problem)
    } else {
        fixed_only(&raw, text, &mut problems, &problem);
        None
    };

    let mut overrides = BTreeMap::new();
    for (key, value) in &raw.overrides {
        match Step::from_name(key) {
            Some(step) if steps.contains(&step) => {
                overrides.insert(step, value.get_ref().clone());
            }
            Some(_) => problems.push(problem(
                at(value.span()),
                &format!("overrides.{key}"),
                format!("overrides `{key}`, which is not in steps"),
            )),
            None => problems.push(problem(
                at(value.span()),
                &format!("overrides.{key}"),
                format!("unknown step `{key}`"),
            )),
        }
    }

    let mut transitions = Vec::new();
    let mut queries = Vec::new();
    for (i, t) in raw.transitions.iter().enumerate() {
        let key = format!("transitions[{i}]");
        let to = t.to.get_ref().trim().to_string();
        if to.is_empty() {
            problems.push(problem(
                at(t.to.span()),
                &format!("{key}.to"),
                "names no process".into(),
            ));
        }
        let (when_text, when_line) = match &t.when {
            Some(w) => (w.get_ref().clone(), at(w.span())),
            None => ("true".to_string(), at(t.to.span())),
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
                    line: line_of(text, t.to.span().start),
                });
            }
            Err(e) => problems.push(problem(
                when_line,
                &format!("{key}.when"),
                format!("{e} in `{when_text}`"),
            )),
        }
    }
    // The questions that decide an execute_now rule are asked before the dialogue: when the
    // dialogue opens, whether it will stand (or be superseded by the process handed to) is
    // known, and it can be streamed.
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
    if !queries.is_empty() && !steps.contains(&Step::MentalQuery) {
        problems.push(problem(
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
        problems.push(problem(
            steps_line,
            "steps",
            "the proactive process needs `mental_query`: it decides whether to follow up".into(),
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(ProcessDef {
        name,
        description: raw.description.trim().to_string(),
        steps,
        instructions: raw.instructions.filter(|s| !s.trim().is_empty()),
        overrides,
        transitions,
        queries,
        ism,
        file: path.to_path_buf(),
    })
}

type MakeProblem<'a> = dyn Fn(Option<usize>, &str, String) -> Problem + 'a;

/// An ISM's goal, playbook and actions, checked.
fn ism_part(
    raw: &RawProcess,
    text: &str,
    problems: &mut Vec<Problem>,
    problem: &MakeProblem,
) -> Option<Ism> {
    let at = |span: std::ops::Range<usize>| Some(line_of(text, span.start));
    let kind_line = raw.kind.as_ref().and_then(|k| at(k.span()));
    let before = problems.len();
    let goal = raw
        .goal
        .as_ref()
        .map(|g| g.get_ref().trim().to_string())
        .unwrap_or_default();
    if goal.is_empty() {
        problems.push(problem(
            raw.goal.as_ref().map_or(kind_line, |g| at(g.span())),
            "goal",
            "an ism process needs a `goal`: what the soul is trying to achieve".into(),
        ));
    }
    let max_loops = match &raw.max_loops {
        None => None,
        Some(m) if (1..=50).contains(m.get_ref()) => Some(*m.get_ref() as u32),
        Some(m) => {
            problems.push(problem(
                at(m.span()),
                "max_loops",
                format!("{} is not a loop bound: use 1 to 50", m.get_ref()),
            ));
            None
        }
    };
    let mut actions: Vec<Action> = Vec::new();
    for (i, a) in raw.actions.iter().enumerate() {
        let key = |field: &str| format!("actions[{i}].{field}");
        let line = line_of(text, a.name.span().start);
        let name = a.name.get_ref().trim().to_string();
        // A selection lists names separated by commas, matches them ignoring case and
        // markup, and drops the example's placeholder: a name must survive all three.
        if crate::ism::normalise(&name).is_empty()
            || name == EXAMPLE_ACTION
            || name.chars().any(|c| c.is_control() || "<>\"&,".contains(c))
        {
            problems.push(problem(
                Some(line),
                &key("name"),
                format!(
                    "`{name}` is not an action name: give it a word or two, without <, >, \", & or commas"
                ),
            ));
        } else if actions
            .iter()
            .any(|b| crate::ism::normalise(&b.name) == crate::ism::normalise(&name))
        {
            problems.push(problem(
                Some(line),
                &key("name"),
                format!("action `{name}` is defined twice"),
            ));
        }
        let effect_line = at(a.effect.span());
        let only = |field: &str, span: Option<std::ops::Range<usize>>, effects: &str| {
            span.map(|s| {
                problem(
                    at(s),
                    &key(field),
                    format!(
                        "`{field}` belongs to {effects}, not to effect `{}`",
                        a.effect.get_ref().trim()
                    ),
                )
            })
        };
        let effect = match a.effect.get_ref().trim() {
            "think" => Some(Effect::Think),
            "query" => match a.question.as_ref().map(|q| q.get_ref().trim()) {
                Some(q) if !q.is_empty() => Some(Effect::Query {
                    question: q.to_string(),
                }),
                _ => {
                    problems.push(problem(
                        effect_line,
                        &key("question"),
                        "a `query` action needs the `question` it asks (answered true or false)"
                            .into(),
                    ));
                    None
                }
            },
            "respond" => Some(Effect::Respond {
                keep_going: a.keep_going.as_ref().is_some_and(|k| *k.get_ref()),
            }),
            "transition" => match a.to.as_ref().map(|t| t.get_ref().trim()) {
                Some(to) if !to.is_empty() => Some(Effect::Transition {
                    to: to.to_string(),
                    params: a
                        .params
                        .as_ref()
                        .and_then(|p| serde_json::to_value(p.get_ref()).ok())
                        .and_then(|v| v.as_object().cloned())
                        .unwrap_or_default(),
                    execute_now: a.execute_now.as_ref().is_some_and(|e| *e.get_ref()),
                }),
                _ => {
                    problems.push(problem(
                        effect_line,
                        &key("to"),
                        "a `transition` action needs `to`, the process it hands over to".into(),
                    ));
                    None
                }
            },
            "done" => Some(Effect::Done),
            other => {
                problems.push(problem(
                    effect_line,
                    &key("effect"),
                    format!(
                        "unknown effect `{other}`; the effects are {}",
                        Effect::NAMES.join(", ")
                    ),
                ));
                None
            }
        };
        let effect_name = effect.as_ref().map(|e| e.name());
        if effect_name != Some("query") {
            problems.extend(only(
                "question",
                a.question.as_ref().map(|q| q.span()),
                "`query`",
            ));
        }
        if effect_name != Some("respond") {
            problems.extend(only(
                "continue",
                a.keep_going.as_ref().map(|k| k.span()),
                "`respond`",
            ));
        }
        if effect_name != Some("transition") {
            problems.extend(only("to", a.to.as_ref().map(|t| t.span()), "`transition`"));
            problems.extend(only(
                "params",
                a.params.as_ref().map(|p| p.span()),
                "`transition`",
            ));
            problems.extend(only(
                "execute_now",
                a.execute_now.as_ref().map(|e| e.span()),
                "`transition`",
            ));
        }
        if let Some(effect) = effect {
            actions.push(Action {
                name,
                description: a.description.trim().to_string(),
                effect,
                line,
            });
        }
    }
    let ism = Ism {
        goal,
        playbook: raw
            .playbook
            .as_ref()
            .map(|p| p.get_ref().trim().to_string())
            .unwrap_or_default(),
        max_loops,
        actions,
    };
    if raw.actions.is_empty() {
        problems.push(problem(
            kind_line,
            "actions",
            "an ism process needs `[[actions]]` for the soul to choose from".into(),
        ));
    } else if problems.len() == before && !ism.can_respond() {
        problems.push(problem(
            kind_line,
            "actions",
            "no action answers the person: add one with `effect = \"respond\"`".into(),
        ));
    }
    Some(ism)
}

/// A fixed process must not carry an ISM's fields.
fn fixed_only(raw: &RawProcess, text: &str, problems: &mut Vec<Problem>, problem: &MakeProblem) {
    let at = |span: std::ops::Range<usize>| Some(line_of(text, span.start));
    let mut stray = Vec::new();
    if let Some(g) = &raw.goal {
        stray.push(("goal", at(g.span())));
    }
    if let Some(p) = &raw.playbook {
        stray.push(("playbook", at(p.span())));
    }
    if let Some(m) = &raw.max_loops {
        stray.push(("max_loops", at(m.span())));
    }
    if let Some(a) = raw.actions.first() {
        stray.push(("actions", at(a.name.span())));
    }
    for (key, line) in stray {
        problems.push(problem(
            line,
            key,
            format!("`{key}` belongs to an ism process: add `kind = \"ism\"`"),
        ));
    }
}

impl ProcessDef {
    /// An ISM's actions (none for a fixed process).
    pub fn actions(&self) -> impl Iterator<Item = &Action> {
        self.ism.iter().flat_map(|i| i.actions.iter())
    }
}

/// Problems across files: `main` must exist, targets must exist, execute_now must not loop.
pub fn check_set(defs: &BTreeMap<String, ProcessDef>, dir: &Path) -> Vec<Problem> {
    let mut problems = Vec::new();
    if !defs.contains_key(MAIN) {
        problems.push(Problem {
            file: dir.join("main.toml").display().to_string(),
            key: String::new(),
            line: None,
            message: "there is no `main` process; every thread falls back to it".into(),
        });
    }
    for def in defs.values() {
        for (i, a) in def.actions().enumerate() {
            if let Effect::Transition { to, .. } = &a.effect {
                if !defs.contains_key(to) {
                    problems.push(Problem {
                        file: def.file.display().to_string(),
                        key: format!("actions[{i}].to"),
                        line: Some(a.line),
                        message: format!(
                            "action `{}` hands over to a missing process `{to}` (known: {})",
                            a.name,
                            defs.keys().cloned().collect::<Vec<_>>().join(", ")
                        ),
                    });
                }
            }
        }
        for (i, t) in def.transitions.iter().enumerate() {
            if !t.to.is_empty() && !defs.contains_key(&t.to) {
                problems.push(Problem {
                    file: def.file.display().to_string(),
                    key: format!("transitions[{i}].to"),
                    line: Some(t.line),
                    message: format!(
                        "names a missing process `{}` (known: {})",
                        t.to,
                        defs.keys().cloned().collect::<Vec<_>>().join(", ")
                    ),
                });
            }
        }
    }
    if let Some(cycle) = execute_now_cycle(defs) {
        let first = &defs[&cycle[0]];
        let t = first
            .transitions
            .iter()
            .find(|t| t.execute_now && t.to == cycle[1]);
        problems.push(Problem {
            file: first.file.display().to_string(),
            key: "transitions".into(),
            line: t.map(|t| t.line),
            message: format!("execute_now rules form a cycle: {}", cycle.join(" → ")),
        });
    }
    problems
}

/// A cycle of execute_now transitions, as process names with the first repeated at the end.
fn execute_now_cycle(defs: &BTreeMap<String, ProcessDef>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        defs: &BTreeMap<String, ProcessDef>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(pos) = path.iter().position(|p| p == node) {
            let mut cycle = path[pos..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        if let Some(def) = defs.get(node) {
            for t in def.transitions.iter().filter(|t| t.execute_now) {
                if let Some(c) = visit(&t.to, defs, path, done) {
                    return Some(c);
                }
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for name in defs.keys() {
        if let Some(c) = visit(name, defs, &mut Vec::new(), &mut done) {
            return Some(c);
        }
    }
    None
}

/// Reads every `*.toml` in `dir`: the good definitions and every problem.
pub fn load_dir(dir: &Path) -> (BTreeMap<String, ProcessDef>, Vec<Problem>) {
    let mut defs = BTreeMap::new();
    let mut problems = Vec::new();
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) => {
            problems.push(Problem {
                file: dir.display().to_string(),
                key: String::new(),
                line: None,
                message: format!(
                    "cannot read the processes folder: {e}; set [paths] processes_dir"
                ),
            });
            return (defs, problems);
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    for path in paths {
        match load_file(&path) {
            Ok(def) => {
                defs.insert(def.name.clone(), def);
            }
            Err(p) => problems.extend(p),
        }
    }
    (defs, problems)
}
