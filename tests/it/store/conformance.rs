//! The conformance suite: a turn's begin and commit are PL/pgSQL on PostgreSQL
//! (migrations/postgres/0002, 0003, 0005, called from memory/postgres/turns.rs) and Rust on
//! SQLite (memory/turn.rs). Each scenario below runs through the faces on a fresh store of
//! each backend; what it observes (contexts, people, entries, the soul, counters, processes,
//! usage, inbox rows) is written down field by field with only ids and times normalised, and
//! the two accounts must be equal. Skipped, with a line saying so, without PostgreSQL.

use std::collections::HashMap;
use std::fmt::Debug;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use anima::memory::faces::Store;
use anima::memory::{
    now_ms, Entry, EntryType, Inbound, Intake, NewEntry, TurnContext, TurnRecord, TurnStart,
};
use anima::process::ThreadProcess;

use super::backends;

mod dossiers;
mod forgetting;
mod people;
mod psyche;
mod threads;

/// What a scenario saw, one labelled line at a time, with ids numbered in the order they were
/// first seen (per kind) and times left out: the same account on both backends.
#[derive(Default)]
struct Seen {
    lines: Vec<String>,
    ids: HashMap<(&'static str, i64), i64>,
}

impl Seen {
    fn note(&mut self, label: &str, value: impl Debug) {
        self.lines.push(format!("{label}: {value:#?}"));
    }

    /// The `kind` id `raw` as the n-th of its kind seen (0 stays 0: "none yet").
    fn id(&mut self, kind: &'static str, raw: i64) -> i64 {
        if raw == 0 {
            return 0;
        }
        let next = self.ids.keys().filter(|(k, _)| *k == kind).count() as i64 + 1;
        *self.ids.entry((kind, raw)).or_insert(next)
    }

    /// Entries were deleted: SQLite gives a number again once the newest entries are gone
    /// (`keep_numbering`), PostgreSQL never does, so what is seen next is numbered afresh.
    fn renumber(&mut self) {
        self.ids.retain(|(kind, _), _| *kind != "entry");
    }

    fn entry(&mut self, e: &Entry) -> Entry {
        Entry {
            id: self.id("entry", e.id),
            created_at: 0,
            metadata: sorted(&e.metadata),
            ..e.clone()
        }
    }

    fn context(&mut self, label: &str, c: &TurnContext) {
        let mut c = c.clone();
        c.recent = c.recent.iter().map(|e| self.entry(e)).collect();
        c.since_id = self.id("entry", c.since_id);
        if let Some(w) = c.whisper.as_mut() {
            w.id = self.id("whisper", w.id);
        }
        self.note(label, c);
    }

    /// Everything the store holds of `threads` and `people`, and the soul's state and count.
    async fn store(&mut self, label: &str, s: &dyn Store, threads: &[&str], people: &[&str]) {
        for t in threads {
            let entries: Vec<Entry> = s.thread_entries(t).await.unwrap();
            let entries: Vec<Entry> = entries.iter().map(|e| self.entry(e)).collect();
            self.note(&format!("{label}: {t}'s entries"), entries);
            self.note(
                &format!("{label}: {t}'s process"),
                s.thread_process(t).await.unwrap(),
            );
            let transitions: Vec<_> = s
                .transitions(t)
                .await
                .unwrap()
                .into_iter()
                .map(|r| (r.interaction, r.record))
                .collect();
            self.note(&format!("{label}: {t}'s transitions"), transitions);
            self.note(&format!("{label}: {t}'s usage"), s.usage(t).await.unwrap());
            self.note(
                &format!("{label}: {t}'s session"),
                s.claude_session(t).await.unwrap(),
            );
            let (who, name, at) = s.last_speaker(t).await.unwrap();
            self.note(&format!("{label}: {t}'s last speaker"), (who, name, at > 0));
        }
        for p in people {
            self.note(&format!("{label}: {p}"), s.user(p).await.unwrap());
            let history: Vec<_> = s
                .model_history(p)
                .await
                .unwrap()
                .into_iter()
                .map(|(version, note, _at)| (version, note))
                .collect();
            self.note(&format!("{label}: {p}'s model history"), history);
            self.note(
                &format!("{label}: {p}'s versions to export"),
                s.pending_model_versions(p).await.unwrap(),
            );
        }
        self.note(&format!("{label}: soul"), s.soul_state().await.unwrap());
        self.note(
            &format!("{label}: interactions"),
            s.interactions().await.unwrap(),
        );
    }

    /// The inbox row's fields a turn writes.
    async fn inbox(&mut self, label: &str, s: &dyn Store, row: i64) {
        let item = s.inbox_item(row).await.unwrap().expect("the row");
        self.note(
            label,
            (
                item.status,
                item.reply,
                item.attempts,
                item.failures,
                item.text,
            ),
        );
    }
}

/// `v` with its objects' keys in order: JSON objects are equal as values whatever their keys'
/// order, which jsonb does not keep.
fn sorted(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            keys.into_iter()
                .map(|k| (k.clone(), sorted(&map[k])))
                .collect::<serde_json::Map<_, _>>()
                .into()
        }
        serde_json::Value::Array(items) => items.iter().map(sorted).collect(),
        other => other.clone(),
    }
}

fn start(thread: &str, user: &str, name: &str, text: &str, claimant: &str) -> TurnStart {
    TurnStart {
        thread: thread.into(),
        user_id: user.into(),
        display_name: name.into(),
        text: text.into(),
        source: None,
        inbox: None,
        window: 20,
        claimant: claimant.into(),
        claim_until_ms: now_ms() + 60_000,
        conversation_claim: None,
    }
}

fn reply(thread: &str, user: &str, ctx: &TurnContext, text: &str) -> TurnRecord {
    TurnRecord {
        thread: thread.into(),
        user_id: user.into(),
        interaction: ctx.interaction,
        entries: vec![NewEntry::new(EntryType::ExternalDialog, text)],
        since_id: Some(ctx.since_id),
        ..TurnRecord::default()
    }
}

async fn accept(s: &dyn Store, conversation: &str, seq: f64, user: &str, text: &str) -> i64 {
    match s
        .accept_inbound(&Inbound {
            origin: format!("{conversation}/{seq}"),
            conversation: conversation.into(),
            seq,
            address: "{}".into(),
            user_id: user.into(),
            text: text.into(),
            requires_spoken: false,
        })
        .await
        .unwrap()
    {
        Intake::Accepted(row) => row,
        other => panic!("not accepted: {other:?}"),
    }
}

fn process(current: &str, invocations: u64) -> ThreadProcess {
    ThreadProcess {
        current: current.into(),
        previous: Some("main".into()),
        invocations,
        params: [("topic".to_string(), serde_json::json!("café ☕"))].into(),
    }
}

type Scenario = for<'a> fn(&'a dyn Store, &'a mut Seen) -> Pin<Box<dyn Future<Output = ()> + 'a>>;

/// Every scenario, by name.
const SCENARIOS: &[(&str, Scenario)] = &[
    ("a first message from a new person", |s, seen| {
        Box::pin(people::first_message(s, seen))
    }),
    ("a returning person renamed, and a slug taken", |s, seen| {
        Box::pin(people::renamed(s, seen))
    }),
    ("multi-byte and emoji text and names", |s, seen| {
        Box::pin(people::multibyte(s, seen))
    }),
    ("whispers waiting, claimed, released, lapsed", |s, seen| {
        Box::pin(people::whispers(s, seen))
    }),
    ("a commit with a new model and soul state", |s, seen| {
        Box::pin(people::model_and_soul(s, seen))
    }),
    ("a commit whose model has no person", |s, seen| {
        Box::pin(people::model_without_person(s, seen))
    }),
    ("a begin retried on its inbox row", |s, seen| {
        Box::pin(threads::retried(s, seen))
    }),
    ("the window over a long conversation", |s, seen| {
        Box::pin(threads::window(s, seen))
    }),
    ("a thread with a stored process", |s, seen| {
        Box::pin(threads::stored_process(s, seen))
    }),
    ("commits after release_turn", |s, seen| {
        Box::pin(threads::after_release(s, seen))
    }),
    ("a reset while a turn runs", |s, seen| {
        Box::pin(threads::reset_meanwhile(s, seen))
    }),
    ("a proactive turn on a new thread", |s, seen| {
        Box::pin(threads::proactive(s, seen))
    }),
    (
        "a dream's consolidation, its model checks, then a turn",
        |s, seen| Box::pin(threads::consolidated(s, seen)),
    ),
    ("a person forgotten, then a quiet spell", |s, seen| {
        Box::pin(forgetting::a_person_then_a_quiet_spell(s, seen))
    }),
    ("a turn under its conversation's claim", |s, seen| {
        Box::pin(threads::under_a_claim(s, seen))
    }),
    (
        "the psyche's events, post-cognition and packet",
        |s, seen| Box::pin(psyche::events_and_packet(s, seen)),
    ),
    ("a reset before any turn committed", |s, seen| {
        Box::pin(threads::reset_before_any_turn(s, seen))
    }),
    ("dossiers written, exported and forgotten", |s, seen| {
        Box::pin(dossiers::written_exported_forgotten(s, seen))
    }),
    (
        "a message's text rewritten with its files' notes",
        |s, seen| Box::pin(threads::message_rewritten(s, seen)),
    ),
    // A NUL is kept as U+FFFD on both (PostgreSQL's text cannot hold one).
    ("a NUL in a message", |s, seen| {
        Box::pin(threads::nul_in_a_message(s, seen))
    }),
];

/// What `scenario` saw on `store`.
async fn account(store: Arc<dyn Store>, scenario: Scenario) -> Vec<String> {
    let mut seen = Seen::default();
    scenario(store.as_ref(), &mut seen).await;
    seen.lines
}

#[tokio::test]
async fn a_turn_s_functions_on_postgres_keep_the_contract_the_rust_rule_keeps_on_sqlite() {
    compare(SCENARIOS).await;
}

/// Runs each scenario of `table` on a fresh store of each backend and compares the accounts.
async fn compare(table: &[(&str, Scenario)]) {
    if std::env::var(backends::POSTGRES_URL).map_or(true, |u| u.is_empty()) {
        eprintln!("PostgreSQL skipped: {} is not set", backends::POSTGRES_URL);
        return;
    }
    for (name, scenario) in table {
        let sqlite = backends::sqlite();
        let on_sqlite = account(sqlite.store.clone(), *scenario).await;
        let postgres = backends::postgres().await.expect("the server");
        let on_postgres = account(postgres.store.clone(), *scenario).await;
        for (a, b) in on_sqlite.iter().zip(&on_postgres) {
            assert!(
                a == b,
                "{name}: SQLite and PostgreSQL differ\n{}",
                differ(a, b)
            );
        }
        assert_eq!(
            on_sqlite.len(),
            on_postgres.len(),
            "{name}: as many observations"
        );
    }
}

/// The lines where `a` (SQLite's) and `b` (PostgreSQL's) differ, each cut short.
fn differ(a: &str, b: &str) -> String {
    let short = |l: &str| l.chars().take(160).collect::<String>();
    let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let mut out = format!("{}\n", short(a[0]));
    for i in 0..a.len().max(b.len()) {
        let (x, y) = (a.get(i).copied(), b.get(i).copied());
        if x != y {
            out += &format!(
                "line {i}\n  sqlite:   {}\n  postgres: {}\n",
                short(x.unwrap_or("(none)")),
                short(y.unwrap_or("(none)"))
            );
        }
    }
    out
}
