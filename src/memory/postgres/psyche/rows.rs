//! The soul's state, its relationships, the facts people stated and its intentions, as rows:
//! what `psyche::update` and `psyche::mapping` read and write whole. SQL only; no number is
//! computed here. The substrate is the JSON document SQLite stores (`memory::psyche`'s
//! `stored_json` / `substrate_of`), exact to the bit.

use std::collections::BTreeMap;

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::{Param, Result};
use crate::memory::psyche::{stored_json, substrate_of};
use crate::psyche::classify::{Fact, FactKind};
use crate::psyche::state::Horizon;
use crate::psyche::{Intention, Psyche, Relationship, Signed, Substrate, Unit};

/// Makes sure the soul has a row to lock (its state `{}`, read as a new soul's, until an
/// event writes it).
pub(super) const ENSURE: &str = "INSERT INTO psyche_substrate (soul, state, updated_at)
    VALUES ($1, '{}', anima_at($2)) ON CONFLICT (soul) DO NOTHING";

/// Locks the soul's row until the transaction ends, and reads its state: an event's first read.
pub(super) const LOCK: &str = "SELECT state::text FROM psyche_substrate WHERE soul = $1 FOR UPDATE";

const STATE: &str = "SELECT state::text FROM psyche_substrate WHERE soul = $1";

/// Writes the soul's state (its row exists: the event locked it).
pub(super) const SAVE_STATE: &str =
    "UPDATE psyche_substrate SET state = $2::text::jsonb, updated_at = anima_at($3) WHERE soul = $1";

pub(super) const RELATIONSHIP: &str =
    "SELECT warmth, trust, tension, comfort, volatility, exchanges, anima_ms(last_seen)
     FROM psyche_relationships WHERE soul = $1 AND person = $2";

/// Writes a relationship's row whole.
pub(super) const SAVE_RELATIONSHIP: &str = "INSERT INTO psyche_relationships
    (soul, person, warmth, trust, tension, comfort, volatility, exchanges, last_seen)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, anima_at($9))
    ON CONFLICT (soul, person) DO UPDATE SET warmth = excluded.warmth, trust = excluded.trust,
        tension = excluded.tension, comfort = excluded.comfort,
        volatility = excluded.volatility, exchanges = excluded.exchanges,
        last_seen = excluded.last_seen";

/// Facts people stated about themselves; the latest of each kind wins.
pub(super) const SAVE_FACTS: &str = "INSERT INTO psyche_facts (soul, person, kind, value, at)
    SELECT $1, $2, k, v, anima_at($5) FROM unnest($3::text[], $4::text[]) AS f (k, v)
    ON CONFLICT (soul, person, kind) DO UPDATE SET value = excluded.value, at = excluded.at";

/// The state as stored; a soul without one (or with a row this build cannot read) is new.
pub(super) fn substrate(json: Option<&str>, psyche: &Psyche, now: i64) -> Substrate {
    substrate_of(json.unwrap_or_default(), psyche, now)
}

pub(super) async fn load_substrate(
    c: &impl GenericClient,
    soul: &str,
    psyche: &Psyche,
    now: i64,
) -> Result<Substrate> {
    let st = c.prepare_cached(STATE).await?;
    let row = c.query_opt(&st, &[&soul]).await?;
    Ok(substrate(row.as_ref().map(|r| r.get(0)), psyche, now))
}

/// The parameters of `SAVE_STATE`.
pub(super) fn state_params(soul: &str, s: &Substrate) -> Vec<Param> {
    vec![
        Box::new(soul.to_string()),
        Box::new(stored_json(s)),
        Box::new(s.updated_at),
    ]
}

/// A relationship from the first seven columns of `row`.
pub(super) fn relationship(r: &Row) -> Relationship {
    Relationship {
        warmth: Signed::new(r.get(0)),
        trust: Signed::new(r.get(1)),
        tension: Unit::new(r.get(2)),
        comfort: Unit::new(r.get(3)),
        volatility: Unit::new(r.get(4)),
        exchanges: r.get::<_, i64>(5).clamp(0, u32::MAX as i64) as u32,
        last_seen: r.get(6),
    }
}

/// The relationships with `people` the soul has, by person.
pub(super) async fn relationships_with(
    c: &impl GenericClient,
    soul: &str,
    people: &[&str],
) -> Result<BTreeMap<String, Relationship>> {
    let st = c
        .prepare_cached(
            "SELECT warmth, trust, tension, comfort, volatility, exchanges, anima_ms(last_seen),
                 person
             FROM psyche_relationships WHERE soul = $1 AND person = ANY($2)",
        )
        .await?;
    Ok(c.query(&st, &[&soul, &people])
        .await?
        .iter()
        .map(|r| (r.get(7), relationship(r)))
        .collect())
}

/// The parameters of `SAVE_RELATIONSHIP`.
pub(super) fn relationship_params(soul: &str, person: &str, r: &Relationship) -> Vec<Param> {
    vec![
        Box::new(soul.to_string()),
        Box::new(person.to_string()),
        Box::new(r.warmth.get()),
        Box::new(r.trust.get()),
        Box::new(r.tension.get()),
        Box::new(r.comfort.get()),
        Box::new(r.volatility.get()),
        Box::new(i64::from(r.exchanges)),
        Box::new(r.last_seen),
    ]
}

/// The parameters of `SAVE_FACTS`: one fact of each kind, the last stated winning (as rows
/// written one after another would leave them).
pub(super) fn facts_params(soul: &str, person: &str, facts: &[Fact], at: i64) -> Vec<Param> {
    let latest: BTreeMap<&str, &str> = facts
        .iter()
        .map(|f| (f.kind.name(), f.value.as_str()))
        .collect();
    let (kinds, values): (Vec<String>, Vec<String>) = latest
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .unzip();
    vec![
        Box::new(soul.to_string()),
        Box::new(person.to_string()),
        Box::new(kinds),
        Box::new(values),
        Box::new(at),
    ]
}

/// The facts `people` stated, by person, each person's ordered by kind (as SQLite orders
/// them: by bytes).
pub(super) async fn facts_of(
    c: &impl GenericClient,
    soul: &str,
    people: &[&str],
) -> Result<BTreeMap<String, Vec<Fact>>> {
    let st = c
        .prepare_cached(
            "SELECT person, kind, value FROM psyche_facts WHERE soul = $1 AND person = ANY($2)
             ORDER BY person, kind COLLATE \"C\"",
        )
        .await?;
    let mut out: BTreeMap<String, Vec<Fact>> = BTreeMap::new();
    for r in c.query(&st, &[&soul, &people]).await? {
        if let Some(kind) = FactKind::from_name(r.get(1)) {
            out.entry(r.get(0)).or_default().push(Fact {
                kind,
                value: r.get(2),
            });
        }
    }
    Ok(out)
}

pub(super) async fn intentions(c: &impl GenericClient, soul: &str) -> Result<Vec<Intention>> {
    let st = c
        .prepare_cached(
            "SELECT kind, target, horizon, priority, anima_ms(created_at), anima_ms(expires_at)
             FROM psyche_intentions WHERE soul = $1 ORDER BY priority DESC, id",
        )
        .await?;
    Ok(c.query(&st, &[&soul])
        .await?
        .iter()
        .map(|r| Intention {
            kind: r.get(0),
            target: r.get(1),
            horizon: Horizon::from_name(r.get(2)).unwrap_or(Horizon::Short),
            priority: Unit::new(r.get(3)),
            created_at: r.get(4),
            expires_at: r.get(5),
        })
        .collect())
}

/// Replaces the soul's intentions with `all`, in two statements.
pub(super) async fn save_intentions(
    c: &impl GenericClient,
    soul: &str,
    all: &[Intention],
) -> Result<()> {
    let delete = c
        .prepare_cached("DELETE FROM psyche_intentions WHERE soul = $1")
        .await?;
    c.execute(&delete, &[&soul]).await?;
    let kinds: Vec<&str> = all.iter().map(|i| i.kind.as_str()).collect();
    let targets: Vec<Option<&str>> = all.iter().map(|i| i.target.as_deref()).collect();
    let horizons: Vec<&str> = all.iter().map(|i| i.horizon.name()).collect();
    let priorities: Vec<f64> = all.iter().map(|i| i.priority.get()).collect();
    let created: Vec<i64> = all.iter().map(|i| i.created_at).collect();
    let expires: Vec<i64> = all
        .iter()
        .map(|i| i.expires_at.clamp(-FAR_MS, FAR_MS))
        .collect();
    let insert = c
        .prepare_cached(
            "INSERT INTO psyche_intentions (soul, kind, target, horizon, priority, created_at, expires_at)
             SELECT $1, k, t, h, p, anima_at(c), anima_at(e)
             FROM unnest($2::text[], $3::text[], $4::text[], $5::float8[], $6::int8[], $7::int8[])
                 WITH ORDINALITY AS i (k, t, h, p, c, e, n)
             ORDER BY n",
        )
        .await?;
    c.execute(
        &insert,
        &[
            &soul,
            &kinds,
            &targets,
            &horizons,
            &priorities,
            &created,
            &expires,
        ],
    )
    .await?;
    Ok(())
}

/// Times past any the psyche writes, either way, that `timestamptz` still holds.
const FAR_MS: i64 = 1 << 47;
