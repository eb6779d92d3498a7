//! A dream's consolidation, thread by thread and batch by batch: the backlog read, one
//! bounded consolidation call, its answer read, the batch committed (summary, episodes, the
//! user models it refreshed), what came of it tallied into the report. Reads and writes only
//! through the dream's faces of the store (`Dreams`, and `States` to see whether a message
//! moved the soul out of the state it dreams in); the call goes through the `Caller`.
//!
//! Turning a backlog into the call's words and an answer into a `Consolidation` is pure
//! (`items`, `consolidation`); so is the tally (`DreamReport::tally`).

use tracing::info;

use super::model::Caller;
use super::DreamReport;
use crate::memory::dream::{Backlog, Consolidation, DreamHold, Keep, ModelRefresh};
use crate::memory::faces::{Dreams, States};
use crate::memory::{now_ms, EntryType, StoreError};
use crate::process::Library;
use crate::states::dream::{self as words, Dreamt, Item, Someone};
use crate::states::shutdown;
use crate::states::State;

/// The most entries one consolidation call shows.
const BATCH_ENTRIES: usize = 200;
/// The most characters one consolidation call shows (one entry at least).
const BATCH_CHARS: usize = 40_000;

/// What the consolidation reads and calls.
pub(super) struct Dreaming<'a> {
    pub dreams: &'a dyn Dreams,
    pub states: &'a dyn States,
    pub caller: Caller<'a>,
    /// The soul's files (read at each batch: a change shows in the next call).
    pub library: &'a Library,
    /// The state the soul dreams in (DREAM, or SHUTDOWN when no daemon runs).
    pub dreaming_in: State,
    /// The dream's lock: a dream that lost it stops (another may have begun).
    pub hold: &'a DreamHold,
}

/// What one batch came to.
#[derive(Debug, PartialEq)]
pub(super) enum Batched {
    /// Committed: the entries it summarised, those pruned, the episodes kept, the models
    /// refreshed.
    Written {
        summarised: u64,
        pruned: u64,
        episodes: u64,
        models: Vec<String>,
    },
    /// Another dream consolidated it meanwhile: nothing written.
    Taken,
    /// Nothing consolidated, in words; whether it was the call that failed.
    Failed { error: String, call_failed: bool },
}

impl Dreaming<'_> {
    /// Consolidates every thread with a backlog, until done or until the dream must yield.
    pub(super) async fn all(&self, r: &mut DreamReport) {
        let threads = match self.dreams.dream_threads(self.keep()).await {
            Ok(t) => t,
            Err(e) => {
                r.errors.push(e.to_string());
                return;
            }
        };
        r.threads = threads.len();
        for thread in threads {
            if !self.thread(&thread, r).await {
                break;
            }
        }
        if r.yielded {
            // What is left, for the report: counted without a model call.
            r.backlog_left = self.left().await.unwrap_or(0);
        }
    }

    /// One thread, batch by batch: false when the dream yields.
    async fn thread(&self, thread: &str, r: &mut DreamReport) -> bool {
        // Whether a batch of this thread was written yet (it counts once).
        let mut done_any = false;
        loop {
            if self.interrupted().await {
                r.yielded = true;
                return false;
            }
            if !self.hold.holds() {
                r.errors
                    .push("the dream's lock was lost (its connection closed)".into());
                r.yielded = true;
                return false;
            }
            let backlog = match (self.dreams)
                .backlog(thread, self.keep(), BATCH_ENTRIES, BATCH_CHARS)
                .await
            {
                Ok(Some(b)) => b,
                Ok(None) => return true,
                Err(e) => {
                    r.errors.push(format!("{thread}: {e}"));
                    return true;
                }
            };
            r.model_calls += 1;
            let batched = self.batch(thread, &backlog).await;
            let more = matches!(batched, Batched::Written { .. }) && backlog.left > 0;
            let written = matches!(batched, Batched::Written { .. });
            r.tally(thread, &backlog, batched, !done_any);
            done_any |= written;
            if !more {
                return true;
            }
        }
    }

    /// One batch: the call, its answer read, the consolidation committed.
    async fn batch(&self, thread: &str, backlog: &Backlog) -> Batched {
        let timeout = std::time::Duration::from_secs(self.caller.config.llm.timeout_secs);
        let soul = self.library.current().soul.soul_md.clone();
        let people = people(backlog);
        let call =
            words::consolidation(&soul, backlog.summary.as_deref(), &items(backlog), &people);
        let dreamt = match self.caller.state_call(&call, timeout).await {
            Ok(answer) => words::read_consolidation(&answer, &people),
            Err(error) => {
                return Batched::Failed {
                    error,
                    call_failed: true,
                }
            }
        };
        let Some(dreamt) = dreamt else {
            return Batched::Failed {
                error: "the answer held no <summary>; nothing consolidated".into(),
                call_failed: false,
            };
        };
        let c = consolidation(thread, backlog, dreamt);
        let episodes = c.episodes.len() as u64;
        match self.dreams.consolidate(c, self.keep()).await {
            Ok(done) if done.written => Batched::Written {
                summarised: backlog.entries.len() as u64,
                pruned: done.pruned,
                episodes,
                models: done.models,
            },
            Ok(_) => Batched::Taken,
            Err(e) => Batched::Failed {
                error: e.to_string(),
                call_failed: false,
            },
        }
    }

    /// Whether the dream should stop: the soul left the state it dreams in.
    async fn interrupted(&self) -> bool {
        match self.states.cognitive_state().await {
            Ok(row) => State::from_name(&row.state) != Some(self.dreaming_in),
            Err(_) => true,
        }
    }

    /// What a dream keeps of each conversation, as of now: the newest `[dream] keep_recent`
    /// entries, and the last hour, which the conditional shutdown reads.
    fn keep(&self) -> Keep {
        Keep {
            entries: self.caller.config.states.dream_keep_recent,
            since_ms: now_ms() - shutdown::RECENT_MS,
        }
    }

    /// The entries still waiting for a dream.
    async fn left(&self) -> Result<u64, StoreError> {
        let keep = self.keep();
        let mut n = 0;
        for t in self.dreams.dream_threads(keep).await? {
            if let Some(b) = self
                .dreams
                .backlog(&t, keep, usize::MAX, usize::MAX)
                .await?
            {
                n += b.entries.len() as u64;
            }
        }
        Ok(n)
    }
}

impl DreamReport {
    /// Adds what a batch of `thread` came to (`first`: no batch of its thread was written
    /// before it).
    pub(super) fn tally(&mut self, thread: &str, backlog: &Backlog, b: Batched, first: bool) {
        match b {
            Batched::Written {
                summarised,
                pruned,
                episodes,
                models,
            } => {
                // A thread counts once, at the batch that first consolidated some of it.
                if first {
                    self.threads_consolidated += 1;
                }
                self.entries_summarised += summarised;
                self.entries_pruned += pruned;
                self.episodes += episodes;
                for m in models {
                    if !self.models_refreshed.contains(&m) {
                        self.models_refreshed.push(m);
                    }
                }
            }
            Batched::Taken => {
                info!(thread = %thread, "dream: another dream consolidated this batch")
            }
            Batched::Failed { error, call_failed } => {
                self.failed_calls += u32::from(call_failed);
                self.errors.push(format!("{thread}: {error}"));
                self.backlog_left += backlog.entries.len() as u64 + backlog.left;
            }
        }
    }
}

/// The people of a batch, as the call names them.
fn people(backlog: &Backlog) -> Vec<Someone<'_>> {
    backlog
        .people
        .iter()
        .map(|p| Someone {
            id: &p.user_id,
            name: &p.display_name,
        })
        .collect()
}

/// The batch's entries as the call tells them: who did what.
fn items(backlog: &Backlog) -> Vec<Item<'_>> {
    backlog
        .entries
        .iter()
        .map(|e| {
            let who = e
                .user_id
                .as_deref()
                .and_then(|u| backlog.people.iter().find(|p| p.user_id == u))
                .map_or("someone", |p| p.display_name.as_str());
            let (who, what) = match e.entry_type {
                EntryType::UserMessage => (who, "said"),
                EntryType::ExternalDialog => ("you", "said"),
                EntryType::InternalMonologue => ("you", "thought"),
                EntryType::MentalQuery => ("you", "asked yourself"),
                EntryType::SoulStateUpdate => ("you", "noted your state"),
                EntryType::UserModelUpdate => ("you", "updated a user model"),
                EntryType::ActionSelection => ("you", "chose"),
            };
            Item {
                who,
                what,
                text: &e.content,
            }
        })
        .collect()
}

/// What the dream read from a batch, as the store commits it: the summary, the episodes,
/// and the note on each person who has a model (a person without one yet gets their first
/// from a turn).
fn consolidation(thread: &str, backlog: &Backlog, dreamt: Dreamt) -> Consolidation {
    let models = dreamt
        .notes
        .iter()
        .filter_map(|(id, note)| {
            let p = backlog.people.iter().find(|p| &p.user_id == id)?;
            let model = p.model.as_deref()?;
            Some(ModelRefresh {
                user_id: id.clone(),
                version: p.model_version,
                model: format!("{}\n- {}", model.trim_end(), note),
                note: format!("Dream: {note}"),
            })
        })
        .collect();
    Consolidation {
        thread: thread.to_string(),
        since_id: backlog.since_id,
        summary: dreamt.summary,
        first_id: backlog.entries[0].id,
        through_id: backlog.entries.last().map_or(0, |e| e.id),
        episodes: dreamt.memories,
        models,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::dream::Person;
    use crate::memory::Entry;

    fn entry(id: i64, t: EntryType, user: Option<&str>, content: &str) -> Entry {
        Entry {
            id,
            thread: "C1:1.0".into(),
            entry_type: t,
            content: content.into(),
            verb: None,
            user_id: user.map(str::to_string),
            metadata: serde_json::json!({}),
            created_at: 0,
        }
    }

    fn person(id: &str, name: &str, model: Option<&str>) -> Person {
        Person {
            user_id: id.into(),
            display_name: name.into(),
            model: model.map(str::to_string),
            model_version: 3,
        }
    }

    fn backlog(left: u64) -> Backlog {
        Backlog {
            thread: "C1:1.0".into(),
            since_id: 1,
            summary: None,
            entries: vec![
                entry(5, EntryType::UserMessage, Some("U1"), "hello"),
                entry(6, EntryType::ExternalDialog, None, "hi Ann"),
                entry(7, EntryType::UserMessage, Some("U9"), "who?"),
            ],
            left,
            people: vec![
                person("U1", "Ann", Some("Ann likes tea.\n")),
                person("U2", "Bo", None),
            ],
        }
    }

    #[test]
    fn a_batch_is_told_as_who_did_what() {
        let b = backlog(0);
        let told: Vec<(&str, &str, &str)> =
            items(&b).iter().map(|i| (i.who, i.what, i.text)).collect();
        assert_eq!(
            told,
            [
                ("Ann", "said", "hello"),
                ("you", "said", "hi Ann"),
                ("someone", "said", "who?")
            ]
        );
    }

    #[test]
    fn a_consolidation_refreshes_only_the_models_of_people_who_have_one() {
        let b = backlog(0);
        let dreamt = Dreamt {
            summary: "They met.".into(),
            memories: vec![("first meeting".into(), 6)],
            notes: vec![
                ("U1".into(), "greets warmly".into()),
                ("U2".into(), "new here".into()),
            ],
        };
        let c = consolidation("C1:1.0", &b, dreamt);
        assert_eq!((c.first_id, c.through_id, c.since_id), (5, 7, 1));
        assert_eq!(
            c.models.len(),
            1,
            "Bo has no model yet: a turn gives the first"
        );
        let m = &c.models[0];
        assert_eq!(m.user_id, "U1");
        assert_eq!(m.version, 3);
        assert_eq!(m.model, "Ann likes tea.\n- greets warmly");
        assert_eq!(m.note, "Dream: greets warmly");
    }

    #[test]
    fn the_tally_counts_a_thread_once_and_a_failure_leaves_its_backlog() {
        let mut r = DreamReport::default();
        let written = |models: &[&str]| Batched::Written {
            summarised: 3,
            pruned: 2,
            episodes: 1,
            models: models.iter().map(|m| m.to_string()).collect(),
        };
        r.tally("C1", &backlog(4), written(&["U1"]), true);
        r.tally("C1", &backlog(0), written(&["U1"]), false);
        assert_eq!(r.threads_consolidated, 1);
        assert_eq!(
            (r.entries_summarised, r.entries_pruned, r.episodes),
            (6, 4, 2)
        );
        assert_eq!(r.models_refreshed, ["U1"]);
        let failed = Batched::Failed {
            error: "no answer".into(),
            call_failed: true,
        };
        r.tally("C2", &backlog(10), failed, true);
        assert_eq!(r.failed_calls, 1);
        assert_eq!(r.backlog_left, 13, "the batch and what follows it");
        assert_eq!(r.errors, ["C2: no answer"]);
        let unread = Batched::Failed {
            error: "no summary".into(),
            call_failed: false,
        };
        r.tally("C3", &backlog(0), unread, true);
        assert_eq!(r.failed_calls, 1, "the call answered");
        r.tally("C4", &backlog(0), Batched::Taken, true);
        assert_eq!(r.threads_consolidated, 1);
        assert_eq!(r.backlog_left, 16);
    }
}
