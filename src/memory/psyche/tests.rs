use std::collections::BTreeMap;
use std::sync::Arc;

use rusqlite::{params, OptionalExtension};

use super::memories::{fts_query, CANDIDATES, COMMON_WORD_DOCS};
use super::*;
use crate::memory::faces::{Dreams, Psychology};
use crate::memory::sqlite::{Block, Sqlite};
use crate::memory::SqliteStore;
use crate::psyche::gate::{Silence, Verdict};
use crate::psyche::mapping::IntentionUpdate;
use crate::psyche::EventKind;

fn store() -> (tempfile::TempDir, Arc<SqliteStore>) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("anima.db")).unwrap();
    (dir, Arc::new(store))
}

fn said(kind: EventKind, who: &str, text: &str, at: i64) -> Event {
    Event {
        kind,
        person: Some(who.into()),
        text: text.into(),
        at,
    }
}

#[test]
fn an_event_is_one_transaction_that_writes_state_relationship_memory_facts_and_the_log() {
    let (_d, s) = store();
    let p = Psyche::shipped();
    let before = s.write_transactions();
    let (fx, d) = Sqlite::on(&s)
        .psyche_event(
            "Wren",
            &p,
            &GateRules::default(),
            &said(
                EventKind::Addressed,
                "U1",
                "I'm a nurse in Lyon and I'm worried about the test",
                1_000,
            ),
            &Place::default(),
        )
        .block()
        .unwrap();
    assert_eq!(s.write_transactions(), before + 1, "one write transaction");
    assert_eq!(d.verdict, Verdict::Answer);
    assert!(fx.memory.is_some());
    let mind = Sqlite::on(&s)
        .psyche_mind("Wren", &p, None, 2_000)
        .block()
        .unwrap();
    assert_eq!(mind.substrate, fx.substrate);
    assert_eq!(mind.relationships["U1"].exchanges, 1);
    assert_eq!(mind.facts["U1"][0].value, "nurse in Lyon");
    assert_eq!(mind.memories, 1);
    assert_eq!(mind.recent_memories[0].people, vec!["U1".to_string()]);
    assert_eq!(mind.decisions[0].verdict, "answer");
    assert_eq!(mind.decisions[0].inputs, d.inputs, "logged with its inputs");
    // Another soul in the same home is another substrate.
    assert_eq!(
        Sqlite::on(&s)
            .psyche_mind("Kit", &p, None, 2_000)
            .block()
            .unwrap()
            .memories,
        0
    );
}

#[test]
fn an_event_with_a_key_is_applied_once() {
    let (_d, s) = store();
    let p = Psyche::shipped();
    let e = said(
        EventKind::Addressed,
        "U1",
        "thanks, you are a great friend",
        1_000,
    );
    let once = |at: i64| {
        Sqlite::on(&s)
            .psyche_event_once(
                "Wren",
                &p,
                &GateRules::default(),
                &Event { at, ..e.clone() },
                &Place::default(),
                "inbox:7",
            )
            .block()
            .unwrap()
    };
    assert!(once(1_000).is_some());
    assert!(once(5_000).is_none(), "a retry of the same message");
    let mind = Sqlite::on(&s)
        .psyche_mind("Wren", &p, None, 9_000)
        .block()
        .unwrap();
    assert_eq!(mind.relationships["U1"].exchanges, 1);
    assert_eq!(mind.decisions.len(), 1);
}

/// An overheard "ok" by U1 at `at`, keyed `key`: whether it was applied (not seen before).
fn heard_once(s: &Arc<SqliteStore>, p: &Psyche, key: &str, at: i64) -> bool {
    Sqlite::on(s)
        .psyche_event_once(
            "Wren",
            p,
            &GateRules::default(),
            &said(EventKind::Overheard, "U1", "ok", at),
            &Place::default(),
            key,
        )
        .block()
        .unwrap()
        .is_some()
}

#[test]
fn keys_stay_seen_when_they_move_from_the_state_row_to_the_table() {
    use super::seen::{LONGEST_INLINE, RECENT_BYTES};
    let (_d, s) = store();
    let p = Psyche::shipped();
    let once = |key: &str, at: i64| heard_once(&s, &p, key, at);
    let count = |sql: &str| -> i64 { s.conn().query_row(sql, [], |r| r.get(0)).unwrap() };
    let row = || {
        count("SELECT length(CAST(recent_keys AS BLOB)) FROM psyche_substrate WHERE soul = 'Wren'")
            as usize
    };
    let table = || count("SELECT count(*) FROM psyche_seen");
    // Keys of every shape: a tab, a line feed or great length keep a key out of the row.
    let mut keys: Vec<String> = (0..120).map(|i| format!("inbox:{i}")).collect();
    keys.extend([
        "tick:a\tb".to_string(),
        "x\ny".to_string(),
        "é".repeat(LONGEST_INLINE),
        "source:Év0ÜŁ東".to_string(),
    ]);
    let mut moved = false;
    for (i, key) in keys.iter().enumerate() {
        let before = table();
        assert!(once(key, 1_000 * (i as i64 + 1)), "{key} the first time");
        assert!(
            row() < RECENT_BYTES,
            "the row's lines stay within their budget"
        );
        // The whole row, with the state and the decisions' lines, fits a 4 KB page (a
        // table's row keeps up to 4,061 bytes there before it spills onto a page of its own).
        let whole = count(
            "SELECT length(CAST(soul || state || updated_at || recent_keys || recent_decisions AS BLOB))
             FROM psyche_substrate WHERE soul = 'Wren'",
        );
        assert!(whole < 4_000, "{whole} bytes");
        if i < 120 {
            let grew = table() - before;
            // An inline key is in the row, or moved with the others: never alone.
            assert!(grew == 0 || grew > 10, "{key}: {grew}");
            moved |= grew > 0;
            // The keys' and the decisions' lines move together, in the same event.
            let decisions =
                count("SELECT length(recent_decisions) FROM psyche_substrate WHERE soul = 'Wren'");
            assert_eq!(row() == 0, decisions == 0, "{key}: {decisions}");
        } else if i < 123 {
            assert_eq!(table(), before + 1, "{key:?} goes to the table at once");
        }
    }
    assert!(moved, "the row's lines moved to the table at least once");
    assert!(row() > 0);
    for key in &keys {
        assert!(!once(key, 999_999), "{key} again");
    }
    // A part of a key in the row's list is a key of its own.
    let last = "source:Év0ÜŁ東";
    for part in ["ource:Év0ÜŁ東", "source:Év0ÜŁ"] {
        assert!(once(part, 1_000_000), "{part}");
    }
    let mind = Sqlite::on(&s)
        .psyche_mind("Wren", &p, None, 2_000_000)
        .block()
        .unwrap();
    assert_eq!(mind.relationships["U1"].exchanges, keys.len() as u32 + 2);
    assert!(!once(last, 3_000_000));
}

#[test]
fn decisions_move_from_the_state_row_to_the_table_in_order_and_read_back_whole() {
    use super::gate_log::{LoggedDecision, RECENT_BYTES};
    let (_d, s) = store();
    let p = Psyche::shipped();
    let rules = GateRules::default();
    let long = "é".repeat(40);
    // People and channels of every shape: a tab, a line feed or great length keep a decision
    // out of the row's lines.
    let people = ["U1", "Zoé", "東京", "a\tb", "x\ny", long.as_str()];
    let channels = [None, Some("C1"), Some("C\t2"), Some("")];
    let texts = [
        "I'm terrified, please help me, the release broke everything!",
        "ok",
        "thanks, you are a great friend 🙏",
    ];
    let kinds = [
        EventKind::Addressed,
        EventKind::Overheard,
        EventKind::Reaction,
    ];
    let row_len = || -> usize {
        s.conn()
            .query_row(
                "SELECT length(CAST(recent_decisions AS BLOB)) FROM psyche_substrate",
                [],
                |r| r.get::<_, i64>(0),
            )
            .unwrap() as usize
    };
    let table = || -> i64 {
        s.conn()
            .query_row("SELECT count(*) FROM psyche_gate_log", [], |r| r.get(0))
            .unwrap()
    };
    let mut expected: Vec<LoggedDecision> = Vec::new();
    let mut straight = 0;
    for i in 0..152usize {
        let who = people[i % people.len()];
        let place = Place {
            channel: channels[i % channels.len()].map(str::to_string),
            listened: i % 2 == 0,
        };
        let e = said(kinds[i % 3], who, texts[i % 3], 1_000 * i as i64);
        let before = table();
        let (_, d) = Sqlite::on(&s)
            .psyche_event("Wren", &p, &rules, &e, &place)
            .block()
            .unwrap();
        expected.push(LoggedDecision::new(&e, &place, &d));
        assert!(
            row_len() < RECENT_BYTES,
            "the row's lines stay within their budget"
        );
        if who.contains(['\t', '\n']) || who.len() > 64 || i % channels.len() == 2 {
            // Straight to the table, after whatever lines were waiting.
            assert!(table() > before, "{who:?}");
            assert_eq!(row_len(), 0);
            straight += 1;
        }
    }
    assert!(straight > 0 && row_len() > 0 && table() > straight);
    // Read back whole and in order, newest first, numbers to the bit.
    let mut all = Sqlite::on(&s)
        .psyche_decisions("Wren", 1_000)
        .block()
        .unwrap();
    all.reverse();
    assert_eq!(all, expected);
    for (a, b) in all.iter().zip(&expected) {
        assert_eq!(a.meaning.to_bits(), b.meaning.to_bits());
        assert_eq!(
            a.inputs.energy.get().to_bits(),
            b.inputs.energy.get().to_bits()
        );
    }
    // A limit takes the newest, from the row first; a person's are theirs only.
    let newest: Vec<LoggedDecision> = expected.iter().rev().take(3).cloned().collect();
    assert_eq!(
        Sqlite::on(&s).psyche_decisions("Wren", 3).block().unwrap(),
        newest
    );
    let zoe = Sqlite::on(&s)
        .psyche_mind("Wren", &p, Some("Zoé"), 1_000_000)
        .block()
        .unwrap()
        .decisions;
    let want: Vec<LoggedDecision> = expected
        .iter()
        .rev()
        .filter(|l| l.person.as_deref() == Some("Zoé"))
        .take(10)
        .cloned()
        .collect();
    assert_eq!(zoe, want);
    assert_eq!(zoe.len(), 10);
}

#[test]
fn the_store_replays_like_the_pure_update_and_keeps_the_cooldown() {
    let (_d, s) = store();
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
        let (_, d) = Sqlite::on(&s)
            .psyche_event(
                "Wren",
                &p,
                &rules,
                &said(EventKind::Overheard, who, l, (i as i64 + 1) * 20_000),
                &listened,
            )
            .block()
            .unwrap();
        verdicts.push(d.verdict);
    }
    assert_eq!(
        verdicts.iter().filter(|v| **v == Verdict::Speak).count(),
        1,
        "{verdicts:?}"
    );
    assert_eq!(
        verdicts.last(),
        Some(&Verdict::Silent(Silence::Cooldown)),
        "{verdicts:?}"
    );
    let (_, d) = Sqlite::on(&s)
        .psyche_event(
            "Wren",
            &p,
            &rules,
            &said(
                EventKind::Overheard,
                "U1",
                "you refuse to listen to the compiler",
                90_000,
            ),
            &Place::default(),
        )
        .block()
        .unwrap();
    assert_eq!(d.verdict, Verdict::Silent(Silence::NotListened));
}

#[test]
fn the_packet_recalls_the_matching_memory_and_says_no_number() {
    let (_d, s) = store();
    let p = Psyche::shipped();
    let rules = GateRules::default();
    for (i, text) in [
        "I'm worried the borrow checker hates my refactor",
        "Please help me, I feel lonely tonight",
        "Can you help me plan the garden party?",
    ]
    .iter()
    .enumerate()
    {
        Sqlite::on(&s)
            .psyche_event(
                "Wren",
                &p,
                &rules,
                &said(EventKind::Addressed, "U1", text, i as i64 * 1000),
                &Place::default(),
            )
            .block()
            .unwrap();
    }
    let packet = Sqlite::on(&s)
        .psyche_packet(
            "Wren",
            &p,
            &[("U1".into(), "Zoé".into())],
            "the borrow checker again",
            10_000,
        )
        .block()
        .unwrap();
    let text = packet.render(&|q| format!("«{q}»"));
    let first = text
        .lines()
        .find(|l| l.starts_with("You remember"))
        .unwrap();
    assert!(first.contains("borrow checker"), "{text}");
    assert!(text.contains("«Zoé»"), "{text}");
    assert!(!text.chars().any(|c| c.is_ascii_digit()), "{text}");
}

#[test]
fn post_cognition_goes_through_the_table_and_persists() {
    let (_d, s) = store();
    let p = Psyche::shipped();
    Sqlite::on(&s)
        .psyche_event(
            "Wren",
            &p,
            &GateRules::default(),
            &said(EventKind::Addressed, "U1", "hello", 0),
            &Place::default(),
        )
        .block()
        .unwrap();
    let before = Sqlite::on(&s)
        .psyche_mind("Wren", &p, Some("U1"), 0)
        .block()
        .unwrap()
        .relationships["U1"]
        .clone();
    let applied = Sqlite::on(&s)
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
                description: "priority 1.0".into(),
            }],
            10,
        )
        .block()
        .unwrap();
    assert_eq!(applied.len(), 2, "{applied:?}");
    let mind = Sqlite::on(&s)
        .psyche_mind("Wren", &p, Some("U1"), 10)
        .block()
        .unwrap();
    let after = &mind.relationships["U1"];
    assert!((after.trust.get() - before.trust.get() - 0.05).abs() < 1e-9);
    assert_eq!(mind.intentions.len(), 1);
    assert_eq!(
        mind.intentions[0].priority,
        p.intentions["be_gentle"].priority
    );
}

#[test]
fn a_full_text_query_is_only_words_and_leaves_out_common_ones() {
    let (_d, s) = store();
    let conn = s.conn();
    assert_eq!(
        fts_query(&conn, "a \"b\" OR c*").unwrap(),
        Some("\"a\" OR \"b\" OR \"c\" OR \"or\"".into())
    );
    assert_eq!(fts_query(&conn, "🦀 !!").unwrap(), None);
    for i in 0..=COMMON_WORD_DOCS {
        conn.execute(
            "INSERT INTO psyche_memories (soul, text, importance, salience, at) VALUES ('W', ?1, 0.5, 0.5, 0)",
            [format!("the day {i}")],
        )
        .unwrap();
    }
    assert_eq!(
        fts_query(&conn, "the garden").unwrap(),
        Some("\"garden\"".into()),
        "`the` is in every memory"
    );
}

#[test]
fn the_salient_list_is_always_the_top_of_all_memories() {
    let (_d, s) = store();
    let conn = s.conn();
    let ids = |sql: &str, soul: &str| -> Vec<i64> {
        conn.prepare(sql)
            .unwrap()
            .query_map([soul], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    let mut rng = fastrand::Rng::with_seed(7);
    for step in 0..800 {
        let soul = ["Wren", "Kit"][rng.usize(..2)];
        let any: Option<i64> = conn
            .query_row(
                "SELECT id FROM psyche_memories WHERE soul = ?1 ORDER BY random() LIMIT 1",
                [soul],
                |r| r.get(0),
            )
            .optional()
            .unwrap();
        // Saliences in tenths, so that ties (the newer first) are common.
        let tenths = rng.u8(..=10) as f64 / 10.0;
        match (rng.usize(..8), any) {
            (0..=3, _) | (_, None) => {
                conn.execute(
                    "INSERT INTO psyche_memories (soul, text, importance, salience, at)
                     VALUES (?1, 'a day', 0.5, ?2, 0)",
                    params![soul, tenths],
                )
                .unwrap();
            }
            (4 | 5, Some(id)) => {
                conn.execute(
                    "UPDATE psyche_memories SET salience = min(1.0, salience + 0.1) WHERE id = ?1",
                    [id],
                )
                .unwrap();
            }
            (6, Some(id)) => {
                conn.execute(
                    "UPDATE psyche_memories SET salience = ?2 WHERE id = ?1",
                    params![id, tenths],
                )
                .unwrap();
            }
            (_, Some(id)) => {
                conn.execute("DELETE FROM psyche_memories WHERE id = ?1", [id])
                    .unwrap();
            }
        }
        assert_eq!(
            ids(
                "SELECT memory FROM psyche_salient WHERE soul = ?1 ORDER BY salience DESC, memory DESC",
                soul
            ),
            ids(
                &format!(
                    "SELECT id FROM psyche_memories WHERE soul = ?1
                     ORDER BY salience DESC, id DESC LIMIT {CANDIDATES}"
                ),
                soul
            ),
            "step {step}"
        );
    }
}

#[test]
fn a_person_coming_back_makes_their_last_memory_more_salient_up_to_one() {
    let (_d, s) = store();
    let p = Psyche::shipped();
    let event = |who: &str, text: &str, at: i64| {
        Sqlite::on(&s)
            .psyche_event(
                "Wren",
                &p,
                &GateRules::default(),
                &said(EventKind::Addressed, who, text, at),
                &Place::default(),
            )
            .block()
            .unwrap()
            .0
    };
    let salience = |id: i64| salience_stored(&s, id);
    let hour = 3_600_000i64;
    let spell = (p.memory.return_after_hours * hour as f64) as i64;
    let worried = "I'm worried the borrow checker hates my refactor";
    assert!(event("U1", worried, 0).memory.is_some());
    assert!(event("U2", worried, 1).memory.is_some());
    let (first, other) = (salience(1), salience(2));
    // The rest of the conversation: no boost, however many lines.
    for k in 0..5 {
        assert!(event("U1", "ok", 10 + k * 60_000).memory.is_none());
    }
    assert_eq!(salience(1), first, "a conversation going on is no return");
    let mut expected = first;
    let mut at = 10 + 4 * 60_000;
    for k in 0..12 {
        at += spell;
        let fx = event("U1", "ok", at);
        assert!(fx.memory.is_none());
        assert!(fx.salience_boost.is_some());
        expected = (expected + p.memory.salience_boost.get()).min(1.0);
        assert_eq!(salience(1), expected, "after {} returns", k + 1);
        // The next line, a minute later, is the same visit.
        assert!(event("U1", "ok", at + 60_000).salience_boost.is_none());
        at += 60_000;
        assert_eq!(salience(1), expected);
    }
    assert_eq!(expected, 1.0);
    assert_eq!(
        salience(2),
        other,
        "another person's memory stays as it was"
    );
    // A newer memory shared with U1 is the one that grows now.
    assert!(event("U1", worried, at + 1).memory.is_some());
    event("U1", "ok", at + 1 + spell);
    assert_eq!(salience(1), 1.0);
    assert!(salience(3) > first);
}

/// A memory's salience as retrieval reads it (with any boost waiting for it).
fn salience_read(s: &Arc<SqliteStore>, id: i64) -> f64 {
    memories::memory_rows(
        &s.conn(),
        &format!(
            "SELECT {} FROM psyche_memories m WHERE m.id = ?1",
            memories::MEMORY_COLUMNS
        ),
        [id],
    )
    .unwrap()[0]
        .salience
        .get()
}

fn salience_stored(s: &Arc<SqliteStore>, id: i64) -> f64 {
    s.conn()
        .query_row(
            "SELECT salience FROM psyche_memories WHERE id = ?1",
            [id],
            |r| r.get(0),
        )
        .unwrap()
}

/// What waits on `person`'s relationship row: the memory and its boost.
fn waiting(s: &Arc<SqliteStore>, person: &str) -> (Option<i64>, f64) {
    s.conn()
        .query_row(
            "SELECT boost_memory, boost FROM psyche_relationships WHERE person = ?1",
            [person],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap()
}

/// Relationship rows whose newest memory's salience is not the one stored in the memory.
fn stale_rows(s: &Arc<SqliteStore>) -> i64 {
    s.conn()
        .query_row(
            "SELECT count(*) FROM psyche_relationships r JOIN psyche_memories m ON m.id = r.last_memory
             WHERE m.salience <> r.last_salience",
            [],
            |r| r.get(0),
        )
        .unwrap()
}

#[test]
fn a_return_below_the_most_salient_waits_on_the_relationship_row_and_reads_the_same() {
    let (_d, s) = store();
    let p = Psyche::shipped();
    let rules = GateRules::default();
    let event = |who: &str, text: &str, at: i64| {
        Sqlite::on(&s)
            .psyche_event(
                "Wren",
                &p,
                &rules,
                &said(EventKind::Addressed, who, text, at),
                &Place::default(),
            )
            .block()
            .unwrap()
            .0
    };
    let spell = (p.memory.return_after_hours * 3_600_000.0) as i64;
    let boost = p.memory.salience_boost.get();
    // Twenty memories that matter more than U1's will: the list of the most salient is full.
    for i in 0..20 {
        let who = format!("V{i}");
        let fx = event(
            &who,
            "I'm terrified, please help me, the release broke everything!",
            i,
        );
        assert!(fx.memory.is_some());
    }
    assert!(event("U1", "I'm worried about the garden", 100)
        .memory
        .is_some());
    let mine = 21;
    let first = salience_stored(&s, mine);
    let least: f64 = s
        .conn()
        .query_row("SELECT min(salience) FROM psyche_salient", [], |r| r.get(0))
        .unwrap();
    assert!(
        first + boost < least,
        "{first} + {boost} stays under {least}"
    );

    // U1 comes back: the boost waits on their row; the memory's page is not written.
    let mut at = 100 + spell;
    event("U1", "ok", at);
    assert_eq!(
        salience_stored(&s, mine),
        first,
        "the memory is not written"
    );
    assert_eq!(waiting(&s, "U1"), (Some(mine), boost));
    assert_eq!(salience_read(&s, mine), first + boost);
    // A line of the same visit changes nothing; a second return adds to what waits.
    event("U1", "ok", at + 1);
    assert_eq!(waiting(&s, "U1"), (Some(mine), boost));
    at += 1 + spell;
    event("U1", "ok", at);
    assert_eq!(waiting(&s, "U1"), (Some(mine), boost + boost));
    assert_eq!(salience_read(&s, mine), first + (boost + boost));
    // The packet recalls it at that salience, and the person's numbers moved as ever.
    let packet = Sqlite::on(&s)
        .psyche_packet(
            "Wren",
            &p,
            &[("U1".into(), "Zoé".into())],
            "the garden",
            at + 5,
        )
        .block()
        .unwrap();
    assert!(packet
        .render(&|q| q.to_string())
        .contains("worried about the garden"));
    assert_eq!(
        Sqlite::on(&s)
            .psyche_mind("Wren", &p, Some("U1"), at)
            .block()
            .unwrap()
            .relationships["U1"]
            .exchanges,
        4
    );

    // Post-cognition rewrites the row: what waits stays.
    Sqlite::on(&s)
        .psyche_post_cognition(
            "Wren",
            &p,
            &[StanceShift {
                target: "U1".into(),
                description: "warmer".into(),
            }],
            &[],
            at + 10,
        )
        .block()
        .unwrap();
    assert_eq!(waiting(&s, "U1"), (Some(mine), boost + boost));

    // A newer memory shared with U1: the event that makes it writes the older boost to its
    // memory; then a return owes the new one to the newer memory, and writes no memory.
    assert!(event("U1", "I'm worried about the compiler", at + 20)
        .memory
        .is_some());
    let newer = 22;
    assert_eq!(salience_stored(&s, mine), first + (boost + boost));
    assert_eq!(waiting(&s, "U1"), (None, 0.0));
    let made = salience_stored(&s, newer);
    at += 20 + spell;
    event("U1", "ok", at);
    assert_eq!(salience_stored(&s, mine), first + (boost + boost));
    assert_eq!(
        salience_stored(&s, newer),
        made,
        "the return writes no memory"
    );
    assert_eq!(waiting(&s, "U1"), (Some(newer), boost));

    // The upkeep writes every waiting boost to its memory.
    let read = salience_read(&s, newer);
    assert_eq!(stale_rows(&s), 0);
    Sqlite::on(&s).upkeep().block().unwrap();
    assert_eq!(waiting(&s, "U1"), (None, 0.0));
    assert_eq!(salience_stored(&s, newer), read);
    assert_eq!(salience_read(&s, newer), read);
    assert_eq!(
        stale_rows(&s),
        0,
        "the row knows its newest memory's salience"
    );
}

/// 600 random events by 12 people, a quarter of them after a quiet spell, and with `between`,
/// post-cognition (a padded target) or a dream's upkeep now and then between them. After every
/// event: each memory's salience as read equals a model of "its own, plus a boost for each
/// return of its person while it was their newest, up to 1"; no row's copy of its newest
/// memory's salience is stale; the list of the most salient is the top of the saliences as
/// read. How many returns left their boost waiting, and how many wrote it at once.
fn salience_against_the_model(seed: u64, between: bool) -> (usize, usize) {
    let (_d, s) = store();
    let p = Psyche::shipped();
    let rules = GateRules::default();
    let spell = (p.memory.return_after_hours * 3_600_000.0) as i64;
    let boost = p.memory.salience_boost.get();
    let texts = [
        "I'm worried about the garden",
        "ok",
        "thanks, you are a great friend",
        "I'm terrified, please help me, the release broke everything!",
        "the compiler again, why",
        "I'm a nurse in Lyon and I'm anxious about the test",
    ];
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut expected: BTreeMap<i64, f64> = BTreeMap::new();
    let mut newest: BTreeMap<String, i64> = BTreeMap::new();
    let mut last_seen: BTreeMap<String, i64> = BTreeMap::new();
    let mut at = 0i64;
    let (mut waited, mut written) = (0, 0);
    for step in 0..600 {
        at += if rng.u8(..4) == 0 { spell } else { 1_000 };
        let who = format!("U{}", rng.usize(..12));
        let text = texts[rng.usize(..texts.len())];
        let back = last_seen.get(&who).is_some_and(|&seen| at - seen >= spell);
        let stored_before = newest.get(&who).map(|&id| salience_stored(&s, id));
        let (fx, _) = Sqlite::on(&s)
            .psyche_event(
                "Wren",
                &p,
                &rules,
                &said(EventKind::Addressed, &who, text, at),
                &Place::default(),
            )
            .block()
            .unwrap();
        assert_eq!(fx.salience_boost.is_some(), back, "step {step}");
        if let (true, Some(&id)) = (back, newest.get(&who)) {
            let e = expected.get_mut(&id).unwrap();
            *e = (*e + boost).min(1.0);
            if salience_stored(&s, id) == stored_before.unwrap() {
                waited += 1;
            } else {
                written += 1;
            }
        }
        if let Some(m) = &fx.memory {
            let id: i64 = s
                .conn()
                .query_row("SELECT max(id) FROM psyche_memories", [], |r| r.get(0))
                .unwrap();
            expected.insert(id, m.salience.get());
            newest.insert(who.clone(), id);
        }
        // Between events: post-cognition rewrites the row, or a dream writes what waits.
        match rng.u8(..10) {
            0 if between => {
                Sqlite::on(&s)
                    .psyche_post_cognition(
                        "Wren",
                        &p,
                        &[StanceShift {
                            target: format!(" {who} "),
                            description: "open_up".into(),
                        }],
                        &[],
                        at,
                    )
                    .block()
                    .unwrap();
            }
            1 if between => {
                Sqlite::on(&s).upkeep().block().unwrap();
            }
            _ => {}
        }
        last_seen.insert(who, at);
        for (&id, &e) in &expected {
            let read = salience_read(&s, id);
            assert!(
                (read - e).abs() < 1e-12,
                "step {step}: memory {id} reads {read}, not {e}"
            );
        }
        assert_eq!(stale_rows(&s), 0, "step {step}");
        let conn = s.conn();
        let listed: Vec<i64> = conn
            .prepare("SELECT memory FROM psyche_salient ORDER BY salience DESC, memory DESC")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let mut all = memories::memory_rows(
            &conn,
            &format!("SELECT {} FROM psyche_memories m", memories::MEMORY_COLUMNS),
            [],
        )
        .unwrap();
        all.sort_by(|a, b| {
            (b.salience.get(), b.id)
                .partial_cmp(&(a.salience.get(), a.id))
                .unwrap()
        });
        let top: Vec<i64> = all.iter().take(CANDIDATES).map(|m| m.id).collect();
        assert_eq!(listed, top, "step {step}");
    }
    (waited, written)
}

#[test]
fn a_return_that_changes_the_most_salient_is_written_and_the_list_stays_the_top() {
    let (waited, written) = salience_against_the_model(5, false);
    assert!(
        waited > 10 && written > 10,
        "both ways taken: {waited} waited, {written} written"
    );
}

#[test]
fn salience_reads_right_with_upkeep_and_post_cognition_between_events() {
    let (waited, written) = salience_against_the_model(11, true);
    assert!(waited + written > 10, "{waited} waited, {written} written");
}

#[test]
fn the_upkeep_forgets_old_event_keys_and_merges_the_index_without_losing_a_memory() {
    let (_d, s) = store();
    let p = Psyche::shipped();
    let rules = GateRules::default();
    let now = super::super::now_ms();
    let old = now - SEEN_KEEP_MS - 1;
    let texts = [
        "I'm worried the borrow checker hates my refactor",
        "Please help me, I feel lonely tonight",
        "I'm anxious about the garden party, can you help me?",
    ];
    // Each memory in its own transaction: a full-text segment each.
    for (i, text) in texts.iter().enumerate() {
        let at = if i == 0 { old } else { now - 1_000 + i as i64 };
        let e = said(EventKind::Addressed, "U1", text, at);
        Sqlite::on(&s)
            .psyche_event_once(
                "Wren",
                &p,
                &rules,
                &e,
                &Place::default(),
                &format!("inbox:{i}"),
            )
            .block()
            .unwrap()
            .unwrap();
    }
    // The index's leaf pages, one per segment here (ids 1 and 10: its structure, its averages).
    let segments = |s: &SqliteStore| -> i64 {
        s.conn()
            .query_row(
                "SELECT count(*) FROM psyche_memories_fts_data WHERE id > 10",
                [],
                |r| r.get(0),
            )
            .unwrap()
    };
    let before = segments(&s);
    let u = Sqlite::on(&s).upkeep().block().unwrap();
    assert_eq!(
        u.forgotten_event_keys, 1,
        "only the key older than the window"
    );
    assert_eq!(
        (before, segments(&s)),
        (3, 1),
        "three segments merged into one"
    );
    // The old key is forgotten; the recent ones still hold.
    let again = |key: &str| {
        Sqlite::on(&s)
            .psyche_event_once(
                "Wren",
                &p,
                &rules,
                &said(EventKind::Addressed, "U1", "hello again", now),
                &Place::default(),
                key,
            )
            .block()
            .unwrap()
            .is_some()
    };
    assert!(!again("inbox:1") && !again("inbox:2"));
    assert!(again("inbox:0"));
    // Every memory is still found by its words.
    for (text, query) in texts
        .iter()
        .zip(["borrow checker", "lonely", "garden party"])
    {
        let packet = Sqlite::on(&s)
            .psyche_packet("Wren", &p, &[("U1".into(), "Zoé".into())], query, now + 10)
            .block()
            .unwrap();
        let rendered = packet.render(&|q| q.to_string());
        assert!(rendered.contains(text), "{query}: {rendered}");
    }
}

/// The soul's row at the most its lines may hold by their budgets (keys one byte short of
/// `seen::RECENT_BYTES`, decisions one short of `gate_log::RECENT_BYTES`), with a state that
/// has every stance's pattern and a cooldown: it must still fit one 4 KB page, and stay under
/// the 4,000 bytes the module promises.
#[test]
fn the_soul_row_fits_its_page_with_both_lines_at_their_budget() {
    let (_d, s) = store();
    let p = Psyche::shipped();
    let rules = GateRules::default();
    // Milliseconds since the epoch, as the daemon gives them: 13 digits.
    let mut at: i64 = 1_760_000_000_000;
    // A state as full as the shipped psyche makes it: a cooldown, and a pattern for every
    // stance that moves a drive.
    Sqlite::on(&s)
        .psyche_event(
            "Wren",
            &p,
            &rules,
            &said(EventKind::Addressed, "U1", "hello, how are you?", at),
            &Place::default(),
        )
        .block()
        .unwrap();
    let shifts: Vec<StanceShift> = p
        .stances
        .keys()
        .map(|k| StanceShift {
            target: "U1".into(),
            description: k.clone(),
        })
        .collect();
    Sqlite::on(&s)
        .psyche_post_cognition("Wren", &p, &shifts, &[], at)
        .block()
        .unwrap();
    // Events with long keys and a long person until the lines have just moved: both empty.
    let lens = |s: &SqliteStore| -> (usize, usize) {
        s.conn()
            .query_row(
                "SELECT length(CAST(recent_keys AS BLOB)), length(CAST(recent_decisions AS BLOB))
                 FROM psyche_substrate WHERE soul = 'Wren'",
                [],
                |r| Ok((r.get::<_, i64>(0)? as usize, r.get::<_, i64>(1)? as usize)),
            )
            .unwrap()
    };
    let person = "P".repeat(64);
    // An overheard "ok" by that person, keyed `key`.
    let keyed = |at: i64, key: &str| {
        Sqlite::on(&s)
            .psyche_event_once(
                "Wren",
                &p,
                &rules,
                &said(EventKind::Overheard, &person, "ok", at),
                &Place::default(),
                key,
            )
            .block()
            .unwrap();
    };
    let mut n = 0;
    while lens(&s) != (0, 0) {
        at += 1_000;
        n += 1;
        keyed(at, &format!("{n:0>256}"));
    }
    // The length of the next decision's line for `event` with an empty channel: the event
    // applied and rolled back.
    let trial = |event: &Event| -> usize {
        let conn = s.conn();
        conn.execute_batch("BEGIN").unwrap();
        let mut row = soul_row(&conn, "Wren", &p, event.at).unwrap();
        let before = row.0.decisions.len();
        let place = Place {
            channel: Some(String::new()),
            listened: false,
        };
        event_in(&conn, "Wren", &p, &rules, event, &place, &mut row).unwrap();
        conn.execute_batch("ROLLBACK").unwrap();
        row.0.decisions.len() - before
    };
    // Keys to one byte short of their budget: three lines.
    let key_budget = seen::RECENT_BYTES - 1;
    let line = |key_len: usize| 13 + 1 + key_len + 1;
    let last_key = key_budget - 2 * line(256) - 15;
    for len in [256, 256, last_key] {
        at += 1_000;
        n += 1;
        keyed(at, &format!("{n:0>len$}"));
    }
    assert_eq!(lens(&s).0, key_budget);
    // Decisions to one byte short of theirs: lines with a 64-byte person, then a channel as
    // long as it needs to be to land on the budget.
    let decision_budget = gate_log::RECENT_BYTES - 1;
    loop {
        let gap = decision_budget - lens(&s).1;
        if gap == 0 {
            break;
        }
        at += 1_000;
        let e = said(EventKind::Overheard, &person, "ok", at);
        let base = trial(&e);
        assert!(gap >= base, "no room for one more line: {gap} < {base}");
        // Lines as even as can be over as few as can fill the gap: the last lands on it.
        let lines = gap.div_ceil(base + 64);
        let channel = gap.div_ceil(lines).saturating_sub(base).min(64);
        Sqlite::on(&s)
            .psyche_event(
                "Wren",
                &p,
                &rules,
                &e,
                &Place {
                    channel: Some("C".repeat(channel)),
                    listened: false,
                },
            )
            .block()
            .unwrap();
        assert_eq!(lens(&s).0, key_budget, "the keys did not move");
    }
    assert_eq!(lens(&s), (key_budget, decision_budget));
    let conn = s.conn();
    let whole: i64 = conn
        .query_row(
            "SELECT length(CAST(soul || state || updated_at || recent_keys || recent_decisions AS BLOB))
             FROM psyche_substrate WHERE soul = 'Wren'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let state: i64 = conn
        .query_row(
            "SELECT length(state) FROM psyche_substrate WHERE soul = 'Wren'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    let overflow: i64 = conn
        .query_row(
            "SELECT count(*) FROM dbstat WHERE name = 'psyche_substrate' AND pagetype = 'overflow'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(
        overflow, 0,
        "the row spilled onto an overflow page: {whole} bytes"
    );
    assert!(whole < 4_000, "{whole} bytes (the state alone {state})");
}

/// A key may end in a carriage return and still be a line of the row (only a tab or a line feed
/// keeps it out). When the lines move to the table, the key keeps its `\r` (`str::lines` would
/// take `\r\n` for the end of the line: the event would be applied twice, and the key without
/// the `\r`, never applied, taken as seen).
#[test]
fn a_key_ending_in_a_carriage_return_stays_itself_when_the_lines_move() {
    let (_d, s) = store();
    let p = Psyche::shipped();
    let once = |key: &str, at: i64| heard_once(&s, &p, key, at);
    let keys_in_row = || -> i64 {
        s.conn()
            .query_row(
                "SELECT length(recent_keys) FROM psyche_substrate WHERE soul = 'Wren'",
                [],
                |r| r.get(0),
            )
            .unwrap()
    };
    assert!(once("inbox:1\r", 1_000));
    assert!(keys_in_row() > 0, "the key is a line of the row");
    assert!(!once("inbox:1\r", 2_000), "seen while in the row");
    // Other keys until the lines move to the table.
    let mut i = 2;
    while keys_in_row() > 0 {
        assert!(once(&format!("inbox:{i}"), 1_000 * i));
        i += 1;
    }
    assert!(!once("inbox:1\r", 1_000 * i), "seen once in the table");
    assert!(once("inbox:1", 1_000 * i + 1), "a key never applied");
}
