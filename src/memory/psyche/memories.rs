//! Episodic memories: writing one (with the people in it), the salience the one last shared
//! with someone gains when they come back, and picking the candidates that retrieval scores, by
//! full text (FTS5), recency and salience. The scoring itself is `psyche::retrieve`'s.
//!
//! A return's boost is owed to a memory that can be anywhere in the table, so writing it there
//! would cost the event a page of its own, a third more than a line of a conversation
//! (benches/psyche.rs). It waits instead on the person's relationship row, which the event writes
//! anyway (`Shared`), and readers add it (`salience!`). It is written to the memory when it
//! would change the soul's most salient memories (so that list, migration 14, stays the top by
//! salience as read), when a newer memory is shared with the person (`made`), and in a dream's
//! upkeep. The second is the event that makes a memory, a dozen pages already, rather than
//! the person's next return: so a return never writes a memory unless the list changes.
//! That list only ever gains memories better than its least (the psyche never lowers a salience
//! nor deletes a memory), so a boost that waits keeps its memory below it. The same row keeps
//! the id and stored salience of the newest memory shared with the person, so that a return
//! reads no memory at all: every write of that salience goes through here and updates it.

use rusqlite::{params, Connection, OptionalExtension};

use crate::memory::StoreError;
use crate::psyche::text::words;
use crate::psyche::update::NewMemory;
use crate::psyche::{Memory, Unit};

/// Candidates fetched for retrieval: by full-text match, by recency and by salience, each.
/// The list of the most salient (migration 14) keeps this many: more needs a migration.
pub(crate) const CANDIDATES: usize = 20;

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

/// The salience of memory `m` as retrieval sees it: as stored, and the boosts waiting for it
/// on the rows of the people in it (`Shared`).
macro_rules! salience {
    () => {
        "min(1.0, m.salience + (SELECT total(r.boost) FROM psyche_memory_people p
             CROSS JOIN psyche_relationships r ON r.soul = m.soul AND r.person = p.person
             WHERE p.memory = m.id AND r.boost_memory = m.id))"
    };
}

pub(super) const MEMORY_COLUMNS: &str = concat!(
    "m.id, m.text, m.importance, ",
    salience!(),
    ", m.at,
     (SELECT group_concat(person, char(31)) FROM psyche_memory_people p WHERE p.memory = m.id)"
);

/// Words the full-text query may use: at most this many, the rarest first.
pub(crate) const QUERY_TERMS: usize = 4;
/// A word held by more memories than this says little about which ones matter; leaving it out
/// keeps the index's work bounded as memories accumulate.
pub(crate) const COMMON_WORD_DOCS: i64 = 100;

/// Words of the query counted against the index, the longest first (long words are the rare
/// ones, as a rule).
pub(super) const COUNTED_TERMS: usize = 5;

/// The query's words that are counted against the index: the longest `COUNTED_TERMS`, in a
/// fixed order (every backend picks the same).
pub(crate) fn counted_terms(text: &str) -> Vec<String> {
    let mut w = words(text);
    w.sort_by(|a, b| b.chars().count().cmp(&a.chars().count()).then(a.cmp(b)));
    w.dedup();
    w.truncate(COUNTED_TERMS);
    w
}

/// The query's words, each quoted so that nothing in it is FTS5 syntax: the longest
/// `COUNTED_TERMS`, in a fixed order.
pub(super) fn fts_terms(text: &str) -> Vec<String> {
    counted_terms(text)
        .into_iter()
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

/// What a relationship row keeps of the memories shared with that person: the newest, with
/// its salience as stored (so that a return reads neither), and a boost of salience owed to
/// one of them that waits there (`boost`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Shared {
    pub(super) last: Option<(i64, f64)>,
    pub(super) owed: Option<(i64, f64)>,
}

/// The person came back: the memory last shared with them grows `boost` more salient, up to 1.
/// `shared` is what their relationship row holds; what it should hold now is returned, for the
/// caller to write with that row. The memory is written only when the boost changes the list
/// of the most salient, or when an older boost is owed to another memory.
pub(super) fn boost(
    conn: &Connection,
    soul: &str,
    boost: Unit,
    shared: Shared,
) -> Result<Shared, StoreError> {
    let Some((id, salience)) = shared.last else {
        return Ok(shared);
    };
    let mut owed = 0.0;
    match shared.owed {
        Some((memory, b)) if memory == id => owed = b,
        // Only a row written by a build before `made` owes a boost to an older memory.
        Some((older, b)) => add_salience(conn, older, b)?,
        None => {}
    }
    let owed = (owed + boost.get()).min(1.0 - salience);
    if owed <= 0.0 {
        // At 1 already: nothing is owed.
        return Ok(Shared {
            owed: None,
            ..shared
        });
    }
    // It changes the list when it rises above the least there: when it enters (a list not yet
    // full holds every memory) or moves within it (a memory on it is at least its least).
    let after = salience + owed;
    let least: Option<(f64, i64)> = conn
        .prepare_cached(
            "SELECT salience, memory FROM psyche_salient WHERE soul = ?1
             ORDER BY salience, memory LIMIT 1",
        )?
        .query_row([soul], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    if least.is_none_or(|least| (after, id) > least) {
        add_salience(conn, id, owed)?;
        return Ok(Shared {
            last: Some((id, after.min(1.0))),
            owed: None,
        });
    }
    Ok(Shared {
        last: shared.last,
        owed: Some((id, owed)),
    })
}

/// A new memory `id` shared with the person, at `salience`: it becomes their newest, and a
/// boost owed to an older one is written to that one now. What their row should hold.
pub(super) fn made(
    conn: &Connection,
    shared: Shared,
    id: i64,
    salience: f64,
) -> Result<Shared, StoreError> {
    if let Some((older, b)) = shared.owed {
        add_salience(conn, older, b)?;
    }
    Ok(Shared {
        last: Some((id, salience)),
        owed: None,
    })
}

/// Writes `boost` more salience to memory `id` (migration 14's triggers keep the list).
fn add_salience(conn: &Connection, id: i64, boost: f64) -> Result<(), StoreError> {
    conn.prepare_cached(
        "UPDATE psyche_memories SET salience = min(1.0, salience + ?2) WHERE id = ?1",
    )?
    .execute(params![id, boost])?;
    Ok(())
}

/// Every boost waiting on a relationship row written to its memory (a dream's upkeep). How
/// many were.
pub(super) fn write_waiting(conn: &Connection) -> Result<usize, StoreError> {
    let waiting: Vec<(i64, f64)> = conn
        .prepare_cached(
            "SELECT boost_memory, boost FROM psyche_relationships WHERE boost_memory IS NOT NULL",
        )?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    for &(id, boost) in &waiting {
        add_salience(conn, id, boost)?;
    }
    conn.prepare_cached(
        "UPDATE psyche_relationships
         SET last_salience = CASE WHEN boost_memory = last_memory
                                  THEN min(1.0, last_salience + boost) ELSE last_salience END,
             boost_memory = NULL, boost = 0
         WHERE boost_memory IS NOT NULL",
    )?
    .execute([])?;
    Ok(waiting.len())
}

/// Stores a new episodic memory and the people in it. Its id.
pub(super) fn insert(conn: &Connection, soul: &str, m: &NewMemory) -> Result<i64, StoreError> {
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
    Ok(id)
}
