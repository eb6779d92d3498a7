//! The psychology substrate on PostgreSQL (see `memory::psyche` for what each operation
//! promises). What an event, post-cognition and a packet decide is `memory::psyche::rule`'s,
//! the same rules SQLite runs; this module owns the SQL only, and turns a rule's writes into
//! statements (`Statements`).
//!
//! An event is one transaction that locks the soul's substrate row first (`SELECT … FOR
//! UPDATE`, the row inserted empty beforehand if missing, `ON CONFLICT DO NOTHING`), reads the
//! state and the author's relationship under that lock, runs `rule::event` (update, gate), and
//! writes what it decided: two events never interleave, from one
//! process or many, and post-cognition takes the same lock. An event with a key claims it in
//! `psyche_seen` (unique per soul, `ON CONFLICT DO NOTHING`) under the lock, so a key is
//! applied once ever. Statements of one step go to the server together (tokio-postgres
//! pipelines them; it runs them in the order sent), the BEGIN with the first and the COMMIT
//! with the writes, so an event is two round trips and holds the row for one.
//! `rows` holds the state, relationships, facts and intentions; `memories` the episodic
//! memories and retrieval's candidates; `log` the gate decisions; `statements` a rule's
//! writes as statements.

mod log;
mod memories;
pub(super) use memories::lexemes;
mod rows;
mod statements;

use std::collections::BTreeMap;

use async_trait::async_trait;
use deadpool_postgres::{GenericClient, Transaction};
use futures_util::future::{try_join, try_join5, try_join_all};
use tokio_postgres::types::ToSql;

use super::{snapshot, Postgres};
use crate::memory::faces::Psychology;
use crate::memory::psyche::{rule, LoggedDecision, Mind, Place};
use crate::memory::StoreError;
use crate::psyche::gate::{Decision, GateRules};
use crate::psyche::mapping::{IntentionUpdate, StanceShift};
use crate::psyche::packet::Packet;
use crate::psyche::update::Effects;
use crate::psyche::{Event, Psyche, Substrate};
use statements::Statements;

type Result<T> = std::result::Result<T, StoreError>;

/// A statement's parameter, owned, for statements sent together (`pipeline`).
pub(super) type Param = Box<dyn ToSql + Sync + Send>;

/// Claims an event's key for the soul: a row when the key is new, none when it was applied.
const CLAIM: &str = "INSERT INTO psyche_seen (soul, key, at) VALUES ($1, $2, anima_at($3))
    ON CONFLICT (soul, key) DO NOTHING RETURNING 1";

/// Sends `writes` to the server together, to run in this order in `tx`. (Fewer than 30
/// statements: `try_join_all` then polls them in order, so they are sent in order.)
async fn pipeline(tx: &Transaction<'_>, writes: Vec<(&str, Vec<Param>)>) -> Result<()> {
    let mut prepared = Vec::with_capacity(writes.len());
    for (sql, params) in writes {
        prepared.push((tx.prepare_cached(sql).await?, params));
    }
    try_join_all(prepared.iter().map(|(st, params)| {
        tx.execute_raw(st, params.iter().map(|p| &**p as &(dyn ToSql + Sync)))
    }))
    .await?;
    Ok(())
}

/// A pooled connection in a transaction begun by hand (its BEGIN sent with the first
/// statements, not through tokio-postgres's `Transaction`, whose drop rolls back). Unless
/// `ended`, it is closed when dropped rather than given back to the pool still in the
/// transaction: work cancelled mid-event (a turn stopped) leaves the server to roll it back
/// and let the soul's row go, and no later statement of the pool runs inside it.
struct ByHand(Option<deadpool_postgres::Object>);

impl ByHand {
    fn client(&self) -> &deadpool_postgres::Object {
        self.0
            .as_ref()
            .expect("a connection until ended or dropped")
    }

    /// The transaction is over: the connection goes back to the pool.
    fn ended(mut self) {
        self.0.take();
    }
}

impl Drop for ByHand {
    fn drop(&mut self) {
        if let Some(client) = self.0.take() {
            drop(deadpool_postgres::Object::take(client));
        }
    }
}

/// Sends `writes` and the COMMIT of the transaction they end to the server together, to run
/// in this order. A write that fails makes the COMMIT a rollback; its error is returned.
async fn committed(
    client: &deadpool_postgres::Object,
    writes: Vec<(&str, Vec<Param>)>,
) -> Result<()> {
    let mut prepared = Vec::with_capacity(writes.len());
    for (sql, params) in writes {
        prepared.push((client.prepare_cached(sql).await?, params));
    }
    try_join(
        try_join_all(prepared.iter().map(|(st, params)| {
            client.execute_raw(st, params.iter().map(|p| &**p as &(dyn ToSql + Sync)))
        })),
        client.batch_execute("COMMIT"),
    )
    .await?;
    Ok(())
}

/// Locks `soul`'s substrate row until `tx` ends (inserting it first if missing) and reads the
/// state under the lock, in one round trip.
async fn lock(tx: &Transaction<'_>, soul: &str, psyche: &Psyche, now: i64) -> Result<Substrate> {
    let ensure_row = tx.prepare_cached(rows::ENSURE).await?;
    let lock_row = tx.prepare_cached(rows::LOCK).await?;
    let (_, row) = try_join(
        tx.execute(&ensure_row, &[&soul, &now]),
        tx.query_one(&lock_row, &[&soul]),
    )
    .await?;
    Ok(rows::substrate(Some(row.get(0)), psyche, now))
}

impl Postgres {
    /// One event in one transaction (see the module's docs); `None` when `key` was applied.
    async fn event(
        &self,
        soul: &str,
        psyche: &Psyche,
        rules: &GateRules,
        event: &Event,
        place: &Place,
        key: Option<&str>,
    ) -> Result<Option<(Effects, Decision)>> {
        let begun = ByHand(Some(self.client().await?));
        let applied = self
            .event_on(begun.client(), soul, psyche, rules, event, place, key)
            .await;
        // Whatever was sent, nothing of it stays: the connection goes back to the pool outside
        // any transaction (a warning only, if the COMMIT ended it already), or is closed.
        if applied.is_err() && begun.client().batch_execute("ROLLBACK").await.is_err() {
            return applied;
        }
        begun.ended();
        applied
    }

    /// `event` on `client`, in a transaction whose BEGIN goes to the server with its first
    /// statements and whose COMMIT goes with its writes: the soul's row is held for one round
    /// trip and the Rust in between, however many daemons wait for it.
    #[allow(clippy::too_many_arguments)]
    async fn event_on(
        &self,
        client: &deadpool_postgres::Object,
        soul: &str,
        psyche: &Psyche,
        rules: &GateRules,
        event: &Event,
        place: &Place,
        key: Option<&str>,
    ) -> Result<Option<(Effects, Decision)>> {
        let ensure_row = client.prepare_cached(rows::ENSURE).await?;
        let lock_row = client.prepare_cached(rows::LOCK).await?;
        let relationship = client.prepare_cached(rows::RELATIONSHIP).await?;
        let claim = client.prepare_cached(CLAIM).await?;
        // Sent together, run in order: the transaction begun, the row made sure of and
        // locked, then the author's relationship read and the key claimed under the lock.
        let (_, _, state, rel, new) = try_join5(
            client.batch_execute("BEGIN"),
            client.execute(&ensure_row, &[&soul, &event.at]),
            client.query_one(&lock_row, &[&soul]),
            async {
                match &event.person {
                    Some(p) => client.query_opt(&relationship, &[&soul, p]).await,
                    None => Ok(None),
                }
            },
            async {
                match key {
                    Some(k) => Ok(client
                        .query_opt(&claim, &[&soul, &k, &event.at])
                        .await?
                        .is_some()),
                    None => Ok(true),
                }
            },
        )
        .await?;
        if !new {
            client.batch_execute("ROLLBACK").await?;
            return Ok(None);
        }
        let substrate = rows::substrate(Some(state.get(0)), psyche, event.at);
        let rel = rel.map(|r| rows::relationship(&r));
        let mut writes = Statements::new(soul);
        let applied = rule::event(
            &substrate,
            rel.as_ref(),
            event,
            place,
            psyche,
            rules,
            &mut writes,
        )?;
        committed(client, writes.writes).await?;
        Ok(Some(applied))
    }
}

#[async_trait]
impl Psychology for Postgres {
    async fn psyche_event(
        &self,
        soul: &str,
        psyche: &Psyche,
        rules: &GateRules,
        event: &Event,
        place: &Place,
    ) -> Result<(Effects, Decision)> {
        let result = self.event(soul, psyche, rules, event, place, None).await;
        let applied = self.noted(result)?;
        applied.ok_or_else(|| StoreError::Task("an event without a key was refused".into()))
    }

    async fn psyche_event_once(
        &self,
        soul: &str,
        psyche: &Psyche,
        rules: &GateRules,
        event: &Event,
        place: &Place,
        key: &str,
    ) -> Result<Option<(Effects, Decision)>> {
        let result = self
            .event(soul, psyche, rules, event, place, Some(key))
            .await;
        self.noted(result)
    }

    async fn psyche_packet(
        &self,
        soul: &str,
        psyche: &Psyche,
        people: &[(String, String)],
        query: &str,
        now: i64,
    ) -> Result<Packet> {
        let mut client = self.client().await?;
        let tx = snapshot(&mut client).await?;
        let ids: Vec<&str> = people.iter().map(|(id, _)| id.as_str()).collect();
        // Sent together: reads of one snapshot, in any order.
        let (substrate, relationships, facts, memories, intentions) = tokio::try_join!(
            rows::load_substrate(&tx, soul, psyche, now),
            rows::relationships_with(&tx, soul, &ids),
            rows::facts_of(&tx, soul, &ids),
            memories::candidates(&tx, soul, query),
            rows::intentions(&tx, soul),
        )?;
        tx.commit().await?;
        let read = rule::PacketRead {
            substrate,
            relationships,
            facts,
            memories,
            intentions,
        };
        Ok(rule::packet(read, psyche, people, query, now))
    }

    async fn psyche_post_cognition(
        &self,
        soul: &str,
        psyche: &Psyche,
        shifts: &[StanceShift],
        updates: &[IntentionUpdate],
        now: i64,
    ) -> Result<Vec<String>> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let substrate = lock(&tx, soul, psyche, now).await?;
            let targets = rule::shifted(shifts);
            let (relationships, intentions) = tokio::try_join!(
                rows::relationships_with(&tx, soul, &targets),
                rows::intentions(&tx, soul),
            )?;
            let read = rule::CognitionRead {
                substrate,
                relationships,
                intentions,
            };
            let mut writes = Statements::new(soul);
            let applied = rule::post_cognition(&read, shifts, updates, psyche, now, &mut writes)?;
            pipeline(&tx, writes.writes).await?;
            rows::save_intentions(&tx, soul, &writes.intentions).await?;
            tx.commit().await?;
            Ok(applied)
        }
        .await;
        self.noted(result)
    }

    async fn psyche_mind(
        &self,
        soul: &str,
        psyche: &Psyche,
        person: Option<&str>,
        now: i64,
    ) -> Result<Mind> {
        let mut client = self.client().await?;
        let tx = snapshot(&mut client).await?;
        let substrate = rows::load_substrate(&tx, soul, psyche, now).await?;
        // With a person and without, two statements: a plan for `$2 IS NULL OR person = $2`
        // could use neither the person's key nor the index by last seen.
        const RELATIONSHIPS: &str = "SELECT warmth, trust, tension, comfort, volatility,
                 exchanges, anima_ms(last_seen), person FROM psyche_relationships WHERE soul = $1";
        let relationships = match person {
            Some(person) => {
                let sql = format!("{RELATIONSHIPS} AND person = $2");
                tx.query(&sql, &[&soul, &person]).await?
            }
            None => {
                let sql = format!("{RELATIONSHIPS} ORDER BY last_seen DESC NULLS LAST LIMIT 50");
                tx.query(&sql, &[&soul]).await?
            }
        };
        let relationships: BTreeMap<String, _> = relationships
            .iter()
            .map(|r| (r.get(7), rows::relationship(r)))
            .collect();
        let who: Vec<&str> = relationships.keys().map(String::as_str).collect();
        let facts = rows::facts_of(&tx, soul, &who).await?;
        let memories: i64 = tx
            .query_one(
                "SELECT count(*) FROM psyche_memories WHERE soul = $1",
                &[&soul],
            )
            .await?
            .get(0);
        let recent_memories = tx
            .query(
                &format!(
                    "SELECT {} FROM psyche_memories m WHERE m.soul = $1
                     AND ($2::text IS NULL OR m.id IN (
                         SELECT memory FROM psyche_memory_people WHERE soul = $1 AND person = $2))
                     ORDER BY m.at DESC, m.id DESC LIMIT 10",
                    memories::COLUMNS
                ),
                &[&soul, &person],
            )
            .await?
            .iter()
            .map(memories::memory)
            .collect();
        let decisions = log::decisions(&tx, soul, person, 10).await?;
        let intentions = rows::intentions(&tx, soul).await?;
        tx.commit().await?;
        Ok(Mind {
            substrate,
            relationships,
            facts,
            intentions,
            memories,
            recent_memories,
            decisions,
        })
    }

    async fn psyche_decisions(&self, soul: &str, limit: usize) -> Result<Vec<LoggedDecision>> {
        let client = self.client().await?;
        log::decisions(&client, soul, None, limit).await
    }
}
