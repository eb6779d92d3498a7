//! What a dream reads and writes: each conversation's backlog (its working memory older than
//! what it keeps: the newest `[dream] keep_recent` entries and those of the last hour), the
//! consolidation of one batch of it, the dream's own record and report, and the upkeep after
//! (ANALYZE, an incremental vacuum).
//!
//! A consolidation is one write transaction: the summary that now covers the batch, its
//! episodic memories, the user models it refreshed, and the deletion of exactly the entries
//! the summary covers. A crash before the commit leaves everything as it was (the next dream
//! redoes the batch); after it, nothing is left half done. Never deletes an entry among a
//! conversation's newest `keep_recent`, nor one written since `Keep::since_ms`, nor one no
//! committed summary covers. Knows nothing
//! about how a summary is written: the caller brings it. The face is `sqlite::dreams`; here,
//! the parts of its work it shares.

use rusqlite::{Connection, OptionalExtension};
use serde_json::Value;

use super::{now_ms, StoreError};

pub(crate) use super::records::dream::batch_len;
pub use super::records::dream::{
    Backlog, Consolidated, Consolidation, DreamHold, DreamRow, Episode, Keep, ModelRefresh, Person,
    Upkeep,
};
pub(super) fn since_id(conn: &Connection, thread: &str) -> Result<i64, StoreError> {
    Ok(conn
        .prepare_cached("SELECT since_id FROM threads WHERE thread = ?1")?
        .query_row([thread], |r| r.get(0))
        .optional()?
        .unwrap_or(0))
}

/// The oldest entry of a conversation that a dream keeps (of its newest `keep.entries`, and
/// of those written since `keep.since_ms`): entries before it are the backlog. `None` when
/// there is none before it.
pub(super) fn oldest_kept(
    conn: &Connection,
    thread: &str,
    since: i64,
    keep: Keep,
) -> Result<Option<i64>, StoreError> {
    let entries = i64::from(keep.entries.max(1));
    let newest: Option<i64> = conn
        .prepare_cached(
            "SELECT id FROM working_memory WHERE thread = ?1 AND id > ?2
             ORDER BY id DESC LIMIT 1 OFFSET ?3",
        )?
        .query_row((thread, since, entries - 1), |r| r.get(0))
        .optional()?;
    let Some(newest) = newest else {
        return Ok(None);
    };
    let recent: Option<i64> = conn
        .prepare_cached(
            "SELECT min(id) FROM working_memory WHERE thread = ?1 AND id > ?2 AND created_at >= ?3",
        )?
        .query_row((thread, since, keep.since_ms), |r| r.get(0))?;
    let oldest = recent.map_or(newest, |recent| recent.min(newest));
    let before: i64 = conn
        .prepare_cached(
            "SELECT count(*) FROM working_memory WHERE thread = ?1 AND id > ?2 AND id < ?3",
        )?
        .query_row((thread, since, oldest), |r| r.get(0))?;
    Ok((before > 0).then_some(oldest))
}

/// A conversation's summary, if a dream wrote one.
pub(super) fn summary(
    conn: &Connection,
    thread: &str,
    since: i64,
) -> Result<Option<String>, StoreError> {
    Ok(conn
        .prepare_cached("SELECT summary FROM thread_summaries WHERE thread = ?1 AND since_id = ?2")?
        .query_row((thread, since), |r| r.get(0))
        .optional()?)
}

pub(super) fn last(conn: &Connection) -> Result<Option<DreamRow>, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT id, started_at, finished_at, complete, cause, report FROM dreams
             ORDER BY id DESC LIMIT 1",
        )?
        .query_row([], |r| {
            Ok(DreamRow {
                id: r.get(0)?,
                started_ms: r.get(1)?,
                finished_ms: r.get(2)?,
                complete: r.get::<_, i64>(3)? != 0,
                cause: r.get(4)?,
                report: serde_json::from_str(&r.get::<_, String>(5)?).unwrap_or(Value::Null),
            })
        })
        .optional()?)
}

/// The consolidation's writes; `between` runs after the summary and episodes are written and
/// before anything is deleted (a test fails there to prove the deletion never outlives them).
pub(super) fn consolidate(
    tx: &Connection,
    c: &Consolidation,
    keep: Keep,
    between: &mut dyn FnMut() -> Result<(), StoreError>,
) -> Result<Consolidated, StoreError> {
    if since_id(tx, &c.thread)? != c.since_id {
        // An operator closed the conversation since the batch was read: its working memory
        // stays, and nothing would ever read a summary of it.
        return Ok(Consolidated::default());
    }
    let existing: Option<(i64, i64)> = tx
        .prepare_cached(
            "SELECT covers_through, entries FROM thread_summaries WHERE thread = ?1 AND since_id = ?2",
        )?
        .query_row((&c.thread, c.since_id), |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    if existing.is_some_and(|(through, _)| through >= c.first_id) {
        // Another dream (another process) consolidated this batch meanwhile.
        return Ok(Consolidated::default());
    }
    // Only entries still before what the conversation keeps are covered, whatever the caller
    // read: a batch never reaches into what must be kept.
    let Some(limit) = oldest_kept(tx, &c.thread, c.since_id, keep)? else {
        // Nothing is before what it keeps now (say the clock stepped back since the read).
        return Ok(Consolidated::default());
    };
    let through = c.through_id.min(limit - 1);
    if through < c.first_id {
        return Ok(Consolidated::default());
    }
    let covered: i64 = tx
        .prepare_cached(
            "SELECT count(*) FROM working_memory WHERE thread = ?1 AND id BETWEEN ?2 AND ?3",
        )?
        .query_row((&c.thread, c.first_id, through), |r| r.get(0))?;
    let now = now_ms();
    tx.prepare_cached(
        "INSERT INTO thread_summaries (thread, since_id, summary, covers_through, entries, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (thread, since_id) DO UPDATE SET summary = ?3, covers_through = ?4,
             entries = entries + ?5, updated_at = ?6",
    )?
    .execute((&c.thread, c.since_id, &c.summary, through, covered, now))?;
    for (memory, importance) in &c.episodes {
        tx.prepare_cached(
            "INSERT INTO episodic_memories (thread, memory, importance, created_at) VALUES (?1, ?2, ?3, ?4)",
        )?
        .execute((&c.thread, memory, i64::from((*importance).clamp(1, 10)), now))?;
    }
    let mut models = Vec::new();
    for m in &c.models {
        let version: Option<i64> = tx
            .prepare_cached("SELECT model_version FROM users WHERE user_id = ?1")?
            .query_row([&m.user_id], |r| r.get(0))
            .optional()?;
        // A turn changed the model since the dream read it: its version stands.
        if version == Some(m.version) {
            super::turn::save_model(tx, &m.user_id, &m.model, &m.note, now)?;
            models.push(m.user_id.clone());
        }
    }
    between()?;
    let pruned = tx
        .prepare_cached("DELETE FROM working_memory WHERE thread = ?1 AND id BETWEEN ?2 AND ?3")?
        .execute((&c.thread, c.first_id, through))?;
    Ok(Consolidated {
        pruned: pruned as u64,
        models,
        written: true,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::faces::Dreams;
    use crate::memory::faces::{Admin, Turns, Users};
    use crate::memory::sqlite::Block;
    use crate::memory::sqlite::{run, Sqlite};
    use crate::memory::SqliteStore;
    use crate::memory::{EntryType, NewEntry, TurnRecord};
    use std::sync::Arc;

    /// The newest `entries`, and no entry kept for being recent.
    fn keep(entries: u32) -> Keep {
        Keep {
            entries,
            since_ms: i64::MAX,
        }
    }

    fn store() -> (tempfile::TempDir, Arc<SqliteStore>) {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("a.db")).unwrap();
        (dir, Arc::new(s))
    }

    /// `n` exchanges in `thread`: a message and a reply each (2n entries).
    fn talk(s: &Arc<SqliteStore>, thread: &str, n: usize) {
        for i in 0..n {
            Sqlite::on(s)
                .commit_turn(TurnRecord {
                    thread: thread.into(),
                    user_id: "U1".into(),
                    interaction: i as u64 + 1,
                    entries: vec![
                        NewEntry::new(EntryType::UserMessage, format!("q{i} 日本語 🦀")).user("U1"),
                        NewEntry::new(EntryType::ExternalDialog, format!("a{i} ça va")),
                    ],
                    proactive: true,
                    ..Default::default()
                })
                .block()
                .unwrap();
        }
    }

    fn consolidation(b: &Backlog, summary: &str) -> Consolidation {
        Consolidation {
            thread: b.thread.clone(),
            since_id: b.since_id,
            summary: summary.into(),
            first_id: b.entries[0].id,
            through_id: b.entries.last().unwrap().id,
            episodes: vec![("Tom likes crabs 🦀".into(), 7)],
            models: vec![],
        }
    }

    #[test]
    fn a_consolidation_deletes_only_what_its_summary_covers_and_never_the_newest() {
        let (_d, s) = store();
        talk(&s, "t1", 10);
        talk(&s, "t2", 2);
        assert_eq!(
            Sqlite::on(&s).dream_threads(keep(6)).block().unwrap(),
            ["t1"],
            "t2 has only 4 entries"
        );
        let before = Sqlite::on(&s).thread_entries("t1").block().unwrap();
        let b = Sqlite::on(&s)
            .backlog("t1", keep(6), 5, 100_000)
            .block()
            .unwrap()
            .unwrap();
        assert_eq!(b.entries.len(), 5, "a batch of at most 5");
        assert_eq!(b.left, 9, "20 entries, 6 kept, 5 in this batch");
        assert_eq!(b.entries[0], before[0], "oldest first");
        let done = Sqlite::on(&s)
            .consolidate(consolidation(&b, "They met. 🦀"), keep(6))
            .block()
            .unwrap();
        assert_eq!(done.pruned, 5);
        let after = Sqlite::on(&s).thread_entries("t1").block().unwrap();
        assert_eq!(after, before[5..], "exactly the batch went");
        assert_eq!(
            Sqlite::on(&s)
                .thread_summary("t1")
                .block()
                .unwrap()
                .unwrap(),
            "They met. 🦀"
        );
        assert_eq!(
            Sqlite::on(&s).episodes("t1").block().unwrap()[0].importance,
            7
        );

        // The rest in one batch; the newest six stay.
        let b = Sqlite::on(&s)
            .backlog("t1", keep(6), 100, 100_000)
            .block()
            .unwrap()
            .unwrap();
        assert_eq!((b.entries.len(), b.left), (9, 0));
        assert_eq!(b.summary.as_deref(), Some("They met. 🦀"));
        Sqlite::on(&s)
            .consolidate(consolidation(&b, "All of it."), keep(6))
            .block()
            .unwrap();
        assert_eq!(
            Sqlite::on(&s).thread_entries("t1").block().unwrap(),
            before[14..]
        );
        assert!(Sqlite::on(&s)
            .backlog("t1", keep(6), 100, 100_000)
            .block()
            .unwrap()
            .is_none());
        assert!(Sqlite::on(&s)
            .dream_threads(keep(6))
            .block()
            .unwrap()
            .is_empty());
    }

    #[test]
    fn a_batch_that_reaches_into_the_kept_entries_is_cut_and_a_repeated_one_is_skipped() {
        let (_d, s) = store();
        talk(&s, "t1", 5);
        let all = Sqlite::on(&s).thread_entries("t1").block().unwrap();
        let b = Sqlite::on(&s)
            .backlog("t1", keep(4), 100, 100_000)
            .block()
            .unwrap()
            .unwrap();
        let mut c = consolidation(&b, "s");
        c.through_id = all.last().unwrap().id; // a caller that asks too much
        let done = Sqlite::on(&s)
            .consolidate(c.clone(), keep(4))
            .block()
            .unwrap();
        assert_eq!(done.pruned, 6, "only the 6 before the newest 4");
        assert_eq!(
            Sqlite::on(&s).thread_entries("t1").block().unwrap(),
            all[6..]
        );
        let again = Sqlite::on(&s)
            .consolidate(consolidation(&b, "again"), keep(4))
            .block()
            .unwrap();
        assert!(!again.written, "another dream did it already");
        assert_eq!(
            Sqlite::on(&s)
                .thread_summary("t1")
                .block()
                .unwrap()
                .unwrap(),
            "s"
        );
    }

    #[test]
    fn a_dream_keeps_the_last_hour_however_many_entries_it_holds() {
        let (_d, s) = store();
        talk(&s, "t1", 10);
        let all = Sqlite::on(&s).thread_entries("t1").block().unwrap();
        // The first four exchanges were two hours ago; the other six, minutes ago.
        s.conn()
            .execute(
                "UPDATE working_memory SET created_at = created_at - 7200000 WHERE id <= ?1",
                [all[7].id],
            )
            .unwrap();
        let all = Sqlite::on(&s).thread_entries("t1").block().unwrap();
        let keep = Keep {
            entries: 4,
            since_ms: now_ms() - 3_600_000,
        };
        let b = Sqlite::on(&s)
            .backlog("t1", keep, 100, 100_000)
            .block()
            .unwrap()
            .unwrap();
        assert_eq!(b.entries, all[..8], "only what is older than the hour");
        assert_eq!(b.left, 0);
        // A caller that asks for more is cut at the hour too.
        let mut c = consolidation(&b, "Long ago.");
        c.through_id = all.last().unwrap().id;
        assert_eq!(
            Sqlite::on(&s)
                .consolidate(c.clone(), keep)
                .block()
                .unwrap()
                .pruned,
            8
        );
        assert_eq!(
            Sqlite::on(&s).thread_entries("t1").block().unwrap(),
            all[8..]
        );
        assert!(Sqlite::on(&s)
            .backlog("t1", keep, 100, 100_000)
            .block()
            .unwrap()
            .is_none());
        // Once the hour has passed, the count alone decides.
        let later = Keep {
            since_ms: now_ms() + 3_600_000,
            ..keep
        };
        let b = Sqlite::on(&s)
            .backlog("t1", later, 100, 100_000)
            .block()
            .unwrap()
            .unwrap();
        assert_eq!(b.entries, all[8..16]);
    }

    #[test]
    fn a_batch_all_of_the_last_hour_by_its_commit_deletes_nothing() {
        let (_d, s) = store();
        talk(&s, "t1", 4);
        let before = Sqlite::on(&s).thread_entries("t1").block().unwrap();
        let b = Sqlite::on(&s)
            .backlog("t1", keep(4), 100, 100_000)
            .block()
            .unwrap()
            .unwrap();
        assert_eq!(b.entries, before[..4]);
        // By the commit every entry is of the last hour (the clock stepped back while the
        // model wrote the summary): nothing is before what the conversation keeps, and
        // nothing may be deleted (not `limit - 1` of `i64::MIN`: a panic in a debug build,
        // `i64::MAX` in a release build, i.e. the whole batch deleted).
        let recent = Keep {
            entries: 4,
            since_ms: before[0].created_at,
        };
        let done = Sqlite::on(&s)
            .consolidate(consolidation(&b, "s"), recent)
            .block()
            .unwrap();
        assert_eq!(done.pruned, 0);
        assert!(!done.written, "no summary of entries that all stay");
        assert_eq!(Sqlite::on(&s).thread_entries("t1").block().unwrap(), before);
        assert_eq!(Sqlite::on(&s).thread_summary("t1").block().unwrap(), None);
    }

    #[test]
    fn a_batch_read_before_an_operator_reset_deletes_nothing_of_the_closed_conversation() {
        let (_d, s) = store();
        talk(&s, "t1", 6);
        Sqlite::on(&s)
            .record_user_message("t1", "U1", "Tom", "hi", None)
            .block()
            .unwrap();
        let before = Sqlite::on(&s).thread_entries("t1").block().unwrap();
        let b = Sqlite::on(&s)
            .backlog("t1", keep(4), 100, 100_000)
            .block()
            .unwrap()
            .unwrap();
        // The operator closes the conversation while the dream's call runs: its working
        // memory stays, and no summary of the new conversation may claim it.
        assert!(run(Sqlite::on(&s).reset_thread("t1")).unwrap());
        let done = Sqlite::on(&s)
            .consolidate(consolidation(&b, "old talk"), keep(4))
            .block()
            .unwrap();
        assert!(!done.written, "the batch belongs to a closed conversation");
        assert_eq!(done.pruned, 0);
        assert_eq!(
            Sqlite::on(&s).thread_entries("t1").block().unwrap(),
            before,
            "nothing deleted"
        );
        assert_eq!(Sqlite::on(&s).thread_summary("t1").block().unwrap(), None);
        assert!(Sqlite::on(&s).episodes("t1").block().unwrap().is_empty());
    }

    #[test]
    fn a_failure_between_the_summary_and_the_deletion_leaves_everything_as_it_was() {
        let (_d, s) = store();
        talk(&s, "t1", 6);
        let before = Sqlite::on(&s).thread_entries("t1").block().unwrap();
        let b = Sqlite::on(&s)
            .backlog("t1", keep(4), 100, 100_000)
            .block()
            .unwrap()
            .unwrap();
        let c = consolidation(&b, "never committed");
        let failed = s.write(|tx| {
            consolidate(tx, &c, keep(4), &mut || {
                Err(StoreError::Task("killed between the steps".into()))
            })
        });
        assert!(failed.is_err());
        assert_eq!(
            Sqlite::on(&s).thread_entries("t1").block().unwrap(),
            before,
            "nothing deleted"
        );
        assert_eq!(
            Sqlite::on(&s).thread_summary("t1").block().unwrap(),
            None,
            "no summary either"
        );
        assert!(Sqlite::on(&s).episodes("t1").block().unwrap().is_empty());
        // The next dream redoes the batch.
        let again = Sqlite::on(&s)
            .backlog("t1", keep(4), 100, 100_000)
            .block()
            .unwrap()
            .unwrap();
        assert_eq!(again.entries, b.entries);
        assert_eq!(
            Sqlite::on(&s)
                .consolidate(c.clone(), keep(4))
                .block()
                .unwrap()
                .pruned,
            8
        );
    }

    #[test]
    fn a_model_refresh_is_versioned_unless_a_turn_changed_the_model_meanwhile() {
        let (_d, s) = store();
        Sqlite::on(&s)
            .record_user_message("t1", "U1", "Tom", "hi", None)
            .block()
            .unwrap();
        talk(&s, "t1", 4);
        Sqlite::on(&s)
            .commit_turn(TurnRecord {
                thread: "t1".into(),
                user_id: "U1".into(),
                interaction: 9,
                user_model: Some(("# Tom\n".into(), "met Tom".into())),
                proactive: true,
                ..Default::default()
            })
            .block()
            .unwrap();
        let b = Sqlite::on(&s)
            .backlog("t1", keep(2), 100, 100_000)
            .block()
            .unwrap()
            .unwrap();
        let tom = b.people.iter().find(|p| p.user_id == "U1").unwrap();
        assert_eq!(tom.model.as_deref(), Some("# Tom\n"));
        let mut c = consolidation(&b, "s");
        c.models = vec![ModelRefresh {
            user_id: "U1".into(),
            version: tom.model_version,
            model: "# Tom\n- likes crabs".into(),
            note: "Dream: likes crabs".into(),
        }];
        let done = Sqlite::on(&s)
            .consolidate(c.clone(), keep(2))
            .block()
            .unwrap();
        assert_eq!(done.models, ["U1"]);
        let hist = run(Sqlite::on(&s).model_history("U1")).unwrap();
        assert_eq!(hist.last().unwrap().1, "Dream: likes crabs");
        // A stale version is not saved.
        talk(&s, "t1", 3);
        let b = Sqlite::on(&s)
            .backlog("t1", keep(2), 100, 100_000)
            .block()
            .unwrap()
            .unwrap();
        let mut c = consolidation(&b, "s2");
        c.models = vec![ModelRefresh {
            user_id: "U1".into(),
            version: 1,
            model: "stale".into(),
            note: "stale".into(),
        }];
        assert!(Sqlite::on(&s)
            .consolidate(c.clone(), keep(2))
            .block()
            .unwrap()
            .models
            .is_empty());
        assert_eq!(
            run(Sqlite::on(&s).user("U1"))
                .unwrap()
                .unwrap()
                .model
                .as_deref(),
            Some("# Tom\n- likes crabs")
        );
    }

    #[test]
    fn dreams_are_recorded_and_the_upkeep_says_what_it_could_do() {
        let (_d, s) = store();
        assert!(Sqlite::on(&s).last_dream().block().unwrap().is_none());
        let id = Sqlite::on(&s).begin_dream("anima dream").block().unwrap();
        let row = Sqlite::on(&s).last_dream().block().unwrap().unwrap();
        assert_eq!((row.id, row.finished_ms, row.complete), (id, None, false));
        Sqlite::on(&s)
            .finish_dream(id, true, &serde_json::json!({ "threads": 1 }))
            .block()
            .unwrap();
        let row = Sqlite::on(&s).last_dream().block().unwrap().unwrap();
        assert!(row.complete && row.finished_ms.is_some());
        assert_eq!(row.report["threads"], 1);
        let u = Sqlite::on(&s).upkeep().block().unwrap();
        assert!(u.analyzed);
        assert_eq!(
            u.auto_vacuum, "incremental",
            "a new home is created in that mode"
        );
        assert!(u.vacuumed);
    }
}
