//! The checks of an implicit semantic machine's file (`kind = "ism"`): its goal, loop bound
//! and actions, each action's effect and the fields that belong to it. Pure: text in,
//! `Ism` and problems out.

use super::raw::RawProcess;
use crate::ism::{Action, Effect, Ism};
use crate::steps::EXAMPLE_ACTION;
use crate::toml_file::{Problem, TomlFile};

/// An ISM's goal, playbook and actions, checked.
pub(super) fn ism_part(raw: &RawProcess, f: &TomlFile, problems: &mut Vec<Problem>) -> Option<Ism> {
    let kind_line = raw.kind.as_ref().and_then(|k| f.at(k.span()));
    let before = problems.len();
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
    let max_loops = match &raw.max_loops {
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
    };
    let mut actions: Vec<Action> = Vec::new();
    for (i, a) in raw.actions.iter().enumerate() {
        let key = |field: &str| format!("actions[{i}].{field}");
        let line = f.line(a.name.span().start);
        let name = a.name.get_ref().trim().to_string();
        // A selection lists names separated by commas, matches them ignoring case and
        // markup, and drops the example's placeholder: a name must survive all three.
        if crate::ism::normalise(&name).is_empty()
            || name == EXAMPLE_ACTION
            || name.chars().any(|c| c.is_control() || "<>\"&,".contains(c))
        {
            problems.push(f.problem(
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
            problems.push(f.problem(
                Some(line),
                &key("name"),
                format!("action `{name}` is defined twice"),
            ));
        }
        let effect_line = f.at(a.effect.span());
        let only = |field: &str, span: Option<std::ops::Range<usize>>, effects: &str| {
            span.map(|s| {
                f.problem(
                    f.at(s),
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
                    problems.push(f.problem(
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
                    problems.push(f.problem(
                        effect_line,
                        &key("to"),
                        "a `transition` action needs `to`, the process it hands over to".into(),
                    ));
                    None
                }
            },
            "done" => Some(Effect::Done),
            "tool" => {
                let named = a.tool.as_ref().map(|t| t.get_ref().trim());
                match named.and_then(split_tool) {
                    Some((server, tool)) => Some(Effect::Tool {
                        server: server.to_string(),
                        tool: tool.to_string(),
                    }),
                    None => {
                        let at = a.tool.as_ref().map_or(effect_line, |t| f.at(t.span()));
                        let message = match named {
                            None | Some("") => "a `tool` action needs `tool`, the tool it calls: `server.tool`, such as \"kb.lookup\"".to_string(),
                            Some(t) => format!("`{t}` is not a tool: name it `server.tool`, such as \"kb.lookup\" (the server's name: letters, digits, `_`, `-`)"),
                        };
                        problems.push(f.problem(at, &key("tool"), message));
                        None
                    }
                }
            }
            other => {
                problems.push(f.problem(
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
        if effect_name != Some("tool") {
            problems.extend(only("tool", a.tool.as_ref().map(|t| t.span()), "`tool`"));
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
