//! The `Psychology` face: an event is one transaction applied whole (and once per key), events
//! at once are each counted, retrieval finds a memory by its words in any script, post-cognition
//! persists, and the same script gives the same numbers and words on every backend.

use anima::memory::faces::Psychology;
use anima::memory::psyche::Place;
use anima::psyche::gate::{GateRules, Silence, Verdict};
use anima::psyche::mapping::{IntentionUpdate, StanceShift};
use anima::psyche::packet::{Packet, Piece};
use anima::psyche::{Event, EventKind, Psyche};
use futures_util::future::join_all;

use crate::on_every_backend;

const HOUR: i64 = 3_600_000;

fn said(kind: EventKind, who: &str, text: &str, at: i64) -> Event {
    Event {
        kind,
        person: Some(who.into()),
        text: text.into(),
        at,
    }
}

/// The memories a packet recalls, best first.
fn recalled(packet: &Packet) -> Vec<String> {
    packet
        .sentences
        .iter()
        .filter(|s| matches!(s.first(), Some(Piece::Own(o)) if o.starts_with("You remember")))
        .filter_map(|s| {
            s.iter().rev().find_map(|p| match p {
                Piece::Quoted(q) => Some(q.clone()),
                Piece::Own(_) => None,
            })
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_writes_state_relationship_memory_facts_and_the_log() {
    on_every_backend!(|s, name| {
        let p = Psyche::shipped();
        let text = "I'm a nurse in Lyon and I'm worried about the test";
        let (fx, d) = s
            .psyche_event(
                "Wren",
                &p,
                &GateRules::default(),
                &said(EventKind::Addressed, "U1", text, 1_000),
                &Place::default(),
            )
            .await
            .unwrap();
        assert_eq!(d.verdict, Verdict::Answer, "{name}");
        assert!(fx.memory.is_some(), "{name}");
        let mind = s.psyche_mind("Wren", &p, None, 2_000).await.unwrap();
        assert_eq!(
            mind.substrate, fx.substrate,
            "{name}: the state as the event left it"
        );
        assert_eq!(mind.relationships["U1"].exchanges, 1, "{name}");
        assert_eq!(mind.relationships["U1"].last_seen, Some(1_000), "{name}");
        assert_eq!(mind.facts["U1"][0].value, "nurse in Lyon", "{name}");
        assert_eq!(mind.memories, 1, "{name}");
        assert_eq!(mind.recent_memories[0].people, ["U1"], "{name}");
        assert_eq!(mind.recent_memories[0].text, text, "{name}");
        assert_eq!(mind.decisions[0].verdict, "answer", "{name}");
        assert_eq!(
            mind.decisions[0].inputs, d.inputs,
            "{name}: logged with its inputs"
        );
        // Another soul in the same store is another substrate.
        assert_eq!(
            s.psyche_mind("Kit", &p, None, 2_000)
                .await
                .unwrap()
                .memories,
            0,
            "{name}"
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_with_a_key_is_applied_once_per_soul() {
    on_every_backend!(|s, name| {
        let p = Psyche::shipped();
        let e = said(
            EventKind::Addressed,
            "U1",
            "thanks, you are a great friend",
            1_000,
        );
        let once = |soul: &'static str, at: i64| {
            let (p, e) = (p.clone(), Event { at, ..e.clone() });
            async move {
                s.psyche_event_once(
                    soul,
                    &p,
                    &GateRules::default(),
                    &e,
                    &Place::default(),
                    "inbox:7",
                )
                .await
                .unwrap()
                .is_some()
            }
        };
        assert!(once("Wren", 1_000).await, "{name}");
        assert!(
            !once("Wren", 5_000).await,
            "{name}: a retry of the same message"
        );
        assert!(
            once("Kit", 5_000).await,
            "{name}: another soul has its own keys"
        );
        let mind = s.psyche_mind("Wren", &p, None, 9_000).await.unwrap();
        assert_eq!(mind.relationships["U1"].exchanges, 1, "{name}");
        assert_eq!(mind.decisions.len(), 1, "{name}");
        assert_eq!(mind.memories, 1, "{name}: the retry made no second memory");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn events_at_once_are_each_applied_whole_and_a_key_once() {
    on_every_backend!(|s, name| {
        let p = Psyche::shipped();
        let rules = GateRules::default();
        let nowhere = Place::default();
        // Eight events sent together: on a server, eight transactions racing for the row.
        let events: Vec<Event> = (0..8)
            .map(|i| said(EventKind::Overheard, "U1", &format!("ok {i}"), 1_000 + i))
            .collect();
        let applied = join_all(
            events
                .iter()
                .map(|e| s.psyche_event("Wren", &p, &rules, e, &nowhere)),
        )
        .await;
        assert!(applied.iter().all(|a| a.is_ok()), "{name}: {applied:?}");
        let mind = s.psyche_mind("Wren", &p, None, 9_000).await.unwrap();
        assert_eq!(
            mind.relationships["U1"].exchanges, 8,
            "{name}: none lost to another"
        );
        assert_eq!(
            s.psyche_decisions("Wren", 100).await.unwrap().len(),
            8,
            "{name}"
        );

        // One message's retries arriving together: applied by exactly one of them.
        let e = said(EventKind::Overheard, "U2", "hello there", 2_000);
        let retries = join_all(
            (0..6).map(|_| s.psyche_event_once("Wren", &p, &rules, &e, &nowhere, "inbox:9")),
        )
        .await;
        let applied = retries
            .into_iter()
            .filter(|r| r.as_ref().unwrap().is_some())
            .count();
        assert_eq!(applied, 1, "{name}");
        let mind = s.psyche_mind("Wren", &p, Some("U2"), 9_000).await.unwrap();
        assert_eq!(mind.relationships["U2"].exchanges, 1, "{name}");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_packet_recalls_a_memory_by_its_words_in_any_script() {
    on_every_backend!(|s, name| {
        let p = Psyche::shipped();
        let rules = GateRules::default();
        let mut at = 0;
        let mut event = |who: &str, text: &str| {
            at += 1_000;
            said(EventKind::Addressed, who, text, at)
        };
        let targets = [
            "I'm worried, the café near the station closed",
            "I'm worried about my trip to Москва",
            "I'm worried about the borrow checker",
            "I'm worried about my 日本語 lessons",
        ];
        let mut made = Vec::new();
        for t in targets {
            let (fx, _) = s
                .psyche_event("Wren", &p, &rules, &event("U1", t), &Place::default())
                .await
                .unwrap();
            made.push(fx.memory.expect("a memory").salience.get());
        }
        // Newer and more salient memories than every target, more than the newest and the most
        // salient candidates hold: only the full-text search can bring a target back.
        let mut louder = 0;
        for i in 0..30 {
            let text = format!(
                "Please help me, I'm so scared and worried and lonely tonight {}!",
                "x".repeat(i + 1)
            );
            let (fx, _) = s
                .psyche_event("Wren", &p, &rules, &event("U2", &text), &Place::default())
                .await
                .unwrap();
            let m = fx.memory.expect("a memory");
            louder += usize::from(made.iter().all(|t| m.salience.get() > *t));
        }
        assert!(louder > 20, "{name}: {louder} louder memories");
        let now = at + 1_000;
        let people = [("U1".to_string(), "Zoé".to_string())];
        for (query, expected) in [
            ("the CAFÉ", targets[0]),
            ("МОСКВА", targets[1]),
            ("borrow", targets[2]),
        ] {
            let packet = s
                .psyche_packet("Wren", &p, &people, query, now)
                .await
                .unwrap();
            let recalled = recalled(&packet);
            assert_eq!(
                recalled.first().map(String::as_str),
                Some(expected),
                "{name}: {query}: {recalled:?}"
            );
            let text = packet.render(&|q| format!("«{q}»"));
            assert!(!text.chars().any(|c| c.is_ascii_digit()), "{name}: {text}");
        }
        // A script written without spaces: `psyche::text::words` makes a word of each
        // character. PostgreSQL indexes those words; SQLite's FTS5 (unicode61) keeps "日本語" as
        // one token, which a query by character never matches: a known gap of the SQLite
        // backend, checked here so that closing it shows.
        let packet = s
            .psyche_packet("Wren", &p, &people, "日本語", now)
            .await
            .unwrap();
        let found = recalled(&packet).first().map(String::as_str) == Some(targets[3]);
        assert_eq!(
            found,
            name != "sqlite",
            "{name}: 日本語: {:?}",
            recalled(&packet)
        );
        // Words that are syntax to a full-text query are only words.
        let packet = s
            .psyche_packet("Wren", &p, &people, "'café' | !(&):* \\ <->", now)
            .await
            .unwrap();
        assert_eq!(
            recalled(&packet).first().map(String::as_str),
            Some(targets[0]),
            "{name}"
        );
        // A memory is not recalled before it happened.
        let packet = s
            .psyche_packet("Wren", &p, &people, "borrow", 2_500)
            .await
            .unwrap();
        assert!(!recalled(&packet).iter().any(|m| m == targets[2]), "{name}");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn post_cognition_moves_a_relationship_and_intentions_and_persists() {
    on_every_backend!(|s, name| {
        let p = Psyche::shipped();
        s.psyche_event(
            "Wren",
            &p,
            &GateRules::default(),
            &said(EventKind::Addressed, "U1", "hello", 0),
            &Place::default(),
        )
        .await
        .unwrap();
        let before = s
            .psyche_mind("Wren", &p, Some("U1"), 0)
            .await
            .unwrap()
            .relationships["U1"]
            .clone();
        let applied = s
            .psyche_post_cognition(
                "Wren",
                &p,
                &[StanceShift {
                    target: " U1 ".into(),
                    description: "benefit of the doubt".into(),
                }],
                &[IntentionUpdate {
                    operation: "create".into(),
                    kind: "be_gentle".into(),
                    target: Some("U1".into()),
                    horizon: "short".into(),
                    description: "priority 1.0".into(),
                }],
                10,
            )
            .await
            .unwrap();
        assert_eq!(applied.len(), 2, "{name}: {applied:?}");
        let mind = s.psyche_mind("Wren", &p, Some("U1"), 10).await.unwrap();
        let after = &mind.relationships["U1"];
        assert!(
            (after.trust.get() - before.trust.get() - 0.05).abs() < 1e-9,
            "{name}"
        );
        assert_eq!(mind.intentions.len(), 1, "{name}");
        assert_eq!(
            mind.intentions[0].priority, p.intentions["be_gentle"].priority,
            "{name}"
        );
        assert_eq!(mind.intentions[0].target.as_deref(), Some("U1"), "{name}");
        // The intention is in the next packet, in words.
        let people = [("U1".to_string(), "Zoé".to_string())];
        let packet = s
            .psyche_packet("Wren", &p, &people, "hi", 20)
            .await
            .unwrap();
        assert!(
            packet
                .render(&|q| q.to_string())
                .contains("mean to be gentle with Zoé"),
            "{name}"
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_keeps_its_cooldown_and_the_log_reads_newest_first() {
    on_every_backend!(|s, name| {
        let p = Psyche::shipped();
        let rules = GateRules::default();
        let listened = Place {
            channel: Some("C1".into()),
            listened: true,
        };
        let lines = [
            "This refactor is stupid, you broke the compiler build AGAIN!",
            "Don't you DARE call my code stupid, your test suite is useless!",
            "I hate this design, it is a failure and you refuse to listen",
        ];
        let mut verdicts = Vec::new();
        for (i, l) in lines.iter().enumerate() {
            let who = if i % 2 == 0 { "U1" } else { "U2" };
            let e = said(EventKind::Overheard, who, l, (i as i64 + 1) * 20_000);
            verdicts.push(
                s.psyche_event("Wren", &p, &rules, &e, &listened)
                    .await
                    .unwrap()
                    .1
                    .verdict,
            );
        }
        assert_eq!(
            verdicts.iter().filter(|v| **v == Verdict::Speak).count(),
            1,
            "{name}: {verdicts:?}"
        );
        assert_eq!(
            verdicts.last(),
            Some(&Verdict::Silent(Silence::Cooldown)),
            "{name}"
        );
        let e = said(EventKind::Overheard, "U1", "you refuse to listen", 90_000);
        let (_, d) = s
            .psyche_event("Wren", &p, &rules, &e, &Place::default())
            .await
            .unwrap();
        assert_eq!(d.verdict, Verdict::Silent(Silence::NotListened), "{name}");

        let log = s.psyche_decisions("Wren", 3).await.unwrap();
        assert_eq!(
            log.iter().map(|l| l.at).collect::<Vec<_>>(),
            [90_000, 60_000, 40_000],
            "{name}"
        );
        assert_eq!(log[0].channel, None, "{name}");
        assert_eq!(log[1].channel.as_deref(), Some("C1"), "{name}");
        assert!(log[1].listened && !log[0].listened, "{name}");
        let mind = s
            .psyche_mind("Wren", &p, Some("U2"), 100_000)
            .await
            .unwrap();
        assert_eq!(mind.decisions.len(), 1, "{name}: U2's only");
        assert_eq!(
            mind.relationships.keys().collect::<Vec<_>>(),
            ["U2"],
            "{name}"
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_script_gives_the_same_answers_on_every_backend() {
    let mut runs: Vec<(&str, serde_json::Value)> = Vec::new();
    on_every_backend!(|s, name| {
        let p = Psyche::shipped();
        let rules = GateRules::default();
        let here = Place {
            channel: Some("C1".into()),
            listened: true,
        };
        let script = [
            (
                EventKind::Addressed,
                "U1",
                "I'm a nurse in Lyon and I love the café 日本語",
                0,
            ),
            (
                EventKind::Overheard,
                "U2",
                "the compiler build is broken AGAIN, I hate it",
                60_000,
            ),
            (EventKind::Reaction, "U1", "heart", 120_000),
            // U1 back after hours: their last memory grows more salient.
            (
                EventKind::Addressed,
                "U1",
                "I'm back, worried about the exam",
                5 * HOUR,
            ),
            (
                EventKind::Addressed,
                "U1",
                "thanks, you are a great friend",
                5 * HOUR + 1_000,
            ),
        ];
        let mut out = Vec::new();
        for (i, (kind, who, text, at)) in script.into_iter().enumerate() {
            let e = said(kind, who, text, at);
            let key = format!("inbox:{}", i % 4);
            let applied = s
                .psyche_event_once("Wren", &p, &rules, &e, &here, &key)
                .await
                .unwrap();
            out.push(serde_json::to_value(applied.map(|(fx, d)| (fx, d.verdict.name()))).unwrap());
        }
        let people = [
            ("U1".to_string(), "Zoé".to_string()),
            ("U2".to_string(), "Kai".to_string()),
        ];
        let packet = s
            .psyche_packet("Wren", &p, &people, "café exam", 6 * HOUR)
            .await
            .unwrap();
        out.push(packet.render(&|q| format!("«{q}»")).into());
        let mind = s.psyche_mind("Wren", &p, None, 6 * HOUR).await.unwrap();
        out.push(serde_json::to_value(&mind).unwrap());
        runs.push((name, serde_json::Value::Array(out)));
    });
    for pair in runs.windows(2) {
        assert_eq!(
            pair[0].1, pair[1].1,
            "{} and {} differ",
            pair[0].0, pair[1].0
        );
    }
}

/// An event cancelled at any point (a turn stopped mid-event) leaves no transaction behind:
/// no connection of the pool stays inside one holding the soul's row, and the next event is
/// applied at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_event_cancelled_midway_leaves_no_transaction_behind() {
    let Some(fresh) = crate::store::backends::postgres().await else {
        return;
    };
    let s = &fresh.store;
    let (p, rules) = (Psyche::shipped(), GateRules::default());
    for i in 0..60u64 {
        let e = said(
            EventKind::Overheard,
            "U1",
            &format!("ok {i}"),
            1_000 + i as i64,
        );
        let cut = std::time::Duration::from_micros(50 * i);
        let _ = tokio::time::timeout(
            cut,
            s.psyche_event("Wren", &p, &rules, &e, &Place::default()),
        )
        .await;
        // The server hears a closed connection a moment later; a transaction left open would
        // stay for the store's idle-transaction limit (4 s), or until the pool's next user.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        while crate::store::backends::idle_in_transaction(&fresh).await > 0 {
            assert!(
                std::time::Instant::now() < deadline,
                "an event cancelled after {cut:?} left its transaction open"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }
    let last = said(EventKind::Addressed, "U1", "still here", 9_000);
    s.psyche_event("Wren", &p, &rules, &last, &Place::default())
        .await
        .unwrap();
}
