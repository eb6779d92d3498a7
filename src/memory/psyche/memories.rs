//! Episodic memories: writing one (with the people in it), refreshing the salience of the one
//! last shared with someone, and picking the candidates that retrieval scores, by full text
//! (FTS5), recency and salience. The scoring itself is `psyche::retrieve`'s.

use rusqlite::{params, Connection};

use crate::memory::StoreError;
use crate::psyche::text::words;
use crate::psyche::update::NewMemory;
use crate::psyche::{Memory, Unit};

/// Candidates fetched for retrieval: by full-text match, by recency and by salience, each.
/// The list of the most salient (migration 14) keeps this many: more needs a migration.
pub(super) const CANDIDATES: usize = 20;

pub(super) fn memory_rows(
    conn: &Connection,
    sql: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<Memory>, StoreError> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(args, |r| {
        Ok(Memory {
            id: r.get(0)?,
            text: r.get(1)?,
            importance: Unit::new(r.get(2)?),
            salience: Unit::new(r.get(3)?),
            at: r.get(4)?,
            people: r
                .get::<_, Option<String>>(5)?
                .map(|p| p.split('\u{1f}').map(str::to_string).collect())
                .unwrap_or_default(),
        })
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) const MEMORY_COLUMNS: &str = "m.id, m.text, m.importance, m.salience, m.at,
     (SELECT group_concat(person, char(31)) FROM psyche_memory_people p WHERE p.memory = m.id)";

/// Words the full-text query may use: at most this many, the rarest first.
pub(super) const QUERY_TERMS: usize = 4;
/// A word held by more memories than this says little about which ones matter; leaving it out
/// keeps the index's work bounded as memories accumulate.
pub(super) const COMMON_WORD_DOCS: i64 = 100;

/// Words of the query counted against the index, the longest first (long words are the rare
/// ones, as a rule).
pub(super) const COUNTED_TERMS: usize = 5;

/// The query's words, each quoted so that nothing in it is FTS5 syntax: the longest
/// `COUNTED_TERMS`, in a fixed order.
pub(super) fn fts_terms(text: &str) -> Vec<String> {
    let mut w = words(text);
    w.sort_by(|a, b| b.chars().count().cmp(&a.chars().count()).then(a.cmp(b)));
    w.dedup();
    w.into_iter()
        .take(COUNTED_TERMS)
        .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect()
}

/// An FTS5 query for the rarer words of `text` (any of them), or `None` when no word helps.
pub(super) fn fts_query(conn: &Connection, text: &str) -> Result<Option<String>, StoreError> {
    let mut counted: Vec<(i64, String)> = Vec::new();
    // How many memories hold the word, counted no further than the limit: the work per word
    // stays bounded however common it is.
    let mut stmt = conn.prepare_cached(
        "SELECT count(*) FROM (SELECT 1 FROM psyche_memories_fts WHERE psyche_memories_fts MATCH ?1 LIMIT ?2)",
    )?;
    for quoted in fts_terms(text) {
        let docs: i64 = stmt.query_row(params![quoted, COMMON_WORD_DOCS + 1], |r| r.get(0))?;
        if docs <= COMMON_WORD_DOCS {
            counted.push((docs, quoted));
        }
    }
    counted.sort();
    let terms: Vec<String> = counted
        .into_iter()
        .take(QUERY_TERMS)
        .map(|(_, t)| t)
        .collect();
    Ok((!terms.is_empty()).then(|| terms.join(" OR ")))
}

/// Candidates for retrieval: the best full-text matches, the newest, the most salient.
pub(super) fn candidates(
    conn: &Connection,
    soul: &str,
    query: &str,
) -> Result<Vec<Memory>, StoreError> {
    let mut out: Vec<Memory> = Vec::new();
    if let Some(q) = fts_query(conn, query)? {
        out = memory_rows(
            conn,
            &format!(
                "SELECT {MEMORY_COLUMNS} FROM psyche_memories_fts f CROSS JOIN psyche_memories m ON m.id = f.rowid
                 WHERE psyche_memories_fts MATCH ?1 AND m.soul = ?2 ORDER BY f.rank LIMIT ?3"
            ),
            params![q, soul, CANDIDATES as i64],
        )?;
    }
    let newest = format!(
        "SELECT {MEMORY_COLUMNS} FROM psyche_memories m WHERE m.soul = ?1
         ORDER BY m.at DESC, m.id DESC LIMIT ?2"
    );
    // The most salient: the list the triggers of migration 14 keep (the same order).
    let salient = format!(
        "SELECT {MEMORY_COLUMNS} FROM psyche_salient s CROSS JOIN psyche_memories m ON m.id = s.memory
         WHERE s.soul = ?1 ORDER BY s.salience DESC, s.memory DESC LIMIT ?2"
    );
    for sql in [newest, salient] {
        let more = memory_rows(conn, &sql, params![soul, CANDIDATES as i64])?;
        for m in more {
            if !out.iter().any(|x| x.id == m.id) {
                out.push(m);
            }
        }
    }
    Ok(out)
}

/// The memory most recently shared with `person` grows `boost` more salient when they come
/// back: one row, one page in the event's transaction (and one more only when the list of the
/// most salient changes; benches/psyche.rs).
pub(super) fn refresh_salience(
    conn: &Connection,
    soul: &str,
    person: &str,
    boost: Unit,
) -> Result<(), StoreError> {
    // `id = (SELECT max(…))`, not `id IN (SELECT … LIMIT 1)`: an IN list is built in a
    // temporary table on every run, ten times the cost of the update itself. A memory already
    // at 1 is left alone: rewriting the same value would still write its page.
    conn.prepare_cached(
        "UPDATE psyche_memories SET salience = min(1.0, salience + ?1)
         WHERE id = (SELECT max(memory) FROM psyche_memory_people WHERE person = ?2)
           AND +soul = ?3 AND salience < 1.0",
    )?
    .execute(params![boost.get(), person, soul])?;
    Ok(())
}

/// Stores a new episodic memory and the people in it.
pub(super) fn insert(conn: &Connection, soul: &str, m: &NewMemory) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO psyche_memories (soul, text, importance, salience, at) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![soul, m.text, m.importance.get(), m.salience.get(), m.at])?;
    let id = conn.last_insert_rowid();
    for p in &m.people {
        conn.prepare_cached(
            "INSERT OR IGNORE INTO psyche_memory_people (person, memory) VALUES (?1, ?2)",
        )?
        .execute(params![p, id])?;
    }
    Ok(())
}
