//! The PostgreSQL schema's migrations: numbered SQL files from migrations/postgres/, embedded
//! at build time, applied in one transaction under an advisory lock, so that processes
//! starting together migrate once and the others find the work done. A database whose schema
//! is newer than this anima is refused. `anima check` proves here, leaving nothing, that the
//! role can create and migrate the schema or write to the current one.

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
    include_str!("../../../migrations/postgres/0008_traces.sql"),
    include_str!("../../../migrations/postgres/0009_daemon_listen.sql"),
    include_str!("../../../migrations/postgres/0010_dossiers.sql"),
    include_str!("../../../migrations/postgres/0011_traces_person.sql"),
    include_str!("../../../migrations/postgres/0012_trace_pieces.sql"),
];

pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// The advisory lock every anima takes to migrate (any fixed number: "anima" in ASCII).
const MIGRATION_LOCK: i64 = 0x0061_6e69_6d61;

pub(super) async fn migrate(client: &mut Object, place: &str) -> Result<(), StoreError> {
    let tx = client.transaction().await?;
    apply(&tx, place).await?;
    tx.commit().await?;
    Ok(())
}

/// Proves, for `anima check`, that the role can do what anima needs, and leaves nothing: the
/// migrations a schema behind this anima's needs (creating it in an empty database), then a
/// write to every table anima writes, all in a transaction that is rolled back. The schema's
/// version as found.
pub(super) async fn prove(
    client: &mut tokio_postgres::Client,
    place: &str,
) -> Result<i64, StoreError> {
    let tx = client.transaction().await?;
    let found = apply(&tx, place).await?;
    writable(&tx, place).await?;
    tx.rollback().await?;
    Ok(found)
}

/// Brings the schema to this anima's version under the migration lock, and returns the
/// version it had. A current schema is only read: a role that may write anima's tables but
/// not create any (the schema's owner migrated it) runs anima.
async fn apply(tx: &tokio_postgres::Transaction<'_>, place: &str) -> Result<i64, StoreError> {
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    let found = version(tx).await?;
    if found > SCHEMA_VERSION {
        return Err(StoreError::TooNewDatabase {
            place: place.to_string(),
            found,
            supported: SCHEMA_VERSION,
        });
    }
    if found == SCHEMA_VERSION {
        return Ok(found);
    }
    let failed = |version: usize| {
        move |e: tokio_postgres::Error| StoreError::Migration {
            place: place.to_string(),
            version: version as i64,
            why: super::describe(&e),
        }
    };
    let next = found as usize + 1;
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS anima_schema (
             id       smallint PRIMARY KEY CHECK (id = 1),
             version  bigint   NOT NULL
         )",
    )
    .await
    .map_err(failed(next))?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.batch_execute(sql).await.map_err(failed(i + 1))?;
    }
    tx.execute(
        "INSERT INTO anima_schema (id, version) VALUES (1, $1)
         ON CONFLICT (id) DO UPDATE SET version = excluded.version",
        &[&SCHEMA_VERSION],
    )
    .await
    .map_err(failed(SCHEMA_VERSION as usize))?;
    tracing::info!(db = %place, from = found, to = SCHEMA_VERSION, "database migrated");
    Ok(found)
}

/// Whether the role may read and write every table of anima's schema and use its sequences,
/// and the server takes a write (not a standby, not read-only): what is missing, named.
async fn writable(tx: &tokio_postgres::Transaction<'_>, place: &str) -> Result<(), StoreError> {
    let missing: Vec<String> = tx
        .query(
            "SELECT c.relname || CASE c.relkind WHEN 'S' THEN ' (sequence: USAGE)'
                                    ELSE ' (SELECT, INSERT, UPDATE, DELETE)' END
             FROM pg_class c
             WHERE c.relnamespace = (SELECT relnamespace FROM pg_class
                                     WHERE oid = 'anima_schema'::regclass)
               AND CASE c.relkind
                     WHEN 'S' THEN NOT has_sequence_privilege(c.oid, 'USAGE')
                     WHEN 'r' THEN NOT (has_table_privilege(c.oid, 'SELECT')
                                        AND has_table_privilege(c.oid, 'INSERT')
                                        AND has_table_privilege(c.oid, 'UPDATE')
                                        AND has_table_privilege(c.oid, 'DELETE'))
                     ELSE false END
             ORDER BY c.relname",
            &[],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if !missing.is_empty() {
        return Err(StoreError::Connect {
            place: place.to_string(),
            why: format!(
                "the role may not use all of anima's tables; it lacks rights on {}: connect as \
                 the schema's owner, or grant them",
                missing.join(", ")
            ),
        });
    }
    tx.execute(
        "INSERT INTO store_probe (id, at) VALUES (1, now())
         ON CONFLICT (id) DO UPDATE SET at = excluded.at",
        &[],
    )
    .await?;
    Ok(())
}

/// The schema version of the database (0: none yet).
pub(super) async fn version(
    client: &impl tokio_postgres::GenericClient,
) -> Result<i64, StoreError> {
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
