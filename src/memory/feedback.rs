//! What people say of the soul's replies: one row per (reply, person), the latest value
//! they gave it. A reply is named by the surface's reference of the message it went into
//! (the first part delivered, or the message it was streamed into); the surface decides
//! which clicks are worth recording. Knows nothing of buttons or Slack.

use rusqlite::OptionalExtension;

use super::{now_ms, SqliteStore, StoreError};

pub use super::records::feedback::{Judged, Verdict};

impl SqliteStore {
    /// Records `person`'s verdict on the reply that went into the message `reference`, in one
    /// write transaction. `same_place` is asked about each candidate row's address (a
    /// reference is unique only within its place): the first row it accepts is judged.
    pub fn record_feedback(
        &self,
        reference: &str,
        same_place: impl Fn(&str) -> bool,
        person: &str,
        verdict: Verdict,
    ) -> Result<Judged, StoreError> {
        self.write(|tx| {
            let rows: Vec<(i64, String)> = tx
                .prepare_cached(
                    "SELECT id, address FROM inbox WHERE reply_ref = ?1
                     UNION SELECT id, address FROM inbox WHERE stream_ref = ?1
                     ORDER BY id",
                )?
                .query_map([reference], |r| Ok((r.get(0)?, r.get(1)?)))?
                .collect::<Result<_, _>>()?;
            let Some((inbox, _)) = rows.into_iter().find(|(_, a)| same_place(a)) else {
                return Ok(Judged::UnknownReply);
            };
            let before: Option<String> = tx
                .prepare_cached("SELECT value FROM feedback WHERE inbox_id = ?1 AND person = ?2")?
                .query_row((inbox, person), |r| r.get(0))
                .optional()?;
            tx.prepare_cached(
                "INSERT INTO feedback (inbox_id, person, value, at_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (inbox_id, person) DO UPDATE SET value = excluded.value, at_ms = excluded.at_ms",
            )?
            .execute((inbox, person, verdict.as_str(), now_ms()))?;
            Ok(Judged::Stored {
                inbox,
                changed: before.as_deref() != Some(verdict.as_str()),
            })
        })
    }

    /// Every person's latest verdict on the reply that went into the message `reference`.
    pub fn feedback_on(&self, reference: &str) -> Result<Vec<(String, Verdict)>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn.prepare_cached(
            "SELECT f.person, f.value FROM feedback f JOIN inbox i ON i.id = f.inbox_id
             WHERE i.reply_ref = ?1 OR i.stream_ref = ?1 ORDER BY f.person",
        )?;
        let rows = stmt
            .query_map([reference], |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })?
            .collect::<Result<Vec<_>, _>>()?;
        rows.into_iter().map(|(p, v)| Ok((p, v.parse()?))).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::{Inbound, Intake};

    fn store() -> (tempfile::TempDir, SqliteStore) {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("a.db")).unwrap();
        (dir, s)
    }

    fn answered(s: &SqliteStore, origin: &str, place: &str, reference: &str) -> i64 {
        let Intake::Accepted(id) = s
            .accept_inbound(&Inbound {
                origin: origin.into(),
                conversation: format!("{place}:1.0"),
                seq: 1.0,
                address: place.into(),
                user_id: "U1".into(),
                text: "hi".into(),
                requires_spoken: false,
            })
            .unwrap()
        else {
            panic!("accepted")
        };
        s.mark_part_posted(id, 1, reference, true).unwrap();
        id
    }

    #[test]
    fn one_row_per_reply_and_person_with_the_latest_value() {
        let (_d, s) = store();
        let id = answered(&s, "o1", "P1", "9.0");
        let here = |a: &str| a == "P1";
        assert_eq!(
            s.record_feedback("9.0", here, "U1", Verdict::Good).unwrap(),
            Judged::Stored {
                inbox: id,
                changed: true
            }
        );
        assert_eq!(
            s.record_feedback("9.0", here, "U1", Verdict::Good).unwrap(),
            Judged::Stored {
                inbox: id,
                changed: false
            },
            "the same click again changes nothing"
        );
        s.record_feedback("9.0", here, "U1", Verdict::Bad).unwrap();
        s.record_feedback("9.0", here, "U2", Verdict::Good).unwrap();
        assert_eq!(
            s.feedback_on("9.0").unwrap(),
            vec![
                ("U1".to_string(), Verdict::Bad),
                ("U2".to_string(), Verdict::Good)
            ]
        );
    }

    #[test]
    fn a_message_the_soul_never_sent_or_from_another_place_is_unknown() {
        let (_d, s) = store();
        answered(&s, "o1", "P1", "9.0");
        assert_eq!(
            s.record_feedback("8.0", |_| true, "U1", Verdict::Good)
                .unwrap(),
            Judged::UnknownReply
        );
        assert_eq!(
            s.record_feedback("9.0", |a| a == "P2", "U1", Verdict::Good)
                .unwrap(),
            Judged::UnknownReply,
            "the same reference in another place is another message"
        );
        assert!(s.feedback_on("9.0").unwrap().is_empty());
    }

    #[test]
    fn a_streamed_reply_is_found_by_its_stream_reference() {
        let (_d, s) = store();
        let Intake::Accepted(id) = s
            .accept_inbound(&Inbound {
                origin: "o2".into(),
                conversation: "P1:1.0".into(),
                seq: 2.0,
                address: "P1".into(),
                user_id: "U1".into(),
                text: "hi".into(),
                requires_spoken: false,
            })
            .unwrap()
        else {
            panic!("accepted")
        };
        s.set_stream_ref(id, "7.5").unwrap();
        assert_eq!(
            s.record_feedback("7.5", |_| true, "U3", Verdict::Bad)
                .unwrap(),
            Judged::Stored {
                inbox: id,
                changed: true
            }
        );
    }
}
