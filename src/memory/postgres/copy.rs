//! `anima store copy --to postgres`: everything a soul's SQLite store holds, copied into an
//! empty PostgreSQL database in one transaction, so a copy that fails or is killed midway
//! leaves the database as empty as it was.
//!
//! Each table is a list of columns and what each becomes: SQLite's unix milliseconds become
//! timestamps, its 0/1 flags booleans, its JSON text jsonb. Row ids are kept (references
//! between tables stay true), and each identity sequence is moved past the largest.

use rusqlite::types::Value as Sql;
use tokio_postgres::types::ToSql;

use super::Postgres;
use crate::memory::{SqliteStore, StoreError};

type Result<T> = std::result::Result<T, StoreError>;

/// What a SQLite column becomes.
#[derive(Clone, Copy)]
enum As {
    Int,
    /// An INTEGER that PostgreSQL keeps as `integer` (not bigint).
    Int4,
    /// An INTEGER that PostgreSQL keeps as `smallint`.
    Int2,
    Real,
    Text,
    /// Unix milliseconds → timestamptz.
    Ms,
    /// Unix microseconds → timestamptz.
    Us,
    Bool,
    Json,
    /// A text's words for the full-text index (`psyche_memories.search`).
    Words,
}

/// A table: its SQLite name, its PostgreSQL name, and (SQLite column, PostgreSQL column, as).
struct Table {
    from: &'static str,
    to: &'static str,
    columns: &'static [(&'static str, &'static str, As)],
    /// Its id is an identity column: kept, and the sequence moved past it.
    identity: bool,
    /// The row is seeded by the schema: the copy replaces it (by this key).
    upsert_on: Option<&'static str>,
    /// A kind shown in the report.
    kind: &'static str,
}

use As::*;

#[rustfmt::skip]
const TABLES: &[Table] = &[
    Table { from: "inbox", to: "inbox", kind: "messages", identity: true, upsert_on: None, columns: &[
        ("id", "id", Int), ("origin", "origin", Text), ("conversation", "conversation", Text),
        ("seq", "seq", Real), ("address", "address", Text), ("note", "note", Text),
        ("user_id", "user_id", Text), ("text", "text", Text), ("status", "status", Text),
        ("reply", "reply", Text), ("parts_posted", "parts_posted", Int),
        ("part_refs", "part_refs", Json), ("reply_ref", "reply_ref", Text),
        ("stream_ref", "stream_ref", Text), ("received_us", "received_at", Us),
        ("attempts", "attempts", Int), ("failures", "failures", Int),
        ("interruptions", "interruptions", Int), ("in_flight", "in_flight", Text),
        ("failure", "failure", Text), ("heard_in", "heard_in", Text), ("done_at", "done_at", Ms)] },
    Table { from: "conversations", to: "conversations", kind: "conversations", identity: false, upsert_on: None, columns: &[
        ("key", "key", Text), ("spoken", "spoken", Bool), ("note", "note", Text)] },
    Table { from: "openings", to: "openings", kind: "openings", identity: false, upsert_on: None, columns: &[
        ("kind", "kind", Text), ("place", "place", Text), ("at_ms", "at", Ms)] },
    Table { from: "feedback", to: "feedback", kind: "feedback", identity: false, upsert_on: None, columns: &[
        ("inbox_id", "inbox_id", Int), ("person", "person", Text), ("value", "value", Text),
        ("at_ms", "at", Ms)] },
    Table { from: "admin_log", to: "admin_log", kind: "admin commands", identity: false, upsert_on: None, columns: &[
        ("origin", "origin", Text), ("user_id", "user_id", Text), ("command", "command", Text),
        ("allowed", "allowed", Bool), ("done", "done", Bool), ("at", "at", Ms)] },
    Table { from: "working_memory", to: "working_memory", kind: "working-memory entries", identity: true, upsert_on: None, columns: &[
        ("id", "id", Int), ("thread", "thread", Text), ("entry_type", "entry_type", Text),
        ("content", "content", Text), ("verb", "verb", Text), ("user_id", "user_id", Text),
        ("metadata", "metadata", Json), ("source", "source", Text), ("created_at", "created_at", Ms)] },
    Table { from: "threads", to: "threads", kind: "threads", identity: false, upsert_on: None, columns: &[
        ("thread", "thread", Text), ("turns", "turns", Int), ("claude_session", "claude_session", Text),
        ("since_id", "since_id", Int), ("updated_at", "updated_at", Ms)] },
    Table { from: "turn_usage", to: "turn_usage", kind: "model calls", identity: true, upsert_on: None, columns: &[
        ("id", "id", Int), ("thread", "thread", Text), ("interaction", "interaction", Int),
        ("provider", "provider", Text), ("model", "model", Text), ("input_tokens", "input_tokens", Int),
        ("output_tokens", "output_tokens", Int), ("cache_creation_tokens", "cache_creation_tokens", Int),
        ("cache_read_tokens", "cache_read_tokens", Int), ("latency_ms", "latency_ms", Int),
        ("stop_reason", "stop_reason", Text), ("created_at", "created_at", Ms)] },
    Table { from: "soul_memory", to: "soul_memory", kind: "soul-state keys", identity: false, upsert_on: Some("key"), columns: &[
        ("key", "key", Text), ("value", "value", Text), ("updated_at", "updated_at", Ms)] },
    Table { from: "counters", to: "counters", kind: "counters", identity: false, upsert_on: Some("name"), columns: &[
        ("name", "name", Text), ("value", "value", Int)] },
    Table { from: "whispers", to: "whispers", kind: "whispers", identity: true, upsert_on: None, columns: &[
        ("id", "id", Int), ("whisper", "whisper", Text), ("source", "source", Text),
        ("created_at", "created_at", Ms), ("claimed_by", "claimed_by", Text),
        ("claimed_until", "claimed_until", Ms), ("consumed_at", "consumed_at", Ms),
        ("consumed_by", "consumed_by", Text)] },
    Table { from: "users", to: "users", kind: "users", identity: false, upsert_on: None, columns: &[
        ("user_id", "user_id", Text), ("display_name", "display_name", Text), ("slug", "slug", Text),
        ("turns", "turns", Int), ("injected_at_turn", "injected_at_turn", Int), ("model", "model", Text),
        ("model_version", "model_version", Int), ("exported_version", "exported_version", Int),
        ("updated_at", "updated_at", Ms)] },
    Table { from: "user_model_history", to: "user_model_history", kind: "user-model versions", identity: false, upsert_on: None, columns: &[
        ("user_id", "user_id", Text), ("version", "version", Int), ("model", "model", Text),
        ("change_note", "change_note", Text), ("created_at", "created_at", Ms)] },
    Table { from: "thread_process", to: "thread_process", kind: "thread processes", identity: false, upsert_on: None, columns: &[
        ("thread", "thread", Text), ("current", "current", Text), ("previous", "previous", Text),
        ("invocations", "invocations", Int), ("params", "params", Json), ("updated_at", "updated_at", Ms)] },
    Table { from: "process_transitions", to: "process_transitions", kind: "process transitions", identity: true, upsert_on: None, columns: &[
        ("id", "id", Int), ("thread", "thread", Text), ("interaction", "interaction", Int),
        ("from_process", "from_process", Text), ("to_process", "to_process", Text), ("rule", "rule", Int4),
        ("action", "action", Text), ("execute_now", "execute_now", Bool), ("params", "params", Json),
        ("at", "at", Ms)] },
    Table { from: "cognitive_state", to: "cognitive_state", kind: "cognitive state", identity: false, upsert_on: Some("id"), columns: &[
        ("id", "id", Int2), ("state", "state", Text), ("since", "since", Ms), ("cause", "cause", Text),
        ("degraded", "degraded", Bool)] },
    Table { from: "state_moves", to: "state_moves", kind: "state moves", identity: true, upsert_on: None, columns: &[
        ("id", "id", Int), ("from_state", "from_state", Text), ("to_state", "to_state", Text),
        ("cause", "cause", Text), ("detail", "detail", Json), ("at", "at", Ms)] },
    Table { from: "journal", to: "journal", kind: "journal entries", identity: true, upsert_on: None, columns: &[
        ("id", "id", Int), ("entry", "entry", Text), ("at", "at", Ms)] },
    Table { from: "thread_summaries", to: "thread_summaries", kind: "thread summaries", identity: false, upsert_on: None, columns: &[
        ("thread", "thread", Text), ("since_id", "since_id", Int), ("summary", "summary", Text),
        ("covers_through", "covers_through", Int), ("entries", "entries", Int), ("updated_at", "updated_at", Ms)] },
    Table { from: "episodic_memories", to: "episodic_memories", kind: "episodic memories", identity: true, upsert_on: None, columns: &[
        ("id", "id", Int), ("thread", "thread", Text), ("memory", "memory", Text),
        ("importance", "importance", Int2), ("created_at", "created_at", Ms)] },
    Table { from: "dreams", to: "dreams", kind: "dreams", identity: true, upsert_on: None, columns: &[
        ("id", "id", Int), ("started_at", "started_at", Ms), ("finished_at", "finished_at", Ms),
        ("complete", "complete", Bool), ("cause", "cause", Text), ("report", "report", Json)] },
    Table { from: "psyche_substrate", to: "psyche_substrate", kind: "psyche states", identity: false, upsert_on: None, columns: &[
        ("soul", "soul", Text), ("state", "state", Json), ("updated_at", "updated_at", Ms)] },
    Table { from: "psyche_relationships", to: "psyche_relationships", kind: "relationships", identity: false, upsert_on: None, columns: &[
        ("soul", "soul", Text), ("person", "person", Text), ("warmth", "warmth", Real),
        ("trust", "trust", Real), ("tension", "tension", Real), ("comfort", "comfort", Real),
        ("volatility", "volatility", Real), ("exchanges", "exchanges", Int), ("last_seen", "last_seen", Ms)] },
    Table { from: "psyche_memories", to: "psyche_memories", kind: "psyche memories", identity: true, upsert_on: None, columns: &[
        ("id", "id", Int), ("soul", "soul", Text), ("text", "text", Text), ("text", "search", Words),
        ("importance", "importance", Real), ("salience", "salience", Real), ("at", "at", Ms)] },
    Table { from: "psyche_memory_people p JOIN psyche_memories m ON m.id = p.memory", to: "psyche_memory_people", kind: "people in memories", identity: false, upsert_on: None, columns: &[
        ("m.soul", "soul", Text), ("p.person", "person", Text), ("p.memory", "memory", Int)] },
    Table { from: "psyche_facts", to: "psyche_facts", kind: "facts", identity: false, upsert_on: None, columns: &[
        ("soul", "soul", Text), ("person", "person", Text), ("kind", "kind", Text),
        ("value", "value", Text), ("at", "at", Ms)] },
    Table { from: "psyche_intentions", to: "psyche_intentions", kind: "intentions", identity: true, upsert_on: None, columns: &[
        ("id", "id", Int), ("soul", "soul", Text), ("kind", "kind", Text), ("target", "target", Text),
        ("horizon", "horizon", Text), ("priority", "priority", Real), ("created_at", "created_at", Ms),
        ("expires_at", "expires_at", Ms)] },
    Table { from: "psyche_seen", to: "psyche_seen", kind: "event keys", identity: false, upsert_on: None, columns: &[
        ("soul", "soul", Text), ("key", "key", Text), ("at", "at", Ms)] },
    Table { from: "psyche_gate_log", to: "psyche_gate_log", kind: "gate decisions", identity: true, upsert_on: None, columns: &[
        ("id", "id", Int), ("soul", "soul", Text), ("at", "at", Ms), ("event_kind", "event_kind", Text),
        ("person", "person", Text), ("channel", "channel", Text), ("verdict", "verdict", Text),
        ("meaning", "meaning", Real), ("threshold", "threshold", Real), ("salience_max", "salience_max", Real),
        ("drive_pressure_max", "drive_pressure_max", Real), ("arc_hot", "arc_hot", Real),
        ("rel_stakes", "rel_stakes", Real), ("energy", "energy", Real), ("trivial", "trivial", Bool),
        ("choice", "choice", Bool), ("listened", "listened", Bool)] },
    Table { from: "traces", to: "traces", kind: "traces", identity: false, upsert_on: None, columns: &[
        ("trace", "trace", Text), ("kind", "kind", Text), ("thread", "thread", Text),
        ("person", "person", Text), ("inbox", "inbox", Int), ("process", "process", Text),
        ("at", "at", Ms), ("reply", "reply", Text), ("body", "body", Text),
        ("pieces", "pieces", Text)] },
    Table { from: "trace_pieces", to: "trace_pieces", kind: "trace pieces", identity: false, upsert_on: None, columns: &[
        ("key", "key", Text), ("text", "text", Text)] },
    Table { from: "psyche_samples", to: "psyche_samples", kind: "inner-life samples", identity: true, upsert_on: None, columns: &[
        ("id", "id", Int), ("at", "at", Ms), ("body", "body", Text)] },
    Table { from: "dossiers", to: "dossiers", kind: "dossiers", identity: false, upsert_on: None, columns: &[
        ("slug", "slug", Text), ("name", "name", Text), ("aliases", "aliases", Text),
        ("kind", "kind", Text), ("about", "about", Text), ("version", "version", Int),
        ("exported_version", "exported_version", Int), ("updated_at", "updated_at", Int)] },
    Table { from: "dossier_versions", to: "dossier_versions", kind: "dossier versions", identity: false, upsert_on: None, columns: &[
        ("slug", "slug", Text), ("version", "version", Int), ("text", "text", Text),
        ("note", "note", Text), ("at", "at", Int)] },
];

/// How long the copy's transaction may sit idle between its statements (while it reads a
/// table of SQLite) before the server ends it.
const COPY_IDLE: std::time::Duration = std::time::Duration::from_secs(15);

/// What a copy wrote: (kind, rows), in the order copied.
pub type Copied = Vec<(&'static str, u64)>;

/// Copies everything in `from` into this database, which must hold nothing yet.
pub async fn copy_from_sqlite(from: &SqliteStore, to: &Postgres) -> Result<Copied> {
    // What the SQLite store keeps inline (the psyche's latest keys and decisions, boosts
    // waiting on relationships) goes to its tables first, as events and dreams do in time.
    from.write(crate::memory::psyche::write_out)?;
    let mut client = to.client().await?;
    let tx = client.transaction().await?;
    // No one else writes while the copy runs: a daemon started meanwhile waits (and says so,
    // `locks`). Between its statements the copy reads a table of SQLite, which takes longer
    // than a turn's pause but not long: a copy that says nothing for longer was killed with
    // its connection left open (a lost machine), and the server ends its transaction and lets
    // its locks go, for the next copy.
    tx.batch_execute(&format!(
        "SET LOCAL idle_in_transaction_session_timeout = {};
         LOCK TABLE inbox, working_memory, users, counters IN EXCLUSIVE MODE",
        COPY_IDLE.as_millis()
    ))
    .await?;
    if let Some(what) = not_empty(&tx).await? {
        return Err(StoreError::NotEmpty {
            place: to.place().to_string(),
            what,
        });
    }
    let mut copied = Copied::new();
    for table in TABLES {
        let rows = read(from, table)?;
        let n = rows.len() as u64;
        for row in &rows {
            insert(&tx, table, row).await?;
        }
        if table.identity {
            tx.execute(
                &format!(
                    "SELECT setval(pg_get_serial_sequence('{0}', 'id'),
                                   greatest((SELECT max(id) FROM {0}), 1),
                                   (SELECT max(id) FROM {0}) IS NOT NULL)",
                    table.to
                ),
                &[],
            )
            .await?;
        }
        // The counts must agree before anything is committed.
        let there: i64 = tx
            .query_one(&format!("SELECT count(*) FROM {}", table.to), &[])
            .await?
            .get(0);
        let expected = if table.upsert_on.is_some() {
            there.max(n as i64)
        } else {
            n as i64
        };
        if there != expected {
            return Err(StoreError::Task(format!(
                "{}: {n} rows read, {there} in the copy",
                table.kind
            )));
        }
        copied.push((table.kind, n));
    }
    // What each conversation has said, which SQLite counts when it reads.
    tx.execute("SELECT anima_count_said()", &[]).await?;
    tx.commit().await?;
    Ok(copied)
}

/// What makes the database not empty, if anything: a row a soul would have written.
async fn not_empty(tx: &deadpool_postgres::Transaction<'_>) -> Result<Option<String>> {
    for table in TABLES.iter().filter(|t| t.upsert_on.is_none()) {
        let any: bool = tx
            .query_one(&format!("SELECT EXISTS (SELECT 1 FROM {})", table.to), &[])
            .await?
            .get(0);
        if any {
            return Ok(Some(format!("it holds {}", table.kind)));
        }
    }
    let turns: i64 = tx
        .query_one(
            "SELECT value FROM counters WHERE name = 'interactions'",
            &[],
        )
        .await?
        .get(0);
    Ok((turns > 0).then(|| format!("its soul has had {turns} interactions")))
}

fn read(from: &SqliteStore, table: &Table) -> Result<Vec<Vec<Sql>>> {
    let conn = if crate::memory::trace_file::TABLES.contains(&table.from) {
        from.traces().conn()
    } else {
        from.conn()
    };
    let names: Vec<&str> = table.columns.iter().map(|c| c.0).collect();
    let mut stmt = conn.prepare(&format!("SELECT {} FROM {}", names.join(", "), table.from))?;
    let rows = stmt.query_map([], |r| {
        (0..names.len()).map(|i| r.get::<_, Sql>(i)).collect()
    })?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}

async fn insert(tx: &deadpool_postgres::Transaction<'_>, table: &Table, row: &[Sql]) -> Result<()> {
    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = Vec::with_capacity(row.len());
    let mut slots = Vec::with_capacity(row.len());
    for (i, ((name, _, kind), value)) in table.columns.iter().zip(row).enumerate() {
        let n = i + 1;
        let bad = || {
            StoreError::Task(format!(
                "{}.{name}: a value of the wrong kind ({value:?})",
                table.from
            ))
        };
        let (slot, param): (String, Box<dyn ToSql + Sync + Send>) = match (kind, value) {
            (Int | Ms | Us, Sql::Integer(v)) => (format!("${n}"), Box::new(*v)),
            (Int | Ms | Us | Int4 | Int2 | Real | Text | Json | Bool | Words, Sql::Null) => {
                (format!("${n}::text"), Box::new(None::<String>))
            }
            (Int4, Sql::Integer(v)) => (
                format!("${n}"),
                Box::new(i32::try_from(*v).map_err(|_| bad())?),
            ),
            (Int2, Sql::Integer(v)) => (
                format!("${n}"),
                Box::new(i16::try_from(*v).map_err(|_| bad())?),
            ),
            (Real, Sql::Real(v)) => (format!("${n}"), Box::new(*v)),
            (Real, Sql::Integer(v)) => (format!("${n}"), Box::new(*v as f64)),
            (Text, Sql::Text(v)) => (format!("${n}"), Box::new(v.clone())),
            (Bool, Sql::Integer(v)) => (format!("${n}"), Box::new(*v != 0)),
            (Words, Sql::Text(v)) => (
                format!("array_to_tsvector(${n}::text[])"),
                Box::new(super::psyche::lexemes(v)),
            ),
            (Json, Sql::Text(v)) => (
                format!("${n}"),
                Box::new(serde_json::from_str::<serde_json::Value>(v).map_err(|_| bad())?),
            ),
            _ => return Err(bad()),
        };
        let slot = match (kind, value) {
            (_, Sql::Null) => format!("NULL::{}", pg_type(*kind)),
            (Ms, _) => format!("anima_at({slot})"),
            (Us, _) => format!("anima_at_us({slot})"),
            _ => slot,
        };
        if !matches!(value, Sql::Null) {
            params.push(param);
        }
        slots.push(slot);
    }
    // Placeholders are numbered by the values actually sent (NULLs are written inline).
    let mut k = 0;
    let slots: Vec<String> = slots
        .into_iter()
        .map(|s| {
            if s.starts_with("NULL::") {
                s
            } else {
                k += 1;
                renumber(&s, k)
            }
        })
        .collect();
    let columns: Vec<&str> = table.columns.iter().map(|c| c.1).collect();
    let overriding = if table.identity {
        " OVERRIDING SYSTEM VALUE"
    } else {
        ""
    };
    let conflict = match table.upsert_on {
        Some(key) => format!(
            " ON CONFLICT ({key}) DO UPDATE SET {}",
            columns
                .iter()
                .filter(|c| **c != key)
                .map(|c| format!("{c} = excluded.{c}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => String::new(),
    };
    let sql = format!(
        "INSERT INTO {} ({}){overriding} VALUES ({}){conflict}",
        table.to,
        columns.join(", "),
        slots.join(", ")
    );
    let refs: Vec<&(dyn ToSql + Sync)> = params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect();
    tx.execute(&sql, &refs).await?;
    Ok(())
}

/// `$7`, `anima_at($7)` → the same with placeholder `k`.
fn renumber(slot: &str, k: usize) -> String {
    match slot.find('$') {
        Some(at) => {
            let end = slot[at + 1..]
                .find(|c: char| !c.is_ascii_digit())
                .map_or(slot.len(), |e| at + 1 + e);
            format!("{}${k}{}", &slot[..at], &slot[end..])
        }
        None => slot.to_string(),
    }
}

fn pg_type(kind: As) -> &'static str {
    match kind {
        Int => "bigint",
        Int4 => "integer",
        Int2 => "smallint",
        Real => "double precision",
        Text => "text",
        Ms | Us => "timestamptz",
        Bool => "boolean",
        Json => "jsonb",
        Words => "tsvector",
    }
}
