//! The checks of an implicit semantic machine's file (`kind = "ism"`): its goal, loop bound
//! and actions, each action's effect and the fields that belong to it. Pure: text in,
//! `Ism` and problems out.

use super::raw::{RawAction, RawProcess};
use crate::ism::{Action, Effect, Ism};
use crate::steps::EXAMPLE_ACTION;
use crate::toml_file::{Problem, TomlFile};

/// An ISM's goal, playbook and actions, checked.
pub(super) fn ism_part(raw: &RawProcess, f: &TomlFile, problems: &mut Vec<Problem>) -> Option<Ism> {
    let kind_line = raw.kind.as_ref().and_then(|k| f.at(k.span()));
    let before = problems.len();
    let goal = goal(raw, f, kind_line, problems);
    let max_loops = max_loops(raw, f, problems);
    let mut actions: Vec<Action> = Vec::new();
    for (i, a) in raw.actions.iter().enumerate() {
        if let Some(action) = action(i, a, &actions, f, problems) {
            actions.push(action);
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
        problems.push(f.problem(
            kind_line,
            "actions",
            "an ism process needs `[[actions]]` for the soul to choose from".into(),
        ));
    } else if problems.len() == before && !ism.can_respond() {
        problems.push(f.problem(
            kind_line,
            "actions",
            "no action answers the person: add one with `effect = \"respond\"`".into(),
        ));
    }
    Some(ism)
}

/// The goal, trimmed; a missing or blank one is a problem.
fn goal(
    raw: &RawProcess,
    f: &TomlFile,
    kind_line: Option<usize>,
    problems: &mut Vec<Problem>,
) -> String {
    let goal = raw
        .goal
        .as_ref()
        .map(|g| g.get_ref().trim().to_string())
        .unwrap_or_default();
    if goal.is_empty() {
        problems.push(f.problem(
            raw.goal.as_ref().map_or(kind_line, |g| f.at(g.span())),
            "goal",
            "an ism process needs a `goal`: what the soul is trying to achieve".into(),
        ));
    }
    goal
}

/// The loop bound, 1 to 50 when given.
fn max_loops(raw: &RawProcess, f: &TomlFile, problems: &mut Vec<Problem>) -> Option<u32> {
    match &raw.max_loops {
        None => None,
        Some(m) if (1..=50).contains(m.get_ref()) => Some(*m.get_ref() as u32),
        Some(m) => {
            problems.push(f.problem(
                f.at(m.span()),
                "max_loops",
                format!("{} is not a loop bound: use 1 to 50", m.get_ref()),
            ));
            None
        }
    }
}

/// The `i`th action, checked against those before it; `None` when its effect is unusable.
fn action(
    i: usize,
    a: &RawAction,
    before: &[Action],
    f: &TomlFile,
    problems: &mut Vec<Problem>,
) -> Option<Action> {
    let line = f.line(a.name.span().start);
    let name = a.name.get_ref().trim().to_string();
    problems.extend(
        name_problem(&name, before)
            .map(|m| f.problem(Some(line), &format!("actions[{i}].name"), m)),
    );
    let effect = effect(i, a, f, problems);
    problems.extend(misplaced_fields(i, a, effect.as_ref().map(|e| e.name()), f));
    Some(Action {
        name,
        description: a.description.trim().to_string(),
        effect: effect?,
        line,
    })
}

/// What is wrong with an action's name, if anything: a selection lists names separated by
/// commas, matches them ignoring case and markup, and drops the example's placeholder, so a
/// name must survive all three; and it must not repeat an earlier one.
fn name_problem(name: &str, before: &[Action]) -> Option<String> {
    if crate::ism::normalise(name).is_empty()
        || name == EXAMPLE_ACTION
        || name.chars().any(|c| c.is_control() || "<>\"&,".contains(c))
    {
        Some(format!(
            "`{name}` is not an action name: give it a word or two, without <, >, \", & or commas"
        ))
    } else if before
        .iter()
        .any(|b| crate::ism::normalise(&b.name) == crate::ism::normalise(name))
    {
        Some(format!("action `{name}` is defined twice"))
    } else {
        None
    }
}

/// The action's effect with the fields it needs; a missing field or an unknown effect is a
/// problem and `None`.
fn effect(i: usize, a: &RawAction, f: &TomlFile, problems: &mut Vec<Problem>) -> Option<Effect> {
    let key = |field: &str| format!("actions[{i}].{field}");
    let effect_line = f.at(a.effect.span());
    let (field, message) = match a.effect.get_ref().trim() {
        "think" => return Some(Effect::Think),
        "done" => return Some(Effect::Done),
        "respond" => {
            return Some(Effect::Respond {
                keep_going: a.keep_going.as_ref().is_some_and(|k| *k.get_ref()),
            })
        }
        "query" => match a.question.as_ref().map(|q| q.get_ref().trim()) {
            Some(q) if !q.is_empty() => {
                return Some(Effect::Query {
                    question: q.to_string(),
                })
            }
            _ => (
                "question",
                "a `query` action needs the `question` it asks (answered true or false)".into(),
            ),
        },
        "transition" => match a.to.as_ref().map(|t| t.get_ref().trim()) {
            Some(to) if !to.is_empty() => return Some(transition(a, to)),
            _ => (
                "to",
                "a `transition` action needs `to`, the process it hands over to".into(),
            ),
        },
        "tool" => return tool(i, a, f, problems),
        other => (
            "effect",
            format!(
                "unknown effect `{other}`; the effects are {}",
                Effect::NAMES.join(", ")
            ),
        ),
    };
    problems.push(f.problem(effect_line, &key(field), message));
    None
}

/// A transition to `to` with the action's parameters.
fn transition(a: &RawAction, to: &str) -> Effect {
    Effect::Transition {
        to: to.to_string(),
        params: a
            .params
            .as_ref()
            .and_then(|p| serde_json::to_value(p.get_ref()).ok())
            .and_then(|v| v.as_object().cloned())
            .unwrap_or_default(),
        execute_now: a.execute_now.as_ref().is_some_and(|e| *e.get_ref()),
    }
}

/// A tool call to `server.tool`; a missing or malformed name is a problem.
fn tool(i: usize, a: &RawAction, f: &TomlFile, problems: &mut Vec<Problem>) -> Option<Effect> {
    let named = a.tool.as_ref().map(|t| t.get_ref().trim());
    if let Some((server, tool)) = named.and_then(split_tool) {
        return Some(Effect::Tool {
            server: server.to_string(),
            tool: tool.to_string(),
        });
    }
    let at = a
        .tool
        .as_ref()
        .map_or(f.at(a.effect.span()), |t| f.at(t.span()));
    let message = match named {
        None | Some("") => "a `tool` action needs `tool`, the tool it calls: `server.tool`, such as \"kb.lookup\"".to_string(),
        Some(t) => format!("`{t}` is not a tool: name it `server.tool`, such as \"kb.lookup\" (the server's name: letters, digits, `_`, `-`)"),
    };
    problems.push(f.problem(at, &format!("actions[{i}].tool"), message));
    None
}

/// The fields given that belong to another effect than the action's, each a problem.
fn misplaced_fields(
    i: usize,
    a: &RawAction,
    effect_name: Option<&str>,
    f: &TomlFile,
) -> Vec<Problem> {
    // (field, where it was written, the effect it belongs to)
    let fields = [
        ("question", a.question.as_ref().map(|q| q.span()), "query"),
        (
            "continue",
            a.keep_going.as_ref().map(|k| k.span()),
            "respond",
        ),
        ("to", a.to.as_ref().map(|t| t.span()), "transition"),
        ("params", a.params.as_ref().map(|p| p.span()), "transition"),
        (
            "execute_now",
            a.execute_now.as_ref().map(|e| e.span()),
            "transition",
        ),
        ("tool", a.tool.as_ref().map(|t| t.span()), "tool"),
    ];
    fields
        .into_iter()
        .filter(|(_, _, owner)| effect_name != Some(*owner))
        .filter_map(|(field, span, owner)| {
            let message = format!(
                "`{field}` belongs to `{owner}`, not to effect `{}`",
                a.effect.get_ref().trim()
            );
            span.map(|s| f.problem(f.at(s), &format!("actions[{i}].{field}"), message))
        })
        .collect()
}

/// `server.tool` as (server, tool): a server name (letters, digits, `_`, `-`), a dot, and a
/// tool name that is not blank.
pub fn split_tool(named: &str) -> Option<(&str, &str)> {
    let (server, tool) = named.split_once('.')?;
    let server_ok = !server.is_empty()
        && server
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    (server_ok && !tool.trim().is_empty() && tool.trim() == tool).then_some((server, tool))
}
