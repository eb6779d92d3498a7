//! One run of an eval: a throwaway home (a copy of the soul and process folders, a fresh
//! SQLite store and model repository in a temporary folder, removed afterwards), the engine
//! built on it as `anima chat` builds it, the conversation said turn by turn, and every
//! expectation checked after its turn.
//!
//! Never opens the configured home's store or repository: the configuration is copied with
//! every path pointed into the throwaway home. A pause (`after`) moves the soul's clock on
//! through the process-wide clock offset (`memory::set_clock_offset`), so one run is one
//! process: `anima eval` starts a child per run (`cli/eval.rs`) and runs share nothing.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::expect::{self, Expect, Observed};
use super::file::{Eval, Turn};
use super::judge;
use crate::config::{Config, StoreBackend};
use crate::engine::{Engine, Message, Perception, TurnOutcome};

/// What the reply check is named in a report.
pub const NO_RAW_TAG: &str = "no raw tag or internal block in the reply";
/// What a turn whose model failed is named in a report.
pub const MODEL_ANSWERS: &str = "the model answers";
/// What a run that could not be carried out is named in a report.
pub const RUN_COMPLETES: &str = "the run completes";

/// An expectation that did not hold, and what came instead.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failed {
    /// From 1; 0 for the run as a whole.
    pub turn: usize,
    pub expectation: String,
    pub got: String,
}

/// A temporary folder holding one run's home, removed when dropped.
pub struct Throwaway {
    pub root: PathBuf,
}

impl Throwaway {
    /// A new folder under the system's temporary one, with copies of `soul_dir` and
    /// `processes_dir` (those that exist: a missing one stays missing, so the built-in soul
    /// or processes answer, as they would for the configured home).
    pub fn new(soul_dir: &Path, processes_dir: &Path) -> std::io::Result<Throwaway> {
        let root =
            std::env::temp_dir().join(format!("anima-eval-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&root)?;
        let t = Throwaway { root };
        if soul_dir.is_dir() {
            copy_dir(soul_dir, &t.soul_dir())?;
        }
        if processes_dir.is_dir() {
            copy_dir(processes_dir, &t.processes_dir())?;
        }
        Ok(t)
    }

    pub fn home(&self) -> PathBuf {
        self.root.join("home")
    }

    pub fn soul_dir(&self) -> PathBuf {
        self.root.join("soul")
    }

    pub fn processes_dir(&self) -> PathBuf {
        self.root.join("processes")
    }

    /// `config` with every path in this home: its store SQLite, the model `model` when given,
    /// nothing streamed, no daimon asked (a run is the soul's own, repeatable, and spends no
    /// other service's budget).
    pub fn config(&self, config: &Config, model: Option<&str>) -> Config {
        let mut c = config.clone();
        c.home = self.home();
        c.soul_dir = self.soul_dir();
        c.processes_dir = self.processes_dir();
        c.store.backend = StoreBackend::Sqlite;
        c.llm.stream = false;
        c.daimons.clear();
        if let Some(m) = model {
            c.llm.model = m.to_string();
        }
        c
    }
}

impl Drop for Throwaway {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Copies the files of `from` into `to`, folders included (links followed).
fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let path = entry.path();
        if path.is_dir() {
            copy_dir(&path, &to.join(entry.file_name()))?;
        } else {
            std::fs::copy(&path, to.join(entry.file_name()))?;
        }
    }
    Ok(())
}

/// Runs `eval` once in a throwaway home on `config` (with `model`, when given): the
/// expectations that failed, in turn order. A run that cannot be carried out (no engine, a
/// store that fails) is one failure, turn 0.
pub async fn run(config: &Config, model: Option<&str>, eval: &Eval) -> Vec<Failed> {
    let home = match Throwaway::new(&config.soul_dir, &config.processes_dir) {
        Ok(h) => h,
        Err(e) => return vec![whole(format!("cannot make a throwaway home: {e}"))],
    };
    let config = Arc::new(home.config(config, model));
    let result = conversation(&config, eval).await;
    crate::memory::set_clock_offset(0);
    drop(home);
    result.unwrap_or_else(|e| vec![whole(e)])
}

fn whole(got: String) -> Failed {
    Failed {
        turn: 0,
        expectation: RUN_COMPLETES.into(),
        got,
    }
}

async fn build(config: &Arc<Config>) -> Result<Engine, String> {
    Engine::build(config)
        .await
        .map(Engine::start_tools)
        .map_err(|e| format!("the engine could not be built: {e}"))
}

/// The conversation, turn by turn: the failures, or why the run stopped.
async fn conversation(config: &Arc<Config>, eval: &Eval) -> Result<Vec<Failed>, String> {
    let mut engine = build(config).await?;
    let mut failures = Vec::new();
    let mut said: Vec<(String, String)> = Vec::new();
    let mut ahead_us: i64 = 0;
    for (i, turn) in eval.turns.iter().enumerate() {
        let number = i + 1;
        if !turn.after.is_zero() {
            ahead_us = ahead_us.saturating_add(turn.after.as_micros().min(i64::MAX as u128) as i64);
            crate::memory::set_clock_offset(ahead_us);
        }
        if turn.restart && i > 0 {
            engine.flush_traces().await;
            engine.stop_tools().await;
            drop(engine);
            engine = build(config).await?;
        }
        let user_id = format!("eval:{}", crate::memory::slug(&turn.from, "tester"));
        let outcome = engine
            .perceive(&message(turn, &user_id))
            .await
            .map_err(|e| format!("turn {number}: the store failed: {e}"))?;
        if let Some(err) = &outcome.error {
            failures.push(Failed {
                turn: number,
                expectation: MODEL_ANSWERS.into(),
                got: format!("{err} (the run stopped here)"),
            });
            break;
        }
        let seen = observe(&engine, &outcome, &user_id).await?;
        said.push((turn.from.clone(), turn.say.clone()));
        if let Some(tag) = expect::raw_tag(&seen.reply) {
            failures.push(Failed {
                turn: number,
                expectation: NO_RAW_TAG.into(),
                got: format!("{tag} in the reply: {}", expect::quote(&seen.reply)),
            });
        }
        for e in &turn.expect {
            let result = match e.check(&seen) {
                Some(r) => r,
                None => judged(&engine, e, &said, &seen.reply).await,
            };
            if let Err(got) = result {
                failures.push(Failed {
                    turn: number,
                    expectation: e.describe(),
                    got,
                });
            }
        }
        // The judge reads the soul's words under its name, as the person saw them.
        let soul = engine.library().current().soul.name().to_string();
        said.push((soul, seen.reply));
    }
    engine.flush_traces().await;
    engine.stop_tools().await;
    Ok(failures)
}

fn message(turn: &Turn, user_id: &str) -> Perception {
    Perception::Message(Message {
        thread: turn.thread.clone(),
        user_id: user_id.to_string(),
        display_name: turn.from.clone(),
        text: turn.say.clone(),
        attachments: Vec::new(),
        source: None,
        inbox_id: None,
        claim: None,
        newer: None,
        speech: None,
    })
}

async fn judged(
    engine: &Engine,
    e: &Expect,
    said: &[(String, String)],
    reply: &str,
) -> Result<(), String> {
    let Expect::Judge(q) = e else {
        return Ok(());
    };
    judge::outcome(judge::ask(engine.provider().as_ref(), said, reply, q).await)
}

/// What the turn left: its reply, the thread's process, the soul's state, the speaker's
/// model, the tools called.
async fn observe(
    engine: &Engine,
    outcome: &TurnOutcome,
    user_id: &str,
) -> Result<Observed, String> {
    let store = engine.store();
    let failed = |e: crate::memory::StoreError| format!("reading the throwaway store: {e}");
    let state = store.cognitive_state().await.map_err(failed)?.state;
    let soul_state = store.soul_state().await.map_err(failed)?;
    let soul_state = soul_state
        .all()
        .iter()
        .map(|(k, v)| format!("{k}: {v}"))
        .collect::<Vec<_>>()
        .join("\n");
    let user_model = store
        .user(user_id)
        .await
        .map_err(failed)?
        .and_then(|u| u.model);
    let tool_calls = outcome
        .machine_log
        .iter()
        .flat_map(|it| it.calls.iter())
        .map(|c| (c.tool.clone(), c.arguments.clone()))
        .collect();
    Ok(Observed {
        reply: outcome.reply.clone(),
        process: outcome.process.clone(),
        state,
        user_model,
        soul_state,
        tool_calls,
    })
}
