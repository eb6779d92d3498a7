use super::*;
use crate::memory::faces::{Admin, Processes, SoulRecord, Turns, Users, Whispers};
use crate::memory::sqlite::{run, Block, Sqlite};
use crate::memory::EntryType;
use crate::memory::SqliteStore;
use crate::process::ThreadProcess;
use std::sync::Arc;

fn store() -> (tempfile::TempDir, Arc<SqliteStore>) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("anima.db")).unwrap();
    (dir, Arc::new(store))
}

fn start(thread: &str, text: &str, claimant: &str) -> TurnStart {
    TurnStart {
        thread: thread.into(),
        user_id: "U1".into(),
        display_name: "Tom".into(),
        text: text.into(),
        source: None,
        inbox: None,
        window: 20,
        claimant: claimant.into(),
        claim_until_ms: now_ms() + 60_000,
        conversation_claim: None,
    }
}

fn record(thread: &str, interaction: u64) -> TurnRecord {
    TurnRecord {
        thread: thread.into(),
        user_id: "U1".into(),
        interaction,
        entries: vec![NewEntry::new(EntryType::ExternalDialog, "hi")],
        ..Default::default()
    }
}

#[test]
fn a_reset_while_a_turn_runs_is_not_undone_by_its_commit() {
    let (_d, s) = store();
    let (_, ctx) = Sqlite::on(&s)
        .begin_turn(start("t1", "first", "a"))
        .block()
        .unwrap();
    let mut rec = record("t1", ctx.interaction);
    rec.since_id = Some(ctx.since_id);
    rec.process = Some(ThreadProcess {
        current: "deep_work".into(),
        ..ThreadProcess::default()
    });
    rec.claude_session = Some("old-session".into());
    Sqlite::on(&s).commit_turn(rec).block().unwrap();

    // The next turn begins; an operator closes the conversation before it commits.
    let (_, ctx) = Sqlite::on(&s)
        .begin_turn(start("t1", "second", "b"))
        .block()
        .unwrap();
    assert_eq!(ctx.thread_turns, 1);
    assert!(run(Sqlite::on(&s).reset_thread("t1")).unwrap());
    let mut rec = record("t1", ctx.interaction);
    rec.since_id = Some(ctx.since_id);
    rec.process = Some(ThreadProcess {
        current: "frustrated".into(),
        ..ThreadProcess::default()
    });
    rec.claude_session = Some("session-2".into());
    Sqlite::on(&s).commit_turn(rec).block().unwrap();

    // The new conversation is as the reset left it.
    let (_, ctx) = Sqlite::on(&s)
        .begin_turn(start("t1", "third", "c"))
        .block()
        .unwrap();
    assert_eq!(ctx.thread_turns, 0, "no turns");
    assert_eq!(ctx.process, None, "its process from the start");
    assert_eq!(ctx.claude_session, None, "a new provider session");
    let texts: Vec<&str> = ctx.recent.iter().map(|e| e.content.as_str()).collect();
    assert_eq!(texts, ["third"], "nothing of the closed conversation");
    // Without the check (an unknown beginning), a commit is as before.
    let mut rec = record("t1", ctx.interaction);
    rec.process = Some(ThreadProcess {
        current: "main".into(),
        ..ThreadProcess::default()
    });
    Sqlite::on(&s).commit_turn(rec).block().unwrap();
    assert_eq!(
        run(Sqlite::on(&s).thread_process("t1"))
            .unwrap()
            .unwrap()
            .current,
        "main"
    );
}

#[test]
fn a_turn_counts_and_advances_the_thread_and_user() {
    let (_d, s) = store();
    let (_, ctx) = Sqlite::on(&s)
        .begin_turn(start("t1", "hello", "a"))
        .block()
        .unwrap();
    assert_eq!(ctx.interaction, 1);
    assert_eq!(ctx.thread_turns, 0);
    assert_eq!(ctx.recent.len(), 1);
    let mut rec = record("t1", ctx.interaction);
    rec.injected_user_model = true;
    Sqlite::on(&s).commit_turn(rec).block().unwrap();
    let ctx = Sqlite::on(&s)
        .load_turn("t1", "U1", "Tom", 20)
        .block()
        .unwrap();
    assert_eq!(ctx.interaction, 2, "the number the next message takes");
    assert_eq!(ctx.thread_turns, 1);
    assert_eq!(ctx.user.turns, 1);
    assert_eq!(ctx.user.injected_at_turn, Some(1));
    assert_eq!(ctx.recent.len(), 2);
}

#[test]
fn a_failed_turn_rolls_back_entirely() {
    let (_d, s) = store();
    Sqlite::on(&s)
        .record_user_message("t1", "U1", "Tom", "hello", None)
        .block()
        .unwrap();
    let mut rec = record("t1", 1);
    rec.soul_updates = vec![("emotionalState".into(), "engaged".into())];
    // A constraint violation in the middle of the turn: the usage row's provider is NOT NULL.
    {
        let conn = s.conn();
        conn.execute_batch(
            "CREATE TRIGGER fail_usage BEFORE INSERT ON turn_usage BEGIN SELECT RAISE(ABORT, 'boom'); END;",
        )
        .unwrap();
    }
    rec.usage = vec![UsageRecord::default()];
    assert!(Sqlite::on(&s).commit_turn(rec).block().is_err());
    assert_eq!(run(Sqlite::on(&s).interactions()).unwrap(), 0);
    assert_eq!(
        run(Sqlite::on(&s).soul_state())
            .unwrap()
            .get("emotionalState"),
        "neutral"
    );
    assert_eq!(
        Sqlite::on(&s).thread_entries("t1").block().unwrap().len(),
        1,
        "only the user message"
    );
}

#[test]
fn model_updates_are_versioned_with_notes() {
    let (_d, s) = store();
    Sqlite::on(&s)
        .record_user_message("t1", "U1", "Tom", "hello", None)
        .block()
        .unwrap();
    let mut rec = record("t1", 1);
    rec.user_model = Some(("# Tom\n".into(), "First impression.".into()));
    let u = Sqlite::on(&s)
        .commit_turn(rec.clone())
        .block()
        .unwrap()
        .expect("changed");
    assert_eq!(u.model_version, 1);
    rec.user_model = Some(("# Tom\nmore\n".into(), "Learned more.".into()));
    rec.interaction = 2;
    let u = Sqlite::on(&s).commit_turn(rec).block().unwrap().unwrap();
    assert_eq!(u.model.as_deref(), Some("# Tom\nmore\n"));
    let notes: Vec<String> = run(Sqlite::on(&s).model_history("U1"))
        .unwrap()
        .into_iter()
        .map(|h| h.1)
        .collect();
    assert_eq!(notes, vec!["First impression.", "Learned more."]);
    assert_eq!(run(Sqlite::on(&s).unexported_models()).unwrap().len(), 1);
    run(Sqlite::on(&s).mark_exported("U1", 2)).unwrap();
    assert!(run(Sqlite::on(&s).unexported_models()).unwrap().is_empty());
}

#[test]
fn two_people_with_one_name_get_different_slugs() {
    let (_d, s) = store();
    Sqlite::on(&s)
        .record_user_message("t1", "U1", "Sam", "a", None)
        .block()
        .unwrap();
    Sqlite::on(&s)
        .record_user_message("t2", "U2", "Sam", "b", None)
        .block()
        .unwrap();
    assert_eq!(run(Sqlite::on(&s).user("U1")).unwrap().unwrap().slug, "sam");
    assert_eq!(
        run(Sqlite::on(&s).user("U2")).unwrap().unwrap().slug,
        "sam-u2"
    );
    Sqlite::on(&s)
        .record_user_message("t1", "U1", "Samuel", "c", None)
        .block()
        .unwrap();
    let u1 = run(Sqlite::on(&s).user("U1")).unwrap().unwrap();
    assert_eq!(
        (u1.display_name.as_str(), u1.slug.as_str()),
        ("Samuel", "sam")
    );
}

#[test]
fn a_sourced_message_is_recorded_once() {
    let (_d, s) = store();
    let a = Sqlite::on(&s)
        .record_user_message("t1", "U1", "Tom", "hello", Some("slack:C1:1.0"))
        .block()
        .unwrap();
    let b = Sqlite::on(&s)
        .record_user_message("t1", "U1", "Tom", "hello", Some("slack:C1:1.0"))
        .block()
        .unwrap();
    assert_eq!(a, b);
    assert_eq!(
        Sqlite::on(&s).thread_entries("t1").block().unwrap().len(),
        1
    );
}

#[test]
fn a_whisper_is_consumed_once() {
    let (_d, s) = store();
    let id = run(Sqlite::on(&s).add_whisper("they need assurance", "kothar")).unwrap();
    let (_, ctx) = Sqlite::on(&s)
        .begin_turn(start("t1", "hello", "a"))
        .block()
        .unwrap();
    let w = ctx.whisper.expect("claimed");
    assert_eq!((w.id, w.source.as_str()), (id, "kothar"));
    let mut rec = record("t1", 1);
    rec.whisper_id = Some(id);
    Sqlite::on(&s).commit_turn(rec).block().unwrap();
    let (_, ctx) = Sqlite::on(&s)
        .begin_turn(start("t1", "again", "b"))
        .block()
        .unwrap();
    assert!(ctx.whisper.is_none());
}

#[test]
fn turns_running_at_once_take_distinct_numbers_and_one_whisper_shapes_one_turn() {
    let (_d, s) = store();
    let whisper = run(Sqlite::on(&s).add_whisper("they need assurance", "kothar")).unwrap();
    let s = std::sync::Arc::new(s);
    let started: Vec<_> = (0..24)
        .map(|i| {
            let s = s.clone();
            std::thread::spawn(move || {
                let (thread, claimant) = (format!("t{i}"), format!("c{i}"));
                let (_, ctx) = Sqlite::on(&s)
                    .begin_turn(start(&thread, "hi", &claimant))
                    .block()
                    .unwrap();
                (ctx.interaction, ctx.whisper.map(|w| w.id))
            })
        })
        .collect();
    let mut numbers = Vec::new();
    let mut whispered = 0;
    for h in started {
        let (n, w) = h.join().unwrap();
        numbers.push(n);
        if w.is_some() {
            assert_eq!(w, Some(whisper));
            whispered += 1;
        }
    }
    numbers.sort_unstable();
    assert_eq!(numbers, (1..=24).collect::<Vec<u64>>());
    assert_eq!(whispered, 1, "exactly one turn claimed the whisper");
    assert_eq!(run(Sqlite::on(&s).interactions()).unwrap(), 24);
}

#[test]
fn a_failed_turn_gives_back_its_number_and_its_whisper() {
    let (_d, s) = store();
    let id = run(Sqlite::on(&s).add_whisper("they need assurance", "kothar")).unwrap();
    let (_, ctx) = Sqlite::on(&s)
        .begin_turn(start("t1", "hello", "a"))
        .block()
        .unwrap();
    assert_eq!(ctx.interaction, 1);
    // Another turn starts meanwhile: it cannot take the claimed whisper.
    let (_, other) = Sqlite::on(&s)
        .begin_turn(start("t2", "hey", "b"))
        .block()
        .unwrap();
    assert!(other.whisper.is_none());
    // The first fails: its number stays taken (a later turn has one), the whisper is free.
    Sqlite::on(&s)
        .release_turn(1, Some((id, "a".into())))
        .block()
        .unwrap();
    assert_eq!(run(Sqlite::on(&s).interactions()).unwrap(), 2);
    // Releasing someone else's claim does nothing; giving back the newest number works.
    let (_, third) = Sqlite::on(&s)
        .begin_turn(start("t3", "yo", "c"))
        .block()
        .unwrap();
    assert_eq!(third.whisper.map(|w| w.id), Some(id));
    Sqlite::on(&s)
        .release_turn(third.interaction, Some((id, "a".into())))
        .block()
        .unwrap();
    assert_eq!(run(Sqlite::on(&s).interactions()).unwrap(), 2);
    let (_, fourth) = Sqlite::on(&s)
        .begin_turn(start("t4", "yo", "d"))
        .block()
        .unwrap();
    assert!(fourth.whisper.is_none(), "still claimed by c");
    assert_eq!(fourth.interaction, 3);
}

#[test]
fn a_claim_left_by_a_dead_process_lapses() {
    let (_d, s) = store();
    let id = run(Sqlite::on(&s).add_whisper("they need assurance", "kothar")).unwrap();
    let mut t = start("t1", "hello", "dead");
    t.claim_until_ms = now_ms() - 1;
    assert!(Sqlite::on(&s)
        .begin_turn(t)
        .block()
        .unwrap()
        .1
        .whisper
        .is_some());
    let (_, ctx) = Sqlite::on(&s)
        .begin_turn(start("t2", "hi", "alive"))
        .block()
        .unwrap();
    assert_eq!(ctx.whisper.map(|w| w.id), Some(id));
}
