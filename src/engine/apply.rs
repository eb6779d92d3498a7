//! Turns parsed answers into a turn's writes, acting only on the steps that were requested.
//!
//! A turn may run several processes (an execute_now chain); each run's answer is applied to
//! one `Outcome`, so the turn still commits as one transaction. Only the last run's dialogue
//! is said: an earlier run's dialogue was superseded by the process it handed over to.

use serde::Serialize;
use tracing::{debug, info};

use crate::memory::soul_state::model_may_set;
use crate::memory::{EntryType, NewEntry, SoulState, UserRecord};
use crate::parse::Cognition;
use crate::prompt::TurnPlan;
use crate::steps::{Step, SOUL_STATE_CHECK, USER_MODEL_CHECK};

/// A soul-state key that changed this turn.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StateChange {
    pub key: String,
    pub from: String,
    pub to: String,
}

/// What the runs of one turn add up to.
#[derive(Debug, Default)]
pub struct Outcome {
    pub entries: Vec<NewEntry>,
    pub soul_updates: Vec<(String, String)>,
    pub state_changes: Vec<StateChange>,
    pub user_model: Option<(String, String)>,
    pub injected_user_model: bool,
}

impl Outcome {
    /// Applies one run's answer. `soul` is the state as this turn has left it so far and is
    /// updated in place, so a process handed to later sees the changes.
    pub fn apply(
        &mut self,
        plan: &TurnPlan,
        c: &Cognition,
        user: Option<&UserRecord>,
        soul: &mut SoulState,
        extra_meta: &serde_json::Value,
    ) {
        let meta = |mut v: serde_json::Value| {
            if let (Some(obj), Some(extra)) = (v.as_object_mut(), extra_meta.as_object()) {
                obj.extend(extra.clone());
            }
            v
        };
        self.injected_user_model |= plan.inject_user_model;
        if let Some(m) = c
            .monologue
            .as_ref()
            .filter(|_| plan.requests(Step::InternalMonologue))
        {
            self.entries.push(
                NewEntry::new(EntryType::InternalMonologue, &m.text)
                    .verb(m.verb.clone())
                    .metadata(meta(serde_json::json!({}))),
            );
        }
        if plan.requests(Step::MentalQuery) {
            for q in &c.mental_queries {
                self.entries.push(
                    NewEntry::new(EntryType::MentalQuery, &q.question)
                        .metadata(meta(serde_json::json!({ "result": q.answer }))),
                );
            }
        }
        self.apply_user_model(plan, c, user, &meta);
        self.apply_soul_state(plan, c, soul, &meta);
    }

    /// The user-model check's answer, and the update it allows (only after a true check).
    fn apply_user_model(
        &mut self,
        plan: &TurnPlan,
        c: &Cognition,
        user: Option<&UserRecord>,
        meta: &impl Fn(serde_json::Value) -> serde_json::Value,
    ) {
        if let (true, Some(answer), Some(user)) = (
            plan.requests(Step::UserModelCheck),
            c.user_model_check,
            user,
        ) {
            self.entries.push(
                NewEntry::new(EntryType::MentalQuery, USER_MODEL_CHECK)
                    .user(&user.user_id)
                    .metadata(meta(serde_json::json!({ "result": answer }))),
            );
        }
        match (
            &c.user_model_update,
            plan.requests(Step::UserModelUpdate),
            c.user_model_check,
            user,
        ) {
            (Some(model), true, Some(true), Some(user)) => {
                let note = c
                    .model_change_note
                    .clone()
                    .unwrap_or_else(|| format!("Updated the model of {}.", user.display_name));
                self.entries.push(
                    NewEntry::new(EntryType::UserModelUpdate, &note)
                        .user(&user.user_id)
                        .metadata(meta(
                            serde_json::json!({ "version": user.model_version + 1 }),
                        )),
                );
                self.user_model = Some((model.clone(), note));
            }
            (Some(_), true, ..) => debug!("user_model_update ignored: the check did not say true"),
            (Some(_), false, ..) => {
                debug!("volunteered user_model_update ignored: not requested this turn")
            }
            (None, ..) => {}
        }
    }

    /// The soul-state check's answer, and the update it allows (only after a true check):
    /// the keys the model may set, applied to `soul` in place.
    fn apply_soul_state(
        &mut self,
        plan: &TurnPlan,
        c: &Cognition,
        soul: &mut SoulState,
        meta: &impl Fn(serde_json::Value) -> serde_json::Value,
    ) {
        if let (true, Some(answer)) = (plan.requests(Step::SoulStateCheck), c.soul_state_check) {
            self.entries.push(
                NewEntry::new(EntryType::MentalQuery, SOUL_STATE_CHECK)
                    .metadata(meta(serde_json::json!({ "result": answer }))),
            );
        }
        if c.soul_state_update.is_empty() {
            return;
        }
        if !plan.requests(Step::SoulStateUpdate) {
            debug!("volunteered soul_state_update ignored: not requested this turn");
            return;
        }
        if c.soul_state_check != Some(true) {
            debug!("soul_state_update ignored: the check did not say true");
            return;
        }
        let mut lines = Vec::new();
        for (key, value) in &c.soul_state_update {
            if !model_may_set(key) {
                info!(key = %key, "unknown soul-state key ignored");
                continue;
            }
            let from = soul.get(key).to_string();
            if from != *value {
                self.state_changes.push(StateChange {
                    key: key.clone(),
                    from,
                    to: value.clone(),
                });
                self.soul_updates.retain(|(k, _)| k != key);
                self.soul_updates.push((key.clone(), value.clone()));
                soul.set(key, value);
                lines.push(format!("{key}: {value}"));
            }
        }
        if !lines.is_empty() {
            self.entries.push(
                NewEntry::new(EntryType::SoulStateUpdate, lines.join("\n"))
                    .metadata(meta(serde_json::json!({}))),
            );
        }
    }

    /// Records what was said: the last run's reply.
    pub fn say(&mut self, c: &Cognition, extra_meta: &serde_json::Value) {
        let mut meta = serde_json::json!({ "source": c.reply_source });
        if let (Some(obj), Some(extra)) = (meta.as_object_mut(), extra_meta.as_object()) {
            obj.extend(extra.clone());
        }
        self.entries.push(
            NewEntry::new(EntryType::ExternalDialog, &c.reply)
                .verb(c.dialogue.as_ref().and_then(|d| d.verb.clone()))
                .metadata(meta),
        );
    }
}
