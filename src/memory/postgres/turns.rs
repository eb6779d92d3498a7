//! Turns and working memory on PostgreSQL (see `memory::turn` and its neighbours for what
//! each operation promises); `records` reads and writes what turns leave. The interaction counter moves with `UPDATE … RETURNING` under its
//! row lock and a whisper is claimed with `FOR UPDATE SKIP LOCKED`, so turns running at once,
//! in one process or several, get distinct numbers and distinct whispers.

use async_trait::async_trait;
use deadpool_postgres::{GenericClient, Transaction};
use tokio_postgres::Row;

use super::working::{entry, insert_entry, recent, ENTRY};
use super::Postgres;
use crate::memory::faces::Turns;
use crate::memory::Whisper;
use crate::memory::{
    now_ms, users, Entry, EntryType, NewEntry, SoulState, StoreError, TurnContext, TurnRecord,
    TurnStart, UsageRecord, UserRecord,
};
use crate::process::{ThreadProcess, TransitionRecord};

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
    Ok(c.query_opt(
        &format!("SELECT {USER} FROM users WHERE user_id = $1"),
        &[&user_id],
    )
    .await?
    .map(|r| user(&r)))
}

pub(super) async fn soul_state(c: &impl GenericClient) -> Result<SoulState> {
    let mut state = SoulState::default();
    for r in c.query("SELECT key, value FROM soul_memory", &[]).await? {
        state.set(r.get(0), r.get(1));
    }
    Ok(state)
}

pub(super) async fn thread_process(
    c: &impl GenericClient,
    thread: &str,
) -> Result<Option<ThreadProcess>> {
    Ok(c.query_opt(
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

/// What a turn reads; `interaction` is the number the next message would take.
async fn context(
    c: &impl GenericClient,
    thread: &str,
    user_id: &str,
    display_name: &str,
    window: u32,
) -> Result<TurnContext> {
    let interactions: i64 = c
        .query_one(
            "SELECT value FROM counters WHERE name = 'interactions'",
            &[],
        )
        .await?
        .get(0);
    let (thread_turns, claude_session, since_id) = c
        .query_opt(
            "SELECT turns, claude_session, since_id FROM threads WHERE thread = $1",
            &[&thread],
        )
        .await?
        .map_or((0, None, 0), |r| (r.get(0), r.get(1), r.get(2)));
    let cognitive_state: String = c
        .query_one("SELECT state FROM cognitive_state WHERE id = 1", &[])
        .await?
        .get(0);
    let summary = c
        .query_opt(
            "SELECT summary FROM thread_summaries WHERE thread = $1 AND since_id = $2",
            &[&thread, &since_id],
        )
        .await?
        .map(|r| r.get(0));
    Ok(TurnContext {
        interaction: interactions as u64 + 1,
        thread_turns,
        recent: recent(c, thread, window, since_id).await?,
        soul: soul_state(c).await?,
        user: get_user(c, user_id)
            .await?
            .unwrap_or_else(|| UserRecord::new(user_id, display_name)),
        whisper: None,
        claude_session,
        process: thread_process(c, thread).await?,
        since_id,
        cognitive_state,
        summary,
    })
}

async fn upsert_user(
    tx: &Transaction<'_>,
    user_id: &str,
    display_name: &str,
    now: i64,
) -> Result<()> {
    // The slug is fixed when the user is first seen, so a renamed person keeps their file.
    let base = users::slug(display_name, user_id);
    let taken: Option<String> = tx
        .query_opt("SELECT user_id FROM users WHERE slug = $1", &[&base])
        .await?
        .map(|r| r.get(0));
    let slug = match taken {
        Some(owner) if owner != user_id => format!("{base}-{}", users::slug("", user_id)),
        _ => base,
    };
    tx.execute(
        "INSERT INTO users (user_id, display_name, slug, updated_at) VALUES ($1, $2, $3, anima_at($4))
         ON CONFLICT (user_id) DO UPDATE SET display_name = excluded.display_name",
        &[&user_id, &display_name, &slug, &now],
    )
    .await?;
    Ok(())
}

async fn record_message(
    tx: &Transaction<'_>,
    thread: &str,
    user_id: &str,
    display_name: &str,
    text: &str,
    source: Option<&str>,
) -> Result<i64> {
    let now = now_ms();
    upsert_user(tx, user_id, display_name, now).await?;
    if let Some(src) = source {
        if let Some(r) = tx
            .query_opt("SELECT id FROM working_memory WHERE source = $1", &[&src])
            .await?
        {
            return Ok(r.get(0));
        }
    }
    let entry = NewEntry::new(EntryType::UserMessage, text)
        .user(user_id)
        .metadata(serde_json::json!({ "name": display_name }));
    let id = insert_entry(tx, thread, &entry, now).await?;
    if let Some(src) = source {
        tx.execute(
            "UPDATE working_memory SET source = $2 WHERE id = $1",
            &[&id, &src],
        )
        .await?;
    }
    Ok(id)
}

/// A new version of a user's model, with its change note, in the caller's transaction.
pub(super) async fn save_model(
    tx: &Transaction<'_>,
    user_id: &str,
    model: &str,
    note: &str,
    now: i64,
) -> Result<()> {
    tx.execute(
        "UPDATE users SET model = $2, model_version = model_version + 1, updated_at = anima_at($3)
         WHERE user_id = $1",
        &[&user_id, &model, &now],
    )
    .await?;
    tx.execute(
        "INSERT INTO user_model_history (user_id, version, model, change_note, created_at)
         SELECT user_id, model_version, model, $2, anima_at($3) FROM users WHERE user_id = $1",
        &[&user_id, &note, &now],
    )
    .await?;
    Ok(())
}

async fn commit(tx: &Transaction<'_>, rec: &TurnRecord) -> Result<Option<UserRecord>> {
    let now = now_ms();
    for e in &rec.entries {
        insert_entry(tx, &rec.thread, e, now).await?;
    }
    // The thread's row, locked: a reset that closes the conversation waits for this turn.
    let current: Option<i64> = tx
        .query_opt(
            "SELECT since_id FROM threads WHERE thread = $1 FOR UPDATE",
            &[&rec.thread],
        )
        .await?
        .map(|r| r.get(0));
    let reset_meanwhile =
        matches!((rec.since_id, current), (Some(began), Some(now_at)) if began != now_at);
    if reset_meanwhile {
        tx.execute(
            "UPDATE threads SET since_id = (SELECT coalesce(max(id), 0) FROM working_memory
                                            WHERE thread = $1),
                 updated_at = anima_at($2) WHERE thread = $1",
            &[&rec.thread, &now],
        )
        .await?;
    }
    for (k, v) in &rec.soul_updates {
        tx.execute(
            "INSERT INTO soul_memory (key, value, updated_at) VALUES ($1, $2, anima_at($3))
             ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at",
            &[k, v, &now],
        )
        .await?;
    }
    let counted = i64::from(!rec.proactive) * i64::from(!reset_meanwhile);
    tx.execute(
        "INSERT INTO threads (thread, turns, claude_session, updated_at)
         VALUES ($1, $4, $2, anima_at($3))
         ON CONFLICT (thread) DO UPDATE SET turns = threads.turns + $4,
             claude_session = coalesce(excluded.claude_session, threads.claude_session),
             updated_at = excluded.updated_at",
        &[
            &rec.thread,
            &rec.claude_session.as_ref().filter(|_| !reset_meanwhile),
            &now,
            &counted,
        ],
    )
    .await?;
    if let Some(state) = rec.process.as_ref().filter(|_| !reset_meanwhile) {
        save_process(
            tx,
            &rec.thread,
            rec.interaction,
            state,
            &rec.transitions,
            now,
        )
        .await?;
    }
    if !rec.proactive {
        tx.execute(
            "UPDATE users SET turns = turns + 1,
                 injected_at_turn = CASE WHEN $2 THEN turns + 1 ELSE injected_at_turn END,
                 updated_at = anima_at($3)
             WHERE user_id = $1",
            &[&rec.user_id, &rec.injected_user_model, &now],
        )
        .await?;
    }
    if let Some((model, note)) = &rec.user_model {
        save_model(tx, &rec.user_id, model, note, now).await?;
    }
    if let Some(id) = rec.whisper_id {
        tx.execute(
            "UPDATE whispers SET consumed_at = anima_at($2), consumed_by = $3, claimed_until = NULL
             WHERE id = $1 AND consumed_at IS NULL AND ($4::text IS NULL OR claimed_by = $4)",
            &[&id, &now, &rec.thread, &rec.whisper_claimant],
        )
        .await?;
    }
    for u in &rec.usage {
        tx.execute(
            "INSERT INTO turn_usage (thread, interaction, provider, model, input_tokens,
                 output_tokens, cache_creation_tokens, cache_read_tokens, latency_ms, stop_reason,
                 created_at)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, anima_at($11))",
            &[
                &rec.thread,
                &(rec.interaction as i64),
                &u.provider,
                &u.model,
                &(u.input_tokens as i64),
                &(u.output_tokens as i64),
                &(u.cache_creation_tokens as i64),
                &(u.cache_read_tokens as i64),
                &(u.latency_ms as i64),
                &u.stop_reason,
                &now,
            ],
        )
        .await?;
    }
    if let Some((id, reply)) = &rec.inbox {
        tx.execute(
            "UPDATE inbox SET status = 'replying', reply = $2 WHERE id = $1 AND status = 'pending'",
            &[id, reply],
        )
        .await?;
    }
    match &rec.user_model {
        Some(_) => get_user(tx, &rec.user_id).await,
        None => Ok(None),
    }
}

async fn save_process(
    tx: &Transaction<'_>,
    thread: &str,
    interaction: u64,
    state: &ThreadProcess,
    transitions: &[TransitionRecord],
    now: i64,
) -> Result<()> {
    let params = serde_json::to_value(&state.params).unwrap_or_default();
    tx.execute(
        "INSERT INTO thread_process (thread, current, previous, invocations, params, updated_at)
         VALUES ($1, $2, $3, $4, $5, anima_at($6))
         ON CONFLICT (thread) DO UPDATE SET current = excluded.current,
             previous = excluded.previous, invocations = excluded.invocations,
             params = excluded.params, updated_at = excluded.updated_at",
        &[
            &thread,
            &state.current,
            &state.previous,
            &(state.invocations as i64),
            &params,
            &now,
        ],
    )
    .await?;
    for t in transitions {
        tx.execute(
            "INSERT INTO process_transitions (thread, interaction, from_process, to_process, rule,
                 execute_now, params, at, action)
             VALUES ($1, $2, $3, $4, $5, $6, $7, anima_at($8), $9)",
            &[
                &thread,
                &(interaction as i64),
                &t.from,
                &t.to,
                &t.rule.map(|r| r as i32),
                &t.execute_now,
                &serde_json::Value::Object(t.params.clone()),
                &now,
                &t.action,
            ],
        )
        .await?;
    }
    Ok(())
}

#[async_trait]
impl Turns for Postgres {
    async fn begin_turn(&self, t: TurnStart) -> Result<(i64, TurnContext)> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let id = record_message(
                &tx,
                &t.thread,
                &t.user_id,
                &t.display_name,
                &t.text,
                t.source.as_deref(),
            )
            .await?;
            let interaction: i64 = tx
                .query_one(
                    "UPDATE counters SET value = value + 1 WHERE name = 'interactions'
                     RETURNING value",
                    &[],
                )
                .await?
                .get(0);
            if let Some(row) = t.inbox {
                tx.execute(
                    "UPDATE inbox SET attempts = attempts + 1, in_flight = $2 WHERE id = $1",
                    &[&row, &self.instance()],
                )
                .await?;
            }
            let now = now_ms();
            let whisper = tx
                .query_opt(
                    "UPDATE whispers SET claimed_by = $1, claimed_until = anima_at($2)
                     WHERE id = (SELECT id FROM whispers
                                 WHERE consumed_at IS NULL
                                   AND (claimed_until IS NULL OR claimed_until < anima_at($3))
                                 ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
                     RETURNING id, whisper, source",
                    &[&t.claimant, &t.claim_until_ms, &now],
                )
                .await?
                .map(|r| Whisper {
                    id: r.get(0),
                    text: r.get(1),
                    source: r.get(2),
                });
            let mut ctx = context(&tx, &t.thread, &t.user_id, &t.display_name, t.window).await?;
            tx.commit().await?;
            ctx.interaction = interaction as u64;
            ctx.whisper = whisper;
            Ok((id, ctx))
        }
        .await;
        self.noted(result)
    }

    async fn commit_turn(&self, rec: TurnRecord) -> Result<Option<UserRecord>> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let user = commit(&tx, &rec).await?;
            tx.commit().await?;
            Ok(user)
        }
        .await;
        self.noted(result)
    }

    async fn release_turn(&self, interaction: u64, whisper: Option<(i64, String)>) -> Result<()> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            tx.execute(
                "UPDATE counters SET value = value - 1 WHERE name = 'interactions' AND value = $1",
                &[&(interaction as i64)],
            )
            .await?;
            if let Some((id, claimant)) = whisper {
                tx.execute(
                    "UPDATE whispers SET claimed_by = NULL, claimed_until = NULL
                     WHERE id = $1 AND claimed_by = $2 AND consumed_at IS NULL",
                    &[&id, &claimant],
                )
                .await?;
            }
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
        let mut client = self.client().await?;
        // One snapshot for every read.
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await?;
        let ctx = context(&tx, thread, user_id, display_name, window).await?;
        tx.commit().await?;
        Ok(ctx)
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
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let id = record_message(&tx, thread, user_id, display_name, text, source).await?;
            tx.commit().await?;
            Ok(id)
        }
        .await;
        self.noted(result)
    }

    async fn thread_entries(&self, thread: &str) -> Result<Vec<Entry>> {
        let client = self.client().await?;
        client
            .query(
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
            .query_opt(
                "SELECT user_id, metadata->>'name' FROM working_memory
                 WHERE thread = $1 AND entry_type = 'userMessage' ORDER BY id DESC LIMIT 1",
                &[&thread],
            )
            .await?;
        let last_at: Option<i64> = client
            .query_one(
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
            .query(
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
            .query_opt(
                "SELECT claude_session FROM threads WHERE thread = $1",
                &[&thread],
            )
            .await?
            .and_then(|r| r.get(0)))
    }
}
