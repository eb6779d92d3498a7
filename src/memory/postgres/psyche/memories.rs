//! Episodic memories on PostgreSQL: writing one with the people in it, the salience the one
//! last shared with someone gains when they come back, and the candidates retrieval scores.
//!
//! Candidates come from PostgreSQL's full-text search: the GIN-indexed `search` column holds
//! each memory's words as `psyche::text::words` finds them (anima writes it, so matching never
//! depends on the server's locale or parser), and the query is the rarer of the query's
//! longest words, as on SQLite (`memory::psyche::counted_terms`, `QUERY_TERMS`,
//! `COMMON_WORD_DOCS`). With the newest and the most salient memories, they go to
//! `psyche::retrieve`, whose BM25 re-ranks them in Rust. A return's boost is written to the
//! memory at once (a row of its own is no cost worth avoiding here), so salience as stored is
//! salience as read.

use deadpool_postgres::GenericClient;
use tokio_postgres::Row;

use super::{Param, Result};
use crate::memory::psyche::{counted_terms, CANDIDATES, COMMON_WORD_DOCS, QUERY_TERMS};
use crate::psyche::text::words;
use crate::psyche::update::NewMemory;
use crate::psyche::{Memory, Unit};

/// A memory's columns, in `memory`'s order.
pub(super) const COLUMNS: &str = "m.id, m.text, m.importance, m.salience, anima_ms(m.at),
    ARRAY(SELECT p.person FROM psyche_memory_people p WHERE p.memory = m.id ORDER BY p.person)";

/// The longest word the index keeps, in bytes (PostgreSQL refuses a lexeme of 2 KB; a memory
/// is at most `MEMORY_CHARS` characters, so only a pathological word is left out).
const LONGEST_WORD: usize = 2_000;

pub(super) fn memory(r: &Row) -> Memory {
    Memory {
        id: r.get(0),
        text: r.get(1),
        importance: Unit::new(r.get(2)),
        salience: Unit::new(r.get(3)),
        at: r.get(4),
        people: r.get(5),
    }
}

/// The person came back: the memory last shared with them (their newest) grows `boost` more
/// salient, up to 1.
pub(super) const BOOST: &str = "UPDATE psyche_memories SET salience = least(1.0, salience + $3)
    WHERE id = (SELECT memory FROM psyche_memory_people WHERE soul = $1 AND person = $2
                ORDER BY memory DESC LIMIT 1)";

pub(super) fn boost_params(soul: &str, person: &str, boost: Unit) -> Vec<Param> {
    vec![
        Box::new(soul.to_string()),
        Box::new(person.to_string()),
        Box::new(boost.get()),
    ]
}

/// A new memory and the people in it, in one statement.
pub(super) const INSERT: &str = "WITH m AS (
        INSERT INTO psyche_memories (soul, text, search, importance, salience, at)
        VALUES ($1, $2, array_to_tsvector($3::text[]), $4, $5, anima_at($6)) RETURNING id)
    INSERT INTO psyche_memory_people (soul, person, memory)
    SELECT DISTINCT $1, p, m.id FROM m, unnest($7::text[]) AS p";

pub(super) fn insert_params(soul: &str, m: &NewMemory) -> Vec<Param> {
    vec![
        Box::new(soul.to_string()),
        Box::new(m.text.clone()),
        Box::new(lexemes(&m.text)),
        Box::new(m.importance.get()),
        Box::new(m.salience.get()),
        Box::new(m.at),
        Box::new(m.people.clone()),
    ]
}

/// A text's words for the index, each once.
pub(in crate::memory::postgres) fn lexemes(text: &str) -> Vec<String> {
    let mut w = words(text);
    w.retain(|w| w.len() <= LONGEST_WORD);
    w.sort();
    w.dedup();
    w
}

/// A word as a tsquery lexeme: quoted, so that nothing in it is tsquery syntax.
fn lexeme(word: &str) -> String {
    format!("'{}'", word.replace('\\', "\\\\").replace('\'', "''"))
}

/// Candidates for retrieval, best full-text matches first, then the newest, then the most
/// salient, each once.
pub(super) async fn candidates(
    c: &impl GenericClient,
    soul: &str,
    query: &str,
) -> Result<Vec<Memory>> {
    let terms: Vec<String> = counted_terms(query)
        .iter()
        .filter(|w| w.len() <= LONGEST_WORD)
        .map(|w| lexeme(w))
        .collect();
    // The limits are written into the statements, not bound: planned once per connection, a
    // statement sees a bound LIMIT as a tenth of the soul's memories, and a plan for that many
    // grows dear (past a hundred thousand memories the server compiles it at every run).
    let (limit, docs, terms_kept) = (CANDIDATES, COMMON_WORD_DOCS, QUERY_TERMS);
    // How many memories hold each word, counted no further than the limit (the work per word
    // stays bounded however common it is); the rarest `QUERY_TERMS` make the query.
    let matching = c
        .prepare_cached(&format!(
            "WITH counted AS MATERIALIZED (
                 SELECT t, (SELECT count(*) FROM (
                     SELECT 1 FROM psyche_memories WHERE soul = $1 AND search @@ t::tsquery
                     LIMIT {}) hits) AS docs
                 FROM unnest($2::text[]) AS t),
             picked AS (
                 SELECT t FROM counted WHERE docs <= {docs}
                 ORDER BY docs, t COLLATE \"C\" LIMIT {terms_kept}),
             q AS (SELECT string_agg(t, ' | ')::tsquery AS q FROM picked)
             SELECT {COLUMNS} FROM psyche_memories m, q
             WHERE q.q IS NOT NULL AND m.soul = $1 AND m.search @@ q.q
             ORDER BY ts_rank(m.search, q.q) DESC, m.id DESC LIMIT {limit}",
            docs + 1
        ))
        .await?;
    let newest = c
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM psyche_memories m WHERE m.soul = $1
             ORDER BY m.at DESC, m.id DESC LIMIT {limit}"
        ))
        .await?;
    let salient = c
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM psyche_memories m WHERE m.soul = $1
             ORDER BY m.salience DESC, m.id DESC LIMIT {limit}"
        ))
        .await?;
    // Sent together; the server answers them in order.
    let (matching, newest, salient) = futures_util::future::try_join3(
        c.query(&matching, &[&soul, &terms]),
        c.query(&newest, &[&soul]),
        c.query(&salient, &[&soul]),
    )
    .await?;
    let mut out: Vec<Memory> = matching.iter().map(memory).collect();
    for r in newest.iter().chain(&salient) {
        let m = memory(r);
        if !out.iter().any(|x| x.id == m.id) {
            out.push(m);
        }
    }
    Ok(out)
}
