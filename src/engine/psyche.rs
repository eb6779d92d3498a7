//! The psychology substrate in a turn: the message's event applied to the soul's substrate
//! (one write transaction), then the context packet that the prompt's `<inner_life>` section
//! describes in words. The numbers stay in the store; the packet holds words only.
//!
//! After the turn, the stance shifts and intention updates the answer holds go through the
//! table (`psyche::mapping`, one write transaction, only when there are any); a target is the
//! person spoken with, named as the prompt names them.
//!
//! A message that does not address the soul (in a channel it is in) is `overhear`d: its
//! event moves the substrate and the meaningfulness gate decides, with `[autonomy]`'s rules
//! and channels, whether it deserves cognition; no model is called here, whatever comes.
//!
//! A failure here is logged and the turn goes on without an inner life: the soul answers as
//! it did before the substrate existed, never worse.

use tracing::{info, warn};

use super::perception::Message;
use super::tracer::Tracer;
use super::{Engine, EngineError};
use crate::config::AutonomyConfig;
use crate::memory::faces::Psychology;
use crate::memory::now_ms;
use crate::memory::psyche::Place;
use crate::process::Loaded;
use crate::psyche::answer;
use crate::psyche::{Decision, Event, EventKind, GateRules, Packet};

/// What happened, for [`Engine::feel`].
#[derive(Debug, Clone, Copy)]
pub struct Happened<'a> {
    pub kind: EventKind,
    /// Where, if anywhere (a tick: where the soul last overheard something it may come back
    /// to, or nowhere).
    pub channel: Option<&'a str>,
    /// Who, if anyone.
    pub person: Option<&'a str>,
    /// Its words (a reaction's, a joining's; a tick's: the message it may come back to).
    pub text: &'a str,
    pub at_ms: i64,
}

/// Applies an addressed message to the substrate and builds the turn's packet, through the
/// psychology face only.
pub(super) async fn psyche_turn(
    store: &dyn Psychology,
    autonomy: &AutonomyConfig,
    m: &Message,
    lib: &Loaded,
    tracer: &Tracer<'_>,
) -> Option<Packet> {
    let soul = lib.soul.name().to_string();
    let psyche = lib.psyche.clone();
    let rules = gate_rules(autonomy);
    let event = Event {
        kind: EventKind::Addressed,
        person: Some(m.user_id.clone()),
        text: m.text.clone(),
        at: now_ms(),
    };
    let people = vec![(m.user_id.clone(), m.display_name.clone())];
    let key = m
        .source
        .clone()
        .or_else(|| m.inbox_id.map(|id| format!("inbox:{id}")));
    let place = Place::default();
    let result = async {
        let decided = match &key {
            // A message from the inbox may come again (a retried turn): once only.
            Some(key) => {
                store
                    .psyche_event_once(&soul, &psyche, &rules, &event, &place, key)
                    .await?
            }
            None => Some(
                store
                    .psyche_event(&soul, &psyche, &rules, &event, &place)
                    .await?,
            ),
        };
        if let Some((_, d)) = decided {
            tracer.decision("gate", || {
                let v = d.verdict.name();
                format!(
                    "{v} (meaning {:.2}, threshold {:.2})",
                    d.meaning, d.threshold
                )
            });
        }
        store
            .psyche_packet(&soul, &psyche, &people, &event.text, event.at)
            .await
    }
    .await;
    match result {
        Ok(packet) => Some(packet),
        Err(e) => {
            warn!(error = %e, "the psyche could not take this message in; the turn goes on without its inner life");
            tracer.error(|| format!("the psyche could not take this message in: {e}"));
            None
        }
    }
}

/// Applies the answer's stance shifts and intention updates, through the table.
pub(super) async fn psyche_after(
    store: &dyn Psychology,
    raw: &str,
    m: &Message,
    lib: &Loaded,
    tracer: &Tracer<'_>,
) {
    let (shifts, updates) = answer::read(raw);
    if shifts.is_empty() && updates.is_empty() {
        return;
    }
    let is_speaker = |name: &str| {
        let name = name.trim().trim_start_matches('@');
        name.is_empty()
            || name.eq_ignore_ascii_case(&m.display_name)
            || name == m.user_id
            || name.to_lowercase() == m.display_name.to_lowercase()
    };
    // Only the person spoken with can be a stance's target.
    let shifts: Vec<_> = shifts
        .into_iter()
        .filter(|s| is_speaker(&s.target))
        .map(|mut s| {
            s.target = m.user_id.clone();
            s
        })
        .collect();
    let updates: Vec<_> = updates
        .into_iter()
        .map(|mut u| {
            if u.target.as_deref().is_some_and(is_speaker) {
                u.target = Some(m.user_id.clone());
            }
            u
        })
        .collect();
    let soul = lib.soul.name().to_string();
    let psyche = lib.psyche.clone();
    let now = now_ms();
    match store
        .psyche_post_cognition(&soul, &psyche, &shifts, &updates, now)
        .await
    {
        Ok(applied) if !applied.is_empty() => {
            info!(applied = ?applied, "psyche changed by the answer");
            for line in &applied {
                tracer.memory("psyche", || line.clone());
            }
        }
        Ok(_) => {}
        Err(e) => warn!(error = %e, "the answer's stances and intentions could not be applied"),
    }
}

impl Engine {
    /// A message in `channel` that does not address the soul: applied to the substrate, and
    /// the gate's decision (logged with its inputs). `Verdict::Speak` means the soul may take
    /// a turn on it unasked; the cooldown has then begun. `source`: the message's working-memory
    /// source (its inbox row), so that the turn answering it does not apply it again; `None`
    /// when that source was heard before.
    pub async fn overhear(
        &self,
        channel: &str,
        user_id: &str,
        text: &str,
        at_ms: i64,
        source: &str,
    ) -> Result<Option<Decision>, EngineError> {
        let happened = Happened {
            kind: EventKind::Overheard,
            channel: Some(channel),
            person: Some(user_id),
            text,
            at_ms,
        };
        self.feel(happened, source).await
    }

    /// Something that happened to the soul that is not a message to answer (a reaction to
    /// its message, a person joining, the tick): applied to the substrate once per `source`,
    /// with the gate's decision logged. `None` when that source was felt before. Deciding
    /// calls no model; acting on a `Speak` is the caller's.
    pub async fn feel(
        &self,
        happened: Happened<'_>,
        source: &str,
    ) -> Result<Option<Decision>, EngineError> {
        let lib = self.library.current();
        let soul = lib.soul.name().to_string();
        let psyche = lib.psyche.clone();
        let rules = gate_rules(&self.config.autonomy);
        let place = Place {
            channel: happened.channel.map(str::to_string),
            listened: happened
                .channel
                .is_some_and(|c| self.config.autonomy.listens_in(c)),
        };
        let event = Event {
            kind: happened.kind,
            person: happened.person.map(str::to_string),
            text: happened.text.to_string(),
            at: happened.at_ms,
        };
        let key = source.to_string();
        let heard = self
            .store
            .psyche_event_once(&soul, &psyche, &rules, &event, &place, &key)
            .await?;
        Ok(heard.map(|(_, decision)| decision))
    }
}

impl Engine {
    /// Samples the inner life now, for the window's charts: mood, each drive and energy, read
    /// through the psychology face; the store keeps the newest `keep` samples.
    pub async fn sample_inner_life(&self, keep: u64) -> Result<(), EngineError> {
        let lib = self.library.current();
        let now = now_ms();
        let mind = (self.store)
            .psyche_mind(lib.soul.name(), &lib.psyche, None, now)
            .await?;
        let sample = crate::memory::PsycheSample {
            at: now,
            body: sample_body(&mind.substrate, &mind.relationships),
        };
        self.store.record_psyche_sample(sample, keep).await?;
        Ok(())
    }
}

/// The people whose relationship a sample holds at most: the most recently seen.
const SAMPLED_PEOPLE: usize = 12;

/// A sample's body: `{"valence", "arousal", "energy", "drives": {name: pressure},
/// "relationships": {person: {"warmth", "trust", "tension", "comfort"}}}`, the relationships
/// those of the `SAMPLED_PEOPLE` people seen most recently.
fn sample_body(
    s: &crate::psyche::Substrate,
    relationships: &std::collections::BTreeMap<String, crate::psyche::Relationship>,
) -> String {
    let drives: serde_json::Map<String, serde_json::Value> = crate::psyche::Drive::ALL
        .iter()
        .map(|d| (d.name().to_string(), s.drives[d.index()].get().into()))
        .collect();
    let mut recent: Vec<_> = relationships.iter().collect();
    recent.sort_by_key(|(person, r)| (std::cmp::Reverse(r.last_seen), *person));
    let people: serde_json::Map<String, serde_json::Value> = recent
        .into_iter()
        .take(SAMPLED_PEOPLE)
        .map(|(person, r)| {
            let values = serde_json::json!({
                "warmth": r.warmth.get(), "trust": r.trust.get(),
                "tension": r.tension.get(), "comfort": r.comfort.get(),
            });
            (person.clone(), values)
        })
        .collect();
    serde_json::json!({
        "valence": s.valence.get(),
        "arousal": s.arousal.get(),
        "energy": s.energy.get(),
        "drives": drives,
        "relationships": people,
    })
    .to_string()
}

/// The gate's rules, from `[autonomy]`.
fn gate_rules(a: &AutonomyConfig) -> GateRules {
    GateRules {
        enabled: a.enabled,
        weights: a.weights,
        threshold: a.threshold,
        cooldown_ms: (a.cooldown_secs as i64).saturating_mul(1000),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_holds_the_mood_each_drive_and_energy() {
        let psyche = crate::psyche::Psyche::shipped();
        let s = crate::psyche::Substrate::new(&psyche, 0);
        let mut people = std::collections::BTreeMap::new();
        for n in 0..20 {
            let mut r = crate::psyche::Relationship::new(&psyche);
            r.last_seen = Some(n);
            people.insert(format!("U{n:02}"), r);
        }
        let v: serde_json::Value = serde_json::from_str(&sample_body(&s, &people)).unwrap();
        let sampled = v["relationships"].as_object().unwrap();
        assert_eq!(sampled.len(), SAMPLED_PEOPLE, "the most recently seen only");
        assert!(sampled.contains_key("U19") && !sampled.contains_key("U07"));
        assert!(sampled["U19"]["warmth"].is_f64() && sampled["U19"]["comfort"].is_f64());
        for key in ["valence", "arousal", "energy"] {
            assert!(v[key].is_f64(), "{key}: {v}");
        }
        let drives = v["drives"].as_object().unwrap();
        assert_eq!(drives.len(), 5);
        assert!(drives
            .values()
            .all(|d| (0.0..=1.0).contains(&d.as_f64().unwrap())));
    }

    #[test]
    fn the_default_autonomy_gives_the_substrates_default_rules() {
        let c = crate::config::parse(
            "",
            std::path::Path::new("/a/anima.toml"),
            std::path::Path::new("/a"),
        )
        .unwrap();
        assert_eq!(gate_rules(&c.autonomy), GateRules::default());
        let mut a = c.autonomy.clone();
        a.cooldown_secs = 60;
        assert_eq!(gate_rules(&a).cooldown_ms, 60_000);
    }
}
