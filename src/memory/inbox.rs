//! The inbox on SQLite: each operation's contract is `faces::Inbox`'s; what a row is and the
//! rules over it (`Pickup`, `stop_closes`) are `records::inbox`'s. An attempt under way is
//! marked with this store's instance (`in_flight`); json arrays hold a row's part references.

use rusqlite::{Connection, OptionalExtension, Row};

use super::{now_ms, now_us, stored_column, SqliteStore, StoreError};

use super::records::inbox::{stop_closes, Pickup};
pub use super::records::inbox::{
    Inbound, InboxItem, InboxStatus, Intake, Overheard, MAX_FAILURES, MAX_INTERRUPTIONS,
};
const COLUMNS: &str = "id, origin, conversation, address, note, user_id, text, status, reply, parts_posted, reply_ref, received_us, attempts, seq, stream_ref, failures, interruptions";
/// The column after `COLUMNS`.
const NEXT: usize = 17;

fn from_row(r: &Row) -> rusqlite::Result<InboxItem> {
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

impl SqliteStore {
    /// `accept` in one IMMEDIATE write.
    pub fn accept_inbound(&self, m: &Inbound) -> Result<Intake, StoreError> {
        self.write(|tx| accept(tx, m))
    }

    /// One cached read; a write only when the pick-up counts something (`Pickup`).
    pub fn claim_next(&self, conversation: &str) -> Result<Option<InboxItem>, StoreError> {
        let next = self
            .conn()
            .prepare_cached(&format!(
                "SELECT {COLUMNS}, (SELECT COUNT(*) FROM inbox o
                     WHERE o.conversation = ?1 AND o.status IN ('pending', 'replying')), in_flight
                 FROM inbox WHERE conversation = ?1 AND status IN ('pending', 'replying')
                 ORDER BY seq, id LIMIT 1"
            ))?
            .query_row([conversation], |r| {
                let mut item = from_row(r)?;
                item.others_waiting = r.get::<_, i64>(NEXT)? > 1;
                Ok((item, r.get::<_, Option<String>>(NEXT + 1)?))
            })
            .optional()?;
        let Some((mut item, in_flight)) = next else {
            return Ok(None);
        };
        let pickup = Pickup::of(&item, in_flight.as_deref(), &self.instance);
        if pickup.reads_only() {
            return Ok(Some(item));
        }
        let id = item.id;
        let (attempts, interruptions) = self.write(|tx| {
            let interrupted = tx
                .prepare_cached(
                    "UPDATE inbox SET interruptions = interruptions + 1, in_flight = NULL
                     WHERE id = ?1 AND in_flight IS NOT NULL AND in_flight != ?2
                     RETURNING interruptions",
                )?
                .query_row((id, &self.instance), |r| r.get::<_, i64>(0))
                .optional()?;
            let counts = (item.attempts, interrupted.unwrap_or(item.interruptions));
            if !pickup.attempt_begins(&item, counts.1) {
                return Ok(counts);
            }
            let attempts = tx
                .prepare_cached(
                    "UPDATE inbox SET attempts = attempts + 1, in_flight = ?2 WHERE id = ?1
                     RETURNING attempts",
                )?
                .query_row((id, &self.instance), |r| r.get(0))?;
            Ok((attempts, counts.1))
        })?;
        item.attempts = attempts;
        item.interruptions = interruptions;
        Ok(Some(item))
    }

    /// Counts only an attempt marked with this instance.
    pub fn note_failure(&self, id: i64) -> Result<i64, StoreError> {
        self.write(|tx| {
            tx.prepare_cached(
                "UPDATE inbox SET failures = failures + 1, in_flight = NULL
                 WHERE id = ?1 AND in_flight = ?2",
            )?
            .execute((id, &self.instance))?;
            Ok(tx
                .prepare_cached("SELECT failures FROM inbox WHERE id = ?1")?
                .query_row([id], |r| r.get(0))
                .optional()?
                .unwrap_or(0))
        })
    }

    pub fn open_conversations(&self) -> Result<Vec<String>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT DISTINCT conversation FROM inbox WHERE status IN ('pending', 'replying')",
        )?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn inbox_depth(&self) -> Result<u64, StoreError> {
        Ok(self.conn().query_row(
            "SELECT count(*) FROM inbox WHERE status IN ('pending', 'replying')",
            [],
            |r| r.get::<_, i64>(0),
        )? as u64)
    }

    pub fn inbox_item(&self, id: i64) -> Result<Option<InboxItem>, StoreError> {
        Ok(self
            .conn()
            .prepare_cached(&format!("SELECT {COLUMNS} FROM inbox WHERE id = ?1"))?
            .query_row([id], from_row)
            .optional()?)
    }

    pub fn set_inbox_reply(&self, id: i64, reply: &str) -> Result<(), StoreError> {
        self.write(|tx| {
            tx.execute(
                "UPDATE inbox SET status = 'replying', reply = ?2 WHERE id = ?1 AND status = 'pending'",
                (id, reply),
            )?;
            Ok(())
        })
    }

    /// `part_refs` is a json array; `max` and `coalesce` keep it monotonic.
    pub fn mark_part_posted(
        &self,
        id: i64,
        parts_posted: i64,
        reference: &str,
        last: bool,
    ) -> Result<(), StoreError> {
        self.write(|tx| {
            tx.prepare_cached(
                "UPDATE inbox SET parts_posted = max(parts_posted, ?2),
                     reply_ref = coalesce(reply_ref, ?3),
                     part_refs = CASE WHEN EXISTS (SELECT 1 FROM json_each(part_refs)
                                                   WHERE value = ?3) THEN part_refs
                                      ELSE json_insert(part_refs, '$[#]', ?3) END,
                     status = CASE WHEN ?4 THEN 'done' ELSE status END,
                     done_at = CASE WHEN ?4 THEN coalesce(done_at, ?5) ELSE done_at END
                 WHERE id = ?1",
            )?
            .execute((id, parts_posted, reference, last, now_ms()))?;
            tx.prepare_cached(
                "INSERT INTO conversations (key, spoken) SELECT conversation, 1 FROM inbox WHERE id = ?1
                 ON CONFLICT (key) DO UPDATE SET spoken = 1",
            )?
            .execute([id])?;
            Ok(())
        })
    }

    /// One read over the conversation's `reply_ref`, `stream_ref` and `part_refs`.
    pub fn references_held(&self, id: i64) -> Result<Vec<String>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "WITH others AS (
                 SELECT reply_ref, stream_ref, part_refs FROM inbox
                 WHERE conversation = (SELECT conversation FROM inbox WHERE id = ?1))
             SELECT reply_ref FROM others WHERE reply_ref IS NOT NULL
             UNION SELECT stream_ref FROM others WHERE stream_ref IS NOT NULL
             UNION SELECT p.value FROM others, json_each(others.part_refs) AS p",
        )?;
        let rows = stmt.query_map([id], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn set_stream_ref(&self, id: i64, reference: &str) -> Result<(), StoreError> {
        self.write(|tx| {
            tx.prepare_cached("UPDATE inbox SET stream_ref = ?2 WHERE id = ?1")?
                .execute((id, reference))?;
            tx.prepare_cached(
                "INSERT INTO conversations (key, spoken) SELECT conversation, 1 FROM inbox WHERE id = ?1
                 ON CONFLICT (key) DO UPDATE SET spoken = 1",
            )?
            .execute([id])?;
            Ok(())
        })
    }

    /// Reads the row and asks `stop_closes` inside the write.
    pub fn mark_stopped(&self, id: i64, said: &str) -> Result<bool, StoreError> {
        self.write(|tx| {
            let open = tx
                .prepare_cached("SELECT status, reply, parts_posted FROM inbox WHERE id = ?1")?
                .query_row([id], |r| {
                    let reply = r.get_ref(1)?.as_str_or_null()?;
                    Ok(stop_closes(stored_column(r, 0)?, reply, r.get(2)?, said))
                })
                .optional()?
                .unwrap_or(false);
            if open {
                tx.execute(
                    "UPDATE inbox SET status = 'stopped', reply = ?2, done_at = ?3 WHERE id = ?1",
                    (id, said, now_ms()),
                )?;
            }
            Ok(open)
        })
    }

    /// `accept`, then the row closed as overheard, in one write.
    pub fn record_overheard(&self, m: &Inbound, place: &str) -> Result<Intake, StoreError> {
        self.write(|tx| {
            let intake = accept(tx, m)?;
            if let Intake::Accepted(id) = intake {
                tx.prepare_cached(
                    "UPDATE inbox SET status = 'overheard', heard_in = ?2, done_at = ?3 WHERE id = ?1",
                )?
                .execute((id, place, now_ms()))?;
            }
            Ok(intake)
        })
    }

    pub fn reopen_overheard(&self, id: i64) -> Result<bool, StoreError> {
        self.write(|tx| {
            let n = tx
                .prepare_cached(
                    "UPDATE inbox SET status = 'pending', done_at = NULL WHERE id = ?1 AND status = 'overheard'",
                )?
                .execute([id])?;
            Ok(n == 1)
        })
    }

    /// Reads the newest row with `heard_in`, and filters it here.
    pub fn last_overheard(&self, since_us: i64) -> Result<Option<Overheard>, StoreError> {
        let last = self
            .conn()
            .prepare_cached(&format!(
                "SELECT {COLUMNS}, heard_in FROM inbox WHERE heard_in IS NOT NULL ORDER BY id DESC LIMIT 1"
            ))?
            .query_row([], |r| Ok((from_row(r)?, r.get::<_, String>(NEXT)?)))
            .optional()?;
        Ok(last
            .filter(|(item, _)| {
                item.status == InboxStatus::Overheard && item.received_us >= since_us
            })
            .map(|(item, place)| Overheard { item, place }))
    }

    pub fn mark_done(&self, id: i64) -> Result<(), StoreError> {
        self.write(|tx| {
            tx.execute(
                "UPDATE inbox SET status = 'done', done_at = ?2 WHERE id = ?1",
                (id, now_ms()),
            )?;
            Ok(())
        })
    }

    pub fn mark_failed(
        &self,
        id: i64,
        failure: &str,
        apology: Option<&str>,
    ) -> Result<(), StoreError> {
        self.write(|tx| {
            tx.execute(
                "UPDATE inbox SET status = 'failed', failure = ?2, done_at = ?3,
                     part_refs = CASE WHEN ?4 IS NULL THEN part_refs
                                      ELSE json_insert(part_refs, '$[#]', ?4) END
                 WHERE id = ?1 AND status IN ('pending', 'replying')",
                (id, failure, now_ms(), apology),
            )?;
            Ok(())
        })
    }

    pub fn conversation_address(
        &self,
        conversation: &str,
    ) -> Result<Option<(String, Option<String>)>, StoreError> {
        Ok(self
            .conn()
            .prepare_cached(
                "SELECT address, note FROM inbox WHERE conversation = ?1 ORDER BY id DESC LIMIT 1",
            )?
            .query_row([conversation], |r| Ok((r.get(0)?, r.get(1)?)))
            .optional()?)
    }

    pub fn note_conversation(&self, key: &str, note: &str) -> Result<(), StoreError> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO conversations (key, spoken, note) VALUES (?1, 1, ?2)
                 ON CONFLICT (key) DO UPDATE SET spoken = 1, note = excluded.note",
                (key, note),
            )?;
            Ok(())
        })
    }
}

fn accept(tx: &Connection, m: &Inbound) -> Result<Intake, StoreError> {
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

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("a.db")).unwrap();
        (dir, s)
    }

    #[test]
    fn the_last_overheard_message_is_one_to_come_back_to_until_it_is_spoken_to_or_too_old() {
        let (_d, s) = store();
        let id = |i: Intake| match i {
            Intake::Accepted(id) => id,
            other => panic!("{other:?}"),
        };
        assert_eq!(s.last_overheard(0).unwrap(), None);
        let first = id(s.record_overheard(&inbound("C1:1", 1.0), "C1").unwrap());
        let second = id(s.record_overheard(&inbound("C1:2", 2.0), "C1").unwrap());
        assert_eq!(
            s.record_overheard(&inbound("C1:2", 2.0), "C1").unwrap(),
            Intake::Duplicate
        );
        // A message that addresses the soul is not overheard, and hides nothing.
        id(s.accept_inbound(&inbound("C1:3", 3.0)).unwrap());
        let last = s.last_overheard(0).unwrap().unwrap();
        assert_eq!((last.item.id, last.place.as_str()), (second, "C1"));
        assert_eq!(last.item.status, InboxStatus::Overheard);
        assert_eq!(
            s.last_overheard(last.item.received_us + 1).unwrap(),
            None,
            "too old"
        );
        // Spoken to once: not again, and the one before it is not brought up instead.
        assert!(s.reopen_overheard(second).unwrap());
        assert!(!s.reopen_overheard(second).unwrap());
        assert_eq!(
            s.inbox_item(second).unwrap().unwrap().status,
            InboxStatus::Pending
        );
        assert_eq!(s.last_overheard(0).unwrap(), None);
        assert_eq!(
            s.inbox_item(first).unwrap().unwrap().status,
            InboxStatus::Overheard
        );
    }

    #[test]
    fn a_row_whose_status_this_anima_does_not_know_is_an_error_not_a_pending_row() {
        let (_d, s) = store();
        let Intake::Accepted(id) = s.accept_inbound(&inbound("C1:1", 1.0)).unwrap() else {
            panic!()
        };
        s.conn()
            .execute("UPDATE inbox SET status = 'archived' WHERE id = ?1", [id])
            .unwrap();
        match s.inbox_item(id) {
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
                    .unwrap()
                {
                    Intake::Accepted(id) => id,
                    other => panic!("{other:?}"),
                }
            })
            .collect();
        // Pending: the turn had not committed.
        s.set_stream_ref(ids[0], "9.1").unwrap();
        assert!(s.mark_stopped(ids[0], "Half a").unwrap());
        let stopped = s.inbox_item(ids[0]).unwrap().unwrap();
        assert_eq!(stopped.status, InboxStatus::Stopped);
        assert_eq!(stopped.reply.as_deref(), Some("Half a"));
        assert_eq!(stopped.stream_ref.as_deref(), Some("9.1"));
        // The turn committed as the stop came: still stopped, its reply not delivered.
        s.set_inbox_reply(ids[1], "The whole answer").unwrap();
        assert!(s.mark_stopped(ids[1], "The wh").unwrap());
        assert_eq!(
            s.inbox_item(ids[1]).unwrap().unwrap().reply.as_deref(),
            Some("The wh")
        );
        // The stop came after the whole reply was said: it cut nothing, and the reply is
        // delivered like any other.
        let whole = match s.accept_inbound(&inbound("C1:4.0", 4.0)).unwrap() {
            Intake::Accepted(id) => id,
            other => panic!("{other:?}"),
        };
        s.set_inbox_reply(whole, "The whole answer").unwrap();
        assert!(!s.mark_stopped(whole, "The whole answer\n").unwrap());
        let kept = s.inbox_item(whole).unwrap().unwrap();
        assert_eq!(kept.status, InboxStatus::Replying);
        assert_eq!(kept.reply.as_deref(), Some("The whole answer"));
        // Part of the reply is out: it is delivered to the end.
        s.set_inbox_reply(ids[2], "Long").unwrap();
        s.mark_part_posted(ids[2], 1, "9.3", false).unwrap();
        assert!(!s.mark_stopped(ids[2], "").unwrap());
        assert_eq!(
            s.inbox_item(ids[2]).unwrap().unwrap().status,
            InboxStatus::Replying
        );
        // A stopped row is not claimed again.
        assert_eq!(s.claim_next("C1:1.0").unwrap().unwrap().id, ids[2]);
    }

    #[test]
    fn twins_and_retries_are_one_row_and_order_is_by_seq() {
        let (_d, s) = store();
        let Intake::Accepted(second) = s.accept_inbound(&inbound("C1:2.0001", 2.0001)).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            s.accept_inbound(&inbound("C1:2.0001", 2.0001)).unwrap(),
            Intake::Duplicate
        );
        let Intake::Accepted(first) = s.accept_inbound(&inbound("C1:1.5", 1.5)).unwrap() else {
            panic!()
        };
        let item = s.claim_next("C1:1.0").unwrap().unwrap();
        assert_eq!((item.id, item.attempts), (first, 0), "lower seq first");
        assert_eq!(
            s.claim_next("C1:1.0").unwrap().unwrap().attempts,
            0,
            "waiting is no attempt"
        );
        s.conn()
            .execute("UPDATE inbox SET attempts = 1 WHERE id = ?1", [first])
            .unwrap();
        s.set_inbox_reply(first, "hi").unwrap();
        assert_eq!(
            s.claim_next("C1:1.0").unwrap().unwrap().attempts,
            2,
            "a fixed reply counts its delivery"
        );
        s.mark_done(first).unwrap();
        assert_eq!(s.claim_next("C1:1.0").unwrap().unwrap().id, second);
        assert_eq!(s.open_conversations().unwrap(), vec!["C1:1.0".to_string()]);
        s.mark_failed(second, "poison", Some("9.9")).unwrap();
        assert_eq!(s.references_held(second).unwrap(), ["9.9"], "the apology");
        assert!(s.claim_next("C1:1.0").unwrap().is_none());
        assert!(s.open_conversations().unwrap().is_empty());
    }

    /// Begins row `id`'s turn as the engine does (its attempt counted and marked as under way).
    fn begin(s: &SqliteStore, id: i64) {
        s.begin_turn(&crate::memory::TurnStart {
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
        .unwrap();
    }

    #[test]
    fn an_attempt_a_dying_process_left_is_an_interruption_and_a_caught_one_a_failure() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        let first = SqliteStore::open(&path).unwrap();
        let Intake::Accepted(id) = first.accept_inbound(&inbound("C1:1", 1.0)).unwrap() else {
            panic!()
        };
        let item = first.claim_next("C1:1.0").unwrap().unwrap();
        assert_eq!(
            (item.attempts, item.failures, item.interruptions),
            (0, 0, 0)
        );
        begin(&first, id);
        // Its own claim again (a worker looking while the turn runs) counts nothing.
        let item = first.claim_next("C1:1.0").unwrap().unwrap();
        assert_eq!(
            (item.attempts, item.failures, item.interruptions),
            (1, 0, 0)
        );
        // The process dies in the turn: the next one counts an interruption, once.
        drop(first);
        let second = SqliteStore::open(&path).unwrap();
        let item = second.claim_next("C1:1.0").unwrap().unwrap();
        assert_eq!(
            (item.attempts, item.failures, item.interruptions),
            (1, 0, 1)
        );
        let again = second.claim_next("C1:1.0").unwrap().unwrap();
        assert_eq!(again.interruptions, 1, "counted once");
        assert!(!again.exhausted());
        // Its turn fails, caught: a failure, and the attempt is over.
        begin(&second, id);
        assert_eq!(second.note_failure(id).unwrap(), 1);
        assert_eq!(second.note_failure(id).unwrap(), 1, "no attempt under way");
        drop(second);
        let third = SqliteStore::open(&path).unwrap();
        let item = third.claim_next("C1:1.0").unwrap().unwrap();
        assert_eq!(
            (item.attempts, item.failures, item.interruptions),
            (2, 1, 1),
            "a failed attempt is not also an interruption"
        );
        assert_eq!(third.inbox_item(id).unwrap().unwrap(), item);
    }

    #[test]
    fn a_row_is_given_up_after_three_failures_or_ten_interruptions() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        let s = SqliteStore::open(&path).unwrap();
        let accept = |origin: &str, seq: f64| match s.accept_inbound(&inbound(origin, seq)) {
            Ok(Intake::Accepted(id)) => id,
            other => panic!("{other:?}"),
        };
        let (poison, crashing) = (accept("C1:1", 1.0), accept("C1:2", 2.0));
        for n in 1..=MAX_FAILURES {
            assert!(!s.claim_next("C1:1.0").unwrap().unwrap().exhausted());
            begin(&s, poison);
            assert_eq!(s.note_failure(poison).unwrap(), n);
        }
        let item = s.claim_next("C1:1.0").unwrap().unwrap();
        assert_eq!((item.id, item.failures), (poison, MAX_FAILURES));
        assert!(item.exhausted());
        s.mark_failed(poison, "poison", None).unwrap();
        drop(s);

        // A fixed reply whose delivery every process dies in: each start counts one.
        let mut s = SqliteStore::open(&path).unwrap();
        s.set_inbox_reply(crashing, "hi").unwrap();
        for n in 1..=MAX_INTERRUPTIONS {
            let item = s.claim_next("C1:1.0").unwrap().unwrap();
            assert_eq!((item.id, item.interruptions), (crashing, n - 1));
            assert!(!item.exhausted());
            drop(s);
            s = SqliteStore::open(&path).unwrap();
        }
        let item = s.claim_next("C1:1.0").unwrap().unwrap();
        assert_eq!(
            (item.attempts, item.interruptions),
            (MAX_INTERRUPTIONS, MAX_INTERRUPTIONS)
        );
        assert!(item.exhausted());
        assert_eq!(
            s.inbox_item(crashing).unwrap().unwrap(),
            item,
            "the store holds what the claim says: an exhausted row begins no attempt"
        );
    }

    #[test]
    fn the_references_the_rows_of_a_conversation_hold_are_known() {
        let (_d, s) = store();
        let accept = |origin: &str, seq: f64| match s.accept_inbound(&inbound(origin, seq)) {
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
        let Intake::Accepted(other) = s.accept_inbound(&elsewhere).unwrap() else {
            panic!()
        };
        s.set_inbox_reply(first, "a long reply").unwrap();
        s.set_stream_ref(first, "9.1").unwrap();
        s.mark_part_posted(first, 1, "9.1", false).unwrap();
        s.mark_part_posted(first, 2, "9.2", false).unwrap();
        s.mark_part_posted(first, 3, "9.3", true).unwrap();
        s.set_stream_ref(second, "9.4").unwrap();
        s.mark_part_posted(other, 1, "8.1", true).unwrap();
        let held = |id| {
            let mut refs = s.references_held(id).unwrap();
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
        assert_eq!(s.accept_inbound(&m).unwrap(), Intake::NotParticipating);
        let Intake::Accepted(id) = s.accept_inbound(&inbound("C1:2.0", 2.0)).unwrap() else {
            panic!()
        };
        s.mark_part_posted(id, 1, "3.0", true).unwrap();
        let done = s.inbox_item(id).unwrap().unwrap();
        assert_eq!(
            (done.status, done.reply_ref.as_deref()),
            (InboxStatus::Done, Some("3.0"))
        );
        assert!(matches!(s.accept_inbound(&m).unwrap(), Intake::Accepted(_)));
    }

    #[test]
    fn a_noted_conversation_is_joined_and_its_note_travels_with_its_messages() {
        let (_d, s) = store();
        s.note_conversation("C1:1.0", "assistant").unwrap();
        let mut m = inbound("C1:5.0", 5.0);
        m.requires_spoken = true;
        let Intake::Accepted(id) = s.accept_inbound(&m).unwrap() else {
            panic!()
        };
        assert_eq!(
            s.inbox_item(id).unwrap().unwrap().note.as_deref(),
            Some("assistant")
        );
        assert_eq!(
            s.conversation_address("C1:1.0").unwrap(),
            Some(("{\"to\":\"C1\"}".to_string(), Some("assistant".to_string())))
        );
    }
}
