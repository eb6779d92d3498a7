//! Turns on SQLite: each operation of the `Turns` face in one write transaction or one read.
//! A turn's begin, its context alone and its commit are `memory::turn`'s SQL (free functions
//! over the open transaction), run here in their transactions; the rest is written here.

use async_trait::async_trait;
use rusqlite::OptionalExtension;

use super::{Result, Sqlite};
use crate::memory::faces::Turns;
use crate::memory::{turn, working};
use crate::memory::{Entry, TurnContext, TurnRecord, TurnStart, UsageRecord, UserRecord};

#[async_trait]
impl Turns for Sqlite {
    async fn begin_turn(&self, t: TurnStart) -> Result<(i64, TurnContext)> {
        self.call(move |db| db.write(|tx| turn::begin(tx, &db.instance, &t)))
            .await
    }

    async fn commit_turn(&self, rec: TurnRecord) -> Result<Option<UserRecord>> {
        self.call(move |db| db.write(|tx| turn::commit(tx, &rec)))
            .await
    }

    async fn release_turn(&self, interaction: u64, whisper: Option<(i64, String)>) -> Result<()> {
        self.call(move |db| {
            db.write(|tx| {
                tx.prepare_cached(
                    "UPDATE counters SET value = value - 1 WHERE name = 'interactions' AND value = ?1",
                )?
                .execute([interaction as i64])?;
                if let Some((id, claimant)) = whisper {
                    tx.prepare_cached(
                        "UPDATE whispers SET claimed_by = NULL, claimed_until = NULL
                     WHERE id = ?1 AND claimed_by = ?2 AND consumed_at IS NULL",
                    )?
                    .execute((id, claimant))?;
                }
                Ok(())
            })
        })
        .await
    }

    async fn load_turn(
        &self,
        thread: &str,
        user_id: &str,
        display_name: &str,
        window: u32,
    ) -> Result<TurnContext> {
        let (thread, user_id, display_name) = (
            thread.to_owned(),
            user_id.to_owned(),
            display_name.to_owned(),
        );
        self.call(move |db| {
            // One snapshot; deferred, as a read takes no write lock.
            let mut conn = db.conn();
            let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Deferred)?;
            let ctx = turn::context(&tx, &thread, &user_id, &display_name, window)?;
            tx.commit()?;
            Ok(ctx)
        })
        .await
    }

    async fn record_user_message(
        &self,
        thread: &str,
        user_id: &str,
        display_name: &str,
        text: &str,
        source: Option<&str>,
    ) -> Result<i64> {
        let (thread, user_id, display_name, text) = (
            thread.to_owned(),
            user_id.to_owned(),
            display_name.to_owned(),
            text.to_owned(),
        );
        let source = source.map(str::to_owned);
        self.call(move |db| {
            db.write(|tx| {
                turn::record_message(
                    tx,
                    &thread,
                    &user_id,
                    &display_name,
                    &text,
                    source.as_deref(),
                )
            })
        })
        .await
    }

    async fn rewrite_message(&self, id: i64, text: &str) -> Result<()> {
        let text = crate::memory::working::capped(text).into_owned();
        self.call(move |db| {
            db.write(|tx| {
                tx.prepare_cached(
                    "UPDATE working_memory SET content = ?2 WHERE id = ?1 AND entry_type = 'userMessage'",
                )?
                .execute((id, text))?;
                Ok(())
            })
        })
        .await
    }

    async fn thread_entries(&self, thread: &str) -> Result<Vec<Entry>> {
        let thread = thread.to_owned();
        self.call(move |db| working::all(&db.conn(), &thread)).await
    }

    /// A thread's last speaker (user id and display name, empty if none) and the time of its
    /// last entry: what a proactive turn needs without reading the whole thread.
    async fn last_speaker(&self, thread: &str) -> Result<(String, String, i64)> {
        let thread = thread.to_owned();
        self.call(move |db| {
            let thread = thread.as_str();
            let conn = db.conn();
            let speaker: Option<(Option<String>, String)> = conn
                .prepare_cached(
                    "SELECT user_id, metadata FROM working_memory
                 WHERE thread = ?1 AND entry_type = 'userMessage' ORDER BY id DESC LIMIT 1",
                )?
                .query_row([thread], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()?;
            let last_at: Option<i64> = conn
                .prepare_cached("SELECT max(created_at) FROM working_memory WHERE thread = ?1")?
                .query_row([thread], |r| r.get(0))?;
            let (user_id, name) = match speaker {
                Some((id, meta)) => {
                    let name = serde_json::from_str::<serde_json::Value>(&meta)
                        .ok()
                        .and_then(|m| m.get("name").and_then(|n| n.as_str()).map(str::to_string))
                        .unwrap_or_default();
                    (id.unwrap_or_default(), name)
                }
                None => (String::new(), String::new()),
            };
            Ok((user_id, name, last_at.unwrap_or(0)))
        })
        .await
    }

    /// The model calls of a thread's turns, oldest first.
    async fn usage(&self, thread: &str) -> Result<Vec<UsageRecord>> {
        let thread = thread.to_owned();
        self.call(move |db| {
            let thread = thread.as_str();
            let conn = db.conn();
            let mut stmt = conn.prepare(
                "SELECT provider, model, input_tokens, output_tokens, cache_creation_tokens, cache_read_tokens,
                    latency_ms, stop_reason
             FROM turn_usage WHERE thread = ?1 ORDER BY id",
            )?;
            let rows = stmt.query_map([thread], |r| {
                Ok(UsageRecord {
                    provider: r.get(0)?,
                    model: r.get(1)?,
                    input_tokens: r.get::<_, i64>(2)? as u64,
                    output_tokens: r.get::<_, i64>(3)? as u64,
                    cache_creation_tokens: r.get::<_, i64>(4)? as u64,
                    cache_read_tokens: r.get::<_, i64>(5)? as u64,
                    latency_ms: r.get::<_, i64>(6)? as u64,
                    stop_reason: r.get(7)?,
                })
            })?;
            Ok(rows.collect::<std::result::Result<_, _>>()?)
        })
        .await
    }

    async fn claude_session(&self, thread: &str) -> Result<Option<String>> {
        let thread = thread.to_owned();
        self.call(move |db| {
            let thread = thread.as_str();
            let conn = db.conn();
            Ok(conn
                .query_row(
                    "SELECT claude_session FROM threads WHERE thread = ?1",
                    [thread],
                    |r| r.get::<_, Option<String>>(0),
                )
                .optional()?
                .flatten())
        })
        .await
    }
}
