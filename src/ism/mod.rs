//! The Implicit Semantic Machine's pure core: what an ISM process is (a goal, a playbook and
//! the actions the soul may choose from) and the loop's bookkeeping, iteration by iteration:
//! when it stops (a newer message, `max_loops`, a final action, an unusable or repeated
//! choice), which chosen actions run and in what order, and the internal log the next
//! selection sees.
//!
//! No I/O, no model calls, no prompt text: the engine asks the model, runs each effect and
//! reports back; this module only decides.

use std::fmt;

/// An ISM process's own part of its file.
#[derive(Debug, Clone, PartialEq)]
pub struct Ism {
    pub goal: String,
    pub playbook: String,
    /// `None`: `[ism] max_loops`.
    pub max_loops: Option<u32>,
    pub actions: Vec<Action>,
}

/// One choice the soul has.
#[derive(Debug, Clone, PartialEq)]
pub struct Action {
    pub name: String,
    pub description: String,
    pub effect: Effect,
    /// The line of its `name` in the process file.
    pub line: usize,
}

/// What choosing an action does.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// One internal-monologue step, then the loop goes on.
    Think,
    /// One mental query, answered true or false, then the loop goes on.
    Query { question: String },
    /// External dialogue to the person; ends the loop unless `keep_going`.
    Respond { keep_going: bool },
    /// Hands the thread to another process; ends the loop.
    Transition {
        to: String,
        params: serde_json::Map<String, serde_json::Value>,
        execute_now: bool,
    },
    /// The goal is met; ends the loop.
    Done,
    /// Calls `tool` on the MCP server `server` with the arguments the selection gave; what it
    /// returns (untrusted text) goes into the log, then the loop goes on.
    Tool { server: String, tool: String },
}

impl Effect {
    /// The effect names of process files.
    pub const NAMES: [&'static str; 6] =
        ["think", "query", "respond", "transition", "done", "tool"];

    pub fn name(&self) -> &'static str {
        match self {
            Effect::Think => "think",
            Effect::Query { .. } => "query",
            Effect::Respond { .. } => "respond",
            Effect::Transition { .. } => "transition",
            Effect::Done => "done",
            Effect::Tool { .. } => "tool",
        }
    }

    /// Whether running it ends the loop.
    pub fn is_final(&self) -> bool {
        match self {
            Effect::Think | Effect::Query { .. } | Effect::Tool { .. } => false,
            Effect::Respond { keep_going } => !keep_going,
            Effect::Transition { .. } | Effect::Done => true,
        }
    }
}

impl Ism {
    /// The action a selection names: exact name first, then ignoring case, surrounding
    /// markup and spaces (small models write `**think**` or `"Think"`).
    pub fn action(&self, named: &str) -> Option<&Action> {
        let wanted = normalise(named);
        self.actions
            .iter()
            .find(|a| a.name == named)
            .or_else(|| self.actions.iter().find(|a| normalise(&a.name) == wanted))
    }

    /// The most model calls one run can make with `default_max_loops` as `[ism] max_loops`:
    /// per iteration the selection and one call for each think, query or respond action
    /// (each runs at most once per selection), then the closing answer. A tool call is not a
    /// model call.
    pub fn calls_per_run(&self, default_max_loops: u32) -> u64 {
        let loops = u64::from(self.max_loops.unwrap_or(default_max_loops).max(1));
        let calling = self
            .actions
            .iter()
            .filter(|a| {
                !matches!(
                    a.effect,
                    Effect::Transition { .. } | Effect::Done | Effect::Tool { .. }
                )
            })
            .count() as u64;
        loops * (1 + calling) + 1
    }

    /// The tool actions: (action, server, tool).
    pub fn tools(&self) -> impl Iterator<Item = (&Action, &str, &str)> {
        self.actions.iter().filter_map(|a| match &a.effect {
            Effect::Tool { server, tool } => Some((a, server.as_str(), tool.as_str())),
            _ => None,
        })
    }

    /// Whether some action answers the person.
    pub fn can_respond(&self) -> bool {
        self.actions
            .iter()
            .any(|a| matches!(a.effect, Effect::Respond { .. }))
    }
}

/// A name as a selection is matched: without surrounding markup, quotes and spaces, in
/// lower case.
pub fn normalise(name: &str) -> String {
    name.trim_matches(|c: char| c.is_whitespace() || "*_`'\"“”‘’.:-[]()".contains(c))
        .to_lowercase()
}

/// What the model chose in one selection, as the engine read it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Choice {
    pub actions: Vec<String>,
    pub reasoning: String,
    /// The arguments given after an action, as written: (the name it followed, the text).
    pub arguments: Vec<(String, String)>,
}

impl Choice {
    /// The arguments given for `action` (matched as names are), the last when given twice.
    pub fn arguments_for(&self, action: &str) -> Option<&str> {
        let wanted = normalise(action);
        self.arguments
            .iter()
            .rev()
            .find(|(name, _)| normalise(name) == wanted)
            .map(|(_, text)| text.as_str())
    }
}

/// Why a loop ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// A respond action ended it.
    Responded,
    /// A transition action ended it (the action's name).
    HandedOver(String),
    /// The soul said the goal is met.
    Done,
    /// `max_loops` iterations ran.
    MaxLoops,
    /// A newer message in the same conversation arrived.
    Interrupted,
    /// The selection could not be read.
    Unparsable,
    /// The selection named no action there is.
    NothingKnown,
    /// The same non-final choice came three times in a row.
    Repeated(String),
}

impl Ending {
    /// A short word for logs, metrics and records.
    pub fn word(&self) -> &'static str {
        match self {
            Ending::Responded => "responded",
            Ending::HandedOver(_) => "handed_over",
            Ending::Done => "done",
            Ending::MaxLoops => "max_loops",
            Ending::Interrupted => "interrupted",
            Ending::Unparsable => "unparsable",
            Ending::NothingKnown => "nothing_known",
            Ending::Repeated(_) => "repeated",
        }
    }
}

impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Ending::Responded => f.write_str("the soul answered"),
            Ending::HandedOver(a) => write!(f, "`{a}` handed the thread over"),
            Ending::Done => f.write_str("the soul said the goal is met"),
            Ending::MaxLoops => f.write_str("the loop reached max_loops"),
            Ending::Interrupted => f.write_str("a newer message arrived"),
            Ending::Unparsable => f.write_str("the selection could not be read"),
            Ending::NothingKnown => f.write_str("the selection named no known action"),
            Ending::Repeated(a) => write!(f, "`{a}` was chosen three times in a row"),
        }
    }
}

/// One iteration, as the log keeps it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Iteration {
    /// From 1.
    pub number: u32,
    /// The known actions chosen, in the order they run.
    pub chosen: Vec<String>,
    /// Names the selection gave that are not actions.
    pub unknown: Vec<String>,
    pub reasoning: String,
    /// What each action that ran produced: (action, a short account).
    pub produced: Vec<(String, String)>,
    /// The tool calls its tool actions made.
    pub calls: Vec<ToolCall>,
}

/// One tool call, as the log keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolCall {
    pub action: String,
    /// `server.tool`.
    pub tool: String,
    /// As sent (or as given, when nothing was sent).
    pub arguments: String,
    /// `ok`, `refused`, `invalid`, `timeout`, … (the metrics' outcome).
    pub outcome: String,
    pub ms: u64,
}

impl Iteration {
    /// The iteration as it is recorded (the reasoning is the record's text): its number,
    /// the actions chosen and skipped, and what each produced.
    pub fn record(&self) -> serde_json::Value {
        serde_json::json!({
            "iteration": self.number,
            "chosen": self.chosen,
            "unknown": self.unknown,
            "produced": self
                .produced
                .iter()
                .map(|(a, p)| serde_json::json!({ "action": a, "produced": p }))
                .collect::<Vec<_>>(),
            "tool_calls": self
                .calls
                .iter()
                .map(|c| serde_json::json!({
                    "action": c.action,
                    "tool": c.tool,
                    "arguments": c.arguments,
                    "outcome": c.outcome,
                    "ms": c.ms,
                }))
                .collect::<Vec<_>>(),
        })
    }

    /// An iteration read back from its record; missing or odd fields read as empty.
    pub fn from_record(reasoning: &str, record: &serde_json::Value) -> Iteration {
        let list = |key: &str| -> Vec<String> {
            record
                .get(key)
                .and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .filter_map(|v| v.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        let text = |v: &serde_json::Value, key: &str| {
            v.get(key)
                .and_then(|s| s.as_str())
                .unwrap_or("")
                .to_string()
        };
        Iteration {
            number: record
                .get("iteration")
                .and_then(|v| v.as_u64())
                .map_or(0, |n| n.min(u32::MAX as u64) as u32),
            chosen: list("chosen"),
            unknown: list("unknown"),
            reasoning: reasoning.to_string(),
            produced: record
                .get("produced")
                .and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .map(|p| (text(p, "action"), text(p, "produced")))
                        .collect()
                })
                .unwrap_or_default(),
            calls: record
                .get("tool_calls")
                .and_then(|v| v.as_array())
                .map(|a| {
                    a.iter()
                        .map(|c| ToolCall {
                            action: text(c, "action"),
                            tool: text(c, "tool"),
                            arguments: text(c, "arguments"),
                            outcome: text(c, "outcome"),
                            ms: c.get("ms").and_then(|m| m.as_u64()).unwrap_or(0),
                        })
                        .collect()
                })
                .unwrap_or_default(),
        }
    }
}

/// The actions one selection runs, and whether the loop ends before any of them.
#[derive(Debug, PartialEq)]
pub struct Decision<'a> {
    pub run: Vec<&'a Action>,
    pub ending: Option<Ending>,
}

/// A same choice this many times in a row ends the loop.
pub const REPEAT_LIMIT: u32 = 3;

/// One loop's bookkeeping.
#[derive(Debug)]
pub struct Loop<'a> {
    ism: &'a Ism,
    max_loops: u32,
    log: Vec<Iteration>,
    /// The last non-final choice and how many times in a row it came.
    streak: Option<(Vec<String>, u32)>,
    spoke: bool,
}

impl<'a> Loop<'a> {
    pub fn new(ism: &'a Ism, default_max_loops: u32) -> Loop<'a> {
        Loop {
            ism,
            max_loops: ism.max_loops.unwrap_or(default_max_loops).max(1),
            log: Vec::new(),
            streak: None,
            spoke: false,
        }
    }

    /// Before an iteration: whether the loop stops here.
    pub fn before_iteration(&self, newer_message: bool) -> Option<Ending> {
        if newer_message {
            Some(Ending::Interrupted)
        } else if self.log.len() as u32 >= self.max_loops {
            Some(Ending::MaxLoops)
        } else {
            None
        }
    }

    /// Takes the model's selection (`None`: it could not be read) and says what runs. An
    /// iteration is logged either way; unknown names are kept in it and skipped; nothing
    /// after a final action runs.
    pub fn choose(&mut self, choice: Option<Choice>) -> Decision<'a> {
        let number = self.log.len() as u32 + 1;
        let Some(choice) = choice else {
            self.log.push(Iteration {
                number,
                ..Iteration::default()
            });
            return Decision {
                run: Vec::new(),
                ending: Some(Ending::Unparsable),
            };
        };
        let mut it = Iteration {
            number,
            reasoning: choice.reasoning.trim().to_string(),
            ..Iteration::default()
        };
        let mut run: Vec<&'a Action> = Vec::new();
        let mut done_word = false;
        for name in &choice.actions {
            match self.ism.action(name) {
                Some(a) => {
                    if run.last().is_some_and(|last| last.effect.is_final()) {
                        break;
                    }
                    // Once per selection: a model repeating itself costs one call, not one
                    // per repetition.
                    if run.iter().any(|r| r.name == a.name) {
                        continue;
                    }
                    run.push(a);
                    it.chosen.push(a.name.clone());
                }
                // The seed's own word for "goal met", when no action has that name.
                None if normalise(name) == "done" => {
                    done_word = true;
                    break;
                }
                None => it.unknown.push(name.trim().to_string()),
            }
        }
        self.log.push(it);
        if run.is_empty() {
            let ending = if done_word {
                Ending::Done
            } else {
                Ending::NothingKnown
            };
            self.streak = None;
            return Decision {
                run,
                ending: Some(ending),
            };
        }
        if run.iter().any(|a| a.effect.is_final()) {
            self.streak = None;
        } else {
            let names: Vec<String> = run.iter().map(|a| a.name.clone()).collect();
            let count = match &self.streak {
                Some((last, n)) if *last == names => n + 1,
                _ => 1,
            };
            if count >= REPEAT_LIMIT {
                let what = names.join(", ");
                self.streak = None;
                return Decision {
                    run: Vec::new(),
                    ending: Some(Ending::Repeated(what)),
                };
            }
            self.streak = Some((names, count));
        }
        Decision { run, ending: None }
    }

    /// An action of the current iteration ran and produced `account`: whether that ends the
    /// loop.
    pub fn produced(&mut self, action: &Action, account: &str) -> Option<Ending> {
        if let Some(it) = self.log.last_mut() {
            it.produced
                .push((action.name.clone(), account.trim().to_string()));
        }
        match &action.effect {
            Effect::Respond { keep_going } => {
                self.spoke = true;
                (!keep_going).then_some(Ending::Responded)
            }
            Effect::Transition { .. } => Some(Ending::HandedOver(action.name.clone())),
            Effect::Done => Some(Ending::Done),
            Effect::Think | Effect::Query { .. } | Effect::Tool { .. } => None,
        }
    }

    /// A tool action of the current iteration made `call` (before its account is
    /// [`Loop::produced`]).
    pub fn called(&mut self, call: ToolCall) {
        if let Some(it) = self.log.last_mut() {
            it.calls.push(call);
        }
    }

    /// The iterations so far, oldest first.
    pub fn log(&self) -> &[Iteration] {
        &self.log
    }

    /// Whether a respond action has run.
    pub fn spoke(&self) -> bool {
        self.spoke
    }

    pub fn iterations(&self) -> u32 {
        self.log.len() as u32
    }

    pub fn max_loops(&self) -> u32 {
        self.max_loops
    }
}

#[cfg(test)]
mod tests;
