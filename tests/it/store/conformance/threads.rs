//! Scenarios of a thread's life: a retried begin, the window, a stored process, a turn
//! released, a reset meanwhile, a proactive turn, a dream's consolidation.

use anima::memory::dream::{Consolidation, Keep, ModelRefresh};
use anima::memory::faces::Store;
use anima::memory::{now_ms, Entry, EntryType, NewEntry, TurnRecord, UsageRecord};
use anima::process::{ThreadProcess, TransitionRecord};

use super::{accept, process, reply, start, Seen};

pub(super) async fn retried(s: &dyn Store, seen: &mut Seen) {
    let row = accept(s, "C1:1.0", 1.0, "U1", "once").await;
    let row_id = seen.id("inbox", row);
    seen.note("row", row_id);
    let claimed = s.claim_next("C1:1.0").await.unwrap().expect("a row");
    let mut t = start("C1:1.0", "U1", "Ada", "once", "c1");
    t.source = Some(claimed.source());
    t.inbox = Some(row);
    let (first, ctx) = s.begin_turn(t.clone()).await.unwrap();
    seen.context("first attempt", &ctx);
    seen.inbox("row after the first", s, row).await;
    // The model failed; the turn is retried on the same row with a new claim.
    s.release_turn(ctx.interaction, None).await.unwrap();
    t.claimant = "c2".into();
    let (again, ctx) = s.begin_turn(t).await.unwrap();
    seen.note("same entry", first == again);
    seen.context("second attempt", &ctx);
    let mut rec = reply("C1:1.0", "U1", &ctx, "at last");
    rec.inbox = Some((row, "at last".into()));
    s.commit_turn(rec).await.unwrap();
    seen.inbox("row replying", s, row).await;
    // A reply is fixed once: a later commit naming the row leaves it.
    let (_, ctx) = s
        .begin_turn(start("C1:1.0", "U1", "Ada", "more", "c3"))
        .await
        .unwrap();
    let mut rec = reply("C1:1.0", "U1", &ctx, "other");
    rec.inbox = Some((row, "other".into()));
    s.commit_turn(rec).await.unwrap();
    seen.inbox("row still replying", s, row).await;
    seen.store("end", s, &["C1:1.0"], &["U1"]).await;
}

pub(super) async fn window(s: &dyn Store, seen: &mut Seen) {
    for n in 0..13 {
        let mut t = start(
            "C1:1.0",
            "U1",
            "Ada",
            &format!("message {n}"),
            &format!("c{n}"),
        );
        t.window = 4;
        let (_, ctx) = s.begin_turn(t).await.unwrap();
        seen.context(&format!("turn {n}"), &ctx);
        let mut rec = reply("C1:1.0", "U1", &ctx, &format!("reply {n}"));
        // What is not said (a thought) is in the window but not counted by it.
        rec.entries.insert(
            0,
            NewEntry::new(EntryType::InternalMonologue, format!("thought {n}")),
        );
        if n % 5 == 4 {
            // A message a turn writes itself is said, and counted, as one recorded.
            rec.entries
                .push(NewEntry::new(EntryType::UserMessage, format!("aside {n}")).user("U1"));
        }
        s.commit_turn(rec).await.unwrap();
    }
    for window in [0, 1, 2, 5, 100] {
        let ctx = s.load_turn("C1:1.0", "U1", "Ada", window).await.unwrap();
        seen.context(&format!("loaded with a window of {window}"), &ctx);
    }
    // After a reset the window counts from the new conversation only.
    assert!(s.reset_thread("C1:1.0").await.unwrap());
    let mut t = start("C1:1.0", "U1", "Ada", "anew", "z");
    t.window = 4;
    let (_, ctx) = s.begin_turn(t).await.unwrap();
    seen.context("after a reset", &ctx);
}

pub(super) async fn stored_process(s: &dyn Store, seen: &mut Seen) {
    let (_, ctx) = s
        .begin_turn(start("C1:1.0", "U1", "Ada", "let's work", "c1"))
        .await
        .unwrap();
    seen.context("before", &ctx);
    let mut rec = reply("C1:1.0", "U1", &ctx, "ok");
    rec.process = Some(process("deep_work", 1));
    rec.transitions = vec![
        TransitionRecord {
            from: "main".into(),
            to: "deep_work".into(),
            rule: Some(2),
            action: None,
            execute_now: true,
            params: [("why".to_string(), serde_json::json!("focus 🎯"))]
                .into_iter()
                .collect(),
        },
        TransitionRecord {
            from: "deep_work".into(),
            to: "deep_work".into(),
            rule: None,
            action: Some("stay".into()),
            execute_now: false,
            params: Default::default(),
        },
    ];
    s.commit_turn(rec).await.unwrap();
    let (_, ctx) = s
        .begin_turn(start("C1:1.0", "U1", "Ada", "more", "c2"))
        .await
        .unwrap();
    seen.context("stored", &ctx);
    // A commit without a process leaves the stored one; one with a process replaces it.
    s.commit_turn(reply("C1:1.0", "U1", &ctx, "still"))
        .await
        .unwrap();
    let (_, ctx) = s
        .begin_turn(start("C1:1.0", "U1", "Ada", "and now?", "c3"))
        .await
        .unwrap();
    let mut rec = reply("C1:1.0", "U1", &ctx, "back");
    rec.process = Some(ThreadProcess {
        current: "main".into(),
        previous: Some("deep_work".into()),
        invocations: 0,
        params: Default::default(),
    });
    s.commit_turn(rec).await.unwrap();
    seen.store("end", s, &["C1:1.0"], &["U1"]).await;
}

pub(super) async fn after_release(s: &dyn Store, seen: &mut Seen) {
    s.add_whisper("hush", "dream").await.unwrap();
    let (_, a) = s
        .begin_turn(start("C1:1.0", "U1", "Ada", "a", "a"))
        .await
        .unwrap();
    seen.context("a", &a);
    s.release_turn(
        a.interaction,
        a.whisper.as_ref().map(|w| (w.id, "a".into())),
    )
    .await
    .unwrap();
    seen.note("given back", s.interactions().await.unwrap());
    // The turn commits after all (a late answer): its whisper is no longer its own.
    let mut rec = reply("C1:1.0", "U1", &a, "late");
    rec.whisper_id = a.whisper.as_ref().map(|w| w.id);
    rec.whisper_claimant = Some("a".into());
    s.commit_turn(rec).await.unwrap();
    // A number is given back only while it is the latest.
    let (_, b) = s
        .begin_turn(start("C1:1.0", "U1", "Ada", "b", "b"))
        .await
        .unwrap();
    let (_, c) = s
        .begin_turn(start("C2:1.0", "U1", "Ada", "c", "c"))
        .await
        .unwrap();
    seen.context("b", &b);
    seen.context("c", &c);
    s.release_turn(
        b.interaction,
        b.whisper.as_ref().map(|w| (w.id, "b".into())),
    )
    .await
    .unwrap();
    seen.note("kept", s.interactions().await.unwrap());
    // A release naming another claimant frees nothing.
    let (_, d) = s
        .begin_turn(start("C2:1.0", "U1", "Ada", "d", "d"))
        .await
        .unwrap();
    seen.context("d", &d);
    s.release_turn(
        d.interaction,
        Some((c.whisper.as_ref().map_or(0, |w| w.id), "x".into())),
    )
    .await
    .unwrap();
    let (_, e) = s
        .begin_turn(start("C2:1.0", "U1", "Ada", "e", "e"))
        .await
        .unwrap();
    seen.context("e", &e);
    seen.store("end", s, &["C1:1.0", "C2:1.0"], &["U1"]).await;
}

pub(super) async fn reset_meanwhile(s: &dyn Store, seen: &mut Seen) {
    let (_, ctx) = s
        .begin_turn(start("C1:1.0", "U1", "Ada", "first", "a"))
        .await
        .unwrap();
    let mut rec = reply("C1:1.0", "U1", &ctx, "one");
    rec.process = Some(process("deep_work", 2));
    rec.claude_session = Some("old-session".into());
    s.commit_turn(rec).await.unwrap();
    let (_, ctx) = s
        .begin_turn(start("C1:1.0", "U1", "Ada", "second", "b"))
        .await
        .unwrap();
    seen.context("before the reset", &ctx);
    seen.note("reset", s.reset_thread("C1:1.0").await.unwrap());
    let mut rec = reply("C1:1.0", "U1", &ctx, "two");
    rec.process = Some(process("frustrated", 1));
    rec.claude_session = Some("session-2".into());
    rec.soul_updates = vec![("mood".into(), "puzzled".into())];
    rec.usage = vec![UsageRecord::default()];
    seen.note("commit", s.commit_turn(rec).await.unwrap());
    let (_, ctx) = s
        .begin_turn(start("C1:1.0", "U1", "Ada", "third", "c"))
        .await
        .unwrap();
    seen.context("the new conversation", &ctx);
    // Without the check (an unknown beginning) a commit is as before.
    let mut rec = reply("C1:1.0", "U1", &ctx, "three");
    rec.since_id = None;
    rec.process = Some(process("main", 1));
    s.commit_turn(rec).await.unwrap();
    seen.store("end", s, &["C1:1.0"], &["U1"]).await;
}

pub(super) async fn proactive(s: &dyn Store, seen: &mut Seen) {
    let ctx = s.load_turn("C9:1.0", "U7", "Grace", 20).await.unwrap();
    seen.context("a thread and a person never seen", &ctx);
    let rec = TurnRecord {
        thread: "C9:1.0".into(),
        user_id: "U7".into(),
        interaction: ctx.interaction,
        entries: vec![NewEntry::new(EntryType::ExternalDialog, "thinking of you")
            .metadata(serde_json::json!({ "proactive": true }))],
        proactive: true,
        since_id: Some(ctx.since_id),
        claude_session: Some("s1".into()),
        process: Some(process("main", 1)),
        ..TurnRecord::default()
    };
    seen.note("commit", s.commit_turn(rec).await.unwrap());
    let ctx = s.load_turn("C9:1.0", "U7", "Grace", 20).await.unwrap();
    seen.context("after", &ctx);
    // The person answers; then a proactive turn in a thread they spoke in.
    let (_, ctx) = s
        .begin_turn(start("C9:1.0", "U7", "Grace", "hi!", "c1"))
        .await
        .unwrap();
    seen.context("answered", &ctx);
    s.commit_turn(reply("C9:1.0", "U7", &ctx, "hello"))
        .await
        .unwrap();
    let ctx = s.load_turn("C9:1.0", "U7", "Grace", 20).await.unwrap();
    let mut rec = reply("C9:1.0", "U7", &ctx, "still there?");
    rec.proactive = true;
    rec.injected_user_model = true;
    s.commit_turn(rec).await.unwrap();
    seen.store("end", s, &["C9:1.0"], &["U7"]).await;
    seen.note(
        "quiet threads",
        s.quiet_threads(now_ms() + 60_000)
            .await
            .unwrap()
            .into_iter()
            .map(|(t, _)| t)
            .collect::<Vec<_>>(),
    );
}

pub(super) async fn consolidated(s: &dyn Store, seen: &mut Seen) {
    for (user, name) in [("U1", "Ada"), ("U2", "Grace")] {
        for n in 0..5 {
            let mut t = start(
                "C1:1.0",
                user,
                name,
                &format!("{name} {n} 🦀"),
                &format!("{user}{n}"),
            );
            t.window = 4;
            let (_, ctx) = s.begin_turn(t).await.unwrap();
            let mut rec = reply("C1:1.0", user, &ctx, &format!("to {name} {n}"));
            rec.user_model = (n == 0).then(|| (format!("# {name}"), "Met.".to_string()));
            s.commit_turn(rec).await.unwrap();
        }
    }
    let keep = Keep {
        entries: 6,
        since_ms: i64::MAX,
    };
    let b = s
        .backlog("C1:1.0", keep, 8, 100_000)
        .await
        .unwrap()
        .expect("a backlog");
    let entries: Vec<Entry> = b.entries.iter().map(|e| seen.entry(e)).collect();
    seen.note("backlog", (&entries, b.left, &b.summary, &b.people));
    // Ada's model is as the dream read it; Grace's changed meanwhile: hers is not saved.
    let (_, ctx) = s
        .begin_turn(start("C2:1.0", "U2", "Grace", "elsewhere", "g"))
        .await
        .unwrap();
    let mut rec = reply("C2:1.0", "U2", &ctx, "noted");
    rec.user_model = Some(("# Grace, changed".into(), "Meanwhile.".into()));
    s.commit_turn(rec).await.unwrap();
    let refresh = |user: &str, version: i64| ModelRefresh {
        user_id: user.into(),
        version,
        model: format!("# {user}, dreamt"),
        note: "Dreamt.".into(),
    };
    let done = s
        .consolidate(
            Consolidation {
                thread: b.thread.clone(),
                since_id: b.since_id,
                summary: "They met 🦀.".into(),
                first_id: b.entries[0].id,
                through_id: b.entries.last().expect("a batch").id,
                episodes: vec![("Ada likes crabs 🦀".into(), 7)],
                models: vec![refresh("U1", 1), refresh("U2", 1)],
            },
            keep,
        )
        .await
        .unwrap();
    seen.note("consolidated", done);
    let mut t = start("C1:1.0", "U1", "Ada", "and now?", "z");
    t.window = 4;
    let (_, ctx) = s.begin_turn(t).await.unwrap();
    seen.context("a turn after the dream", &ctx);
    seen.store("end", s, &["C1:1.0", "C2:1.0"], &["U1", "U2"])
        .await;
}

pub(super) async fn under_a_claim(s: &dyn Store, seen: &mut Seen) {
    // The epoch is the backend's own (SQLite grants every claim at 0): used, not compared.
    let epoch = s
        .claim("C1:1.0", std::time::Duration::from_secs(60))
        .await
        .unwrap()
        .expect("the claim");
    let mut t = start("C1:1.0", "U1", "Ada", "claimed", "c1");
    t.conversation_claim = Some(epoch);
    let (_, ctx) = s.begin_turn(t).await.unwrap();
    seen.context("begun under the claim", &ctx);
    let mut rec = reply("C1:1.0", "U1", &ctx, "held");
    rec.claim = Some(epoch);
    seen.note("committed", s.commit_turn(rec).await.unwrap());
    seen.store("end", s, &["C1:1.0"], &["U1"]).await;
}

pub(super) async fn reset_before_any_turn(s: &dyn Store, seen: &mut Seen) {
    // A message recorded, its turn never committed (the model was down), then a reset.
    s.record_user_message("C1:1.0", "U1", "Ada", "lost", None)
        .await
        .unwrap();
    seen.note("reset", s.reset_thread("C1:1.0").await.unwrap());
    let (_, ctx) = s
        .begin_turn(start("C1:1.0", "U1", "Ada", "anew", "c1"))
        .await
        .unwrap();
    seen.context("the next turn", &ctx);
}

pub(super) async fn nul_in_a_message(s: &dyn Store, seen: &mut Seen) {
    let begun = s
        .begin_turn(start("C1:1.0", "U1", "Ada", "a\u{0}b", "c1"))
        .await
        .map(|(_, ctx)| {
            ctx.recent
                .iter()
                .map(|e| e.content.clone())
                .collect::<Vec<_>>()
        })
        .map_err(|e| e.to_string());
    assert_eq!(
        begun
            .as_ref()
            .ok()
            .and_then(|r| r.last())
            .map(String::as_str),
        Some("a\u{FFFD}b"),
        "{begun:?}"
    );
    seen.note("begun", begun);
}

pub(super) async fn message_rewritten(s: &dyn Store, seen: &mut Seen) {
    // A message's files' lines rewritten once the soul noted what each showed; an id that is
    // no message changes nothing.
    let (id, ctx) = s
        .begin_turn(start(
            "C1:1.0",
            "U1",
            "Ada",
            "look\n[shared a file: a.png (an image)]",
            "c1",
        ))
        .await
        .unwrap();
    s.commit_turn(reply("C1:1.0", "U1", &ctx, "a chart"))
        .await
        .unwrap();
    let noted = "look\n[shared a file: a.png (an image); you noted: a chart of sales]";
    s.rewrite_message(id, noted).await.unwrap();
    s.rewrite_message(id + 1, "not a message").await.unwrap();
    s.rewrite_message(id + 1000, "no entry").await.unwrap();
    seen.store("end", s, &["C1:1.0"], &["U1"]).await;
}
