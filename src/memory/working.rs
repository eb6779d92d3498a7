//! Working memory entries: what was said and thought in one conversation.

use rusqlite::{Connection, Row};

use super::StoreError;

pub(crate) use super::records::working::capped;
pub use super::records::working::{Entry, EntryType, NewEntry, CUT_MARK, MAX_ENTRY_CHARS};

pub(super) fn insert(
    conn: &Connection,
    thread: &str,
    e: &NewEntry,
    now: i64,
) -> Result<i64, StoreError> {
    conn.prepare_cached(
        "INSERT INTO working_memory (thread, entry_type, content, verb, user_id, metadata, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    )?
    .execute((
        thread,
        e.entry_type.as_str(),
        capped(&e.content),
        &e.verb,
        &e.user_id,
        e.metadata.to_string(),
        now,
    ))?;
    Ok(conn.last_insert_rowid())
}

const COLUMNS: &str = "id, thread, entry_type, content, verb, user_id, metadata, created_at";

fn from_row(r: &Row) -> rusqlite::Result<Entry> {
    let meta: String = r.get(6)?;
    Ok(Entry {
        id: r.get(0)?,
        thread: r.get(1)?,
        entry_type: super::stored_column(r, 2)?,
        content: r.get(3)?,
        verb: r.get(4)?,
        user_id: r.get(5)?,
        metadata: serde_json::from_str(&meta).unwrap_or(serde_json::Value::Null),
        created_at: r.get(7)?,
    })
}

/// How many things were said in thread ?1 after entry ?2. Both this and `window` read only the
/// index of what was said (`working_memory_said`), never the thread's thoughts.
const SAID: &str = "SELECT count(*) FROM working_memory WHERE thread = ?1 AND id > ?2
                    AND entry_type IN ('userMessage', 'externalDialog')";

/// The entries of thread ?1 after entry ?3, from the thing said ?2 things after it on.
fn window() -> String {
    format!(
        "SELECT {COLUMNS} FROM working_memory WHERE thread = ?1 AND id > ?3 AND id >= coalesce(
             (SELECT id FROM working_memory WHERE thread = ?1 AND id > ?3
                 AND entry_type IN ('userMessage', 'externalDialog')
              ORDER BY id LIMIT 1 OFFSET ?2), 0)
         ORDER BY id"
    )
}

/// A thread's latest messages (user messages and replies: the entries that are history) with
/// the entries between them, oldest first. The window counts what was said, not the thoughts
/// and checks between: a window of 20 is the last 20 to 29 things said (its start moves in
/// steps), about ten exchanges, with the checks among them (which the user-model gate reads).
pub(super) fn recent(
    conn: &Connection,
    thread: &str,
    messages: u32,
    since_id: i64,
) -> Result<Vec<Entry>, StoreError> {
    if messages == 0 {
        return Ok(Vec::new());
    }
    // Entries up to `since_id` belong to the conversation before an operator's reset.
    let said: i64 = conn
        .prepare_cached(SAID)?
        .query_row((thread, since_id), |r| r.get(0))?;
    // The window's start moves in steps of half a window, not message by message, so the
    // history a prompt begins with stays the same for several turns: a provider's prompt
    // cache keeps matching it. The window holds `messages` to `messages + step - 1`.
    let step = (i64::from(messages) / 2).max(1);
    let skip = ((said - i64::from(messages)).max(0) / step) * step;
    let mut stmt = conn.prepare_cached(&window())?;
    let rows = stmt.query_map((thread, skip, since_id), from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

pub(super) fn all(conn: &Connection, thread: &str) -> Result<Vec<Entry>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM working_memory WHERE thread = ?1 ORDER BY id"
    ))?;
    let rows = stmt.query_map([thread], from_row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conn() -> Connection {
        let dir = tempfile::tempdir().unwrap();
        let store = crate::memory::SqliteStore::open(&dir.path().join("a.db")).unwrap();
        drop(store);
        let c = Connection::open(dir.path().join("a.db")).unwrap();
        std::mem::forget(dir);
        c
    }

    /// The window's count and its step to the start read the index of what was said: through
    /// the thread's own index they would read every entry the thread ever had from the table.
    #[test]
    fn the_window_reads_what_was_said_from_its_own_index() {
        let c = conn();
        for sql in [SAID.to_string(), window()] {
            let mut explain = c.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
            let params: [&dyn rusqlite::ToSql; 3] = [&"t", &0, &0];
            let plan: Vec<String> = explain
                .query_map(&params[..explain.parameter_count()], |r| r.get(3))
                .unwrap()
                .collect::<Result<_, _>>()
                .unwrap();
            assert!(
                plan.iter()
                    .any(|step| step.contains("INDEX working_memory_said")),
                "{sql}: {plan:?}"
            );
        }
    }

    #[test]
    fn the_window_counts_what_was_said_not_the_thoughts_between() {
        let c = conn();
        for i in 0..6 {
            insert(
                &c,
                "t",
                &NewEntry::new(EntryType::UserMessage, format!("q{i}")),
                0,
            )
            .unwrap();
            insert(
                &c,
                "t",
                &NewEntry::new(EntryType::InternalMonologue, "hm"),
                0,
            )
            .unwrap();
            insert(
                &c,
                "t",
                &NewEntry::new(EntryType::MentalQuery, "Did I learn something?"),
                0,
            )
            .unwrap();
            insert(
                &c,
                "t",
                &NewEntry::new(EntryType::ExternalDialog, format!("a{i}")),
                0,
            )
            .unwrap();
        }
        let said = |w: u32| -> Vec<String> {
            recent(&c, "t", w, 0)
                .unwrap()
                .into_iter()
                .filter(|e| {
                    matches!(
                        e.entry_type,
                        EntryType::UserMessage | EntryType::ExternalDialog
                    )
                })
                .map(|e| e.content)
                .collect()
        };
        // 12 said; a window of 4 moves in steps of 2: it starts at the 9th.
        assert_eq!(said(4), ["q4", "a4", "q5", "a5"], "two exchanges");
        let window = recent(&c, "t", 4, 0).unwrap();
        assert_eq!(window.len(), 8, "with the thoughts and checks between them");
        insert(&c, "t", &NewEntry::new(EntryType::UserMessage, "q6"), 0).unwrap();
        assert_eq!(
            said(4),
            ["q4", "a4", "q5", "a5", "q6"],
            "the start holds for a step: the prompt's history keeps its beginning"
        );
        insert(&c, "t", &NewEntry::new(EntryType::ExternalDialog, "a6"), 0).unwrap();
        assert_eq!(said(4), ["q5", "a5", "q6", "a6"], "then moves by a step");
        assert_eq!(said(100).len(), 14, "a short thread is all there");
        assert!(recent(&c, "t", 0, 0).unwrap().is_empty());
        let since = all(&c, "t").unwrap()[11].id;
        assert_eq!(
            recent(&c, "t", 100, since).unwrap().len(),
            14,
            "after a reset"
        );
    }

    #[test]
    fn a_runaway_entry_is_stored_cut_and_marked() {
        let c = conn();
        let huge = "é".repeat(MAX_ENTRY_CHARS + 5_000);
        insert(
            &c,
            "t",
            &NewEntry::new(EntryType::InternalMonologue, huge),
            0,
        )
        .unwrap();
        let stored = &all(&c, "t").unwrap()[0].content;
        assert!(stored.ends_with(CUT_MARK));
        assert_eq!(
            stored.chars().count(),
            MAX_ENTRY_CHARS + CUT_MARK.chars().count()
        );
        let short = "日本語 🦀";
        insert(&c, "t", &NewEntry::new(EntryType::UserMessage, short), 0).unwrap();
        assert_eq!(all(&c, "t").unwrap()[1].content, short);
    }

    proptest::proptest! {
        #[test]
        fn capping_never_splits_a_character(s in "\\PC{0,40}", n in 0usize..4) {
            let text = s.repeat(n * 1000 + 1);
            let capped = capped(&text);
            proptest::prop_assert!(capped.chars().count() <= MAX_ENTRY_CHARS + CUT_MARK.chars().count());
            proptest::prop_assert!(text.starts_with(capped.trim_end_matches(CUT_MARK)));
        }
    }
}
