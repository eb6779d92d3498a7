//! Turns, users, whispers, processes, states and operators' views on every backend.

use std::collections::BTreeSet;
use std::sync::Arc;

use anima::memory::faces::{
    Admin, Feedback, Health, Inbox, Processes, SoulRecord, States, Turns, Users, Whispers,
};
use anima::memory::{
    EntryType, Inbound, Intake, Judged, NewEntry, NewMove, Quiet, TurnRecord, TurnStart, Verdict,
};
use anima::process::ThreadProcess;

use crate::on_every_backend;

fn start(thread: &str, text: &str, claimant: &str) -> TurnStart {
    TurnStart {
        thread: thread.into(),
        user_id: "U1".into(),
        display_name: "Zoë".into(),
        text: text.into(),
        source: None,
        inbox: None,
        window: 20,
        claimant: claimant.into(),
        claim_until_ms: anima::memory::now_ms() + 60_000,
        conversation_claim: None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn turns_at_once_take_distinct_numbers_and_one_whisper_goes_to_one_turn() {
    on_every_backend!(|s, name| {
        s.add_whisper("be kind ✨", "test").await.unwrap();
        let mut tasks = Vec::new();
        for i in 0..12 {
            let s = Arc::clone(s);
            tasks.push(tokio::spawn(async move {
                s.begin_turn(start(&format!("C{}:1.0", i % 3), "salut", &format!("c{i}")))
                    .await
                    .unwrap()
                    .1
            }));
        }
        let mut numbers = BTreeSet::new();
        let mut whispered = 0;
        for t in tasks {
            let ctx = t.await.unwrap();
            numbers.insert(ctx.interaction);
            whispered += usize::from(ctx.whisper.is_some());
        }
        assert_eq!(numbers, (1..=12).collect(), "{name}");
        assert_eq!(whispered, 1, "{name}: one claim");
        assert_eq!(s.interactions().await.unwrap(), 12, "{name}");
    });
}

#[tokio::test]
async fn a_turn_commits_everything_at_once_and_its_reply_with_it() {
    on_every_backend!(|s, name| {
        let Intake::Accepted(row) = s
            .accept_inbound(&Inbound {
                origin: "C1:9.0".into(),
                conversation: "C1:1.0".into(),
                seq: 9.0,
                address: "{}".into(),
                user_id: "U1".into(),
                text: "日本語で".into(),
                requires_spoken: false,
            })
            .await
            .unwrap()
        else {
            panic!("{name}")
        };
        let mut t = start("C1:1.0", "日本語で", "c1");
        t.source = Some(format!("inbox:{row}"));
        t.inbox = Some(row);
        let (message, ctx) = s.begin_turn(t.clone()).await.unwrap();
        // The same message again (a retried turn) is recorded once.
        assert_eq!(
            s.record_user_message("C1:1.0", "U1", "Zoë", "日本語で", t.source.as_deref())
                .await
                .unwrap(),
            message,
            "{name}"
        );
        let record = TurnRecord {
            thread: "C1:1.0".into(),
            user_id: "U1".into(),
            interaction: ctx.interaction,
            entries: vec![NewEntry::new(EntryType::ExternalDialog, "はい、もちろん")],
            soul_updates: vec![("currentTopic".into(), "日本語".into())],
            user_model: Some(("# Zoë\nspeaks Japanese".into(), "Learnt: Japanese.".into())),
            inbox: Some((row, "はい、もちろん".into())),
            process: Some(ThreadProcess {
                current: "main".into(),
                previous: None,
                invocations: 1,
                params: Default::default(),
            }),
            ..TurnRecord::default()
        };
        let changed = s.commit_turn(record).await.unwrap().unwrap();
        assert_eq!(changed.model_version, 1, "{name}");
        let item = s.inbox_item(row).await.unwrap().unwrap();
        assert_eq!(item.reply.as_deref(), Some("はい、もちろん"), "{name}");
        let entries = s.thread_entries("C1:1.0").await.unwrap();
        assert_eq!(
            entries
                .iter()
                .map(|e| e.content.as_str())
                .collect::<Vec<_>>(),
            ["日本語で", "はい、もちろん"],
            "{name}"
        );
        assert_eq!(entries[0].metadata["name"], "Zoë", "{name}");
        assert_eq!(s.soul_state().await.unwrap().get("currentTopic"), "日本語");
        assert_eq!(
            s.thread_process("C1:1.0").await.unwrap().unwrap().current,
            "main"
        );
        // Where several threads stand, in one read: one with no process yet is left out.
        let stand = s
            .standing(&["C1:1.0".to_string(), "nowhere:1.0".to_string()])
            .await
            .unwrap();
        assert_eq!(
            stand,
            [("C1:1.0".to_string(), "main".to_string())],
            "{name}"
        );
        let history = s.model_history("U1").await.unwrap();
        assert_eq!(history.len(), 1, "{name}");
        assert_eq!(history[0].1, "Learnt: Japanese.");
        assert_eq!(s.unexported_models().await.unwrap().len(), 1, "{name}");
        assert_eq!(s.pending_model_versions("U1").await.unwrap().len(), 1);
        s.mark_exported("U1", 1).await.unwrap();
        assert!(s.unexported_models().await.unwrap().is_empty(), "{name}");
        let next = s.load_turn("C1:1.0", "U1", "Zoë", 20).await.unwrap();
        assert_eq!(next.thread_turns, 1, "{name}");
        assert_eq!(next.user.model.as_deref(), Some("# Zoë\nspeaks Japanese"));
        assert_eq!(s.last_speaker("C1:1.0").await.unwrap().1, "Zoë", "{name}");
        let users = s.users().await.unwrap();
        assert_eq!(users[0].slug, "zo", "{name}");
    });
}

/// Any version of a user model reads back whole, exported to git or not (the inspector's diff
/// between any two versions).
#[tokio::test]
async fn every_version_of_a_user_model_reads_back_exported_or_not() {
    on_every_backend!(|s, name| {
        let models = ["# Zoë\nfirst", "# Zoë\nsecond ✨\n<script>", "# Zoë\nthird"];
        for (n, model) in models.iter().enumerate() {
            let (_, ctx) = s
                .begin_turn(start("C1:1.0", "hi", &format!("c{n}")))
                .await
                .unwrap();
            let record = TurnRecord {
                thread: "C1:1.0".into(),
                user_id: "U1".into(),
                interaction: ctx.interaction,
                user_model: Some((model.to_string(), format!("v{}", n + 1))),
                ..TurnRecord::default()
            };
            let changed = s.commit_turn(record).await.unwrap().unwrap();
            assert_eq!(changed.model_version, n as i64 + 1, "{name}");
        }
        s.mark_exported("U1", 2).await.unwrap();
        assert_eq!(s.pending_model_versions("U1").await.unwrap().len(), 1);
        for (n, model) in models.iter().enumerate() {
            let text = s.model_version("U1", n as i64 + 1).await.unwrap();
            assert_eq!(text.as_deref(), Some(*model), "{name}: v{}", n + 1);
        }
        assert_eq!(s.model_version("U1", 4).await.unwrap(), None, "{name}");
        assert_eq!(s.model_version("U1", 0).await.unwrap(), None, "{name}");
        assert_eq!(s.model_version("nobody", 1).await.unwrap(), None);
    });
}

#[tokio::test]
async fn a_failed_turn_gives_its_number_and_whisper_back() {
    on_every_backend!(|s, name| {
        s.add_whisper("hm", "test").await.unwrap();
        let (_, ctx) = s.begin_turn(start("C1:1.0", "a", "c1")).await.unwrap();
        let w = ctx.whisper.clone().unwrap();
        s.release_turn(ctx.interaction, Some((w.id, "c1".into())))
            .await
            .unwrap();
        assert_eq!(s.interactions().await.unwrap(), 0, "{name}");
        let (_, again) = s.begin_turn(start("C1:1.0", "b", "c2")).await.unwrap();
        assert_eq!(again.interaction, 1, "{name}");
        assert_eq!(again.whisper.unwrap().id, w.id, "{name}: free again");
    });
}

#[tokio::test]
async fn a_state_move_is_decided_on_the_row_and_refused_when_someone_wrote() {
    on_every_backend!(|s, name| {
        let to = |state: &'static str| {
            move |_: &anima::memory::CognitiveRow| {
                Ok::<_, String>(NewMove {
                    to: state.into(),
                    cause: "test".into(),
                    detail: serde_json::json!({ "by": "test" }),
                    degraded: false,
                })
            }
        };
        let s: &dyn States = s.as_ref();
        let m = anima::memory::move_state(s, None, to("WORK"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            (m.from.as_str(), m.to.as_str()),
            ("SHUTDOWN", "WORK"),
            "{name}"
        );
        let refused = anima::memory::move_state(s, None, |row| {
            Err::<NewMove, _>(format!("in {}", row.state))
        })
        .await
        .unwrap();
        assert_eq!(refused.unwrap_err(), "in WORK", "{name}");
        let seen = Quiet(s.newest_message_id().await.unwrap());
        assert_eq!(seen, Quiet(None), "{name}");
        assert_eq!(s.cognitive_state().await.unwrap().state, "WORK");
        assert_eq!(s.state_moves(5).await.unwrap().len(), 1, "{name}");
        s.add_journal("a quiet day ☀").await.unwrap();
        assert_eq!(s.journal(5).await.unwrap()[0].entry, "a quiet day ☀");
    });
}

#[tokio::test]
async fn a_move_conditioned_on_silence_is_refused_after_a_message() {
    on_every_backend!(|s, name| {
        let seen = Quiet(s.newest_message_id().await.unwrap());
        s.record_user_message("C1:1.0", "U1", "Zoë", "hi", None)
            .await
            .unwrap();
        let states: &dyn States = s.as_ref();
        let moved = anima::memory::move_state(states, Some((seen, "busy")), |_| {
            Ok(NewMove {
                to: "SOLITUDE".into(),
                cause: "quiet".into(),
                detail: serde_json::Value::Null,
                degraded: false,
            })
        })
        .await
        .unwrap();
        assert_eq!(moved.unwrap_err(), "busy", "{name}");
        assert_eq!(s.messages_since(0).await.unwrap().len(), 1, "{name}");
        assert!(s.last_message_ms().await.unwrap().is_some());
    });
}

#[tokio::test]
async fn operators_reset_threads_log_commands_once_and_read_a_snapshot() {
    on_every_backend!(|s, name| {
        assert!(!s.reset_thread("C1:1.0").await.unwrap(), "{name}: unknown");
        let (_, ctx) = s.begin_turn(start("C1:1.0", "a", "c1")).await.unwrap();
        s.commit_turn(TurnRecord {
            thread: "C1:1.0".into(),
            user_id: "U1".into(),
            interaction: ctx.interaction,
            ..TurnRecord::default()
        })
        .await
        .unwrap();
        assert!(s.reset_thread("C1:1.0").await.unwrap(), "{name}");
        let ctx = s.load_turn("C1:1.0", "U1", "Zoë", 20).await.unwrap();
        assert!(ctx.recent.is_empty(), "{name}: a new conversation");
        assert!(s.log_admin("D1:1", "U9", "!status", true).await.unwrap());
        s.admin_done("D1:1").await.unwrap();
        assert!(
            !s.log_admin("D1:1", "U9", "!status", true).await.unwrap(),
            "{name}"
        );
        let snap = s.snapshot().await.unwrap();
        assert_eq!(snap.interactions, 1, "{name}");
        assert_eq!(snap.conversations.len(), 1, "{name}");
        assert!(s.first_time("greeting", "D1").await.unwrap());
        assert!(!s.first_time("greeting", "D1").await.unwrap(), "{name}");
        s.probe().await.unwrap();
        assert!(s.write_health().failing().is_none(), "{name}");
        assert!(s.write_transactions() > 0, "{name}");
        assert!(!s.describe().contains("anima@"), "{name}: never a password");
    });
}

#[tokio::test]
async fn feedback_is_one_value_per_person_and_reply() {
    on_every_backend!(|s, name| {
        let Intake::Accepted(row) = s
            .accept_inbound(&Inbound {
                origin: "C1:3.0".into(),
                conversation: "C1:1.0".into(),
                seq: 3.0,
                address: "C1".into(),
                user_id: "U1".into(),
                text: "?".into(),
                requires_spoken: false,
            })
            .await
            .unwrap()
        else {
            panic!("{name}")
        };
        s.set_inbox_reply(row, "!").await.unwrap();
        s.mark_part_posted(row, 1, "ts-9", true).await.unwrap();
        let here = || Box::new(|a: &str| a == "C1") as anima::memory::faces::SamePlace;
        let first = s
            .record_feedback("ts-9", here(), "U2", Verdict::Good)
            .await
            .unwrap();
        assert_eq!(
            first,
            Judged::Stored {
                inbox: row,
                changed: true
            },
            "{name}"
        );
        let same = s
            .record_feedback("ts-9", here(), "U2", Verdict::Good)
            .await
            .unwrap();
        assert_eq!(
            same,
            Judged::Stored {
                inbox: row,
                changed: false
            },
            "{name}"
        );
        let elsewhere = Box::new(|a: &str| a == "C2") as anima::memory::faces::SamePlace;
        assert_eq!(
            s.record_feedback("ts-9", elsewhere, "U2", Verdict::Bad)
                .await
                .unwrap(),
            Judged::UnknownReply,
            "{name}"
        );
        assert_eq!(
            s.feedback_on("ts-9").await.unwrap(),
            [("U2".to_string(), Verdict::Good)]
        );
        assert!(s.transitions("C1:1.0").await.unwrap().is_empty());
        assert!(s.quiet_threads(0).await.unwrap().is_empty());
    });
}

/// The window counts what was said and moves `window / 2` messages at a time (so a prompt's
/// beginning stays put between moves), with every thought in between; the conversation an
/// operator closed is not in it.
#[tokio::test]
async fn a_turns_window_counts_what_was_said_and_moves_in_steps() {
    on_every_backend!(|s, name| {
        let window = 4;
        let mut said = Vec::new();
        for i in 1..=9 {
            let mut t = start("C1:1.0", &format!("message {i} 👋"), &format!("c{i}"));
            t.window = window;
            let (message, ctx) = s.begin_turn(t).await.unwrap();
            said.push(message);
            // Messages said so far, before this turn's reply: 2i - 1. The window keeps from the
            // said entry at index ((said - 4).max(0) / 2) * 2.
            let total = 2 * i - 1;
            let skip = ((total as i64 - 4).max(0) / 2 * 2) as usize;
            let first = ctx.recent.first().map(|e| e.id);
            assert_eq!(first, Some(said[skip]), "{name}: turn {i}");
            assert!(
                ctx.recent.iter().all(|e| e.id >= said[skip]),
                "{name}: turn {i}"
            );
            let thoughts = ctx
                .recent
                .iter()
                .filter(|e| e.entry_type == EntryType::InternalMonologue)
                .count();
            let replies_kept = said[skip..].len() / 2;
            assert_eq!(
                thoughts, replies_kept,
                "{name}: turn {i}: every thought kept"
            );
            s.commit_turn(TurnRecord {
                thread: "C1:1.0".into(),
                user_id: "U1".into(),
                interaction: ctx.interaction,
                entries: vec![
                    NewEntry::new(EntryType::InternalMonologue, format!("thinking {i}")),
                    NewEntry::new(EntryType::ExternalDialog, format!("reply {i} ✨")),
                ],
                ..Default::default()
            })
            .await
            .unwrap();
            let replies = s.thread_entries("C1:1.0").await.unwrap();
            said.push(replies.last().unwrap().id);
        }
        let ctx = s.load_turn("C1:1.0", "U1", "Zoë", window).await.unwrap();
        // 18 said: the window starts at index ((18 - 4) / 2) * 2 = 14.
        assert_eq!(ctx.recent.first().map(|e| e.id), Some(said[14]), "{name}");
        assert_eq!(ctx.recent.last().unwrap().content, "reply 9 ✨", "{name}");
        assert_eq!(ctx.thread_turns, 9, "{name}");
        // A closed conversation is behind the window: a new one starts empty.
        s.reset_thread("C1:1.0").await.unwrap();
        let ctx = s.load_turn("C1:1.0", "U1", "Zoë", window).await.unwrap();
        assert!(ctx.recent.is_empty(), "{name}: {:?}", ctx.recent);
        let ctx = s.load_turn("C1:1.0", "U1", "Zoë", 0).await.unwrap();
        assert!(ctx.recent.is_empty(), "{name}");
        // The new conversation counts only what was said in it.
        let mut said = Vec::new();
        for i in 1..=4 {
            let mut t = start("C1:1.0", &format!("again {i} 🌱"), &format!("d{i}"));
            t.window = window;
            let (message, ctx) = s.begin_turn(t).await.unwrap();
            said.push(message);
            let skip = ((said.len() as i64 - 4).max(0) / 2 * 2) as usize;
            assert_eq!(
                ctx.recent.first().map(|e| e.id),
                Some(said[skip]),
                "{name}: after the reset, turn {i}"
            );
            s.commit_turn(TurnRecord {
                thread: "C1:1.0".into(),
                user_id: "U1".into(),
                interaction: ctx.interaction,
                since_id: Some(ctx.since_id),
                entries: vec![NewEntry::new(EntryType::ExternalDialog, format!("yes {i}"))],
                ..Default::default()
            })
            .await
            .unwrap();
            said.push(s.thread_entries("C1:1.0").await.unwrap().last().unwrap().id);
        }
        // 8 said since the reset: the window starts at index ((8 - 4) / 2) * 2 = 4.
        let ctx = s.load_turn("C1:1.0", "U1", "Zoë", window).await.unwrap();
        assert_eq!(ctx.recent.first().map(|e| e.id), Some(said[4]), "{name}");
        assert_eq!(ctx.recent.len(), 4, "{name}: {:?}", ctx.recent);
    });
}

/// A person's file name is fixed when they are first seen: a second person with the same name
/// gets their own, and a rename changes the name shown, not the file.
#[tokio::test]
async fn a_persons_slug_is_theirs_from_the_first_message() {
    on_every_backend!(|s, name| {
        let said = |user: &'static str, display: &'static str, text: &'static str| {
            let s = Arc::clone(s);
            async move {
                s.record_user_message("C1:1.0", user, display, text, None)
                    .await
                    .unwrap()
            }
        };
        said("U1", "Zoë Ünal", "salut").await;
        said("U2", "Zoë Ünal", "hi").await;
        said("U1", "Zed", "renamed").await;
        let one = s.user("U1").await.unwrap().unwrap();
        let two = s.user("U2").await.unwrap().unwrap();
        assert_eq!(
            (one.slug.as_str(), one.display_name.as_str()),
            ("zo-nal", "Zed"),
            "{name}"
        );
        assert_eq!(two.slug, "zo-nal-u2", "{name}");
        assert_eq!(two.display_name, "Zoë Ünal", "{name}");
        let entries = s.thread_entries("C1:1.0").await.unwrap();
        assert_eq!(entries.len(), 3, "{name}");
        assert_eq!(entries[2].metadata["name"], "Zed", "{name}");
    });
}
