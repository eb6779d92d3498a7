//! The `Dreams` face: backlogs, one consolidation all or nothing, the dream's record, upkeep.
//!
//! A dream needs a conversation's working memory to exist first: `seed` writes it.

use std::time::Duration;

mod seed;

use anima::memory::dream::{Backlog, Consolidation, Keep, ModelRefresh};
use anima::memory::faces::{Dreams, Psychology, Turns};
use anima::memory::now_ms;
use anima::memory::psyche::Place;
use anima::psyche::gate::GateRules;
use anima::psyche::{Event, EventKind, Psyche};

use crate::on_every_backend;
use seed::Seed;

/// The newest `entries`, and no entry kept for being recent.
fn keep(entries: u32) -> Keep {
    Keep {
        entries,
        since_ms: i64::MAX,
    }
}

/// `n` exchanges in `thread`: a message of U1 and a reply each (2n entries), in several
/// scripts.
async fn talk(s: &impl Seed, thread: &str, n: usize) {
    for i in 0..n {
        s.say(thread, "U1", &format!("q{i} 日本語 🦀 café")).await;
        s.reply(thread, &format!("a{i} ça va")).await;
    }
}

fn consolidation(b: &Backlog, summary: &str) -> Consolidation {
    Consolidation {
        thread: b.thread.clone(),
        since_id: b.since_id,
        summary: summary.into(),
        first_id: b.entries[0].id,
        through_id: b.entries.last().unwrap().id,
        episodes: vec![("Tom likes crabs 🦀 and 日本語".into(), 7)],
        models: vec![],
    }
}

fn ids(entries: &[(i64, String)]) -> Vec<i64> {
    entries.iter().map(|e| e.0).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consolidation_deletes_exactly_its_batch_and_never_the_newest() {
    on_every_backend!(|s, name| {
        talk(s.as_ref(), "t1", 10).await;
        talk(s.as_ref(), "t2", 2).await;
        assert_eq!(
            s.dream_threads(keep(6)).await.unwrap(),
            ["t1"],
            "{name}: t2 has 4 entries"
        );
        let before = s.entries("t1").await;
        let b = s.backlog("t1", keep(6), 5, 100_000).await.unwrap().unwrap();
        assert_eq!(b.entries.len(), 5, "{name}: a batch of at most 5");
        assert_eq!(b.left, 9, "{name}: 20 entries, 6 kept, 5 in this batch");
        assert_eq!(b.entries[0].content, before[0].1, "{name}: oldest first");
        assert_eq!(
            b.entries[0].content, "q0 日本語 🦀 café",
            "{name}: multi-byte text intact"
        );
        assert_eq!(b.people.len(), 1, "{name}: Tom wrote in the batch");
        let done = s
            .consolidate(consolidation(&b, "They met. 🦀"), keep(6))
            .await
            .unwrap();
        assert_eq!((done.pruned, done.written), (5, true), "{name}");
        assert_eq!(
            s.entries("t1").await,
            before[5..],
            "{name}: exactly the batch went"
        );
        // A turn's window counts only what is left: 15 said, so a window of 4 (moving 2 at a
        // time) starts at the 11th of them.
        let ctx = s.load_turn("t1", "U1", "Tom", 4).await.unwrap();
        assert_eq!(
            ctx.recent.first().map(|e| e.id),
            Some(before[15].0),
            "{name}"
        );
        assert_eq!(
            s.thread_summary("t1").await.unwrap().unwrap(),
            "They met. 🦀",
            "{name}"
        );
        let episodes = s.episodes("t1").await.unwrap();
        assert_eq!(episodes.len(), 1, "{name}");
        assert_eq!(
            episodes[0].memory, "Tom likes crabs 🦀 and 日本語",
            "{name}"
        );
        assert_eq!(episodes[0].importance, 7, "{name}");

        // A batch cut by characters: the first entry always, then while they fit.
        let b = s.backlog("t1", keep(6), 100, 21).await.unwrap().unwrap();
        assert_eq!(b.entries.len(), 2, "{name}: 8 + 13 characters fit in 21");
        let b = s.backlog("t1", keep(6), 100, 20).await.unwrap().unwrap();
        assert_eq!(b.entries.len(), 1, "{name}: not in 20");
        let b = s.backlog("t1", keep(6), 100, 1).await.unwrap().unwrap();
        assert_eq!(b.entries.len(), 1, "{name}: one at least");

        // The rest in one batch; the newest six stay, and nothing is left to dream of.
        let b = s
            .backlog("t1", keep(6), 100, 100_000)
            .await
            .unwrap()
            .unwrap();
        assert_eq!((b.entries.len(), b.left), (9, 0), "{name}");
        assert_eq!(b.summary.as_deref(), Some("They met. 🦀"), "{name}");
        s.consolidate(consolidation(&b, "All of it."), keep(6))
            .await
            .unwrap();
        assert_eq!(s.entries("t1").await, before[14..], "{name}");
        // 6 said left: the window of 4 starts at the 3rd.
        let ctx = s.load_turn("t1", "U1", "Tom", 4).await.unwrap();
        assert_eq!(
            ctx.recent.first().map(|e| e.id),
            Some(before[16].0),
            "{name}"
        );
        assert!(
            s.backlog("t1", keep(6), 100, 100_000)
                .await
                .unwrap()
                .is_none(),
            "{name}"
        );
        assert!(s.dream_threads(keep(6)).await.unwrap().is_empty(), "{name}");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_that_reaches_into_the_kept_entries_is_cut_and_a_repeated_one_is_skipped() {
    on_every_backend!(|s, name| {
        talk(s.as_ref(), "t1", 5).await;
        let all = s.entries("t1").await;
        let b = s
            .backlog("t1", keep(4), 100, 100_000)
            .await
            .unwrap()
            .unwrap();
        let mut c = consolidation(&b, "s");
        c.through_id = all.last().unwrap().0; // a caller that asks too much
        assert_eq!(
            s.consolidate(c, keep(4)).await.unwrap().pruned,
            6,
            "{name}: not the newest 4"
        );
        assert_eq!(s.entries("t1").await, all[6..], "{name}");
        let again = s
            .consolidate(consolidation(&b, "again"), keep(4))
            .await
            .unwrap();
        assert!(!again.written, "{name}: another dream did it already");
        assert_eq!(
            s.thread_summary("t1").await.unwrap().unwrap(),
            "s",
            "{name}"
        );
        assert_eq!(
            s.episodes("t1").await.unwrap().len(),
            1,
            "{name}: no second memory"
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dream_keeps_the_last_hour_however_many_entries_it_holds() {
    on_every_backend!(|s, name| {
        talk(s.as_ref(), "t1", 4).await;
        tokio::time::sleep(Duration::from_millis(20)).await;
        let hour_began = now_ms();
        tokio::time::sleep(Duration::from_millis(20)).await;
        talk(s.as_ref(), "t1", 6).await;
        let all = s.entries("t1").await;
        let recent = Keep {
            entries: 4,
            since_ms: hour_began,
        };
        assert_eq!(s.dream_threads(recent).await.unwrap(), ["t1"], "{name}");
        let b = s
            .backlog("t1", recent, 100, 100_000)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            b.entries.iter().map(|e| e.id).collect::<Vec<_>>(),
            ids(&all[..8]),
            "{name}: only what is older than the hour"
        );
        assert_eq!(b.left, 0, "{name}");
        let mut c = consolidation(&b, "Long ago.");
        c.through_id = all.last().unwrap().0;
        assert_eq!(
            s.consolidate(c, recent).await.unwrap().pruned,
            8,
            "{name}: cut at the hour"
        );
        assert_eq!(s.entries("t1").await, all[8..], "{name}");
        assert!(
            s.backlog("t1", recent, 100, 100_000)
                .await
                .unwrap()
                .is_none(),
            "{name}"
        );
        assert!(s.dream_threads(recent).await.unwrap().is_empty(), "{name}");
        // By the commit, the whole batch is of the "last hour": nothing may be deleted.
        let b = s
            .backlog("t1", keep(4), 100, 100_000)
            .await
            .unwrap()
            .unwrap();
        let done = s.consolidate(consolidation(&b, "x"), recent).await.unwrap();
        assert_eq!((done.pruned, done.written), (0, false), "{name}");
        assert_eq!(s.entries("t1").await, all[8..], "{name}");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_consolidation_that_fails_at_its_last_step_leaves_everything_as_it_was() {
    on_every_backend!(|s, name| {
        s.say("t1", "U1", "hi").await;
        s.set_model("U1", "# Tom\n", "met Tom").await;
        talk(s.as_ref(), "t1", 6).await;
        let before = s.entries("t1").await;
        let b = s
            .backlog("t1", keep(4), 100, 100_000)
            .await
            .unwrap()
            .unwrap();
        let tom = b.people.iter().find(|p| p.user_id == "U1").unwrap().clone();
        let mut c = consolidation(&b, "never committed");
        c.models = vec![ModelRefresh {
            user_id: "U1".into(),
            version: tom.model_version,
            model: "# Tom\n- likes crabs".into(),
            note: "Dream: likes crabs".into(),
        }];
        s.refuse_deletions(true).await;
        assert!(s.consolidate(c.clone(), keep(4)).await.is_err(), "{name}");
        s.refuse_deletions(false).await;
        assert_eq!(s.entries("t1").await, before, "{name}: nothing deleted");
        assert_eq!(
            s.thread_summary("t1").await.unwrap(),
            None,
            "{name}: no summary"
        );
        assert!(
            s.episodes("t1").await.unwrap().is_empty(),
            "{name}: no memory"
        );
        assert_eq!(s.history("U1").await.len(), 1, "{name}: no model version");
        let again = s
            .backlog("t1", keep(4), 100, 100_000)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            again.entries, b.entries,
            "{name}: the next dream redoes the batch"
        );
        assert_eq!(again.people, b.people, "{name}: the model as it was");
        let done = s.consolidate(c, keep(4)).await.unwrap();
        assert_eq!((done.pruned, done.models.len()), (9, 1), "{name}");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_read_before_an_operator_reset_deletes_nothing_of_the_closed_conversation() {
    on_every_backend!(|s, name| {
        talk(s.as_ref(), "t1", 6).await;
        s.say("t1", "U1", "hi").await;
        let before = s.entries("t1").await;
        let b = s
            .backlog("t1", keep(4), 100, 100_000)
            .await
            .unwrap()
            .unwrap();
        s.reset("t1").await;
        let done = s
            .consolidate(consolidation(&b, "old talk"), keep(4))
            .await
            .unwrap();
        assert_eq!((done.pruned, done.written), (0, false), "{name}");
        assert_eq!(s.entries("t1").await, before, "{name}: nothing deleted");
        assert_eq!(s.thread_summary("t1").await.unwrap(), None, "{name}");
        assert!(s.episodes("t1").await.unwrap().is_empty(), "{name}");
        assert!(
            s.dream_threads(keep(4)).await.unwrap().is_empty(),
            "{name}: a new conversation"
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_refresh_is_versioned_unless_a_turn_changed_the_model_meanwhile() {
    on_every_backend!(|s, name| {
        s.say("t1", "U1", "hi").await;
        talk(s.as_ref(), "t1", 4).await;
        s.set_model("U1", "# Tom\n", "met Tom").await;
        let b = s
            .backlog("t1", keep(2), 100, 100_000)
            .await
            .unwrap()
            .unwrap();
        let tom = b.people.iter().find(|p| p.user_id == "U1").unwrap();
        assert_eq!(
            (tom.model.as_deref(), tom.model_version),
            (Some("# Tom\n"), 1),
            "{name}"
        );
        let mut c = consolidation(&b, "s");
        c.models = vec![ModelRefresh {
            user_id: "U1".into(),
            version: tom.model_version,
            model: "# Tom\n- likes crabs".into(),
            note: "Dream: likes crabs".into(),
        }];
        assert_eq!(
            s.consolidate(c, keep(2)).await.unwrap().models,
            ["U1"],
            "{name}"
        );
        assert_eq!(
            s.history("U1").await,
            [
                (1, "met Tom".to_string()),
                (2, "Dream: likes crabs".to_string())
            ],
            "{name}: a version with its note, as a turn saves one"
        );
        // A dream that read version 2 while a turn made version 3: the turn's stands.
        talk(s.as_ref(), "t1", 3).await;
        let b = s
            .backlog("t1", keep(2), 100, 100_000)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(b.people[0].model_version, 2, "{name}");
        s.set_model("U1", "# Tom\n- a turn's", "a turn").await;
        let mut c = consolidation(&b, "s2");
        c.models = vec![ModelRefresh {
            user_id: "U1".into(),
            version: 2,
            model: "stale".into(),
            note: "stale".into(),
        }];
        let done = s.consolidate(c, keep(2)).await.unwrap();
        assert!(done.written && done.models.is_empty(), "{name}");
        assert_eq!(s.history("U1").await.len(), 3, "{name}");
        talk(s.as_ref(), "t1", 2).await;
        let b = s
            .backlog("t1", keep(2), 100, 100_000)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            b.people[0].model.as_deref(),
            Some("# Tom\n- a turn's"),
            "{name}"
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_dreams_consolidating_one_batch_at_once_write_it_once() {
    on_every_backend!(|s, name| {
        // Connections open first, so that the two dreams below do run at once.
        let _ = tokio::join!(s.episodes("a"), s.episodes("b"), s.episodes("c"));
        for thread in ["t1", "t2", "t3"] {
            talk(s.as_ref(), thread, 8).await;
            let before = s.entries(thread).await;
            let b = s
                .backlog(thread, keep(4), 100, 100_000)
                .await
                .unwrap()
                .unwrap();
            let (one, two) = tokio::join!(
                s.consolidate(consolidation(&b, "first"), keep(4)),
                s.consolidate(consolidation(&b, "second"), keep(4)),
            );
            let (one, two) = (one.unwrap(), two.unwrap());
            assert!(
                one.written != two.written,
                "{name}: exactly one wrote: {one:?} {two:?}"
            );
            assert_eq!(one.pruned + two.pruned, 12, "{name}");
            assert_eq!(s.entries(thread).await, before[12..], "{name}");
            assert_eq!(
                s.episodes(thread).await.unwrap().len(),
                1,
                "{name}: one memory"
            );
        }
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dreams_are_recorded_and_the_upkeep_forgets_old_event_keys() {
    on_every_backend!(|s, name| {
        assert!(s.last_dream().await.unwrap().is_none(), "{name}");
        let id = s.begin_dream("anima dream").await.unwrap();
        let row = s.last_dream().await.unwrap().unwrap();
        assert_eq!(
            (row.id, row.finished_ms, row.complete),
            (id, None, false),
            "{name}"
        );
        assert_eq!(row.cause, "anima dream", "{name}");
        assert!(
            (row.started_ms - now_ms()).abs() < 60_000,
            "{name}: {}",
            row.started_ms
        );
        s.finish_dream(
            id,
            true,
            &serde_json::json!({ "threads": 1, "note": "ça 🦀" }),
        )
        .await
        .unwrap();
        let row = s.last_dream().await.unwrap().unwrap();
        assert!(row.complete && row.finished_ms.is_some(), "{name}");
        assert_eq!(row.report["note"], "ça 🦀", "{name}");

        // A message's key applied long ago (its event is of 1970) is forgotten by the upkeep,
        // a recent one is not.
        let p = Psyche::shipped();
        let once = |key: &'static str, at: i64| {
            let p = p.clone();
            async move {
                let e = Event {
                    kind: EventKind::Overheard,
                    person: Some("U1".into()),
                    text: "ok".into(),
                    at,
                };
                s.psyche_event_once(
                    "Wren",
                    &p,
                    &GateRules::default(),
                    &e,
                    &Place::default(),
                    key,
                )
                .await
                .unwrap()
                .is_some()
            }
        };
        assert!(once("inbox:1", 1_000).await, "{name}");
        assert!(once("inbox:2", now_ms()).await, "{name}");
        let u = s.upkeep().await.unwrap();
        assert!(u.analyzed, "{name}");
        assert_eq!(u.forgotten_event_keys, 1, "{name}");
        assert!(
            !once("inbox:2", now_ms()).await,
            "{name}: the recent key stays"
        );
        assert!(
            once("inbox:1", 2_000).await,
            "{name}: the old key was forgotten"
        );
    });
}

/// One dream at a time per soul: a second hold is refused while the first lives (from this
/// process or, on PostgreSQL, from another daemon's), and granted once it is let go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_dream_at_a_time_is_held_and_let_go() {
    on_every_backend!(|s, name| {
        let first = s.hold_dream().await.unwrap().expect(name);
        assert!(s.hold_dream().await.unwrap().is_none(), "{name}: held");
        drop(first);
        held_again(s.as_ref()).await;
    });
    let Some(fresh) = crate::store::backends::postgres().await else {
        return;
    };
    let other = crate::store::backends::another(&fresh).await;
    let held = fresh.store.hold_dream().await.unwrap().expect("free");
    assert!(
        other.hold_dream().await.unwrap().is_none(),
        "another daemon's dream waits"
    );
    drop(held);
    held_again(&other).await;
}

/// Takes the dream once it is let go: on PostgreSQL the server hears the holding connection
/// close a moment after the hold is dropped.
async fn held_again(s: &(impl Dreams + ?Sized)) {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while s.hold_dream().await.unwrap().is_none() {
        assert!(std::time::Instant::now() < deadline, "never let go");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
