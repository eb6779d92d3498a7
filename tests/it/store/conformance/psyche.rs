//! The psyche on both backends runs one Rust rule (memory/psyche/rule.rs) over each backend's
//! rows: an event's effects and decision, the post-cognition, the packet and the mind, the
//! same on each.

use anima::memory::faces::Store;
use anima::memory::psyche::Place;
use anima::psyche::gate::GateRules;
use anima::psyche::mapping::{IntentionUpdate, StanceShift};
use anima::psyche::{Event, EventKind, Psyche};

use super::Seen;

const HOUR: i64 = 3_600_000;

pub(super) async fn events_and_packet(s: &dyn Store, seen: &mut Seen) {
    let (p, rules) = (Psyche::shipped(), GateRules::default());
    let here = Place {
        channel: Some("C1".into()),
        listened: true,
    };
    let script = [
        (
            EventKind::Addressed,
            "U1",
            "I'm a nurse in Lyon 🏥 and I love the café",
            0,
        ),
        (
            EventKind::Overheard,
            "U2",
            "the build is broken AGAIN, 日本語 too",
            HOUR,
        ),
        (EventKind::Reaction, "U1", "heart", 2 * HOUR),
        (
            EventKind::Addressed,
            "U1",
            "worried about the exam, be kind",
            9 * HOUR,
        ),
    ];
    for (n, (kind, who, text, at)) in script.into_iter().enumerate() {
        let event = Event {
            kind,
            person: Some(who.into()),
            text: text.into(),
            at,
        };
        let applied = s
            .psyche_event("Wren", &p, &rules, &event, &here)
            .await
            .unwrap();
        seen.note(&format!("event {n}"), applied);
    }
    let changed = s
        .psyche_post_cognition(
            "Wren",
            &p,
            &[StanceShift {
                target: "U1".into(),
                description: "benefit of the doubt".into(),
            }],
            &[IntentionUpdate {
                operation: "create".into(),
                kind: "be_gentle".into(),
                target: Some("U1".into()),
                horizon: "short".into(),
                description: "gently ✨".into(),
            }],
            10 * HOUR,
        )
        .await
        .unwrap();
    assert!(
        !changed.is_empty(),
        "the shift and the intention are applied"
    );
    seen.note("post-cognition", changed);
    let people = [
        ("U1".to_string(), "Zoé".to_string()),
        ("U2".to_string(), "Kai".to_string()),
    ];
    let packet = s
        .psyche_packet("Wren", &p, &people, "café exam", 11 * HOUR)
        .await
        .unwrap();
    seen.note("packet", packet.render(&|q| format!("«{q}»")));
    seen.note(
        "mind",
        s.psyche_mind("Wren", &p, None, 11 * HOUR).await.unwrap(),
    );
    let decisions = s.psyche_decisions("Wren", 10).await.unwrap();
    assert_eq!(decisions.len(), 4, "each event's decision is logged");
    seen.note("decisions", decisions);
}
