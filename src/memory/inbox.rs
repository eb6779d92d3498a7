//! The inbox's rows on SQLite as `sqlite::inbox` reads and writes them: their columns, a row
//! read, and a message taken in (also inside a turn's or an overheard message's transaction).
//! What a row is and the rules over it are `records::inbox`'s.

use rusqlite::{Connection, OptionalExtension, Row};

pub use super::records::inbox::{
    Inbound, InboxItem, InboxStatus, Intake, Overheard, MAX_FAILURES, MAX_INTERRUPTIONS,
};
use super::{now_us, stored_column, StoreError};
pub(super) const COLUMNS: &str = "id, origin, conversation, address, note, user_id, text, status, reply, parts_posted, reply_ref, received_us, attempts, seq, stream_ref, failures, interruptions";
/// The column after `COLUMNS`.
pub(super) const NEXT: usize = 17;

pub(super) fn from_row(r: &Row) -> rusqlite::Result<InboxItem> {
    Ok(InboxItem {
        id: r.get(0)?,
        origin: r.get(1)?,
        conversation: r.get(2)?,
        address: r.get(3)?,
        note: r.get(4)?,
        user_id: r.get(5)?,
        text: r.get(6)?,
        status: stored_column(r, 7)?,
        reply: r.get(8)?,
        parts_posted: r.get(9)?,
        reply_ref: r.get(10)?,
        received_us: r.get(11)?,
        attempts: r.get(12)?,
        seq: r.get(13)?,
        others_waiting: false,
        stream_ref: r.get(14)?,
        failures: r.get(15)?,
        interruptions: r.get(16)?,
    })
}

/// Takes a message into the inbox in the caller's write transaction (`Inbox::accept_inbound`).
pub(super) fn accept(tx: &Connection, m: &Inbound) -> Result<Intake, StoreError> {
    let known: Option<(bool, Option<String>)> = tx
        .prepare_cached("SELECT spoken, note FROM conversations WHERE key = ?1")?
        .query_row([&m.conversation], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    let spoken = known.as_ref().is_some_and(|k| k.0);
    if m.requires_spoken && !spoken {
        return Ok(Intake::NotParticipating);
    }
    let inserted = tx
        .prepare_cached(
            "INSERT OR IGNORE INTO inbox (origin, conversation, seq, address, note, user_id, text, received_us)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?
        .execute(rusqlite::params![
            m.origin,
            m.conversation,
            m.seq,
            m.address,
            known.and_then(|k| k.1),
            m.user_id,
            m.text,
            now_us()
        ])?;
    Ok(if inserted == 1 {
        Intake::Accepted(tx.last_insert_rowid())
    } else {
        Intake::Duplicate
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::faces::{Inbox, Turns};
    use crate::memory::sqlite::{Block, Sqlite};
    use crate::memory::SqliteStore;

    fn inbound(origin: &str, seq: f64) -> Inbound {
        Inbound {
            origin: origin.into(),
            conversation: "C1:1.0".into(),
            seq,
            address: "{\"to\":\"C1\"}".into(),
            user_id: "U1".into(),
            text: "hi".into(),
            requires_spoken: false,
        }
    }

    fn store() -> (tempfile::TempDir, Sqlite) {
        let dir = tempfile::tempdir().unwrap();
        let s = Sqlite::open(&dir.path().join("a.db")).unwrap();
        (dir, s)
    }

    #[test]
    fn the_last_overheard_message_is_one_to_come_back_to_until_it_is_spoken_to_or_too_old() {
        let (_d, s) = store();
        let id = |i: Intake| match i {
            Intake::Accepted(id) => id,
            other => panic!("{other:?}"),
        };
        assert_eq!(s.last_overheard(0).block().unwrap(), None);
        let first = id(s
            .record_overheard(&inbound("C1:1", 1.0), "C1")
            .block()
            .unwrap());
        let second = id(s
            .record_overheard(&inbound("C1:2", 2.0), "C1")
            .block()
            .unwrap());
        assert_eq!(
            s.record_overheard(&inbound("C1:2", 2.0), "C1")
                .block()
                .unwrap(),
            Intake::Duplicate
        );
        // A message that addresses the soul is not overheard, and hides nothing.
        id(s.accept_inbound(&inbound("C1:3", 3.0)).block().unwrap());
        let last = s.last_overheard(0).block().unwrap().unwrap();
        assert_eq!((last.item.id, last.place.as_str()), (second, "C1"));
        assert_eq!(last.item.status, InboxStatus::Overheard);
        assert_eq!(
            s.last_overheard(last.item.received_us + 1).block().unwrap(),
            None,
            "too old"
        );
        // Spoken to once: not again, and the one before it is not brought up instead.
        assert!(s.reopen_overheard(second).block().unwrap());
        assert!(!s.reopen_overheard(second).block().unwrap());
        assert_eq!(
            s.inbox_item(second).block().unwrap().unwrap().status,
            InboxStatus::Pending
        );
        assert_eq!(s.last_overheard(0).block().unwrap(), None);
        assert_eq!(
            s.inbox_item(first).block().unwrap().unwrap().status,
            InboxStatus::Overheard
        );
    }

    #[test]
    fn a_row_whose_status_this_anima_does_not_know_is_an_error_not_a_pending_row() {
        let (_d, s) = store();
        let Intake::Accepted(id) = s.accept_inbound(&inbound("C1:1", 1.0)).block().unwrap() else {
            panic!()
        };
        s.blocking()
            .conn()
            .execute("UPDATE inbox SET status = 'archived' WHERE id = ?1", [id])
            .unwrap();
        match s.inbox_item(id).block() {
            Err(StoreError::Unknown {
                table: "inbox",
                column: "status",
                value,
            }) => assert_eq!(value, "archived"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_stop_closes_an_open_row_or_one_whose_reply_is_fixed_but_not_delivered() {
        let (_d, s) = store();
        let ids: Vec<i64> = [1.0, 2.0, 3.0]
            .iter()
            .map(|seq| {
                match s
                    .accept_inbound(&inbound(&format!("C1:{seq}"), *seq))
                    .block()
                    .unwrap()
                {
                    Intake::Accepted(id) => id,
                    other => panic!("{other:?}"),
                }
            })
            .collect();
        // Pending: the turn had not committed.
        s.set_stream_ref(ids[0], "9.1").block().unwrap();
        assert!(s.mark_stopped(ids[0], "Half a").block().unwrap());
        let stopped = s.inbox_item(ids[0]).block().unwrap().unwrap();
        assert_eq!(stopped.status, InboxStatus::Stopped);
        assert_eq!(stopped.reply.as_deref(), Some("Half a"));
        assert_eq!(stopped.stream_ref.as_deref(), Some("9.1"));
        // The turn committed as the stop came: still stopped, its reply not delivered.
        s.set_inbox_reply(ids[1], "The whole answer")
            .block()
            .unwrap();
        assert!(s.mark_stopped(ids[1], "The wh").block().unwrap());
        assert_eq!(
            s.inbox_item(ids[1])
                .block()
                .unwrap()
                .unwrap()
                .reply
                .as_deref(),
            Some("The wh")
        );
        // The stop came after the whole reply was said: it cut nothing, and the reply is
        // delivered like any other.
        let whole = match s.accept_inbound(&inbound("C1:4.0", 4.0)).block().unwrap() {
            Intake::Accepted(id) => id,
            other => panic!("{other:?}"),
        };
        s.set_inbox_reply(whole, "The whole answer")
            .block()
            .unwrap();
        assert!(!s.mark_stopped(whole, "The whole answer\n").block().unwrap());
        let kept = s.inbox_item(whole).block().unwrap().unwrap();
        assert_eq!(kept.status, InboxStatus::Replying);
        assert_eq!(kept.reply.as_deref(), Some("The whole answer"));
        // Part of the reply is out: it is delivered to the end.
        s.set_inbox_reply(ids[2], "Long").block().unwrap();
        s.mark_part_posted(ids[2], 1, "9.3", false).block().unwrap();
        assert!(!s.mark_stopped(ids[2], "").block().unwrap());
        assert_eq!(
            s.inbox_item(ids[2]).block().unwrap().unwrap().status,
            InboxStatus::Replying
        );
        // A stopped row is not claimed again.
        assert_eq!(s.claim_next("C1:1.0").block().unwrap().unwrap().id, ids[2]);
    }

    #[test]
    fn twins_and_retries_are_one_row_and_order_is_by_seq() {
        let (_d, s) = store();
        let Intake::Accepted(second) = s
            .accept_inbound(&inbound("C1:2.0001", 2.0001))
            .block()
            .unwrap()
        else {
            panic!()
        };
        assert_eq!(
            s.accept_inbound(&inbound("C1:2.0001", 2.0001))
                .block()
                .unwrap(),
            Intake::Duplicate
        );
        let Intake::Accepted(first) = s.accept_inbound(&inbound("C1:1.5", 1.5)).block().unwrap()
        else {
            panic!()
        };
        let item = s.claim_next("C1:1.0").block().unwrap().unwrap();
        assert_eq!((item.id, item.attempts), (first, 0), "lower seq first");
        assert_eq!(
            s.claim_next("C1:1.0").block().unwrap().unwrap().attempts,
            0,
            "waiting is no attempt"
        );
        s.blocking()
            .conn()
            .execute("UPDATE inbox SET attempts = 1 WHERE id = ?1", [first])
            .unwrap();
        s.set_inbox_reply(first, "hi").block().unwrap();
        assert_eq!(
            s.claim_next("C1:1.0").block().unwrap().unwrap().attempts,
            2,
            "a fixed reply counts its delivery"
        );
        s.mark_done(first).block().unwrap();
        assert_eq!(s.claim_next("C1:1.0").block().unwrap().unwrap().id, second);
        assert_eq!(
            s.open_conversations().block().unwrap(),
            vec!["C1:1.0".to_string()]
        );
        s.mark_failed(second, "poison", Some("9.9"))
            .block()
            .unwrap();
        assert_eq!(
            s.references_held(second).block().unwrap(),
            ["9.9"],
            "the apology"
        );
        assert!(s.claim_next("C1:1.0").block().unwrap().is_none());
        assert!(s.open_conversations().block().unwrap().is_empty());
    }

    /// Begins row `id`'s turn as the engine does (its attempt counted and marked as under way).
    fn begin(s: &std::sync::Arc<SqliteStore>, id: i64) {
        Sqlite::on(s)
            .begin_turn(crate::memory::TurnStart {
                thread: "C1:1.0".into(),
                user_id: "U1".into(),
                display_name: "Tom".into(),
                text: "hi".into(),
                source: Some(format!("inbox:{id}")),
                inbox: Some(id),
                window: 20,
                claimant: "c".into(),
                claim_until_ms: 0,
                conversation_claim: None,
            })
            .block()
            .unwrap();
    }

    #[test]
    fn an_attempt_a_dying_process_left_is_an_interruption_and_a_caught_one_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        let first = Sqlite::open(&path).unwrap();
        let Intake::Accepted(id) = first.accept_inbound(&inbound("C1:1", 1.0)).block().unwrap()
        else {
            panic!()
        };
        let item = first.claim_next("C1:1.0").block().unwrap().unwrap();
        assert_eq!(
            (item.attempts, item.failures, item.interruptions),
            (0, 0, 0)
        );
        begin(first.blocking(), id);
        // Its own claim again (a worker looking while the turn runs) counts nothing.
        let item = first.claim_next("C1:1.0").block().unwrap().unwrap();
        assert_eq!(
            (item.attempts, item.failures, item.interruptions),
            (1, 0, 0)
        );
        // The process dies in the turn: the next one counts an interruption, once.
        drop(first);
        let second = Sqlite::open(&path).unwrap();
        let item = second.claim_next("C1:1.0").block().unwrap().unwrap();
        assert_eq!(
            (item.attempts, item.failures, item.interruptions),
            (1, 0, 1)
        );
        let again = second.claim_next("C1:1.0").block().unwrap().unwrap();
        assert_eq!(again.interruptions, 1, "counted once");
        assert!(!again.exhausted());
        // Its turn fails, caught: a failure, and the attempt is over.
        begin(second.blocking(), id);
        assert_eq!(second.note_failure(id).block().unwrap(), 1);
        assert_eq!(
            second.note_failure(id).block().unwrap(),
            1,
            "no attempt under way"
        );
        drop(second);
        let third = Sqlite::open(&path).unwrap();
        let item = third.claim_next("C1:1.0").block().unwrap().unwrap();
        assert_eq!(
            (item.attempts, item.failures, item.interruptions),
            (2, 1, 1),
            "a failed attempt is not also an interruption"
        );
        assert_eq!(third.inbox_item(id).block().unwrap().unwrap(), item);
    }

    #[test]
    fn a_row_is_given_up_after_three_failures_or_ten_interruptions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        let s = Sqlite::open(&path).unwrap();
        let accept = |origin: &str, seq: f64| match s.accept_inbound(&inbound(origin, seq)).block()
        {
            Ok(Intake::Accepted(id)) => id,
            other => panic!("{other:?}"),
        };
        let (poison, crashing) = (accept("C1:1", 1.0), accept("C1:2", 2.0));
        for n in 1..=MAX_FAILURES {
            assert!(!s.claim_next("C1:1.0").block().unwrap().unwrap().exhausted());
            begin(s.blocking(), poison);
            assert_eq!(s.note_failure(poison).block().unwrap(), n);
        }
        let item = s.claim_next("C1:1.0").block().unwrap().unwrap();
        assert_eq!((item.id, item.failures), (poison, MAX_FAILURES));
        assert!(item.exhausted());
        s.mark_failed(poison, "poison", None).block().unwrap();
        drop(s);

        // A fixed reply whose delivery every process dies in: each start counts one.
        let mut s = Sqlite::open(&path).unwrap();
        s.set_inbox_reply(crashing, "hi").block().unwrap();
        for n in 1..=MAX_INTERRUPTIONS {
            let item = s.claim_next("C1:1.0").block().unwrap().unwrap();
            assert_eq!((item.id, item.interruptions), (crashing, n - 1));
            assert!(!item.exhausted());
            drop(s);
            s = Sqlite::open(&path).unwrap();
        }
        let item = s.claim_next("C1:1.0").block().unwrap().unwrap();
        assert_eq!(
            (item.attempts, item.interruptions),
            (MAX_INTERRUPTIONS, MAX_INTERRUPTIONS)
        );
        assert!(item.exhausted());
        assert_eq!(
            s.inbox_item(crashing).block().unwrap().unwrap(),
            item,
            "the store holds what the claim says: an exhausted row begins no attempt"
        );
    }

    #[test]
    fn the_references_the_rows_of_a_conversation_hold_are_known() {
        let (_d, s) = store();
        let accept = |origin: &str, seq: f64| match s.accept_inbound(&inbound(origin, seq)).block()
        {
            Ok(Intake::Accepted(id)) => id,
            other => panic!("{other:?}"),
        };
        let (first, second, third) = (
            accept("C1:1", 1.0),
            accept("C1:2", 2.0),
            accept("C1:3", 3.0),
        );
        let mut elsewhere = inbound("C2:1", 1.0);
        elsewhere.conversation = "C2:1.0".into();
        let Intake::Accepted(other) = s.accept_inbound(&elsewhere).block().unwrap() else {
            panic!()
        };
        s.set_inbox_reply(first, "a long reply").block().unwrap();
        s.set_stream_ref(first, "9.1").block().unwrap();
        s.mark_part_posted(first, 1, "9.1", false).block().unwrap();
        s.mark_part_posted(first, 2, "9.2", false).block().unwrap();
        s.mark_part_posted(first, 3, "9.3", true).block().unwrap();
        s.set_stream_ref(second, "9.4").block().unwrap();
        s.mark_part_posted(other, 1, "8.1", true).block().unwrap();
        let held = |id| {
            let mut refs = s.references_held(id).block().unwrap();
            refs.sort();
            refs
        };
        assert_eq!(held(third), ["9.1", "9.2", "9.3", "9.4"]);
        assert_eq!(held(first), held(third), "its own too");
        assert_eq!(held(other), ["8.1"], "only its own conversation's");
    }

    #[test]
    fn some_messages_need_a_conversation_the_soul_has_spoken_in() {
        let (_d, s) = store();
        let mut m = inbound("C1:5.0", 5.0);
        m.requires_spoken = true;
        assert_eq!(
            s.accept_inbound(&m).block().unwrap(),
            Intake::NotParticipating
        );
        let Intake::Accepted(id) = s.accept_inbound(&inbound("C1:2.0", 2.0)).block().unwrap()
        else {
            panic!()
        };
        s.mark_part_posted(id, 1, "3.0", true).block().unwrap();
        let done = s.inbox_item(id).block().unwrap().unwrap();
        assert_eq!(
            (done.status, done.reply_ref.as_deref()),
            (InboxStatus::Done, Some("3.0"))
        );
        assert!(matches!(
            s.accept_inbound(&m).block().unwrap(),
            Intake::Accepted(_)
        ));
    }

    #[test]
    fn a_noted_conversation_is_joined_and_its_note_travels_with_its_messages() {
        let (_d, s) = store();
        s.note_conversation("C1:1.0", "assistant").block().unwrap();
        let mut m = inbound("C1:5.0", 5.0);
        m.requires_spoken = true;
        let Intake::Accepted(id) = s.accept_inbound(&m).block().unwrap() else {
            panic!()
        };
        assert_eq!(
            s.inbox_item(id).block().unwrap().unwrap().note.as_deref(),
            Some("assistant")
        );
        assert_eq!(
            s.conversation_address("C1:1.0").block().unwrap(),
            Some(("{\"to\":\"C1\"}".to_string(), Some("assistant".to_string())))
        );
    }
}

#[cfg(test)]
mod notes {
    use crate::memory::faces::Inbox;
    use crate::memory::sqlite::{Block, Sqlite};

    #[test]
    fn a_conversations_note() {
        let dir = tempfile::tempdir().unwrap();
        let s = Sqlite::open(&dir.path().join("a.db")).unwrap();
        assert_eq!(s.conversation_note("C1:1.0").block().unwrap(), None);
        s.note_conversation("C1:1.0", "assistant").block().unwrap();
        assert_eq!(
            s.conversation_note("C1:1.0").block().unwrap().as_deref(),
            Some("assistant")
        );
    }
}
