//! Scenarios of people and the soul: who writes, under which name, in which script, with
//! which whisper, and what a commit learns of them.

use anima::memory::faces::Store;
use anima::memory::working::MAX_ENTRY_CHARS;
use anima::memory::{now_ms, EntryType, NewEntry, TurnRecord, UsageRecord};

use super::{reply, start, Seen};

pub(super) async fn first_message(s: &dyn Store, seen: &mut Seen) {
    let (id, ctx) = s
        .begin_turn(start("C1:1.0", "U1", "Ada", "hello", "c1"))
        .await
        .unwrap();
    let id = seen.id("entry", id);
    seen.note("message", id);
    seen.context("context", &ctx);
    seen.store("after begin", s, &["C1:1.0"], &["U1"]).await;
}

pub(super) async fn renamed(s: &dyn Store, seen: &mut Seen) {
    let (_, ctx) = s
        .begin_turn(start("C1:1.0", "U1", "Ada", "hi", "c1"))
        .await
        .unwrap();
    let mut rec = reply("C1:1.0", "U1", &ctx, "hello Ada");
    rec.injected_user_model = true;
    seen.note("first commit", s.commit_turn(rec).await.unwrap());
    let (_, ctx) = s
        .begin_turn(start("C1:1.0", "U1", "Ada Lovelace", "it's me", "c2"))
        .await
        .unwrap();
    seen.context("renamed", &ctx);
    // Another person takes the name the first one had: the slug is theirs with their id.
    let (_, ctx) = s
        .begin_turn(start("C2:1.0", "U2", "Ada", "me too", "c3"))
        .await
        .unwrap();
    seen.context("namesake", &ctx);
    // A message recorded outside a turn renames too.
    s.record_user_message("C2:1.0", "U2", "Ada B.", "again", None)
        .await
        .unwrap();
    seen.store("end", s, &["C1:1.0", "C2:1.0"], &["U1", "U2"])
        .await;
}

pub(super) async fn multibyte(s: &dyn Store, seen: &mut Seen) {
    let name = "Zoë 🦊 山田";
    let text = "héllo 👋🏽 — 日本語で話せますか？ \u{200d}\u{1F469}\u{200d}\u{1F4BB}";
    let mut t = start("C1:1.0", "U1", name, text, "c1");
    t.window = 3;
    let (_, ctx) = s.begin_turn(t).await.unwrap();
    seen.context("begun", &ctx);
    let mut rec = reply("C1:1.0", "U1", &ctx, "はい、もちろん 🎉");
    // An entry past the cap, cut on a character, and entries with every optional field.
    rec.entries.push(NewEntry::new(
        EntryType::InternalMonologue,
        "é🦀".repeat(MAX_ENTRY_CHARS),
    ));
    rec.entries.push(
        NewEntry::new(EntryType::MentalQuery, "ça va ? ✓")
            .verb(Some("wondered".into()))
            .user("U1")
            .metadata(serde_json::json!({ "result": true, "note": "ü 🙂" })),
    );
    rec.soul_updates = vec![("currentTopic".into(), "日本語 🎌".into())];
    rec.claude_session = Some("séance-🔑".into());
    rec.usage = vec![UsageRecord {
        provider: "anthropic".into(),
        model: "claude-ü".into(),
        input_tokens: 12,
        output_tokens: 34,
        cache_creation_tokens: 5,
        cache_read_tokens: 6,
        latency_ms: 789,
        stop_reason: Some("end_turn".into()),
    }];
    rec.user_model = Some(("# Zoë 🦊\nparle français".into(), "Appris : 🇫🇷".into()));
    let user = s.commit_turn(rec).await.unwrap();
    seen.note("committed", user);
    let ctx = s.load_turn("C1:1.0", "U1", name, 3).await.unwrap();
    seen.context("loaded", &ctx);
    seen.store("end", s, &["C1:1.0"], &["U1"]).await;
}

pub(super) async fn whispers(s: &dyn Store, seen: &mut Seen) {
    for (w, from) in [("be kind ✨", "dream"), ("ask about Rust", "operator")] {
        let id = s.add_whisper(w, from).await.unwrap();
        let id = seen.id("whisper", id);
        seen.note("whisper", id);
    }
    let (_, a) = s
        .begin_turn(start("C1:1.0", "U1", "Ada", "a", "a"))
        .await
        .unwrap();
    seen.context("a claims the first", &a);
    let (_, b) = s
        .begin_turn(start("C2:1.0", "U1", "Ada", "b", "b"))
        .await
        .unwrap();
    seen.context("b claims the second", &b);
    let (_, c) = s
        .begin_turn(start("C3:1.0", "U1", "Ada", "c", "c"))
        .await
        .unwrap();
    seen.context("c finds none", &c);
    // a consumes its whisper; b gives its back (and its number, no longer the latest).
    let mut rec = reply("C1:1.0", "U1", &a, "done");
    rec.whisper_id = a.whisper.as_ref().map(|w| w.id);
    rec.whisper_claimant = Some("a".into());
    seen.note("a commits", s.commit_turn(rec).await.unwrap());
    let w = b.whisper.as_ref().expect("b's whisper");
    s.release_turn(b.interaction, Some((w.id, "b".into())))
        .await
        .unwrap();
    let (_, d) = s
        .begin_turn(start("C1:1.0", "U1", "Ada", "d", "d"))
        .await
        .unwrap();
    seen.context("d claims b's", &d);
    // d's claim lapses unreleased: the next turn takes it over.
    let mut lapsing = start("C2:1.0", "U1", "Ada", "e", "e");
    lapsing.claim_until_ms = now_ms() - 1;
    let id = s.add_whisper("a third", "dream").await.unwrap();
    seen.id("whisper", id);
    let (_, e) = s.begin_turn(lapsing).await.unwrap();
    seen.context("e claims the third, until a moment ago", &e);
    let (_, f) = s
        .begin_turn(start("C3:1.0", "U1", "Ada", "f", "f"))
        .await
        .unwrap();
    seen.context("f takes the lapsed claim", &f);
    // e, whose claim f took, does not consume it; f does.
    for (ctx, claimant) in [(&e, "e"), (&f, "f")] {
        let mut rec = reply(&ctx.recent[0].thread, "U1", ctx, "late");
        rec.whisper_id = ctx.whisper.as_ref().map(|w| w.id);
        rec.whisper_claimant = Some(claimant.into());
        s.commit_turn(rec).await.unwrap();
    }
    let (_, g) = s
        .begin_turn(start("C1:1.0", "U1", "Ada", "g", "g"))
        .await
        .unwrap();
    seen.context("g: only d's claim is left, and held", &g);
    seen.store("end", s, &["C1:1.0", "C2:1.0", "C3:1.0"], &["U1"])
        .await;
}

pub(super) async fn model_and_soul(s: &dyn Store, seen: &mut Seen) {
    for (n, (model, topic)) in [
        ("# Ada\nlikes tea", "tea"),
        ("# Ada\nlikes coffee", "coffee"),
    ]
    .into_iter()
    .enumerate()
    {
        let (_, ctx) = s
            .begin_turn(start("C1:1.0", "U1", "Ada", "hi", &format!("c{n}")))
            .await
            .unwrap();
        seen.context(&format!("turn {n}"), &ctx);
        let mut rec = reply("C1:1.0", "U1", &ctx, "noted");
        rec.user_model = Some((model.into(), format!("Learnt: {topic}.")));
        rec.injected_user_model = n == 1;
        rec.soul_updates = vec![
            ("currentTopic".into(), topic.into()),
            ("mood".into(), format!("mood {n}")),
            ("currentTopic".into(), format!("{topic}, at last")),
        ];
        seen.note(&format!("commit {n}"), s.commit_turn(rec).await.unwrap());
    }
    s.mark_exported("U1", 1).await.unwrap();
    // A commit without a new model returns no person.
    let (_, ctx) = s
        .begin_turn(start("C1:1.0", "U1", "Ada", "bye", "c9"))
        .await
        .unwrap();
    seen.context("turn 2", &ctx);
    let rec = reply("C1:1.0", "U1", &ctx, "bye");
    seen.note("commit 2", s.commit_turn(rec).await.unwrap());
    seen.store("end", s, &["C1:1.0"], &["U1"]).await;
}

pub(super) async fn model_without_person(s: &dyn Store, seen: &mut Seen) {
    // A model for someone the store never met: nothing to bump, no history, no record back.
    let rec = TurnRecord {
        thread: "C1:1.0".into(),
        user_id: "U404".into(),
        interaction: 1,
        entries: vec![NewEntry::new(EntryType::ExternalDialog, "anyone there?")],
        user_model: Some(("# nobody".into(), "Learnt: nothing.".into())),
        injected_user_model: true,
        ..TurnRecord::default()
    };
    seen.note("commit", s.commit_turn(rec).await.unwrap());
    seen.store("end", s, &["C1:1.0"], &["U404"]).await;
    seen.note("people", s.users().await.unwrap());
}
