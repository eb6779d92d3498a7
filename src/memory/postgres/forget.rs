//! Forgetting on PostgreSQL (see `memory::sqlite::forget` and `faces::Forgetting`): a person, and the
//! conversations quiet past `[memory] keep_days`, each in one transaction, for every daemon on
//! the database at once.
//!
//! The rows a turn writes are locked in a turn's order: the souls' substrate rows (as a psyche
//! event does), then the threads' rows (as a turn's commit does, so each thread's `said` is
//! counted again after every entry committed in it), and the person's row last.

use async_trait::async_trait;

use super::{Postgres, Prepared};
use crate::memory::faces::Forgetting;
use crate::memory::{Forgotten, Pruned, StoreError};

type Result<T> = std::result::Result<T, StoreError>;
type Tx<'a> = deadpool_postgres::Transaction<'a>;

/// Conversations of the person no one else spoke in (as on SQLite).
const THEIRS_ALONE: &str = "SELECT c FROM (SELECT thread AS c FROM working_memory
                                            WHERE user_id = $1 AND entry_type = 'userMessage'
                                          UNION SELECT conversation FROM inbox WHERE user_id = $1) o
     WHERE NOT EXISTS (SELECT 1 FROM working_memory w WHERE w.thread = o.c
                         AND w.entry_type = 'userMessage' AND w.user_id <> $1)
       AND NOT EXISTS (SELECT 1 FROM inbox i WHERE i.conversation = o.c AND i.user_id <> $1)";

/// Conversations with nothing written since $1 (unix ms) and nothing waiting in the inbox.
const QUIET: &str = "WITH said AS (SELECT thread AS c, max(created_at) AS last
                                   FROM working_memory GROUP BY thread),
          asked AS (SELECT conversation AS c, max(received_at) AS last,
                           bool_or(status IN ('pending', 'replying')) AS open
                    FROM inbox GROUP BY conversation)
     SELECT said.c FROM said LEFT JOIN asked ON asked.c = said.c
     WHERE said.last < anima_at($1) AND (asked.c IS NULL OR (asked.last < anima_at($1)
                                                             AND NOT asked.open))
     UNION
     SELECT asked.c FROM asked LEFT JOIN said ON said.c = asked.c
     WHERE asked.last < anima_at($1) AND NOT asked.open AND said.c IS NULL";

/// Counts what a turn's window counts in `threads` again, from the entries left.
const COUNT_SAID: &str = "UPDATE threads t
        SET said = (SELECT count(*) FROM working_memory w
                     WHERE w.thread = t.thread AND w.id > t.since_id
                       AND w.entry_type IN ('userMessage', 'externalDialog'))
      WHERE t.thread = ANY($1)";

#[async_trait]
impl Forgetting for Postgres {
    async fn forget_person(&self, user_id: &str) -> Result<Forgotten> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let f = forget_person(&tx, user_id).await?;
            tx.commit().await?;
            Ok(f)
        }
        .await;
        self.noted(result)
    }

    async fn forget_quiet(&self, quiet_since: i64) -> Result<Pruned> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let quiet: Vec<String> = tx
                .rows(QUIET, &[&quiet_since])
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect();
            if quiet.is_empty() {
                tx.commit().await?;
                return Ok(Pruned::default());
            }
            tx.run(
                "SELECT 1 FROM threads WHERE thread = ANY($1) ORDER BY thread FOR UPDATE",
                &[&quiet],
            )
            .await?;
            let traces = tx
                .run(
                    "DELETE FROM traces WHERE thread = ANY($1) AND at < anima_at($2)",
                    &[&quiet, &quiet_since],
                )
                .await?;
            // Only what is older than the quiet spell: a message that came meanwhile stays.
            let entries = tx
                .run(
                    "DELETE FROM working_memory
                     WHERE thread = ANY($1) AND created_at < anima_at($2)",
                    &[&quiet, &quiet_since],
                )
                .await?;
            tx.run(COUNT_SAID, &[&quiet]).await?;
            let finished = "conversation = ANY($1) AND status NOT IN ('pending', 'replying')
                            AND received_at < anima_at($2)";
            tx.run(
                &format!(
                    "DELETE FROM feedback WHERE inbox_id IN (SELECT id FROM inbox WHERE {finished})"
                ),
                &[&quiet, &quiet_since],
            )
            .await?;
            let inbox_rows = tx
                .run(
                    &format!(
                        "DELETE FROM inbox WHERE {finished} AND id < (SELECT max(id) FROM inbox)"
                    ),
                    &[&quiet, &quiet_since],
                )
                .await?;
            tx.commit().await?;
            Ok(Pruned {
                conversations: quiet.len() as u64,
                traces,
                entries,
                inbox_rows,
            })
        }
        .await;
        self.noted(result)
    }
}

/// Everything of `user_id` the face promises, counted, with the rows a turn writes locked in a
/// turn's order (the module's doc): souls, threads, then the person.
async fn forget_person(tx: &Tx<'_>, user_id: &str) -> Result<Forgotten> {
    tx.run(
        "SELECT 1 FROM psyche_substrate ORDER BY soul FOR UPDATE",
        &[],
    )
    .await?;
    let mut f = Forgotten {
        known: tx
            .maybe_row("SELECT 1 FROM users WHERE user_id = $1", &[&user_id])
            .await?
            .is_some(),
        ..Forgotten::default()
    };
    f.traces = tx
        .run(
            "DELETE FROM traces WHERE (md5(person) = md5($1) AND person = $1)
                OR thread IN (SELECT thread FROM working_memory WHERE user_id = $1
                              UNION SELECT conversation FROM inbox WHERE user_id = $1)",
            &[&user_id],
        )
        .await?;
    let (alone, shared) = their_conversations(tx, user_id).await?;
    f.conversations = alone.len() as u64;
    f.entries = drop_conversations(tx, &alone).await?;
    f.entries += tx
        .run("DELETE FROM working_memory WHERE user_id = $1", &[&user_id])
        .await?;
    tx.run(COUNT_SAID, &[&shared]).await?;
    forget_in_inbox(tx, user_id, &mut f).await?;
    forget_in_psyche(tx, user_id, &mut f).await?;
    f.model_versions = tx
        .run(&by_person("user_model_history", "user_id"), &[&user_id])
        .await?;
    tx.run(&by_person("users", "user_id"), &[&user_id]).await?;
    Ok(f)
}

/// The person's conversations no one else spoke in, and those they shared, each thread's row
/// locked (in the threads' order).
async fn their_conversations(tx: &Tx<'_>, user_id: &str) -> Result<(Vec<String>, Vec<String>)> {
    let alone: Vec<String> = tx
        .rows(THEIRS_ALONE, &[&user_id])
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    let shared: Vec<String> = tx
        .rows(
            "SELECT DISTINCT thread FROM working_memory
             WHERE user_id = $1 AND NOT thread = ANY($2)",
            &[&user_id, &alone],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    tx.run(
        "SELECT 1 FROM threads WHERE thread = ANY($1) OR thread = ANY($2)
         ORDER BY thread FOR UPDATE",
        &[&alone, &shared],
    )
    .await?;
    Ok((alone, shared))
}

/// Everything kept of the conversations `alone`: their entries (how many), summaries and
/// episodes, processes and transitions, usage, counts.
async fn drop_conversations(tx: &Tx<'_>, alone: &[String]) -> Result<u64> {
    let entries = tx
        .run(
            "DELETE FROM working_memory WHERE thread = ANY($1)",
            &[&alone],
        )
        .await?;
    for table in [
        "thread_summaries",
        "episodic_memories",
        "thread_process",
        "process_transitions",
        "turn_usage",
        "threads",
    ] {
        tx.run(
            &format!("DELETE FROM {table} WHERE thread = ANY($1)"),
            &[&alone],
        )
        .await?;
    }
    tx.run("DELETE FROM conversations WHERE key = ANY($1)", &[&alone])
        .await?;
    Ok(entries)
}

/// The person's inbox rows (those waiting counted, the others emptied), feedback and the
/// operator's commands they ran.
async fn forget_in_inbox(tx: &Tx<'_>, user_id: &str, f: &mut Forgotten) -> Result<()> {
    f.inbox_waiting = tx
        .row(
            "SELECT count(*) FROM inbox
             WHERE user_id = $1 AND status IN ('pending', 'replying')",
            &[&user_id],
        )
        .await?
        .get::<_, i64>(0) as u64;
    // A row answered keeps its origin, so that a late retry of the message is still known and
    // never answered twice; its words, the reply and who sent it go.
    f.inbox_rows = tx
        .run(
            "UPDATE inbox SET text = '', reply = NULL, failure = NULL, user_id = '',
                 status = CASE WHEN status = 'overheard' THEN 'done' ELSE status END
             WHERE user_id = $1 AND status NOT IN ('pending', 'replying')",
            &[&user_id],
        )
        .await?;
    f.feedback = tx
        .run("DELETE FROM feedback WHERE person = $1", &[&user_id])
        .await?;
    f.admin_commands = tx
        .run(
            "UPDATE admin_log SET user_id = '', command = '' WHERE user_id = $1 AND done",
            &[&user_id],
        )
        .await?;
    Ok(())
}

/// The psyche's memories the person is in, relationships with them, facts, intentions about
/// them and gate decisions on their events, for every soul.
async fn forget_in_psyche(tx: &Tx<'_>, user_id: &str, f: &mut Forgotten) -> Result<()> {
    // The people rows go with their memory (a cascade).
    f.memories = tx
        .run(
            "DELETE FROM psyche_memories
             WHERE id IN (SELECT memory FROM psyche_memory_people WHERE person = $1)",
            &[&user_id],
        )
        .await?;
    f.relationships = tx
        .run(&by_person("psyche_relationships", "person"), &[&user_id])
        .await?;
    f.facts = tx
        .run(&by_person("psyche_facts", "person"), &[&user_id])
        .await?;
    f.intentions = tx
        .run(&by_person("psyche_intentions", "target"), &[&user_id])
        .await?;
    f.gate_decisions = tx
        .run(&by_person("psyche_gate_log", "person"), &[&user_id])
        .await?;
    Ok(())
}

fn by_person(table: &str, column: &str) -> String {
    format!("DELETE FROM {table} WHERE {column} = $1")
}
