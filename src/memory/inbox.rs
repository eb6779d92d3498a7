//! The durable Slack inbox: accepted messages, in order per conversation, until their reply
//! is posted. A row moves pending → replying (its reply fixed, in the turn's transaction) →
//! done (every part posted, each part's progress recorded as it goes), or → failed when it
//! could not be answered within `MAX_ATTEMPTS` pick-ups (it then got the short apology).

use rusqlite::{OptionalExtension, Row};

use super::{now_ms, now_us, Store, StoreError};

/// A message accepted from Slack, about to be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewInbound {
    pub event_id: Option<String>,
    pub channel: String,
    pub ts: String,
    pub thread_key: String,
    pub reply_thread_ts: Option<String>,
    pub user_id: String,
    pub text: String,
    pub assistant_thread: bool,
    /// Accept only if the soul has spoken in this (channel, thread_ts).
    pub only_if_participating: Option<(String, String)>,
}

/// What became of an inbound message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intake {
    Accepted(i64),
    /// The same message (channel + ts) is already in the inbox.
    Duplicate,
    /// A thread message without a mention, in a thread the soul has not spoken in.
    NotParticipating,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InboxStatus {
    Pending,
    Replying,
    Done,
    Failed,
}

/// How often a row is picked up before it is given up: a row that panics or fails every
/// time (a poison row) must not hold its conversation.
pub const MAX_ATTEMPTS: i64 = 3;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InboxItem {
    pub id: i64,
    pub channel: String,
    pub ts: String,
    pub thread_key: String,
    pub reply_thread_ts: Option<String>,
    pub user_id: String,
    pub text: String,
    pub assistant_thread: bool,
    pub status: InboxStatus,
    pub reply: Option<String>,
    pub parts_posted: i64,
    pub reply_ts: Option<String>,
    /// When it was accepted (unix microseconds).
    pub received_us: i64,
    /// Pick-ups so far, this one included.
    pub attempts: i64,
}

impl InboxItem {
    /// The working-memory source of this message's user entry.
    pub fn source(&self) -> String {
        format!("slack:{}:{}", self.channel, self.ts)
    }
}

const COLUMNS: &str = "id, channel, ts, thread_key, reply_thread_ts, user_id, text, assistant_thread, status, reply, parts_posted, reply_ts, received_us, attempts";

fn from_row(r: &Row) -> rusqlite::Result<InboxItem> {
    let status: String = r.get(8)?;
    Ok(InboxItem {
        id: r.get(0)?,
        channel: r.get(1)?,
        ts: r.get(2)?,
        thread_key: r.get(3)?,
        reply_thread_ts: r.get(4)?,
        user_id: r.get(5)?,
        text: r.get(6)?,
        assistant_thread: r.get(7)?,
        status: match status.as_str() {
            "replying" => InboxStatus::Replying,
            "done" => InboxStatus::Done,
            "failed" => InboxStatus::Failed,
            _ => InboxStatus::Pending,
        },
        reply: r.get(9)?,
        parts_posted: r.get(10)?,
        reply_ts: r.get(11)?,
        received_us: r.get(12)?,
        attempts: r.get(13)?,
    })
}

impl Store {
    /// Writes an accepted message, unless it is a duplicate or needs a participation the
    /// soul does not have. One transaction, so two twins racing cannot both be accepted.
    pub fn accept_inbound(&self, m: &NewInbound) -> Result<Intake, StoreError> {
        self.write(|tx| accept(tx, m))
    }

    /// Picks up the conversation's next unfinished message, oldest ts first (numerically: a
    /// ts is seconds.microseconds, well within a double's precision), and counts the pick-up.
    pub fn claim_next(&self, thread_key: &str) -> Result<Option<InboxItem>, StoreError> {
        self.write(|tx| {
            Ok(tx
                .prepare_cached(&format!(
                    "UPDATE inbox SET attempts = attempts + 1
                     WHERE id = (SELECT id FROM inbox WHERE thread_key = ?1 AND status IN ('pending', 'replying')
                                 ORDER BY CAST(ts AS REAL), ts LIMIT 1)
                     RETURNING {COLUMNS}"
                ))?
                .query_row([thread_key], from_row)
                .optional()?)
        })
    }

    /// The conversation's next unfinished message, oldest ts first (numerically: a ts is
    /// seconds.microseconds, well within a double's precision).
    pub fn next_open(&self, thread_key: &str) -> Result<Option<InboxItem>, StoreError> {
        Ok(self
            .conn()
            .prepare_cached(&format!(
                "SELECT {COLUMNS} FROM inbox WHERE thread_key = ?1 AND status IN ('pending', 'replying') ORDER BY CAST(ts AS REAL), ts LIMIT 1"
            ))?
            .query_row([thread_key], from_row)
            .optional()?)
    }

    /// Conversations with unfinished messages (to resume after a restart).
    pub fn open_threads(&self) -> Result<Vec<String>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare(
            "SELECT DISTINCT thread_key FROM inbox WHERE status IN ('pending', 'replying')",
        )?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    pub fn inbox_item(&self, id: i64) -> Result<Option<InboxItem>, StoreError> {
        Ok(self
            .conn()
            .prepare_cached(&format!("SELECT {COLUMNS} FROM inbox WHERE id = ?1"))?
            .query_row([id], from_row)
            .optional()?)
    }

    /// Fixes the reply of a message whose turn did not commit (the model failed).
    pub fn set_inbox_reply(&self, id: i64, reply: &str) -> Result<(), StoreError> {
        self.write(|tx| {
            tx.execute(
                "UPDATE inbox SET status = 'replying', reply = ?2 WHERE id = ?1 AND status = 'pending'",
                (id, reply),
            )?;
            Ok(())
        })
    }

    /// Records that parts up to `parts_posted` are in Slack; the first part's ts is kept, and
    /// the thread is remembered as one the soul has spoken in. `last`: the row is done.
    pub fn mark_part_posted(
        &self,
        id: i64,
        parts_posted: i64,
        ts: &str,
        participation: Option<(&str, &str)>,
        last: bool,
    ) -> Result<(), StoreError> {
        self.write(|tx| {
            tx.prepare_cached(
                "UPDATE inbox SET parts_posted = ?2, reply_ts = coalesce(reply_ts, ?3),
                 status = CASE WHEN ?4 THEN 'done' ELSE status END,
                 done_at = CASE WHEN ?4 THEN ?5 ELSE done_at END
             WHERE id = ?1",
            )?
            .execute((id, parts_posted, ts, last, now_ms()))?;
            if let Some((channel, thread_ts)) = participation {
                tx.prepare_cached(
                "INSERT OR IGNORE INTO slack_participation (channel, thread_ts) VALUES (?1, ?2)",
            )?
            .execute((channel, thread_ts))?;
            }
            Ok(())
        })
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

    /// Gives a row up: it was answered with the apology (or could not be), and `failure`
    /// says why, for the operator.
    pub fn mark_failed(&self, id: i64, failure: &str) -> Result<(), StoreError> {
        self.write(|tx| {
            tx.execute(
                "UPDATE inbox SET status = 'failed', failure = ?2, done_at = ?3 WHERE id = ?1",
                (id, failure, now_ms()),
            )?;
            Ok(())
        })
    }

    /// Where a conversation lives in Slack: (channel, reply thread ts, the latest message's ts).
    pub fn slack_location(
        &self,
        thread_key: &str,
    ) -> Result<Option<(String, Option<String>, String)>, StoreError> {
        Ok(self
            .conn()
            .prepare_cached("SELECT channel, reply_thread_ts, ts FROM inbox WHERE thread_key = ?1 ORDER BY id DESC LIMIT 1")?
            .query_row([thread_key], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .optional()?)
    }

    /// Remembers an assistant thread (from `assistant_thread_started`): the soul takes part in
    /// it from the start, and shows its working sign as the assistant status.
    pub fn mark_assistant_thread(&self, channel: &str, thread_ts: &str) -> Result<(), StoreError> {
        self.write(|tx| {
            tx.execute(
                "INSERT INTO slack_participation (channel, thread_ts, kind) VALUES (?1, ?2, 'assistant')
                 ON CONFLICT (channel, thread_ts) DO UPDATE SET kind = 'assistant'",
                (channel, thread_ts),
            )?;
            Ok(())
        })
    }
}

fn accept(tx: &rusqlite::Connection, m: &NewInbound) -> Result<Intake, StoreError> {
    if let Some((channel, thread_ts)) = &m.only_if_participating {
        let spoke: Option<i64> = tx
            .prepare_cached(
                "SELECT 1 FROM slack_participation WHERE channel = ?1 AND thread_ts = ?2",
            )?
            .query_row((channel, thread_ts), |r| r.get(0))
            .optional()?;
        if spoke.is_none() {
            return Ok(Intake::NotParticipating);
        }
    }
    let assistant_thread = match &m.reply_thread_ts {
            Some(t) => tx
                .prepare_cached(
                    "SELECT 1 FROM slack_participation WHERE channel = ?1 AND thread_ts = ?2 AND kind = 'assistant'",
                )?
                .query_row((&m.channel, t), |r| r.get::<_, i64>(0))
                .optional()?
                .is_some(),
            None => false,
        };
    let inserted = tx
            .prepare_cached(
                "INSERT OR IGNORE INTO inbox (event_id, channel, ts, thread_key, reply_thread_ts, user_id, text,
                     assistant_thread, received_us)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?
            .execute(rusqlite::params![
                m.event_id,
                m.channel,
                m.ts,
                m.thread_key,
                m.reply_thread_ts,
                m.user_id,
                m.text,
                m.assistant_thread || assistant_thread,
                now_us()
            ])?;
    let id = tx.last_insert_rowid();
    Ok(if inserted == 1 {
        Intake::Accepted(id)
    } else {
        Intake::Duplicate
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inbound(ts: &str) -> NewInbound {
        NewInbound {
            event_id: Some(format!("Ev{ts}")),
            channel: "C1".into(),
            ts: ts.into(),
            thread_key: "C1:1.0".into(),
            reply_thread_ts: Some("1.0".into()),
            user_id: "U1".into(),
            text: "hi".into(),
            assistant_thread: false,
            only_if_participating: None,
        }
    }

    #[test]
    fn twins_and_retries_are_one_row_and_order_is_by_ts() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("a.db")).unwrap();
        let Intake::Accepted(second) = s.accept_inbound(&inbound("1700000002.000100")).unwrap()
        else {
            panic!()
        };
        let mut twin = inbound("1700000002.000100");
        twin.event_id = Some("EvOther".into());
        assert_eq!(s.accept_inbound(&twin).unwrap(), Intake::Duplicate);
        let Intake::Accepted(first) = s.accept_inbound(&inbound("1700000001.000100")).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            s.next_open("C1:1.0").unwrap().unwrap().id,
            first,
            "older ts first"
        );
        s.mark_done(first).unwrap();
        assert_eq!(s.next_open("C1:1.0").unwrap().unwrap().id, second);
        assert_eq!(s.open_threads().unwrap(), vec!["C1:1.0".to_string()]);
    }

    #[test]
    fn thread_messages_need_participation() {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::open(&dir.path().join("a.db")).unwrap();
        let mut m = inbound("5.0");
        m.only_if_participating = Some(("C1".into(), "1.0".into()));
        assert_eq!(s.accept_inbound(&m).unwrap(), Intake::NotParticipating);
        let Intake::Accepted(id) = s.accept_inbound(&inbound("2.0")).unwrap() else {
            panic!()
        };
        s.mark_part_posted(id, 1, "3.0", Some(("C1", "1.0")), true)
            .unwrap();
        assert_eq!(s.inbox_item(id).unwrap().unwrap().status, InboxStatus::Done);
        assert!(matches!(s.accept_inbound(&m).unwrap(), Intake::Accepted(_)));
        assert_eq!(
            s.inbox_item(id).unwrap().unwrap().reply_ts.as_deref(),
            Some("3.0")
        );
    }
}
