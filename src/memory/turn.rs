//! The two store operations of a turn: read its context, then write its outcome in one
//! transaction (all of the turn or none of it).

use rusqlite::{Connection, OptionalExtension};

use super::process_state;
use super::{now_ms, soul_state, users, working, NewEntry, SqliteStore, StoreError, UserRecord};

pub use super::records::turn::{TurnContext, TurnRecord, TurnStart, UsageRecord, Whisper};
impl SqliteStore {
    /// Writes the user's message to working memory (and remembers the user) before anything
    /// else happens, so a failed turn never loses it. A message with a `source` (an inbox
    /// row) is written once: recording it again returns the first entry's id.
    pub fn record_user_message(
        &self,
        thread: &str,
        user_id: &str,
        display_name: &str,
        text: &str,
        source: Option<&str>,
    ) -> Result<i64, StoreError> {
        self.write(|tx| record_message(tx, thread, user_id, display_name, text, source))
    }

    /// Starts a message turn in one write transaction: the message is recorded (before
    /// anything can fail), the interaction number is taken (`UPDATE … RETURNING`, so turns
    /// running at once get distinct numbers), the oldest free whisper is claimed by this turn
    /// alone, and the context is read. Returns the message's entry id and the context.
    pub fn begin_turn(&self, t: &TurnStart) -> Result<(i64, TurnContext), StoreError> {
        self.write(|tx| {
            let id = record_message(
                tx,
                &t.thread,
                &t.user_id,
                &t.display_name,
                &t.text,
                t.source.as_deref(),
            )?;
            let interaction: i64 = tx
                .prepare_cached(
                    "UPDATE counters SET value = value + 1 WHERE name = 'interactions' RETURNING value",
                )?
                .query_row([], |r| r.get(0))?;
            if let Some(row) = t.inbox {
                // An attempt under way, this instance's until it fails or ends with the row.
                tx.prepare_cached(
                    "UPDATE inbox SET attempts = attempts + 1, in_flight = ?2 WHERE id = ?1",
                )?
                .execute((row, &self.instance))?;
            }
            let now = now_ms();
            let whisper = tx
                .prepare_cached(
                    "UPDATE whispers SET claimed_by = ?1, claimed_until = ?2
                     WHERE id = (SELECT id FROM whispers
                                 WHERE consumed_at IS NULL AND (claimed_until IS NULL OR claimed_until < ?3)
                                 ORDER BY id LIMIT 1)
                     RETURNING id, whisper, source",
                )?
                .query_row((&t.claimant, t.claim_until_ms, now), |r| {
                    Ok(Whisper {
                        id: r.get(0)?,
                        text: r.get(1)?,
                        source: r.get(2)?,
                    })
                })
                .optional()?;
            let mut ctx = context(tx, &t.thread, &t.user_id, &t.display_name, t.window)?;
            ctx.interaction = interaction as u64;
            ctx.whisper = whisper;
            Ok((id, ctx))
        })
    }

    /// Reads what a turn without a message (a proactive turn) needs; takes no number and
    /// claims no whisper.
    pub fn load_turn(
        &self,
        thread: &str,
        user_id: &str,
        display_name: &str,
        window: u32,
    ) -> Result<TurnContext, StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Deferred)?;
        let ctx = context(&tx, thread, user_id, display_name, window)?;
        tx.commit()?;
        Ok(ctx)
    }

    /// Writes a turn's outcome in one transaction. Returns the user's record when their model
    /// changed, so the caller can export it to the git repository.
    pub fn commit_turn(&self, rec: &TurnRecord) -> Result<Option<UserRecord>, StoreError> {
        self.write(|tx| commit(tx, rec))
    }
}

fn commit(tx: &Connection, rec: &TurnRecord) -> Result<Option<UserRecord>, StoreError> {
    let now = now_ms();
    for e in &rec.entries {
        working::insert(tx, &rec.thread, e, now)?;
    }
    let current: Option<i64> = tx
        .prepare_cached("SELECT since_id FROM threads WHERE thread = ?1")?
        .query_row([&rec.thread], |r| r.get(0))
        .optional()?;
    let reset_meanwhile =
        matches!((rec.since_id, current), (Some(began), Some(now_at)) if began != now_at);
    if reset_meanwhile {
        // An operator closed the conversation while this turn ran: its exchange belongs to
        // the closed one, and the new one starts as the reset left it (no turns, no process,
        // no provider session).
        tx.prepare_cached(
            "UPDATE threads SET since_id = (SELECT coalesce(max(id), 0) FROM working_memory WHERE thread = ?1),
                 updated_at = ?2 WHERE thread = ?1",
        )?
        .execute((&rec.thread, now))?;
    }
    for (k, v) in &rec.soul_updates {
        soul_state::set(tx, k, v, now)?;
    }
    // The interaction number was taken when the turn began. A proactive turn answers no user message: it counts no thread or user turn.
    let counted = i64::from(!rec.proactive);
    tx.prepare_cached(
        "INSERT INTO threads (thread, turns, claude_session, updated_at) VALUES (?1, ?4, ?2, ?3)
             ON CONFLICT (thread) DO UPDATE SET turns = turns + ?4,
                 claude_session = coalesce(excluded.claude_session, claude_session),
                 updated_at = excluded.updated_at",
    )?
    .execute((
        &rec.thread,
        rec.claude_session.as_ref().filter(|_| !reset_meanwhile),
        now,
        counted * i64::from(!reset_meanwhile),
    ))?;
    if let Some(state) = rec.process.as_ref().filter(|_| !reset_meanwhile) {
        process_state::save(
            tx,
            &rec.thread,
            rec.interaction,
            state,
            &rec.transitions,
            now,
        )?;
    }
    if !rec.proactive {
        tx.prepare_cached(
            "UPDATE users SET turns = turns + 1,
                     injected_at_turn = CASE WHEN ?2 THEN turns + 1 ELSE injected_at_turn END,
                     updated_at = ?3
                 WHERE user_id = ?1",
        )?
        .execute((&rec.user_id, rec.injected_user_model, now))?;
    }
    let changed = match &rec.user_model {
        Some((model, note)) => Some(save_model(tx, &rec.user_id, model, note, now)?),
        None => None,
    };
    if let Some(id) = rec.whisper_id {
        tx.prepare_cached(
            "UPDATE whispers SET consumed_at = ?2, consumed_by = ?3, claimed_until = NULL
                 WHERE id = ?1 AND consumed_at IS NULL AND (?4 IS NULL OR claimed_by = ?4)",
        )?
        .execute((id, now, &rec.thread, &rec.whisper_claimant))?;
    }
    for u in &rec.usage {
        tx.prepare_cached(
                "INSERT INTO turn_usage (thread, interaction, provider, model, input_tokens, output_tokens,
                     cache_creation_tokens, cache_read_tokens, latency_ms, stop_reason, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            )?
            .execute(rusqlite::params![
                rec.thread,
                rec.interaction as i64,
                u.provider,
                u.model,
                u.input_tokens as i64,
                u.output_tokens as i64,
                u.cache_creation_tokens as i64,
                u.cache_read_tokens as i64,
                u.latency_ms as i64,
                u.stop_reason,
                now
            ])?;
    }
    if let Some((id, reply)) = &rec.inbox {
        tx.prepare_cached(
            "UPDATE inbox SET status = 'replying', reply = ?2 WHERE id = ?1 AND status = 'pending'",
        )?
        .execute((id, reply))?;
    }
    let user = match changed {
        Some(()) => users::get(tx, &rec.user_id)?,
        None => None,
    };
    Ok(user)
}

fn record_message(
    tx: &Connection,
    thread: &str,
    user_id: &str,
    display_name: &str,
    text: &str,
    source: Option<&str>,
) -> Result<i64, StoreError> {
    let now = now_ms();
    upsert_user(tx, user_id, display_name, now)?;
    if let Some(src) = source {
        let existing: Option<i64> = tx
            .prepare_cached("SELECT id FROM working_memory WHERE source = ?1")?
            .query_row([src], |r| r.get(0))
            .optional()?;
        if let Some(id) = existing {
            return Ok(id);
        }
    }
    let entry = NewEntry::new(super::EntryType::UserMessage, text)
        .user(user_id)
        .metadata(serde_json::json!({ "name": display_name }));
    let id = working::insert(tx, thread, &entry, now)?;
    if let Some(src) = source {
        tx.prepare_cached("UPDATE working_memory SET source = ?2 WHERE id = ?1")?
            .execute((id, src))?;
    }
    Ok(id)
}

/// The context a turn reads; `interaction` is the number the next message would take.
fn context(
    tx: &Connection,
    thread: &str,
    user_id: &str,
    display_name: &str,
    window: u32,
) -> Result<TurnContext, StoreError> {
    let interactions: i64 = tx
        .prepare_cached("SELECT value FROM counters WHERE name = 'interactions'")?
        .query_row([], |r| r.get(0))?;
    let (thread_turns, claude_session, since_id) = tx
        .prepare_cached("SELECT turns, claude_session, since_id FROM threads WHERE thread = ?1")?
        .query_row([thread], |r| {
            Ok((r.get::<_, i64>(0)?, r.get(1)?, r.get::<_, i64>(2)?))
        })
        .optional()?
        .unwrap_or((0, None, 0));
    Ok(TurnContext {
        interaction: interactions as u64 + 1,
        thread_turns,
        recent: working::recent(tx, thread, window, since_id)?,
        soul: soul_state::load(tx)?,
        user: users::get(tx, user_id)?.unwrap_or_else(|| UserRecord::new(user_id, display_name)),
        whisper: None,
        claude_session,
        process: process_state::load(tx, thread)?,
        since_id,
        cognitive_state: super::states::current(tx)?.state,
        summary: super::dream::summary(tx, thread, since_id)?,
    })
}

fn upsert_user(
    conn: &Connection,
    user_id: &str,
    display_name: &str,
    now: i64,
) -> Result<(), StoreError> {
    // The slug is fixed when the user is first seen, so a renamed person keeps their file.
    conn.prepare_cached(
        "INSERT INTO users (user_id, display_name, slug, updated_at) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (user_id) DO UPDATE SET display_name = excluded.display_name",
    )?
    .execute((
        user_id,
        display_name,
        unique_slug(conn, display_name, user_id)?,
        now,
    ))?;
    Ok(())
}

/// The user's slug, with the user id appended when another person already has it.
fn unique_slug(conn: &Connection, display_name: &str, user_id: &str) -> Result<String, StoreError> {
    let base = users::slug(display_name, user_id);
    let taken: Option<String> = conn
        .prepare_cached("SELECT user_id FROM users WHERE slug = ?1")?
        .query_row([&base], |r| r.get(0))
        .optional()?;
    Ok(match taken {
        Some(owner) if owner != user_id => format!("{base}-{}", users::slug("", user_id)),
        _ => base,
    })
}

pub(super) fn save_model(
    conn: &Connection,
    user_id: &str,
    model: &str,
    note: &str,
    now: i64,
) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE users SET model = ?2, model_version = model_version + 1, updated_at = ?3 WHERE user_id = ?1",
    )?
    .execute((user_id, model, now))?;
    conn.prepare_cached(
        "INSERT INTO user_model_history (user_id, version, model, change_note, created_at)
         SELECT user_id, model_version, model, ?2, ?3 FROM users WHERE user_id = ?1",
    )?
    .execute((user_id, note, now))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::faces::{Admin, Processes, SoulRecord, Turns, Users, Whispers};
    use crate::memory::sqlite::{run, Block, Sqlite};
    use crate::memory::EntryType;
    use crate::process::ThreadProcess;
    use std::sync::Arc;

    fn store() -> (tempfile::TempDir, Arc<SqliteStore>) {
        let dir = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&dir.path().join("anima.db")).unwrap();
        (dir, Arc::new(store))
    }

    fn start(thread: &str, text: &str, claimant: &str) -> TurnStart {
        TurnStart {
            thread: thread.into(),
            user_id: "U1".into(),
            display_name: "Tom".into(),
            text: text.into(),
            source: None,
            inbox: None,
            window: 20,
            claimant: claimant.into(),
            claim_until_ms: now_ms() + 60_000,
            conversation_claim: None,
        }
    }

    fn record(thread: &str, interaction: u64) -> TurnRecord {
        TurnRecord {
            thread: thread.into(),
            user_id: "U1".into(),
            interaction,
            entries: vec![NewEntry::new(EntryType::ExternalDialog, "hi")],
            ..Default::default()
        }
    }

    #[test]
    fn a_reset_while_a_turn_runs_is_not_undone_by_its_commit() {
        let (_d, s) = store();
        let (_, ctx) = s.begin_turn(&start("t1", "first", "a")).unwrap();
        let mut rec = record("t1", ctx.interaction);
        rec.since_id = Some(ctx.since_id);
        rec.process = Some(ThreadProcess {
            current: "deep_work".into(),
            ..ThreadProcess::default()
        });
        rec.claude_session = Some("old-session".into());
        s.commit_turn(&rec).unwrap();

        // The next turn begins; an operator closes the conversation before it commits.
        let (_, ctx) = s.begin_turn(&start("t1", "second", "b")).unwrap();
        assert_eq!(ctx.thread_turns, 1);
        assert!(run(Sqlite::on(&s).reset_thread("t1")).unwrap());
        let mut rec = record("t1", ctx.interaction);
        rec.since_id = Some(ctx.since_id);
        rec.process = Some(ThreadProcess {
            current: "frustrated".into(),
            ..ThreadProcess::default()
        });
        rec.claude_session = Some("session-2".into());
        s.commit_turn(&rec).unwrap();

        // The new conversation is as the reset left it.
        let (_, ctx) = s.begin_turn(&start("t1", "third", "c")).unwrap();
        assert_eq!(ctx.thread_turns, 0, "no turns");
        assert_eq!(ctx.process, None, "its process from the start");
        assert_eq!(ctx.claude_session, None, "a new provider session");
        let texts: Vec<&str> = ctx.recent.iter().map(|e| e.content.as_str()).collect();
        assert_eq!(texts, ["third"], "nothing of the closed conversation");
        // Without the check (an unknown beginning), a commit is as before.
        let mut rec = record("t1", ctx.interaction);
        rec.process = Some(ThreadProcess {
            current: "main".into(),
            ..ThreadProcess::default()
        });
        s.commit_turn(&rec).unwrap();
        assert_eq!(
            run(Sqlite::on(&s).thread_process("t1"))
                .unwrap()
                .unwrap()
                .current,
            "main"
        );
    }

    #[test]
    fn a_turn_counts_and_advances_the_thread_and_user() {
        let (_d, s) = store();
        let (_, ctx) = s.begin_turn(&start("t1", "hello", "a")).unwrap();
        assert_eq!(ctx.interaction, 1);
        assert_eq!(ctx.thread_turns, 0);
        assert_eq!(ctx.recent.len(), 1);
        let mut rec = record("t1", ctx.interaction);
        rec.injected_user_model = true;
        s.commit_turn(&rec).unwrap();
        let ctx = s.load_turn("t1", "U1", "Tom", 20).unwrap();
        assert_eq!(ctx.interaction, 2, "the number the next message takes");
        assert_eq!(ctx.thread_turns, 1);
        assert_eq!(ctx.user.turns, 1);
        assert_eq!(ctx.user.injected_at_turn, Some(1));
        assert_eq!(ctx.recent.len(), 2);
    }

    #[test]
    fn a_failed_turn_rolls_back_entirely() {
        let (_d, s) = store();
        s.record_user_message("t1", "U1", "Tom", "hello", None)
            .unwrap();
        let mut rec = record("t1", 1);
        rec.soul_updates = vec![("emotionalState".into(), "engaged".into())];
        // A constraint violation in the middle of the turn: the usage row's provider is NOT NULL.
        {
            let conn = s.conn();
            conn.execute_batch(
                "CREATE TRIGGER fail_usage BEFORE INSERT ON turn_usage BEGIN SELECT RAISE(ABORT, 'boom'); END;",
            )
            .unwrap();
        }
        rec.usage = vec![UsageRecord::default()];
        assert!(s.commit_turn(&rec).is_err());
        assert_eq!(run(Sqlite::on(&s).interactions()).unwrap(), 0);
        assert_eq!(
            run(Sqlite::on(&s).soul_state())
                .unwrap()
                .get("emotionalState"),
            "neutral"
        );
        assert_eq!(
            s.thread_entries("t1").unwrap().len(),
            1,
            "only the user message"
        );
    }

    #[test]
    fn model_updates_are_versioned_with_notes() {
        let (_d, s) = store();
        s.record_user_message("t1", "U1", "Tom", "hello", None)
            .unwrap();
        let mut rec = record("t1", 1);
        rec.user_model = Some(("# Tom\n".into(), "First impression.".into()));
        let u = s.commit_turn(&rec).unwrap().expect("changed");
        assert_eq!(u.model_version, 1);
        rec.user_model = Some(("# Tom\nmore\n".into(), "Learned more.".into()));
        rec.interaction = 2;
        let u = s.commit_turn(&rec).unwrap().unwrap();
        assert_eq!(u.model.as_deref(), Some("# Tom\nmore\n"));
        let notes: Vec<String> = run(Sqlite::on(&s).model_history("U1"))
            .unwrap()
            .into_iter()
            .map(|h| h.1)
            .collect();
        assert_eq!(notes, vec!["First impression.", "Learned more."]);
        assert_eq!(run(Sqlite::on(&s).unexported_models()).unwrap().len(), 1);
        run(Sqlite::on(&s).mark_exported("U1", 2)).unwrap();
        assert!(run(Sqlite::on(&s).unexported_models()).unwrap().is_empty());
    }

    #[test]
    fn two_people_with_one_name_get_different_slugs() {
        let (_d, s) = store();
        s.record_user_message("t1", "U1", "Sam", "a", None).unwrap();
        s.record_user_message("t2", "U2", "Sam", "b", None).unwrap();
        assert_eq!(run(Sqlite::on(&s).user("U1")).unwrap().unwrap().slug, "sam");
        assert_eq!(
            run(Sqlite::on(&s).user("U2")).unwrap().unwrap().slug,
            "sam-u2"
        );
        s.record_user_message("t1", "U1", "Samuel", "c", None)
            .unwrap();
        let u1 = run(Sqlite::on(&s).user("U1")).unwrap().unwrap();
        assert_eq!(
            (u1.display_name.as_str(), u1.slug.as_str()),
            ("Samuel", "sam")
        );
    }

    #[test]
    fn a_sourced_message_is_recorded_once() {
        let (_d, s) = store();
        let a = s
            .record_user_message("t1", "U1", "Tom", "hello", Some("slack:C1:1.0"))
            .unwrap();
        let b = s
            .record_user_message("t1", "U1", "Tom", "hello", Some("slack:C1:1.0"))
            .unwrap();
        assert_eq!(a, b);
        assert_eq!(s.thread_entries("t1").unwrap().len(), 1);
    }

    #[test]
    fn a_whisper_is_consumed_once() {
        let (_d, s) = store();
        let id = run(Sqlite::on(&s).add_whisper("they need assurance", "kothar")).unwrap();
        let (_, ctx) = s.begin_turn(&start("t1", "hello", "a")).unwrap();
        let w = ctx.whisper.expect("claimed");
        assert_eq!((w.id, w.source.as_str()), (id, "kothar"));
        let mut rec = record("t1", 1);
        rec.whisper_id = Some(id);
        s.commit_turn(&rec).unwrap();
        let (_, ctx) = s.begin_turn(&start("t1", "again", "b")).unwrap();
        assert!(ctx.whisper.is_none());
    }

    #[test]
    fn turns_running_at_once_take_distinct_numbers_and_one_whisper_shapes_one_turn() {
        let (_d, s) = store();
        let whisper = run(Sqlite::on(&s).add_whisper("they need assurance", "kothar")).unwrap();
        let s = std::sync::Arc::new(s);
        let started: Vec<_> = (0..24)
            .map(|i| {
                let s = s.clone();
                std::thread::spawn(move || {
                    let (thread, claimant) = (format!("t{i}"), format!("c{i}"));
                    let (_, ctx) = s.begin_turn(&start(&thread, "hi", &claimant)).unwrap();
                    (ctx.interaction, ctx.whisper.map(|w| w.id))
                })
            })
            .collect();
        let mut numbers = Vec::new();
        let mut whispered = 0;
        for h in started {
            let (n, w) = h.join().unwrap();
            numbers.push(n);
            if w.is_some() {
                assert_eq!(w, Some(whisper));
                whispered += 1;
            }
        }
        numbers.sort_unstable();
        assert_eq!(numbers, (1..=24).collect::<Vec<u64>>());
        assert_eq!(whispered, 1, "exactly one turn claimed the whisper");
        assert_eq!(run(Sqlite::on(&s).interactions()).unwrap(), 24);
    }

    #[test]
    fn a_failed_turn_gives_back_its_number_and_its_whisper() {
        let (_d, s) = store();
        let id = run(Sqlite::on(&s).add_whisper("they need assurance", "kothar")).unwrap();
        let (_, ctx) = s.begin_turn(&start("t1", "hello", "a")).unwrap();
        assert_eq!(ctx.interaction, 1);
        // Another turn starts meanwhile: it cannot take the claimed whisper.
        let (_, other) = s.begin_turn(&start("t2", "hey", "b")).unwrap();
        assert!(other.whisper.is_none());
        // The first fails: its number stays taken (a later turn has one), the whisper is free.
        Sqlite::on(&s)
            .release_turn(1, Some((id, "a".into())))
            .block()
            .unwrap();
        assert_eq!(run(Sqlite::on(&s).interactions()).unwrap(), 2);
        // Releasing someone else's claim does nothing; giving back the newest number works.
        let (_, third) = s.begin_turn(&start("t3", "yo", "c")).unwrap();
        assert_eq!(third.whisper.map(|w| w.id), Some(id));
        Sqlite::on(&s)
            .release_turn(third.interaction, Some((id, "a".into())))
            .block()
            .unwrap();
        assert_eq!(run(Sqlite::on(&s).interactions()).unwrap(), 2);
        let (_, fourth) = s.begin_turn(&start("t4", "yo", "d")).unwrap();
        assert!(fourth.whisper.is_none(), "still claimed by c");
        assert_eq!(fourth.interaction, 3);
    }

    #[test]
    fn a_claim_left_by_a_dead_process_lapses() {
        let (_d, s) = store();
        let id = run(Sqlite::on(&s).add_whisper("they need assurance", "kothar")).unwrap();
        let mut t = start("t1", "hello", "dead");
        t.claim_until_ms = now_ms() - 1;
        assert!(s.begin_turn(&t).unwrap().1.whisper.is_some());
        let (_, ctx) = s.begin_turn(&start("t2", "hi", "alive")).unwrap();
        assert_eq!(ctx.whisper.map(|w| w.id), Some(id));
    }
}
