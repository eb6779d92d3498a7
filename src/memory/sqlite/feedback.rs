//! Feedback on replies and first times on SQLite: one row per (reply, person), the latest
//! value they gave it, and one row per (kind, place) done once.

use async_trait::async_trait;
use rusqlite::OptionalExtension;

use super::{Result, Sqlite};
use crate::memory::faces::{Feedback, SamePlace};
use crate::memory::{now_ms, Judged, Verdict};

#[async_trait]
impl Feedback for Sqlite {
    async fn record_feedback(
        &self,
        reference: &str,
        same_place: SamePlace,
        person: &str,
        verdict: Verdict,
    ) -> Result<Judged> {
        let (reference, person) = (reference.to_owned(), person.to_owned());
        self.call(move |db| {
            db.write(|tx| {
                let rows: Vec<(i64, String)> = tx
                    .prepare_cached(
                        "SELECT id, address FROM inbox WHERE reply_ref = ?1
                     UNION SELECT id, address FROM inbox WHERE stream_ref = ?1
                     ORDER BY id",
                    )?
                    .query_map([&reference], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<std::result::Result<_, _>>()?;
                let Some((inbox, _)) = rows.into_iter().find(|(_, a)| same_place(a)) else {
                    return Ok(Judged::UnknownReply);
                };
                let before: Option<String> = tx
                    .prepare_cached(
                        "SELECT value FROM feedback WHERE inbox_id = ?1 AND person = ?2",
                    )?
                    .query_row((inbox, &person), |r| r.get(0))
                    .optional()?;
                tx.prepare_cached(
                "INSERT INTO feedback (inbox_id, person, value, at_ms) VALUES (?1, ?2, ?3, ?4)
                 ON CONFLICT (inbox_id, person) DO UPDATE SET value = excluded.value, at_ms = excluded.at_ms",
            )?
            .execute((inbox, &person, verdict.as_str(), now_ms()))?;
                Ok(Judged::Stored {
                    inbox,
                    changed: before.as_deref() != Some(verdict.as_str()),
                })
            })
        })
        .await
    }

    async fn feedback_on(&self, reference: &str) -> Result<Vec<(String, Verdict)>> {
        let reference = reference.to_owned();
        self.call(move |db| {
            let conn = db.conn();
            let mut stmt = conn.prepare_cached(
                "SELECT f.person, f.value FROM feedback f JOIN inbox i ON i.id = f.inbox_id
             WHERE i.reply_ref = ?1 OR i.stream_ref = ?1 ORDER BY f.person",
            )?;
            let rows = stmt
                .query_map([&reference], |r| {
                    Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
                })?
                .collect::<std::result::Result<Vec<_>, _>>()?;
            rows.into_iter().map(|(p, v)| Ok((p, v.parse()?))).collect()
        })
        .await
    }

    async fn first_time(&self, kind: &str, place: &str) -> Result<bool> {
        let (kind, place) = (kind.to_owned(), place.to_owned());
        self.call(move |db| {
            db.write(|tx| {
                let n = tx
                    .prepare_cached(
                        "INSERT INTO openings (kind, place, at_ms) VALUES (?1, ?2, ?3)
                     ON CONFLICT (kind, place) DO NOTHING",
                    )?
                    .execute((&kind, &place, now_ms()))?;
                Ok(n == 1)
            })
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::faces::Inbox;
    use crate::memory::{Inbound, Intake};

    fn store() -> (tempfile::TempDir, Sqlite) {
        let dir = tempfile::tempdir().unwrap();
        let s = Sqlite::open(&dir.path().join("a.db")).unwrap();
        (dir, s)
    }

    fn inbound(origin: &str, place: &str, seq: f64) -> Inbound {
        Inbound {
            origin: origin.into(),
            conversation: format!("{place}:1.0"),
            seq,
            address: place.into(),
            user_id: "U1".into(),
            text: "hi".into(),
            requires_spoken: false,
        }
    }

    async fn answered(s: &Sqlite, origin: &str, place: &str, reference: &str) -> i64 {
        let Intake::Accepted(id) = s
            .accept_inbound(&inbound(origin, place, 1.0))
            .await
            .unwrap()
        else {
            panic!("accepted")
        };
        s.mark_part_posted(id, 1, reference, true).await.unwrap();
        id
    }

    fn at(place: &'static str) -> SamePlace {
        Box::new(move |a: &str| a == place)
    }

    #[tokio::test]
    async fn one_row_per_reply_and_person_with_the_latest_value() {
        let (_d, s) = store();
        let id = answered(&s, "o1", "P1", "9.0").await;
        assert_eq!(
            s.record_feedback("9.0", at("P1"), "U1", Verdict::Good)
                .await
                .unwrap(),
            Judged::Stored {
                inbox: id,
                changed: true
            }
        );
        assert_eq!(
            s.record_feedback("9.0", at("P1"), "U1", Verdict::Good)
                .await
                .unwrap(),
            Judged::Stored {
                inbox: id,
                changed: false
            },
            "the same click again changes nothing"
        );
        s.record_feedback("9.0", at("P1"), "U1", Verdict::Bad)
            .await
            .unwrap();
        s.record_feedback("9.0", at("P1"), "U2", Verdict::Good)
            .await
            .unwrap();
        assert_eq!(
            s.feedback_on("9.0").await.unwrap(),
            vec![
                ("U1".to_string(), Verdict::Bad),
                ("U2".to_string(), Verdict::Good)
            ]
        );
    }

    #[tokio::test]
    async fn a_message_the_soul_never_sent_or_from_another_place_is_unknown() {
        let (_d, s) = store();
        answered(&s, "o1", "P1", "9.0").await;
        assert_eq!(
            s.record_feedback("8.0", Box::new(|_| true), "U1", Verdict::Good)
                .await
                .unwrap(),
            Judged::UnknownReply
        );
        assert_eq!(
            s.record_feedback("9.0", at("P2"), "U1", Verdict::Good)
                .await
                .unwrap(),
            Judged::UnknownReply,
            "the same reference in another place is another message"
        );
        assert!(s.feedback_on("9.0").await.unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_streamed_reply_is_found_by_its_stream_reference() {
        let (_d, s) = store();
        let Intake::Accepted(id) = s.accept_inbound(&inbound("o2", "P1", 2.0)).await.unwrap()
        else {
            panic!("accepted")
        };
        s.set_stream_ref(id, "7.5").await.unwrap();
        assert_eq!(
            s.record_feedback("7.5", Box::new(|_| true), "U3", Verdict::Bad)
                .await
                .unwrap(),
            Judged::Stored {
                inbox: id,
                changed: true
            }
        );
    }

    #[tokio::test]
    async fn the_first_time_only_and_across_a_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.db");
        {
            let s = Sqlite::open(&path).unwrap();
            assert!(s.first_time("greeting", "D1").await.unwrap());
            assert!(!s.first_time("greeting", "D1").await.unwrap());
            assert!(s.first_time("title", "D1").await.unwrap(), "another kind");
            assert!(
                s.first_time("greeting", "D2").await.unwrap(),
                "another place"
            );
        }
        let s = Sqlite::open(&path).unwrap();
        assert!(!s.first_time("greeting", "D1").await.unwrap(), "remembered");
    }
}
