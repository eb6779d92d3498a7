//! Turns and working memory on PostgreSQL (see `memory::turn` and its neighbours for what
//! each operation promises); `records` reads and writes what turns leave.
//!
//! A turn's begin, its context and its commit are one statement each: server-side functions
//! (migrations/postgres/0002) whose JSON `wire` maps, prepared once per connection. Inside
//! them the interaction counter moves with `UPDATE … RETURNING` under its row lock and a whisper
//! is claimed with `FOR UPDATE SKIP LOCKED`, so turns running at once, in one process or
//! several, get distinct numbers and distinct whispers.

use async_trait::async_trait;
use deadpool_postgres::GenericClient;
use serde_json::Value;
use tokio_postgres::Row;

use super::working::{entry, ENTRY};
use super::{fenced, wire, Postgres, Prepared};
use crate::memory::faces::Turns;
use crate::memory::working::capped;
use crate::memory::{
    now_ms, users, Entry, SoulState, StoreError, TurnContext, TurnRecord, TurnStart, UsageRecord,
    UserRecord,
};
use crate::process::ThreadProcess;

type Result<T> = std::result::Result<T, StoreError>;

pub(super) const USER: &str =
    "user_id, display_name, slug, turns, injected_at_turn, model, model_version, exported_version";

pub(super) fn user(r: &Row) -> UserRecord {
    UserRecord {
        user_id: r.get(0),
        display_name: r.get(1),
        slug: r.get(2),
        turns: r.get(3),
        injected_at_turn: r.get(4),
        model: r.get(5),
        model_version: r.get(6),
        exported_version: r.get(7),
    }
}

pub(super) async fn get_user(c: &impl GenericClient, user_id: &str) -> Result<Option<UserRecord>> {
    Ok(c.maybe_row(
        &format!("SELECT {USER} FROM users WHERE user_id = $1"),
        &[&user_id],
    )
    .await?
    .map(|r| user(&r)))
}

pub(super) async fn soul_state(c: &impl GenericClient) -> Result<SoulState> {
    let mut state = SoulState::default();
    for r in c.rows("SELECT key, value FROM soul_memory", &[]).await? {
        state.set(r.get(0), r.get(1));
    }
    Ok(state)
}

pub(super) async fn thread_process(
    c: &impl GenericClient,
    thread: &str,
) -> Result<Option<ThreadProcess>> {
    Ok(c.maybe_row(
        "SELECT current, previous, invocations, params FROM thread_process WHERE thread = $1",
        &[&thread],
    )
    .await?
    .map(|r| ThreadProcess {
        current: r.get(0),
        previous: r.get(1),
        invocations: r.get::<_, i64>(2).max(0) as u64,
        params: serde_json::from_value(r.get(3)).unwrap_or_default(),
    }))
}

/// A person's slug, and the one they get if someone else already holds it (see
/// `anima_record_message`).
fn slugs(user_id: &str, display_name: &str) -> (String, String) {
    let base = users::slug(display_name, user_id);
    let other = format!("{base}-{}", users::slug("", user_id));
    (base, other)
}

/// `updates` with each key once, at its last value, in the order the keys first came.
fn last_per_key(updates: Vec<(String, String)>) -> Vec<(String, String)> {
    let mut once: Vec<(String, String)> = Vec::with_capacity(updates.len());
    for (key, value) in updates {
        match once.iter_mut().find(|(k, _)| *k == key) {
            Some(kept) => kept.1 = value,
            None => once.push((key, value)),
        }
    }
    once
}

#[async_trait]
impl Turns for Postgres {
    async fn begin_turn(&self, t: TurnStart) -> Result<(i64, TurnContext)> {
        let result = async {
            let client = self.client().await?;
            let (slug, other_slug) = slugs(&t.user_id, &t.display_name);
            let begun = client
                .rows(
                    "SELECT * FROM anima_begin_claimed($1, $2, $3, $4, $5, $6, $7, $8, $9, $10,
                                                      $11, $12, $13, $14)",
                    &[
                        &t.thread,
                        &t.user_id,
                        &t.display_name,
                        &slug,
                        &other_slug,
                        &capped(&t.text).as_ref(),
                        &t.source,
                        &t.inbox,
                        &self.instance(),
                        &t.claimant,
                        &t.claim_until_ms,
                        &(t.window.min(i32::MAX as u32) as i32),
                        &now_ms(),
                        &t.conversation_claim,
                    ],
                )
                .await
                .map_err(|e| fenced(e, &t.thread))?;
            wire::begun(&begun, &t.thread, &t.user_id, &t.display_name)
        }
        .await;
        self.noted(result)
    }

    async fn commit_turn(&self, mut rec: TurnRecord) -> Result<Option<UserRecord>> {
        // A key set twice is set to its last value, as in order: one upsert may not touch a
        // row twice.
        rec.soul_updates = last_per_key(std::mem::take(&mut rec.soul_updates));
        let result = async {
            let client = self.client().await?;
            let user: Option<Value> = client
                .row(
                    "SELECT anima_commit_claimed($1, $2)",
                    &[&wire::turn_record(&rec, self.instance()), &now_ms()],
                )
                .await
                .map_err(|e| fenced(e, &rec.thread))?
                .get(0);
            wire::user_record(user)
        }
        .await;
        self.noted(result)
    }

    async fn release_turn(&self, interaction: u64, whisper: Option<(i64, String)>) -> Result<()> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            // The whisper first, then the counter: the order a turn's begin locks them in, so a
            // release and a begin never wait on each other crosswise.
            if let Some((id, claimant)) = whisper {
                tx.run(
                    "UPDATE whispers SET claimed_by = NULL, claimed_until = NULL
                     WHERE id = $1 AND claimed_by = $2 AND consumed_at IS NULL",
                    &[&id, &claimant],
                )
                .await?;
            }
            tx.run(
                "UPDATE counters SET value = value - 1 WHERE name = 'interactions' AND value = $1",
                &[&(interaction as i64)],
            )
            .await?;
            tx.commit().await?;
            Ok(())
        }
        .await;
        self.noted(result)
    }

    async fn load_turn(
        &self,
        thread: &str,
        user_id: &str,
        display_name: &str,
        window: u32,
    ) -> Result<TurnContext> {
        let client = self.client().await?;
        // One statement calling a STABLE function: one snapshot for every read.
        let rows = client
            .rows(
                "SELECT * FROM anima_turn_context($1, $2, $3)",
                &[&thread, &user_id, &(window.min(i32::MAX as u32) as i32)],
            )
            .await?;
        wire::turn_context(&rows, thread, user_id, display_name)
    }

    async fn record_user_message(
        &self,
        thread: &str,
        user_id: &str,
        display_name: &str,
        text: &str,
        source: Option<&str>,
    ) -> Result<i64> {
        let result = async {
            let client = self.client().await?;
            let (slug, other_slug) = slugs(user_id, display_name);
            Ok(client
                .row(
                    "SELECT anima_record_message($1, $2, $3, $4, $5, $6, $7, $8)",
                    &[
                        &thread,
                        &user_id,
                        &display_name,
                        &slug,
                        &other_slug,
                        &capped(text).as_ref(),
                        &source,
                        &now_ms(),
                    ],
                )
                .await?
                .get(0))
        }
        .await;
        self.noted(result)
    }

    async fn rewrite_message(&self, id: i64, text: &str) -> Result<()> {
        let result = async {
            let client = self.client().await?;
            client
                .run(
                    "UPDATE working_memory SET content = $2 WHERE id = $1 AND entry_type = 'userMessage'",
                    &[&id, &capped(text).as_ref()],
                )
                .await?;
            Ok(())
        }
        .await;
        self.noted(result)
    }

    async fn thread_entries(&self, thread: &str) -> Result<Vec<Entry>> {
        let client = self.client().await?;
        client
            .rows(
                &format!("SELECT {ENTRY} FROM working_memory WHERE thread = $1 ORDER BY id"),
                &[&thread],
            )
            .await?
            .iter()
            .map(entry)
            .collect()
    }

    async fn last_speaker(&self, thread: &str) -> Result<(String, String, i64)> {
        let client = self.client().await?;
        let speaker = client
            .maybe_row(
                "SELECT user_id, metadata->>'name' FROM working_memory
                 WHERE thread = $1 AND entry_type = 'userMessage' ORDER BY id DESC LIMIT 1",
                &[&thread],
            )
            .await?;
        let last_at: Option<i64> = client
            .row(
                "SELECT anima_ms(max(created_at)) FROM working_memory WHERE thread = $1",
                &[&thread],
            )
            .await?
            .get(0);
        let (user_id, name) = speaker.map_or((String::new(), String::new()), |r| {
            (
                r.get::<_, Option<String>>(0).unwrap_or_default(),
                r.get::<_, Option<String>>(1).unwrap_or_default(),
            )
        });
        Ok((user_id, name, last_at.unwrap_or(0)))
    }

    async fn usage(&self, thread: &str) -> Result<Vec<UsageRecord>> {
        let client = self.client().await?;
        Ok(client
            .rows(
                "SELECT provider, model, input_tokens, output_tokens, cache_creation_tokens,
                        cache_read_tokens, latency_ms, stop_reason
                 FROM turn_usage WHERE thread = $1 ORDER BY id",
                &[&thread],
            )
            .await?
            .iter()
            .map(|r| UsageRecord {
                provider: r.get(0),
                model: r.get(1),
                input_tokens: r.get::<_, i64>(2) as u64,
                output_tokens: r.get::<_, i64>(3) as u64,
                cache_creation_tokens: r.get::<_, i64>(4) as u64,
                cache_read_tokens: r.get::<_, i64>(5) as u64,
                latency_ms: r.get::<_, i64>(6) as u64,
                stop_reason: r.get(7),
            })
            .collect())
    }

    async fn claude_session(&self, thread: &str) -> Result<Option<String>> {
        let client = self.client().await?;
        Ok(client
            .maybe_row(
                "SELECT claude_session FROM threads WHERE thread = $1",
                &[&thread],
            )
            .await?
            .and_then(|r| r.get(0)))
    }
}
