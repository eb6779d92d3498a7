//! Schema migrations: numbered SQL files from migrations/, embedded at build time, the
//! version kept in `PRAGMA user_version`.
//!
//! Several processes may open one home at once (`anima run` beside `anima chat`): the
//! migrations run inside one EXCLUSIVE transaction that reads the version again once it holds
//! the lock, so whoever comes second finds the work done and applies nothing.

use std::path::Path;

use rusqlite::{Connection, TransactionBehavior};

use super::StoreError;

/// Every migration, in order. Index + 1 is the version it brings the schema to.
pub(super) const MIGRATIONS: &[&str] = &[
    include_str!("../../migrations/0001_init.sql"),
    include_str!("../../migrations/0002_slack_inbox.sql"),
    include_str!("../../migrations/0003_processes.sql"),
    include_str!("../../migrations/0004_hardening.sql"),
    include_str!("../../migrations/0005_conversations.sql"),
    include_str!("../../migrations/0006_admin.sql"),
    include_str!("../../migrations/0007_ism.sql"),
    include_str!("../../migrations/0008_states.sql"),
    include_str!("../../migrations/0009_dream.sql"),
    include_str!("../../migrations/0010_streams.sql"),
    include_str!("../../migrations/0011_psyche.sql"),
    include_str!("../../migrations/0012_feedback.sql"),
    include_str!("../../migrations/0013_heard_in.sql"),
    include_str!("../../migrations/0014_psyche_speed.sql"),
    include_str!("../../migrations/0015_psyche_recent_keys.sql"),
    include_str!("../../migrations/0016_psyche_fewer_pages.sql"),
    include_str!("../../migrations/0017_interruptions.sql"),
    include_str!("../../migrations/0018_part_refs.sql"),
    include_str!("../../migrations/0019_said_index.sql"),
    include_str!("../../migrations/0020_traces.sql"),
    include_str!("../../migrations/0021_dossiers.sql"),
    include_str!("../../migrations/0022_traces_apart.sql"),
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

pub fn migrate(conn: &mut Connection, path: &Path) -> Result<(), StoreError> {
    if version(conn, path)? == SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn.transaction_with_behavior(TransactionBehavior::Exclusive)?;
    // Read again under the lock: another process may have migrated meanwhile.
    let current = version(&tx, path)?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
        tracing::info!(version = i + 1, "database migrated");
    }
    tx.commit()?;
    Ok(())
}

/// Refuses a database whose schema is newer than this build's.
pub fn refuse_newer(conn: &Connection, path: &Path) -> Result<(), StoreError> {
    version(conn, path).map(|_| ())
}

/// The schema version, refused when newer than this build.
fn version(conn: &Connection, path: &Path) -> Result<i64, StoreError> {
    let current: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if current > SCHEMA_VERSION {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: current,
            supported: SCHEMA_VERSION,
        });
    }
    Ok(current)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn migrations_are_numbered_files_in_order() {
        let mut names: Vec<String> =
            std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/migrations"))
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".sql"))
                .collect();
        names.sort();
        assert_eq!(names.len(), MIGRATIONS.len(), "every file is embedded");
        for (i, name) in names.iter().enumerate() {
            assert!(name.starts_with(&format!("{:04}_", i + 1)), "{name}");
        }
    }

    #[test]
    fn a_newer_schema_is_refused_and_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("anima.db");
        {
            let conn = Connection::open(&path).unwrap();
            conn.pragma_update(None, "user_version", SCHEMA_VERSION + 1)
                .unwrap();
        }
        let err = crate::memory::SqliteStore::open(&path)
            .err()
            .expect("refused");
        let msg = err.to_string();
        assert!(msg.contains("newer than this anima"), "{msg}");
        assert!(msg.contains(&path.display().to_string()), "{msg}");
        let conn = Connection::open(&path).unwrap();
        let v: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(v, SCHEMA_VERSION + 1);
    }

    #[test]
    fn processes_opening_a_fresh_home_at_once_migrate_it_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("anima.db");
        let opened: Vec<_> = (0..6)
            .map(|_| {
                let p = path.clone();
                std::thread::spawn(move || crate::memory::SqliteStore::open(&p).map(|_| ()))
            })
            .collect();
        for h in opened {
            h.join().unwrap().expect("every opener succeeds");
        }
        assert_eq!(
            crate::memory::SqliteStore::inspect(&path).unwrap(),
            SCHEMA_VERSION
        );
    }

    #[test]
    fn version_5_keeps_every_inbox_row_and_conversation_in_neutral_words() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("anima.db");
        {
            let mut conn = Connection::open(&path).unwrap();
            let tx = conn.transaction().unwrap();
            for sql in &MIGRATIONS[..4] {
                tx.execute_batch(sql).unwrap();
            }
            tx.pragma_update(None, "user_version", 4).unwrap();
            tx.execute_batch(
                "INSERT INTO inbox (id, event_id, channel, ts, thread_key, reply_thread_ts, user_id, text,
                     assistant_thread, status, reply, parts_posted, reply_ts, received_us, attempts)
                 VALUES (7, 'Ev1', 'D1', '1700000000.000100', 'D1:1.0', '1.0', 'U1', 'hi', 1,
                     'replying', 'hello', 1, '1700000001.000000', 5, 2);
                 INSERT INTO slack_participation (channel, thread_ts, kind) VALUES ('D1', '1.0', 'assistant');
                 INSERT INTO working_memory (thread, entry_type, content, created_at, source)
                 VALUES ('D1:1.0', 'userMessage', 'hi', 0, 'slack:D1:1700000000.000100');",
            )
            .unwrap();
            tx.commit().unwrap();
        }
        use crate::memory::faces::{Inbox, Turns};
        use crate::memory::sqlite::{Block, Sqlite};
        let faces = Sqlite::open(&path).unwrap();
        let store = faces.blocking();
        let item = faces.inbox_item(7).block().unwrap().unwrap();
        assert_eq!(item.origin, "D1:1700000000.000100");
        assert_eq!(item.conversation, "D1:1.0");
        assert_eq!(item.note.as_deref(), Some("assistant"));
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&item.address).unwrap(),
            serde_json::json!({"channel": "D1", "ts": "1700000000.000100", "thread_ts": "1.0"})
        );
        assert_eq!(
            (item.parts_posted, item.reply_ref.as_deref(), item.attempts),
            (1, Some("1700000001.000000"), 2)
        );
        assert_eq!(faces.thread_entries("D1:1.0").block().unwrap().len(), 1);
        let source: String = store
            .conn()
            .query_row("SELECT source FROM working_memory", [], |r| r.get(0))
            .unwrap();
        assert_eq!(
            source,
            item.source(),
            "a retried turn still finds its message"
        );
        assert_eq!(
            faces
                .conversation_address("D1:1.0")
                .block()
                .unwrap()
                .unwrap()
                .1
                .as_deref(),
            Some("assistant")
        );
    }

    #[test]
    fn version_14_lists_the_most_salient_memories_and_keeps_them_all_findable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("anima.db");
        {
            let mut conn = Connection::open(&path).unwrap();
            let tx = conn.transaction().unwrap();
            for sql in &MIGRATIONS[..13] {
                tx.execute_batch(sql).unwrap();
            }
            tx.pragma_update(None, "user_version", 13).unwrap();
            for i in 0..40i64 {
                let soul = if i % 4 == 0 { "Kit" } else { "Wren" };
                tx.execute(
                    "INSERT INTO psyche_memories (soul, text, importance, salience, at)
                     VALUES (?1, ?2, 0.5, ?3, ?4)",
                    rusqlite::params![
                        soul,
                        format!("day {i} at the garden"),
                        (i % 7) as f64 / 7.0,
                        i
                    ],
                )
                .unwrap();
            }
            tx.execute(
                "INSERT INTO psyche_memories (soul, text, importance, salience, at)
                 VALUES ('Wren', 'the borrow checker hates my refactor', 0.5, 0.1, 50)",
                [],
            )
            .unwrap();
            tx.execute(
                "INSERT INTO psyche_gate_log (soul, at, event_kind, verdict, meaning, threshold, salience_max,
                     drive_pressure_max, arc_hot, rel_stakes, energy, trivial, choice, listened)
                 VALUES ('Wren', 1, 'addressed', 'answer', 0.5, 0.5, 1, 0, 0, 0, 1, 0, 1, 0)",
                [],
            )
            .unwrap();
            tx.commit().unwrap();
        }
        use crate::memory::faces::Psychology;
        use crate::memory::sqlite::{Block, Sqlite};
        let faces = Sqlite::open(&path).unwrap();
        let conn = faces.blocking().conn();
        let ids = |sql: &str, soul: &str| -> Vec<i64> {
            conn.prepare(sql)
                .unwrap()
                .query_map([soul], |r| r.get(0))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap()
        };
        for soul in ["Wren", "Kit"] {
            let listed = ids(
                "SELECT memory FROM psyche_salient WHERE soul = ?1 ORDER BY salience DESC, memory DESC",
                soul,
            );
            assert_eq!(
                listed,
                ids(
                    "SELECT id FROM psyche_memories WHERE soul = ?1 ORDER BY salience DESC, id DESC LIMIT 20",
                    soul
                ),
                "{soul}"
            );
            assert_eq!(listed.len(), if soul == "Wren" { 20 } else { 10 });
        }
        let found: i64 = conn
            .query_row(
                "SELECT count(*) FROM psyche_memories_fts WHERE psyche_memories_fts MATCH 'borrow'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(found, 1, "the full-text index is untouched");
        drop(conn);
        assert_eq!(faces.psyche_decisions("Wren", 10).block().unwrap().len(), 1);
        let p = crate::psyche::Psyche::shipped();
        let packet = faces
            .psyche_packet("Wren", &p, &[], "the borrow checker again", 100)
            .block()
            .unwrap();
        let text = packet.render(&|q| q.to_string());
        assert!(text.contains("borrow checker hates"), "{text}");
    }

    #[test]
    fn version_16_finds_the_newest_memory_shared_with_each_person() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("anima.db");
        {
            let mut conn = Connection::open(&path).unwrap();
            let tx = conn.transaction().unwrap();
            for sql in &MIGRATIONS[..15] {
                tx.execute_batch(sql).unwrap();
            }
            tx.pragma_update(None, "user_version", 15).unwrap();
            for (soul, salience) in [("Wren", 0.4), ("Wren", 0.7), ("Kit", 0.9), ("Wren", 0.2)] {
                tx.execute(
                    "INSERT INTO psyche_memories (soul, text, importance, salience, at)
                     VALUES (?1, 'a day', 0.5, ?2, 0)",
                    rusqlite::params![soul, salience],
                )
                .unwrap();
            }
            // U1's newest with Wren is memory 2 (4 is U2's; 3 is another soul's).
            for (person, memory) in [("U1", 1), ("U1", 2), ("U1", 3), ("U2", 4)] {
                tx.execute(
                    "INSERT INTO psyche_memory_people (person, memory) VALUES (?1, ?2)",
                    rusqlite::params![person, memory],
                )
                .unwrap();
            }
            for (soul, person) in [("Wren", "U1"), ("Kit", "U1"), ("Wren", "U3")] {
                tx.execute(
                    "INSERT INTO psyche_relationships
                     (soul, person, warmth, trust, tension, comfort, volatility, exchanges, last_seen)
                     VALUES (?1, ?2, 0, 0, 0, 0.5, 0.5, 1, 0)",
                    rusqlite::params![soul, person],
                )
                .unwrap();
            }
            tx.commit().unwrap();
        }
        let store = crate::memory::SqliteStore::open(&path).unwrap();
        let conn = store.conn();
        let kept = |soul: &str, person: &str| -> (Option<i64>, f64, Option<i64>, f64) {
            conn.query_row(
                "SELECT last_memory, last_salience, boost_memory, boost FROM psyche_relationships
                 WHERE soul = ?1 AND person = ?2",
                [soul, person],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)),
            )
            .unwrap()
        };
        assert_eq!(kept("Wren", "U1"), (Some(2), 0.7, None, 0.0));
        assert_eq!(kept("Kit", "U1"), (Some(3), 0.9, None, 0.0));
        assert_eq!(kept("Wren", "U3"), (None, 0.0, None, 0.0));
    }

    #[test]
    fn migrating_twice_is_a_no_op() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("anima.db");
        drop(crate::memory::SqliteStore::open(&path).unwrap());
        let store = std::sync::Arc::new(crate::memory::SqliteStore::open(&path).unwrap());
        let faces = crate::memory::sqlite::Sqlite::on(&store);
        assert_eq!(
            crate::memory::sqlite::run(crate::memory::faces::SoulRecord::interactions(&faces))
                .unwrap(),
            0
        );
        assert_eq!(
            crate::memory::SqliteStore::inspect(&path).unwrap(),
            SCHEMA_VERSION
        );
    }
}
