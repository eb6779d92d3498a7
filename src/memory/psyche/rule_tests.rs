//! The rules alone: what was read in, what they decide to write out, in order.

use super::*;
use crate::psyche::classify::FactKind;
use crate::psyche::gate::{Silence, Verdict};
use crate::psyche::state::Horizon;
use crate::psyche::update::MEMORY_CHARS;
use crate::psyche::EventKind;

/// One write, as a backend is asked for it.
#[derive(Debug, Clone, PartialEq)]
enum Write {
    Boost(String, Unit),
    Memory(NewMemory, Option<String>),
    Relationship(String, Relationship),
    Facts(String, Vec<Fact>, i64),
    Log(LoggedDecision),
    State(Substrate),
    Intentions(Vec<Intention>),
}

/// Every write, in the order asked.
#[derive(Default)]
struct Recorded(Vec<Write>);

impl EventWrites for Recorded {
    fn boost(&mut self, person: &str, boost: Unit) -> Result<()> {
        self.0.push(Write::Boost(person.into(), boost));
        Ok(())
    }
    fn memory(&mut self, memory: &NewMemory, shared_with: Option<&str>) -> Result<()> {
        let shared = shared_with.map(str::to_string);
        self.0.push(Write::Memory(memory.clone(), shared));
        Ok(())
    }
    fn relationship(&mut self, person: &str, r: &Relationship) -> Result<()> {
        self.0.push(Write::Relationship(person.into(), r.clone()));
        Ok(())
    }
    fn facts(&mut self, person: &str, facts: &[Fact], at: i64) -> Result<()> {
        self.0.push(Write::Facts(person.into(), facts.to_vec(), at));
        Ok(())
    }
    fn log(&mut self, logged: LoggedDecision) -> Result<()> {
        self.0.push(Write::Log(logged));
        Ok(())
    }
    fn state(&mut self, substrate: &Substrate) -> Result<()> {
        self.0.push(Write::State(substrate.clone()));
        Ok(())
    }
}

impl CognitionWrites for Recorded {
    fn state(&mut self, substrate: &Substrate) -> Result<()> {
        EventWrites::state(self, substrate)
    }
    fn relationship(&mut self, person: &str, r: &Relationship) -> Result<()> {
        EventWrites::relationship(self, person, r)
    }
    fn intentions(&mut self, all: Vec<Intention>) -> Result<()> {
        self.0.push(Write::Intentions(all));
        Ok(())
    }
}

const HOUR: i64 = 3_600_000;

fn said(kind: EventKind, who: &str, text: &str, at: i64) -> Event {
    Event {
        kind,
        person: Some(who.into()),
        text: text.into(),
        at,
    }
}

/// The event through the rule (the default gate), and what it asked to write.
fn run(
    substrate: &Substrate,
    relationship: Option<&Relationship>,
    e: &Event,
    place: &Place,
) -> (Effects, Decision, Vec<Write>) {
    run_with(&GateRules::default(), substrate, relationship, e, place)
}

fn run_with(
    rules: &GateRules,
    substrate: &Substrate,
    relationship: Option<&Relationship>,
    e: &Event,
    place: &Place,
) -> (Effects, Decision, Vec<Write>) {
    let p = Psyche::shipped();
    let mut w = Recorded::default();
    let (fx, d) = event(substrate, relationship, e, place, &p, rules, &mut w).unwrap();
    (fx, d, w.0)
}

#[test]
fn a_first_message_in_many_scripts_writes_its_memory_relationship_facts_log_and_state_in_order() {
    let p = Psyche::shipped();
    let text = "  My name is Zoë, and I live in Kraków 🌍. Ça va? 日本語も話します  ";
    let e = said(EventKind::Addressed, "Ü1", text, 5 * HOUR);
    let place = Place {
        channel: Some("C-ñ".into()),
        listened: true,
    };
    let before = Substrate::new(&p, 0);
    let (fx, d, writes) = run(&before, None, &e, &place);

    let [Write::Memory(m, shared), Write::Relationship(who, r), Write::Facts(fact_of, facts, at), Write::Log(logged), Write::State(after)] =
        &writes[..]
    else {
        panic!("{writes:#?}");
    };
    assert_eq!(m.text, text.trim(), "the memory keeps every character");
    assert_eq!(m.people, vec!["Ü1".to_string()]);
    assert_eq!(shared.as_deref(), Some("Ü1"), "the author is in it");
    assert_eq!((who.as_str(), fact_of.as_str()), ("Ü1", "Ü1"));
    assert_eq!(Some(&(who.clone(), r.clone())), fx.relationship.as_ref());
    assert_eq!(r.exchanges, 1);
    let stated: Vec<(FactKind, &str)> = facts.iter().map(|f| (f.kind, &*f.value)).collect();
    assert_eq!(
        stated,
        [(FactKind::Name, "Zoë"), (FactKind::Home, "Kraków")]
    );
    assert_eq!(*at, 5 * HOUR);
    assert_eq!(*logged, LoggedDecision::new(&e, &place, &d));
    assert_eq!(logged.channel.as_deref(), Some("C-ñ"));
    assert_eq!(
        after, &fx.substrate,
        "the state written is the state returned"
    );
    assert_eq!(after.updated_at, 5 * HOUR);
}

#[test]
fn a_long_text_in_many_scripts_is_remembered_clipped_on_a_character_boundary() {
    let p = Psyche::shipped();
    let text = format!("My name is Zoë. {}", "日本語とÇa va 🌍 ".repeat(60));
    let e = said(EventKind::Addressed, "U1", &text, HOUR);
    let (_, _, writes) = run(&Substrate::new(&p, 0), None, &e, &Place::default());
    let Some(Write::Memory(m, _)) = writes.first() else {
        panic!("{writes:#?}");
    };
    let kept: String = text.chars().take(MEMORY_CHARS).collect();
    assert_eq!(
        m.text,
        format!("{kept}…"),
        "whole characters, and a sign of the cut"
    );
}

#[test]
fn an_author_back_after_a_quiet_spell_boosts_before_the_new_memory_is_made() {
    let p = Psyche::shipped();
    let mut known = Relationship::new(&p);
    known.exchanges = 3;
    known.last_seen = Some(0);
    let later = ((p.memory.return_after_hours + 1.0) * HOUR as f64) as i64;
    let text = "I'm back! I work at Ørsted now";
    let e = said(EventKind::Addressed, "U1", text, later);
    let (_, _, writes) = run(&Substrate::new(&p, 0), Some(&known), &e, &Place::default());
    assert!(
        matches!(
            &writes[..],
            [Write::Boost(who, b), Write::Memory(m, Some(shared)), Write::Relationship(r, _), Write::Facts(..), Write::Log(_), Write::State(_)]
                if who == "U1" && *b == p.memory.salience_boost && m.text == text
                    && shared == "U1" && r == "U1"
        ),
        "{writes:#?}"
    );
    // Back within the hour: no boost.
    let soon = said(EventKind::Addressed, "U1", "and again", HOUR / 2);
    let (_, _, writes) = run(
        &Substrate::new(&p, 0),
        Some(&known),
        &soon,
        &Place::default(),
    );
    assert!(
        !writes.iter().any(|w| matches!(w, Write::Boost(..))),
        "{writes:#?}"
    );
}

#[test]
fn a_tick_writes_only_its_log_and_the_state() {
    let p = Psyche::shipped();
    let tick = Event {
        kind: EventKind::Tick,
        person: None,
        text: String::new(),
        at: HOUR,
    };
    let (fx, d, writes) = run(&Substrate::new(&p, 0), None, &tick, &Place::default());
    assert_eq!(
        writes,
        [
            Write::Log(LoggedDecision::new(&tick, &Place::default(), &d)),
            Write::State(fx.substrate.clone()),
        ]
    );
    assert_eq!(fx.relationship, None);
}

#[test]
fn speaking_unasked_starts_the_cooldown_in_the_state_written_and_silence_does_not() {
    let p = Psyche::shipped();
    let listened = Place {
        channel: Some("C1".into()),
        listened: true,
    };
    let heated = "This refactor is stupid, you broke the compiler build AGAIN!";
    let e = said(EventKind::Overheard, "U1", heated, 20_000);
    let eager = GateRules {
        threshold: 0.0,
        ..GateRules::default()
    };
    let (fx, d, writes) = run_with(&eager, &Substrate::new(&p, 0), None, &e, &listened);
    assert_eq!(d.verdict, Verdict::Speak);
    assert_eq!(fx.substrate.last_unasked_at, Some(20_000));
    assert_eq!(writes.last(), Some(&Write::State(fx.substrate.clone())));

    let mut spoke = Substrate::new(&p, 0);
    spoke.last_unasked_at = Some(7);
    let (fx, d, writes) = run_with(&eager, &spoke, None, &e, &listened);
    assert_eq!(d.verdict, Verdict::Silent(Silence::Cooldown));
    assert_eq!(
        d.situation.last_unasked_at,
        Some(7),
        "the gate saw the cooldown"
    );
    assert_eq!(fx.substrate.last_unasked_at, Some(7));
    assert_eq!(writes.last(), Some(&Write::State(fx.substrate.clone())));
}

#[test]
fn post_cognition_writes_the_state_each_shifted_relationship_then_the_intentions() {
    let p = Psyche::shipped();
    let read = CognitionRead {
        substrate: Substrate::new(&p, 0),
        relationships: BTreeMap::from([("U1".to_string(), Relationship::new(&p))]),
        intentions: Vec::new(),
    };
    let shifts = [StanceShift {
        target: " U1 ".into(),
        description: "benefit of the doubt".into(),
    }];
    assert_eq!(shifted(&shifts), ["U1"]);
    let updates = [IntentionUpdate {
        operation: "create".into(),
        kind: "be_gentle".into(),
        target: Some("Zoë".into()),
        horizon: "short".into(),
        description: "priority 1.0".into(),
    }];
    let mut w = Recorded::default();
    let applied = post_cognition(&read, &shifts, &updates, &p, 10, &mut w).unwrap();
    assert_eq!(applied.len(), 2, "{applied:?}");
    let [Write::State(s), Write::Relationship(who, r), Write::Intentions(all)] = &w.0[..] else {
        panic!("{:#?}", w.0);
    };
    let mapped = mapping::apply(
        &read.substrate,
        &read.relationships,
        &read.intentions,
        &shifts,
        &updates,
        &p,
        10,
    );
    assert_eq!(s, &mapped.substrate);
    assert_eq!(who, "U1");
    assert!((r.trust.get() - 0.05).abs() < 1e-9, "{r:?}");
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].target.as_deref(), Some("Zoë"));
    assert_eq!(all[0].horizon, Horizon::Short);
}

fn memory(id: i64, text: &str, at: i64) -> Memory {
    Memory {
        id,
        text: text.into(),
        importance: Unit::new(0.8),
        salience: Unit::new(0.8),
        at,
        people: vec!["U1".into()],
    }
}

#[test]
fn the_packet_leaves_out_the_memory_made_now_and_puts_each_person_with_their_own_rows() {
    let p = Psyche::shipped();
    let now = 10 * HOUR;
    let mut warm = Relationship::new(&p);
    warm.exchanges = 40;
    warm.warmth = crate::psyche::Signed::new(0.9);
    let zoe = Fact {
        kind: FactKind::Name,
        value: "Zoë".into(),
    };
    let read = |memories: Vec<Memory>| PacketRead {
        substrate: Substrate::new(&p, 0),
        relationships: BTreeMap::from([("U1".to_string(), warm.clone())]),
        facts: BTreeMap::from([("U1".to_string(), vec![zoe.clone()])]),
        memories,
        intentions: Vec::new(),
    };
    let people = [
        ("U1".to_string(), "Zoë".to_string()),
        ("U2".to_string(), "Łukasz".to_string()),
    ];
    let query = "the café in Kraków";
    let earlier = memory(1, "we met at the café in Kraków", HOUR);
    let current = memory(2, "the café in Kraków", now);
    let built = packet(
        read(vec![earlier.clone(), current]),
        &p,
        &people,
        query,
        now,
    );
    let by_hand = Packet::build(&Input {
        substrate: &Substrate::new(&p, 0),
        psyche: &p,
        people: &[
            Present {
                id: "U1",
                name: "Zoë",
                relationship: Some(&warm),
                facts: std::slice::from_ref(&zoe),
            },
            Present {
                id: "U2",
                name: "Łukasz",
                relationship: None,
                facts: &[],
            },
        ],
        query,
        memories: std::slice::from_ref(&earlier),
        intentions: &[],
        now,
    });
    assert_eq!(built, by_hand);
    let text = built.render(&|s| format!("«{s}»"));
    assert!(text.contains("we met at the café in Kraków"), "{text}");
    assert!(text.contains("Zoë"), "{text}");
    assert!(text.contains("Łukasz"), "{text}");
}
