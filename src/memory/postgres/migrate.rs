//! The PostgreSQL schema's migrations: numbered SQL files from migrations/postgres/, embedded
//! at build time, applied in one transaction under an advisory lock, so that processes
//! starting together migrate once and the others find the work done. A database whose schema
//! is newer than this anima is refused.

use deadpool_postgres::Object;

use crate::memory::StoreError;

/// The migrations, in order; the schema version is how many have been applied.
const MIGRATIONS: &[&str] = &[
    include_str!("../../../migrations/postgres/0001_init.sql"),
    include_str!("../../../migrations/postgres/0002_turn_functions.sql"),
    include_str!("../../../migrations/postgres/0003_turn_window.sql"),
    include_str!("../../../migrations/postgres/0004_claims.sql"),
    include_str!("../../../migrations/postgres/0005_fenced_writes.sql"),
    include_str!("../../../migrations/postgres/0006_shared_budgets.sql"),
    include_str!("../../../migrations/postgres/0007_planned_once.sql"),
];

pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The advisory lock every anima takes to migrate (any fixed number: "anima" in ASCII).
const MIGRATION_LOCK: i64 = 0x0061_6e69_6d61;

pub(super) async fn migrate(client: &mut Object, place: &str) -> Result<(), StoreError> {
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS anima_schema (
             id       smallint PRIMARY KEY CHECK (id = 1),
             version  bigint   NOT NULL
         )",
    )
    .await?;
    let found: i64 = tx
        .query_opt("SELECT version FROM anima_schema WHERE id = 1", &[])
        .await?
        .map_or(0, |r| r.get(0));
    if found > SCHEMA_VERSION {
        return Err(StoreError::TooNewDatabase {
            place: place.to_string(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.batch_execute(sql)
            .await
            .map_err(|e| StoreError::Migration {
                place: place.to_string(),
                version: i as i64 + 1,
                why: e.to_string(),
            })?;
    }
    if found < SCHEMA_VERSION {
        tx.execute(
            "INSERT INTO anima_schema (id, version) VALUES (1, $1)
             ON CONFLICT (id) DO UPDATE SET version = excluded.version",
            &[&SCHEMA_VERSION],
        )
        .await?;
        tracing::info!(db = %place, from = found, to = SCHEMA_VERSION, "database migrated");
    }
    tx.commit().await?;
    Ok(())
}

/// The schema version of the database, without migrating it (for `anima check`).
pub(super) async fn version(client: &tokio_postgres::Client) -> Result<i64, StoreError> {
    let exists: bool = client
        .query_one("SELECT to_regclass('anima_schema') IS NOT NULL", &[])
        .await?
        .get(0);
    if !exists {
        return Ok(0);
    }
    Ok(client
        .query_opt("SELECT version FROM anima_schema WHERE id = 1", &[])
        .await?
        .map_or(0, |r| r.get(0)))
}
