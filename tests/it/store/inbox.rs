//! The inbox's promises on every backend.

use std::sync::Arc;

use anima::memory::faces::{Inbox, Turns};
use anima::memory::{Inbound, InboxStatus, Intake, TurnStart};

use crate::on_every_backend;

fn inbound(origin: &str, conversation: &str, seq: f64) -> Inbound {
    Inbound {
        origin: origin.into(),
        conversation: conversation.into(),
        seq,
        address: "{\"to\":\"C1\"}".into(),
        user_id: "U1".into(),
        text: "héllo 👋".into(),
        requires_spoken: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_message_is_one_row_however_often_and_however_concurrently_it_arrives() {
    on_every_backend!(|s, name| {
        let mut tasks = Vec::new();
        for _ in 0..16 {
            let s = Arc::clone(s);
            tasks.push(tokio::spawn(async move {
                s.accept_inbound(&inbound("C1:5.0", "C1:1.0", 5.0))
                    .await
                    .unwrap()
            }));
        }
        let mut accepted = 0;
        for t in tasks {
            match t.await.unwrap() {
                Intake::Accepted(_) => accepted += 1,
                Intake::Duplicate => {}
                other => panic!("{name}: {other:?}"),
            }
        }
        assert_eq!(accepted, 1, "{name}: twins and retries are one row");
        assert_eq!(s.inbox_depth().await.unwrap(), 1, "{name}");
    });
}

#[tokio::test]
async fn a_conversation_is_worked_in_order_and_a_fixed_reply_counts_its_attempts() {
    on_every_backend!(|s, name| {
        let later = s
            .accept_inbound(&inbound("C1:7.0", "C1:1.0", 7.0))
            .await
            .unwrap();
        let Intake::Accepted(first) = s
            .accept_inbound(&inbound("C1:6.0", "C1:1.0", 6.0))
            .await
            .unwrap()
        else {
            panic!("{name}: accepted")
        };
        assert!(matches!(later, Intake::Accepted(_)), "{name}");
        let next = s.claim_next("C1:1.0").await.unwrap().unwrap();
        assert_eq!(next.id, first, "{name}: by seq, not arrival");
        assert!(next.others_waiting, "{name}");
        assert_eq!(next.status, InboxStatus::Pending);
        assert_eq!(next.attempts, 0, "{name}: a pending row is only read");
        s.set_inbox_reply(first, "la réponse").await.unwrap();
        let again = s.claim_next("C1:1.0").await.unwrap().unwrap();
        assert_eq!(again.status, InboxStatus::Replying, "{name}");
        assert_eq!(again.reply.as_deref(), Some("la réponse"));
        assert_eq!(again.attempts, 1, "{name}: delivering is an attempt");
        assert_eq!(s.note_failure(first).await.unwrap(), 1, "{name}");
        assert_eq!(
            s.note_failure(first).await.unwrap(),
            1,
            "{name}: no attempt under way"
        );
        s.mark_part_posted(first, 1, "ts-1", false).await.unwrap();
        s.mark_part_posted(first, 2, "ts-2", true).await.unwrap();
        // Marked late (by a daemon paused after posting it): nothing goes back or repeats.
        s.mark_part_posted(first, 1, "ts-1", false).await.unwrap();
        s.mark_failed(first, "given up late", None).await.unwrap();
        let done = s.inbox_item(first).await.unwrap().unwrap();
        assert_eq!(
            done.status,
            InboxStatus::Done,
            "{name}: answered stays answered"
        );
        assert_eq!(done.parts_posted, 2, "{name}: never back");
        assert_eq!(
            done.reply_ref.as_deref(),
            Some("ts-1"),
            "{name}: the first part"
        );
        let mut held = s.references_held(first).await.unwrap();
        held.sort();
        assert_eq!(held, ["ts-1", "ts-2"], "{name}");
        assert_eq!(
            s.open_conversations().await.unwrap(),
            ["C1:1.0"],
            "{name}: the later row waits"
        );
        assert_eq!(
            s.conversation_address("C1:1.0").await.unwrap().unwrap().0,
            "{\"to\":\"C1\"}"
        );
    });
}

#[tokio::test]
async fn a_thread_needs_the_soul_to_have_spoken_and_a_stop_closes_what_was_not_said() {
    on_every_backend!(|s, name| {
        let mut m = inbound("C2:2.0", "C2:1.0", 2.0);
        m.requires_spoken = true;
        assert_eq!(
            s.accept_inbound(&m).await.unwrap(),
            Intake::NotParticipating,
            "{name}"
        );
        s.note_conversation("C2:1.0", "assistant").await.unwrap();
        let Intake::Accepted(id) = s.accept_inbound(&m).await.unwrap() else {
            panic!("{name}: spoken now")
        };
        let item = s.inbox_item(id).await.unwrap().unwrap();
        assert_eq!(item.note.as_deref(), Some("assistant"), "{name}");
        assert_eq!(
            s.conversation_note("C2:1.0").await.unwrap().as_deref(),
            Some("assistant")
        );
        assert!(s.mark_stopped(id, "half").await.unwrap(), "{name}");
        let stopped = s.inbox_item(id).await.unwrap().unwrap();
        assert_eq!(stopped.status, InboxStatus::Stopped, "{name}");
        assert_eq!(stopped.reply.as_deref(), Some("half"));
        assert!(!s.mark_stopped(id, "again").await.unwrap(), "{name}");
    });
}

#[tokio::test]
async fn an_overheard_message_waits_until_the_soul_chooses_to_answer_it() {
    on_every_backend!(|s, name| {
        let since = anima::memory::now_us() - 1_000_000;
        let Intake::Accepted(id) = s
            .record_overheard(&inbound("C3:1.0", "C3:1.0", 1.0), "C3")
            .await
            .unwrap()
        else {
            panic!("{name}")
        };
        assert_eq!(
            s.record_overheard(&inbound("C3:1.0", "C3:1.0", 1.0), "C3")
                .await
                .unwrap(),
            Intake::Duplicate
        );
        assert_eq!(
            s.inbox_depth().await.unwrap(),
            0,
            "{name}: nothing to answer"
        );
        let heard = s.last_overheard(since).await.unwrap().unwrap();
        assert_eq!((heard.item.id, heard.place.as_str()), (id, "C3"), "{name}");
        assert!(s
            .last_overheard(anima::memory::now_us() + 1_000_000)
            .await
            .unwrap()
            .is_none());
        assert!(s.reopen_overheard(id).await.unwrap(), "{name}");
        assert!(!s.reopen_overheard(id).await.unwrap(), "{name}: once");
        assert_eq!(s.inbox_depth().await.unwrap(), 1, "{name}");
        assert!(
            s.last_overheard(since).await.unwrap().is_none(),
            "{name}: spoken to"
        );
    });
}

#[tokio::test]
async fn an_attempt_another_opening_began_is_an_interruption() {
    on_every_backend!(|s, name| {
        let Intake::Accepted(id) = s
            .accept_inbound(&inbound("C4:1.0", "C4:1.0", 1.0))
            .await
            .unwrap()
        else {
            panic!("{name}")
        };
        // This opening begins the turn: its attempt is under way.
        s.begin_turn(TurnStart {
            thread: "C4:1.0".into(),
            user_id: "U1".into(),
            display_name: "Ann".into(),
            text: "héllo 👋".into(),
            source: Some(format!("inbox:{id}")),
            inbox: Some(id),
            window: 20,
            claimant: "t1".into(),
            claim_until_ms: 0,
            conversation_claim: None,
        })
        .await
        .unwrap();
        let item = s.claim_next("C4:1.0").await.unwrap().unwrap();
        assert_eq!(
            (item.attempts, item.interruptions),
            (1, 0),
            "{name}: its own"
        );
    });
}
