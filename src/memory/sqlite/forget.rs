//! Forgetting on SQLite: a person, on an operator's word (`anima users forget`), and the
//! conversations quiet past `[memory] keep_days` (the leader's scan). What each removes, table
//! by table, is `faces::Forgetting`'s promise; docs/operations.md lists it for operators.
//!
//! Owns these statements only. Each operation is one write transaction, so a daemon beside the
//! command sees the person whole or gone. The person's file in the git repository is
//! `model_repo`'s; deciding who NAME is, the CLI's.

use async_trait::async_trait;
use rusqlite::{params, Connection};

use super::{Result, Sqlite};
use crate::memory::faces::Forgetting;
use crate::memory::{psyche, Forgotten, Pruned};

/// Conversations of the person no one else spoke in: every message of theirs, in working
/// memory and in the inbox, is the person's.
const THEIRS_ALONE: &str = "SELECT c FROM (SELECT thread AS c FROM working_memory
                                            WHERE user_id = ?1 AND entry_type = 'userMessage'
                                          UNION SELECT conversation FROM inbox WHERE user_id = ?1)
     WHERE NOT EXISTS (SELECT 1 FROM working_memory w WHERE w.thread = c
                         AND w.entry_type = 'userMessage' AND w.user_id <> ?1)
       AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.conversation = c AND i.user_id <> ?1)";

/// Every conversation the person spoke in (their traces go, in the traces' file).
const THEIR_THREADS: &str = "SELECT thread FROM working_memory WHERE user_id = ?1
     UNION SELECT conversation FROM inbox WHERE user_id = ?1";

/// Conversations with nothing written since ?1 (unix ms) and nothing waiting in the inbox.
const QUIET: &str = "WITH said AS (SELECT thread AS c, max(created_at) AS last
                                   FROM working_memory GROUP BY thread),
          asked AS (SELECT conversation AS c, max(received_us) / 1000 AS last,
                           max(status IN ('pending', 'replying')) AS open
                    FROM inbox GROUP BY conversation)
     SELECT said.c FROM said LEFT JOIN asked ON asked.c = said.c
     WHERE said.last < ?1 AND coalesce(asked.last, 0) < ?1 AND coalesce(asked.open, 0) = 0
     UNION
     SELECT asked.c FROM asked LEFT JOIN said ON said.c = asked.c
     WHERE asked.last < ?1 AND asked.open = 0 AND said.c IS NULL";

#[async_trait]
impl Forgetting for Sqlite {
    async fn forget_person(&self, user_id: &str) -> Result<Forgotten> {
        let user_id = user_id.to_owned();
        self.call(move |db| {
            // The traces are in their own file: theirs go first (their conversations read
            // before the database forgets them), then the rest, then any trace of theirs
            // written meanwhile. Forgetting is done again whole if cut short.
            let threads = column(&db.conn(), THEIR_THREADS, &user_id)?;
            let mut traces = db.write_traces(|t| {
                let mut n = run(t, "DELETE FROM traces WHERE person = ?1", &user_id)?;
                for c in &threads {
                    n += run(t, "DELETE FROM traces WHERE thread = ?1", c)?;
                }
                Ok(n)
            })?;
            let mut f = db.write(|tx| forget_person(tx, &user_id))?;
            traces +=
                db.write_traces(|t| run(t, "DELETE FROM traces WHERE person = ?1", &user_id))?;
            db.traces().scrub();
            f.traces = traces;
            Ok(f)
        })
        .await
    }

    async fn forget_quiet(&self, quiet_since: i64) -> Result<Pruned> {
        self.call(move |db| {
            let (mut p, quiet) = db.write(|tx| forget_quiet(tx, quiet_since))?;
            if !quiet.is_empty() {
                p.traces = db.write_traces(|t| {
                    let mut n = 0;
                    for c in &quiet {
                        n += t.execute(
                            "DELETE FROM traces WHERE thread = ?1 AND at < ?2",
                            params![c, quiet_since],
                        )? as u64;
                    }
                    Ok(n)
                })?;
                if p.traces > 0 {
                    db.traces().scrub();
                }
            }
            Ok(p)
        })
        .await
    }
}

/// Everything of `user_id` the face promises, counted.
fn forget_person(tx: &Connection, user_id: &str) -> Result<Forgotten> {
    // What is deleted is overwritten in the file, not left on free pages.
    tx.pragma_update(None, "secure_delete", "ON")?;
    // The psyche's latest gate decisions sit in lines on the soul's row until they fill: out
    // to their table first, where theirs can be found.
    psyche::write_out(tx)?;
    let mut f = Forgotten {
        known: count(tx, "SELECT count(*) FROM users WHERE user_id = ?1", user_id)? > 0,
        ..Forgotten::default()
    };
    let alone: Vec<String> = column(tx, THEIRS_ALONE, user_id)?;
    for c in &alone {
        f.entries += drop_conversation(tx, c)?;
    }
    f.conversations = alone.len() as u64;
    f.entries += run(tx, "DELETE FROM working_memory WHERE user_id = ?1", user_id)?;
    f.inbox_waiting = count(
        tx,
        "SELECT count(*) FROM inbox WHERE user_id = ?1 AND status IN ('pending', 'replying')",
        user_id,
    )?;
    // A row answered keeps its origin, so that a late retry of the message is still known and
    // never answered twice; its words, the reply and who sent it go.
    f.inbox_rows = run(
        tx,
        "UPDATE inbox SET text = '', reply = NULL, failure = NULL, user_id = '',
             status = CASE WHEN status = 'overheard' THEN 'done' ELSE status END
         WHERE user_id = ?1 AND status NOT IN ('pending', 'replying')",
        user_id,
    )?;
    f.feedback = run(tx, "DELETE FROM feedback WHERE person = ?1", user_id)?;
    f.admin_commands = run(
        tx,
        "UPDATE admin_log SET user_id = '', command = '' WHERE user_id = ?1 AND done = 1",
        user_id,
    )?;
    forget_in_psyche(tx, user_id, &mut f)?;
    f.model_versions = run(
        tx,
        "DELETE FROM user_model_history WHERE user_id = ?1",
        user_id,
    )?;
    run(tx, "DELETE FROM users WHERE user_id = ?1", user_id)?;
    keep_numbering(tx)?;
    Ok(f)
}

/// The conversations quiet since `quiet_since` (unix ms): what is older in them, and their
/// finished inbox rows; and which they are (their traces go in the traces' file).
fn forget_quiet(tx: &Connection, quiet_since: i64) -> Result<(Pruned, Vec<String>)> {
    let quiet: Vec<String> = tx
        .prepare(QUIET)?
        .query_map([quiet_since], |r| r.get(0))?
        .collect::<std::result::Result<_, _>>()?;
    let mut p = Pruned::default();
    for c in &quiet {
        p.entries += tx.execute(
            "DELETE FROM working_memory WHERE thread = ?1 AND created_at < ?2",
            params![c, quiet_since],
        )? as u64;
        let finished = "conversation = ?1 AND status NOT IN ('pending', 'replying')
                        AND received_us < ?2 * 1000";
        tx.execute(
            &format!(
                "DELETE FROM feedback WHERE inbox_id IN (SELECT id FROM inbox WHERE {finished})"
            ),
            params![c, quiet_since],
        )?;
        p.inbox_rows += tx.execute(
            &format!("DELETE FROM inbox WHERE {finished} AND id < (SELECT max(id) FROM inbox)"),
            params![c, quiet_since],
        )? as u64;
    }
    p.conversations = quiet.len() as u64;
    keep_numbering(tx)?;
    Ok((p, quiet))
}

/// Everything kept of conversation `c`: its entries (how many), summaries and episodes, its
/// process and its transitions, its usage, its counts.
fn drop_conversation(tx: &Connection, c: &str) -> Result<u64> {
    let entries = run(tx, "DELETE FROM working_memory WHERE thread = ?1", c)?;
    for table in [
        "thread_summaries",
        "episodic_memories",
        "thread_process",
        "process_transitions",
        "turn_usage",
        "threads",
    ] {
        run(tx, &format!("DELETE FROM {table} WHERE thread = ?1"), c)?;
    }
    run(tx, "DELETE FROM conversations WHERE key = ?1", c)?;
    Ok(entries)
}

/// The psyche's relationships with the person, the memories they are in, facts, intentions
/// about them and gate decisions on their events, for every soul.
fn forget_in_psyche(tx: &Connection, user_id: &str, f: &mut Forgotten) -> Result<()> {
    let memories: Vec<i64> = tx
        .prepare("SELECT memory FROM psyche_memory_people WHERE person = ?1")?
        .query_map([user_id], |r| r.get(0))?
        .collect::<std::result::Result<_, _>>()?;
    for id in &memories {
        // The people rows go with it (a cascade); the FTS index and the list of the most
        // salient are kept by migration 11's and 14's triggers.
        tx.execute("DELETE FROM psyche_memories WHERE id = ?1", [id])?;
        // Another person's row may point at it as the memory last shared with them.
        tx.execute(
            "UPDATE psyche_relationships SET last_memory = NULL, last_salience = 0
             WHERE last_memory = ?1",
            [id],
        )?;
        tx.execute(
            "UPDATE psyche_relationships SET boost_memory = NULL, boost = 0 WHERE boost_memory = ?1",
            [id],
        )?;
    }
    f.memories = memories.len() as u64;
    if !memories.is_empty() {
        // The index's segments merged: a deleted text's terms leave the file, not only the
        // index's answers.
        tx.execute_batch(
            "INSERT INTO psyche_memories_fts (psyche_memories_fts) VALUES ('optimize')",
        )?;
    }
    f.relationships = run(
        tx,
        "DELETE FROM psyche_relationships WHERE person = ?1",
        user_id,
    )?;
    f.facts = run(tx, "DELETE FROM psyche_facts WHERE person = ?1", user_id)?;
    f.intentions = run(
        tx,
        "DELETE FROM psyche_intentions WHERE target = ?1",
        user_id,
    )?;
    f.gate_decisions = run(tx, "DELETE FROM psyche_gate_log WHERE person = ?1", user_id)?;
    Ok(())
}

/// SQLite numbers a new entry one past the newest: once the newest entries are deleted, their
/// numbers come again. A conversation's start (`threads.since_id`) and a summary's reach
/// (`covers_through`) past the newest entry left are brought back to it, so that a message
/// taking a number again is still after the start of its conversation, and not taken as
/// summarised. Nothing stored lies between, so no conversation changes.
fn keep_numbering(tx: &Connection) -> Result<()> {
    let newest: i64 = tx.query_row("SELECT coalesce(max(id), 0) FROM working_memory", [], |r| {
        r.get(0)
    })?;
    // A thread's summaries of earlier conversations are never read again; one that would
    // share the new start with the current one goes.
    tx.execute(
        "DELETE FROM thread_summaries WHERE since_id = ?1
             AND thread IN (SELECT thread FROM thread_summaries WHERE since_id > ?1)",
        [newest],
    )?;
    tx.execute(
        "UPDATE thread_summaries SET since_id = ?1 WHERE since_id > ?1",
        [newest],
    )?;
    tx.execute(
        "UPDATE thread_summaries SET covers_through = ?1 WHERE covers_through > ?1",
        [newest],
    )?;
    tx.execute(
        "UPDATE threads SET since_id = ?1 WHERE since_id > ?1",
        [newest],
    )?;
    Ok(())
}

fn run(tx: &Connection, sql: &str, value: &str) -> Result<u64> {
    Ok(tx.execute(sql, [value])? as u64)
}

fn count(tx: &Connection, sql: &str, value: &str) -> Result<u64> {
    Ok(tx.query_row(sql, [value], |r| r.get::<_, i64>(0))? as u64)
}

fn column(tx: &Connection, sql: &str, value: &str) -> Result<Vec<String>> {
    Ok(tx
        .prepare(sql)?
        .query_map([value], |r| r.get(0))?
        .collect::<std::result::Result<_, _>>()?)
}
