//! The substrate's invariants as property tests (issue 12, point 6), and the behaviour of a
//! few scenes end to end through update and gate.

use std::collections::BTreeMap;

use proptest::prelude::*;

use super::classify::{classify, facts, Fact, FactKind};
use super::def::{Drive, Psyche};
use super::gate::{decide, GateInputs, GateRules, Silence, Situation, Verdict};
use super::mapping::{self, IntentionUpdate, StanceShift};
use super::packet::{Input, Packet, Present};
use super::state::{Event, EventKind, Horizon, Intention, Memory, Relationship, Substrate};
use super::update::apply;
use super::value::{Signed, Unit};
use crate::arbitrary;

const HOUR: i64 = 3_600_000;

fn digit_free() -> impl Strategy<Value = String> {
    arbitrary::text().prop_map(|s| s.replace(|c: char| c.is_ascii_digit(), ""))
}

fn unit() -> impl Strategy<Value = Unit> {
    (-0.5f64..1.5).prop_map(Unit::new)
}

fn signed() -> impl Strategy<Value = Signed> {
    (-1.5f64..1.5).prop_map(Signed::new)
}

fn substrate() -> impl Strategy<Value = Substrate> {
    let p = Psyche::shipped();
    let topics: Vec<String> = p.arcs.iter().map(|a| a.topic.clone()).collect();
    (
        prop::array::uniform5(unit()),
        prop::array::uniform5(signed()),
        signed(),
        unit(),
        prop::collection::vec(unit(), topics.len()),
        unit(),
        0i64..1_000 * HOUR,
    )
        .prop_map(
            move |(drives, shift, valence, arousal, arcs, energy, at)| Substrate {
                drives,
                baseline_shift: shift,
                valence,
                arousal,
                arcs: topics.iter().cloned().zip(arcs).collect(),
                energy,
                updated_at: at,
                last_unasked_at: None,
                patterns: BTreeMap::new(),
            },
        )
}

fn relationship() -> impl Strategy<Value = Relationship> {
    (
        signed(),
        signed(),
        unit(),
        unit(),
        unit(),
        0u32..10,
        prop::option::of(0i64..1_000 * HOUR),
    )
        .prop_map(
            |(warmth, trust, tension, comfort, volatility, exchanges, last_seen)| Relationship {
                warmth,
                trust,
                tension,
                comfort,
                volatility,
                exchanges,
                last_seen,
            },
        )
}

fn kind() -> impl Strategy<Value = EventKind> {
    prop_oneof![
        Just(EventKind::Addressed),
        Just(EventKind::Overheard),
        Just(EventKind::Reaction),
        Just(EventKind::Joined),
        Just(EventKind::Tick),
    ]
}

/// Events a few minutes to a day apart (sometimes out of order), from three people.
fn events() -> impl Strategy<Value = Vec<Event>> {
    prop::collection::vec(
        (kind(), 0usize..3, arbitrary::text(), -HOUR..24 * HOUR),
        1..12,
    )
    .prop_map(|raw| {
        let mut at = 0;
        raw.into_iter()
            .map(|(kind, who, text, step)| {
                at += step;
                Event {
                    kind,
                    person: (kind != EventKind::Tick).then(|| ["U1", "U2", "U3"][who].to_string()),
                    text,
                    at,
                }
            })
            .collect()
    })
}

fn run(events: &[Event], p: &Psyche) -> Vec<super::update::Effects> {
    let mut s = Substrate::new(p, 0);
    let mut rels: BTreeMap<String, Relationship> = BTreeMap::new();
    let mut out = Vec::new();
    for e in events {
        let rel = e.person.as_ref().and_then(|x| rels.get(x));
        let fx = apply(&s, rel, e, p);
        s = fx.substrate.clone();
        if let Some((who, r)) = &fx.relationship {
            rels.insert(who.clone(), r.clone());
        }
        out.push(fx);
    }
    out
}

fn in_unit(x: Unit) -> bool {
    (0.0..=1.0).contains(&x.get())
}

fn in_signed(x: Signed) -> bool {
    (-1.0..=1.0).contains(&x.get())
}

fn substrate_in_range(s: &Substrate) -> bool {
    s.drives.iter().all(|d| in_unit(*d))
        && s.baseline_shift.iter().all(|d| in_signed(*d))
        && in_signed(s.valence)
        && in_unit(s.arousal)
        && in_unit(s.energy)
        && s.arcs.values().all(|a| in_unit(*a))
}

fn relationship_in_range(r: &Relationship) -> bool {
    in_signed(r.warmth)
        && in_signed(r.trust)
        && in_unit(r.tension)
        && in_unit(r.comfort)
        && in_unit(r.volatility)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn no_digit_of_the_state_reaches_the_packet(
        s in substrate(),
        rels in prop::collection::vec(relationship(), 3),
        names in prop::collection::vec(digit_free(), 3),
        fact_values in prop::collection::vec(digit_free(), 3),
        memories in prop::collection::vec((digit_free(), unit(), 0i64..2_000 * HOUR, 0usize..4), 0..8),
        intentions in prop::collection::vec((0usize..6, prop::option::of(digit_free()), unit(), 0usize..4), 0..5),
        query in digit_free(),
        now in 0i64..2_000 * HOUR,
    ) {
        let p = Psyche::shipped();
        let ids = ["UA", "UB", "UC"];
        let facts: Vec<Vec<Fact>> = fact_values
            .iter()
            .zip(FactKind::ALL)
            .map(|(v, kind)| vec![Fact { kind, value: v.clone() }])
            .collect();
        let people: Vec<Present> = (0..3)
            .map(|i| Present {
                id: ids[i],
                name: &names[i],
                relationship: Some(&rels[i]),
                facts: &facts[i],
            })
            .collect();
        let memories: Vec<Memory> = memories
            .into_iter()
            .enumerate()
            .map(|(i, (text, salience, at, who))| Memory {
                id: i as i64,
                text,
                importance: salience,
                salience,
                at,
                people: ids.get(who).map(|w| vec![w.to_string()]).unwrap_or_default(),
            })
            .collect();
        let kinds: Vec<&String> = p.intentions.keys().collect();
        let intentions: Vec<Intention> = intentions
            .into_iter()
            .map(|(k, target, priority, who)| Intention {
                kind: kinds[k % kinds.len()].clone(),
                target: ids.get(who).map(|w| w.to_string()).or(target),
                horizon: Horizon::Medium,
                priority,
                created_at: 0,
                expires_at: now + HOUR,
            })
            .collect();
        let packet = Packet::build(&Input {
            substrate: &s,
            psyche: &p,
            people: &people,
            query: &query,
            memories: &memories,
            intentions: &intentions,
            now,
        });
        let text = packet.render(&|q| q.to_string());
        prop_assert!(!text.chars().any(|c| c.is_ascii_digit()), "{text}");
        prop_assert!(text.starts_with("You feel "));
    }

    #[test]
    fn values_stay_in_range_and_replay_is_deterministic(events in events()) {
        let p = Psyche::shipped();
        let first = run(&events, &p);
        for fx in &first {
            prop_assert!(substrate_in_range(&fx.substrate), "{:?}", fx.substrate);
            if let Some((_, r)) = &fx.relationship {
                prop_assert!(relationship_in_range(r), "{r:?}");
            }
            let g = fx.gate;
            for x in [g.salience_max, g.drive_pressure_max, g.arc_hot, g.rel_stakes, g.energy] {
                prop_assert!(in_unit(x));
            }
            if let Some(m) = &fx.memory {
                prop_assert!(m.importance >= p.memory.episodic_threshold);
                prop_assert!(m.text.chars().count() <= super::update::MEMORY_CHARS + 1);
            }
        }
        prop_assert_eq!(run(&events, &p), first, "same events, same order, same numbers");
    }

    #[test]
    fn the_gate_never_lets_an_ineligible_unaddressed_event_through(
        inputs in (unit(), unit(), unit(), unit(), unit()).prop_map(|(a, b, c, d, e)| GateInputs {
            salience_max: a, drive_pressure_max: b, arc_hot: c, rel_stakes: d, energy: e,
        }),
        kind in kind(),
        trivial: bool,
        choice: bool,
        listened: bool,
        enabled: bool,
        last in prop::option::of(0i64..1_000_000),
        now in 0i64..1_000_000,
        threshold in 0.0f64..1.0,
        weights in prop::array::uniform5(0.0f64..1.0),
    ) {
        let rules = GateRules { enabled, weights, threshold, cooldown_ms: 300_000 };
        let s = Situation { kind, trivial, choice, listened, last_unasked_at: last, now };
        let d = decide(inputs, s, &rules);
        if kind == EventKind::Addressed {
            prop_assert_eq!(d.verdict, Verdict::Answer);
        } else {
            prop_assert_ne!(d.verdict, Verdict::Answer);
            let eligible = enabled
                && listened
                && !trivial
                && choice
                && inputs.meaning(&weights) >= threshold
                && last.is_none_or(|l| now - l >= 300_000);
            prop_assert_eq!(d.verdict == Verdict::Speak, eligible, "{:?}", d);
        }
        prop_assert_eq!(d.inputs, inputs, "the decision carries its inputs");
    }

    #[test]
    fn model_output_changes_numbers_only_through_the_table(
        s in substrate(),
        rel in relationship(),
        shifts in prop::collection::vec((0usize..10, arbitrary::text(), 0usize..2), 0..6),
        updates in prop::collection::vec((0usize..8, 0usize..6, arbitrary::text(), 0usize..4), 0..6),
    ) {
        let p = Psyche::shipped();
        let stance_keys: Vec<&String> = p.stances.keys().collect();
        let kinds: Vec<&String> = p.intentions.keys().collect();
        let shifts: Vec<StanceShift> = shifts
            .into_iter()
            .map(|(k, junk, who)| StanceShift {
                target: ["UA", "UB"][who].into(),
                // A table key as a person might write it, or free text with numbers in it.
                description: match stance_keys.get(k) {
                    Some(key) => key.replace('_', " ").to_uppercase(),
                    None => format!("set trust to 0.9 {junk}"),
                },
            })
            .collect();
        let ops = ["create", "boost", "lower", "drop", "set", "increase by 0.5", "", "Create"];
        let updates: Vec<IntentionUpdate> = updates
            .into_iter()
            .map(|(op, k, junk, h)| IntentionUpdate {
                operation: ops[op].into(),
                kind: kinds.get(k).map_or(format!("priority 1.0 {junk}"), |k| k.to_string()),
                target: Some("UA".into()),
                horizon: ["short", "medium", "long", "forever 999"][h].into(),
                description: format!("priority = 0.99 {junk}"),
            })
            .collect();
        let rels: BTreeMap<String, Relationship> = [("UA".to_string(), rel.clone())].into();
        let all = mapping::apply(&s, &rels, &[], &shifts, &updates, &p, 0);
        // Only the vocabulary counts: the same answer without its unknown words is the same.
        let known_shifts: Vec<StanceShift> = shifts
            .iter()
            .filter(|x| p.stances.contains_key(&mapping::vocabulary_key(&x.description)))
            .cloned()
            .collect();
        let known_updates: Vec<IntentionUpdate> = updates
            .iter()
            .filter(|u| {
                p.intentions.contains_key(&u.kind)
                    && ["create", "boost", "lower", "drop"].contains(&mapping::vocabulary_key(&u.operation).as_str())
            })
            .map(|u| IntentionUpdate { description: String::new(), ..u.clone() })
            .collect();
        let known = mapping::apply(&s, &rels, &[], &known_shifts, &known_updates, &p, 0);
        prop_assert_eq!(&all.substrate, &known.substrate);
        prop_assert_eq!(&all.relationships, &known.relationships);
        prop_assert_eq!(&all.intentions, &known.intentions);
        // Each shift moves a value by at most one row's step.
        let n = known_shifts.len() as f64;
        let after = &all.relationships["UA"];
        prop_assert!((after.trust.get() - rel.trust.get()).abs() <= 0.2 * n + 1e-9);
        prop_assert!((after.warmth.get() - rel.warmth.get()).abs() <= 0.2 * n + 1e-9);
        prop_assert!(substrate_in_range(&all.substrate));
        prop_assert!(all.relationships.values().all(relationship_in_range));
        // A created intention's priority is the table's.
        for i in &all.intentions {
            prop_assert!(p.intentions.contains_key(&i.kind));
        }
        // One answer never moves the personality.
        prop_assert_eq!(all.substrate.baseline_shift, s.baseline_shift);
    }

    #[test]
    fn classifying_multibyte_text_never_panics_and_facts_are_the_persons_words(text in arbitrary::text()) {
        let p = Psyche::shipped();
        let c = classify(&text, &p);
        for d in c.dims.all() {
            prop_assert!(in_signed(d));
        }
        for f in facts(&text) {
            for word in f.value.split(' ') {
                prop_assert!(text.contains(word), "{word:?} not in {text:?}");
            }
        }
    }
}

fn scene_event(kind: EventKind, who: &str, text: &str, at: i64) -> Event {
    Event {
        kind,
        person: Some(who.into()),
        text: text.into(),
        at,
    }
}

/// Runs a scene in a listened-to channel through update and gate, as the store will.
fn gate_scene(lines: &[(&str, &str)]) -> Vec<Verdict> {
    let p = Psyche::shipped();
    let rules = GateRules::default();
    let mut s = Substrate::new(&p, 0);
    let mut rels: BTreeMap<String, Relationship> = BTreeMap::new();
    let mut verdicts = Vec::new();
    for (i, (who, text)) in lines.iter().enumerate() {
        let e = scene_event(EventKind::Overheard, who, text, (i as i64 + 1) * 20_000);
        let fx = apply(&s, rels.get(*who), &e, &p);
        let d = decide(
            fx.gate,
            Situation {
                kind: e.kind,
                trivial: fx.classification.trivial,
                choice: fx.choice,
                listened: true,
                last_unasked_at: s.last_unasked_at,
                now: e.at,
            },
            &rules,
        );
        s = fx.substrate;
        if d.verdict == Verdict::Speak {
            s.last_unasked_at = Some(e.at);
        }
        if let Some((w, r)) = fx.relationship {
            rels.insert(w, r);
        }
        verdicts.push(d.verdict);
    }
    verdicts
}

#[test]
fn a_heated_exchange_on_an_arc_gets_one_contribution_then_the_cooldown() {
    let v = gate_scene(&[
        (
            "U1",
            "This refactor is stupid, you broke the compiler build AGAIN!",
        ),
        (
            "U2",
            "Don't you DARE call my code stupid, your test suite is useless!",
        ),
        (
            "U1",
            "I hate this design, it is a failure and you refuse to listen",
        ),
        ("U2", "Shut up, this bug is yours and I won't fix it"),
    ]);
    assert_eq!(
        v.iter().filter(|v| **v == Verdict::Speak).count(),
        1,
        "{v:?}"
    );
    let spoke = v.iter().position(|v| *v == Verdict::Speak).unwrap();
    assert!(
        v[spoke + 1..]
            .iter()
            .all(|v| *v == Verdict::Silent(Silence::Cooldown)),
        "{v:?}"
    );
}

#[test]
fn a_tick_comes_back_to_a_heated_conversation_only_through_its_topics_and_moves_nothing() {
    let p = Psyche::shipped();
    let rules = GateRules::default();
    let mut s = Substrate::new(&p, 0);
    let craft = p.arcs[0].topic.clone();
    s.arcs.insert(craft, Unit::new(0.9));
    s.drives[Drive::Competence.index()] = Unit::new(0.8);
    let tick = |text: &str| Event {
        kind: EventKind::Tick,
        person: None,
        text: text.into(),
        at: HOUR,
    };
    let verdict = |fx: &super::update::Effects, last: Option<i64>| {
        decide(
            fx.gate,
            Situation {
                kind: EventKind::Tick,
                trivial: fx.classification.trivial,
                choice: fx.choice,
                listened: true,
                last_unasked_at: last,
                now: HOUR,
            },
            &rules,
        )
        .verdict
    };
    let back = apply(
        &s,
        None,
        &tick("Shut up, this bug is yours and I won't fix it"),
        &p,
    );
    let elsewhere = apply(&s, None, &tick("anyone up for lunch later"), &p);
    let nowhere = apply(&s, None, &tick(""), &p);
    assert!(back.gate.salience_max.get() >= 0.85, "{:?}", back.gate);
    assert_eq!(elsewhere.gate.salience_max, Unit::ZERO);
    assert_eq!(verdict(&back, None), Verdict::Speak);
    assert_eq!(
        verdict(&back, Some(HOUR - 60_000)),
        Verdict::Silent(Silence::Cooldown)
    );
    assert_eq!(
        verdict(&nowhere, None),
        Verdict::Silent(Silence::NoChoice),
        "nowhere to come back to"
    );
    // What it would come back to was felt when it was heard: the tick moves only time.
    assert_eq!(back.substrate, nowhere.substrate);
    assert_eq!(elsewhere.substrate, nowhere.substrate);
    assert!(back.memory.is_none() && back.relationship.is_none());
}

#[test]
fn small_talk_gets_nothing() {
    let v = gate_scene(&[
        ("U1", "morning all"),
        ("U2", "hey! nice weekend?"),
        ("U1", "yeah, lunch was cool"),
        ("U3", "lol"),
    ]);
    assert!(v.iter().all(|v| !v.thinks()), "{v:?}");
}

#[test]
fn a_stance_shifts_a_baseline_only_when_it_recurs() {
    let p = Psyche::shipped();
    let s = Substrate::new(&p, 0);
    let shift = StanceShift {
        target: "UA".into(),
        description: "open up".into(),
    };
    let mut state = s.clone();
    let mut rels = BTreeMap::new();
    for n in 1..=p.drift.pattern_repeats {
        let a = mapping::apply(&state, &rels, &[], std::slice::from_ref(&shift), &[], &p, 0);
        state = a.substrate;
        rels = a.relationships;
        let moved = state.baseline_shift[Drive::Relatedness.index()].get();
        if n < p.drift.pattern_repeats {
            assert_eq!(moved, 0.0, "after {n}");
        } else {
            assert!(
                (moved + p.drift.pattern_step.get()).abs() < 1e-12,
                "{moved}"
            );
        }
    }
    assert!(rels["UA"].warmth.get() > 0.0);
}

#[test]
fn a_relationship_warms_with_kindness_and_eases_when_quiet() {
    let p = Psyche::shipped();
    let s = Substrate::new(&p, 0);
    let fx = apply(
        &s,
        None,
        &scene_event(
            EventKind::Addressed,
            "U1",
            "thanks, you are a great friend ❤",
            0,
        ),
        &p,
    );
    let (_, r) = fx.relationship.unwrap();
    assert!(r.warmth.get() > 0.0 && r.exchanges == 1, "{r:?}");
    let fx = apply(
        &s,
        None,
        &scene_event(EventKind::Addressed, "U1", "you idiot, shut up", 0),
        &p,
    );
    let (_, mut r) = fx.relationship.unwrap();
    assert!(r.tension.get() > 0.0 && r.warmth.get() < 0.0, "{r:?}");
    r.last_seen = Some(0);
    let later = super::update::quiet(&r, &p, 60 * 24 * HOUR);
    assert!(later.tension.get() < r.tension.get() && later.warmth.get() > r.warmth.get());
}

#[test]
fn a_memory_grows_salient_when_its_person_comes_back_not_with_every_line() {
    let p = Psyche::shipped();
    let s = Substrate::new(&p, 0);
    let spell = (p.memory.return_after_hours * HOUR as f64) as i64;
    let boost = |rel: Option<&Relationship>, kind: EventKind, at: i64| {
        apply(&s, rel, &scene_event(kind, "U1", "ok", at), &p).salience_boost
    };
    assert_eq!(
        boost(None, EventKind::Addressed, 0),
        None,
        "someone new shares nothing yet"
    );
    let mut known = Relationship::new(&p);
    known.last_seen = Some(0);
    assert_eq!(boost(Some(&known), EventKind::Addressed, spell - 1), None);
    for kind in [
        EventKind::Addressed,
        EventKind::Overheard,
        EventKind::Reaction,
    ] {
        assert_eq!(
            boost(Some(&known), kind, spell),
            Some(("U1".to_string(), p.memory.salience_boost)),
            "{kind:?} after the spell"
        );
    }
    known.last_seen = None;
    assert_eq!(boost(Some(&known), EventKind::Addressed, spell), None);
}

#[test]
fn an_important_message_becomes_a_memory_and_states_facts() {
    let p = Psyche::shipped();
    let s = Substrate::new(&p, 0);
    let fx = apply(
        &s,
        None,
        &scene_event(
            EventKind::Addressed,
            "U1",
            "I'm a nurse and I'm worried about my test results",
            0,
        ),
        &p,
    );
    assert!(fx.memory.is_some(), "{:?}", fx.importance);
    assert_eq!(fx.classification.facts[0].value, "nurse");
    let fx = apply(
        &s,
        None,
        &scene_event(EventKind::Overheard, "U1", "ok", 0),
        &p,
    );
    assert!(fx.memory.is_none());
}

#[test]
fn time_alone_brings_drives_back_to_baseline() {
    let p = Psyche::shipped();
    let mut s = Substrate::new(&p, 0);
    s.drives = [Unit::ONE; 5];
    let later = super::update::settle(&s, &p, 1000 * HOUR);
    for d in Drive::ALL {
        assert!(
            (later.drive(d).get() - p.drive(d).baseline.get()).abs() < 0.01,
            "{d:?}"
        );
    }
}

#[test]
fn the_personality_leans_with_the_moment_and_rests_at_its_usual_self() {
    use super::packet::activation;
    let p = Psyche::shipped();
    let rest = Substrate::new(&p, 0);
    assert_eq!(activation(&rest, &[]), "your usual self");
    let mut tense = Relationship::new(&p);
    tense.tension = Unit::new(0.8);
    assert!(activation(&rest, &[Some(&tense)]).starts_with("guarded"));
    let mut spent = rest.clone();
    spent.energy = Unit::new(0.1);
    assert!(activation(&spent, &[]).starts_with("spent"));
    let mut bright = rest.clone();
    bright.valence = Signed::new(0.7);
    bright.arousal = Unit::new(0.8);
    assert!(activation(&bright, &[]).starts_with("playful"));
    // In the packet, as words.
    let people = [Present {
        id: "UA",
        name: "Ana",
        relationship: Some(&tense),
        facts: &[],
    }];
    let packet = Packet::build(&Input {
        substrate: &rest,
        psyche: &p,
        people: &people,
        query: "hello",
        memories: &[],
        intentions: &[],
        now: 0,
    });
    let text = packet.render(&|q| q.to_string());
    assert!(text.contains("Right now you are guarded"), "{text}");
}
