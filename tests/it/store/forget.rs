//! The `Forgetting` face on every backend: a forgotten person leaves nothing of theirs in any
//! table (read raw, row by row) while everyone else keeps theirs, and a conversation quiet past
//! the moment given loses its working memory and its finished inbox rows, and nothing else.

use std::sync::Arc;

use anima::memory::faces::{Admin, Feedback, Forgetting, Inbox, Psychology, Traces, Turns, Users};
use anima::memory::postgres::Postgres;
use anima::memory::psyche::Place;
use anima::memory::sqlite::Sqlite;
use anima::memory::{
    EntryType, Forgotten, Inbound, Intake, NewEntry, Pruned, TurnRecord, TurnStart, Verdict,
};
use anima::psyche::gate::GateRules;
use anima::psyche::{Event, EventKind, Psyche};
use async_trait::async_trait;

use crate::on_every_backend;

const GONE: &str = "UGONE";
const OTHER: &str = "UADA";

/// Every row of every table, as text: (table, row).
#[async_trait]
trait Raw {
    async fn rows(&self) -> Vec<(String, String)>;
}

#[async_trait]
impl Raw for Sqlite {
    async fn rows(&self) -> Vec<(String, String)> {
        let conn = rusqlite::Connection::open(self.blocking().path()).unwrap();
        let tables: Vec<String> = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table'")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        let mut out = Vec::new();
        for table in tables {
            let mut stmt = conn.prepare(&format!("SELECT * FROM \"{table}\"")).unwrap();
            let n = stmt.column_count();
            let mut rows = stmt.query([]).unwrap();
            while let Some(row) = rows.next().unwrap() {
                let text: Vec<String> = (0..n)
                    .map(|i| match row.get_ref(i).unwrap() {
                        rusqlite::types::ValueRef::Text(t) | rusqlite::types::ValueRef::Blob(t) => {
                            String::from_utf8_lossy(t).into_owned()
                        }
                        v => format!("{v:?}"),
                    })
                    .collect();
                out.push((table.clone(), text.join("|")));
            }
        }
        out
    }
}

#[async_trait]
impl Raw for Postgres {
    async fn rows(&self) -> Vec<(String, String)> {
        use std::str::FromStr;
        let url = std::env::var(crate::store::backends::POSTGRES_URL).unwrap();
        let mut config = tokio_postgres::Config::from_str(&url).unwrap();
        config.dbname(self.place().rsplit_once('/').unwrap().1);
        let (client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        let tables = client
            .query(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public'",
                &[],
            )
            .await
            .unwrap();
        let mut out = Vec::new();
        for t in tables {
            let table: String = t.get(0);
            for row in client
                .query(&format!("SELECT t::text FROM \"{table}\" t"), &[])
                .await
                .unwrap()
            {
                out.push((table.clone(), row.get(0)));
            }
        }
        out
    }
}

fn inbound(origin: &str, conversation: &str, user: &str, text: &str) -> Inbound {
    Inbound {
        origin: origin.into(),
        conversation: conversation.into(),
        seq: 1.0,
        address: "{}".into(),
        user_id: user.into(),
        text: text.into(),
        requires_spoken: false,
    }
}

async fn accepted(s: &(impl Inbox + ?Sized), m: Inbound) -> i64 {
    match s.accept_inbound(&m).await.unwrap() {
        Intake::Accepted(id) => id,
        other => panic!("{other:?}"),
    }
}

/// A message of `user` answered whole: its row, the turn (a thought, the reply, a model
/// change with its note quoting the message), the reply posted.
async fn answered(
    s: &(impl Inbox + Turns + ?Sized),
    conversation: &str,
    user: &str,
    name: &str,
    text: &str,
    reply: &str,
) -> i64 {
    // A surface's name of the message (Slack's: channel and ts), never its words.
    let origin = format!("{conversation}:{}", text.len());
    let row = accepted(s, inbound(&origin, conversation, user, text)).await;
    let (_, ctx) = s
        .begin_turn(TurnStart {
            thread: conversation.into(),
            user_id: user.into(),
            display_name: name.into(),
            text: text.into(),
            source: Some(format!("inbox:{row}")),
            inbox: Some(row),
            window: 20,
            claimant: "c".into(),
            claim_until_ms: anima::memory::now_ms() + 60_000,
            conversation_claim: None,
        })
        .await
        .unwrap();
    let note = format!("What {name} told: {text}");
    s.commit_turn(TurnRecord {
        thread: conversation.into(),
        user_id: user.into(),
        interaction: ctx.interaction,
        entries: vec![
            NewEntry::new(EntryType::InternalMonologue, "thinking it over"),
            NewEntry::new(EntryType::ExternalDialog, reply),
            NewEntry::new(EntryType::UserModelUpdate, &note).user(user),
        ],
        user_model: Some((format!("# {name}\n{text}"), note)),
        inbox: Some((row, reply.into())),
        ..TurnRecord::default()
    })
    .await
    .unwrap();
    s.mark_part_posted(row, 1, &format!("ref-{row}"), true)
        .await
        .unwrap();
    row
}

async fn felt(s: &(impl Psychology + ?Sized), who: &str, text: &str) {
    let event = Event {
        kind: EventKind::Addressed,
        person: Some(who.into()),
        text: text.into(),
        at: anima::memory::now_ms(),
    };
    s.psyche_event(
        "Wren",
        &Psyche::shipped(),
        &GateRules::default(),
        &event,
        &Place::default(),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn a_forgotten_person_leaves_nothing_of_theirs_and_everyone_else_keeps_theirs() {
    on_every_backend!(|s, name| {
        // Their direct conversation, answered; a message of theirs still waiting there.
        answered(
            &**s,
            "D9",
            GONE,
            "Quillon",
            "my quince tart recipe",
            "Lovely tart",
        )
        .await;
        accepted(&**s, inbound("D9:later", "D9", GONE, "one more thing")).await;
        // A thread shared with Ada: both spoke, the soul answered Ada.
        let ada = answered(&**s, "C1:1.0", OTHER, "Ada", "hello all", "Hello Ada").await;
        answered(&**s, "C1:1.0", GONE, "Quillon", "quince season", "Soon").await;
        // What the psyche keeps of each, and a click of theirs on Ada's reply.
        felt(&**s, GONE, "I'm a baker in Quimper and quince is my thing").await;
        felt(&**s, OTHER, "I'm a mathematician in London").await;
        let here = || Box::new(|_: &str| true) as anima::memory::faces::SamePlace;
        s.record_feedback(&format!("ref-{ada}"), here(), GONE, Verdict::Good)
            .await
            .unwrap();
        // Traces: of their own turn, of Ada's turn in the thread they shared (its prompt held
        // their words), and of a conversation they never spoke in.
        for (id, thread, person) in [
            ("t-d9", "D9", GONE),
            ("t-c1", "C1:1.0", OTHER),
            ("t-c2", "C2", OTHER),
        ] {
            s.record_trace(anima::memory::TraceRow {
                trace: id.into(),
                kind: "message".into(),
                thread: thread.into(),
                person: Some(person.into()),
                inbox: None,
                process: "main".into(),
                at: 1,
                reply: None,
                body: format!(
                    "{{\"prompt\": \"{}\"}}",
                    if thread == "C2" {
                        "tea"
                    } else {
                        "quince season"
                    }
                ),
                pieces: Vec::new(),
            })
            .await
            .unwrap();
        }
        assert!(s.rows().await.iter().any(|(_, r)| r.contains("quince")));

        let f = s.forget_person(GONE).await.unwrap();
        assert_eq!(
            (
                f.known,
                f.model_versions,
                f.conversations,
                f.inbox_rows,
                f.inbox_waiting
            ),
            (true, 2, 1, 2, 1),
            "{name}: {f:?}"
        );
        assert_eq!(
            (f.relationships, f.memories, f.feedback),
            (1, 1, 1),
            "{name}: {f:?}"
        );
        // Their conversation's message, thought, reply and model note; in the shared thread,
        // their message and the note on their model.
        assert_eq!(f.entries, 4 + 2, "{name}: {f:?}");
        assert!(f.gate_decisions >= 1, "{name}: {f:?}");
        assert_eq!(f.traces, 2, "{name}: {f:?}");
        assert!(
            s.trace("t-c2").await.unwrap().is_some(),
            "{name}: not theirs"
        );

        for (table, row) in s.rows().await {
            // Words as the full-text index keeps them too: lower-cased.
            for word in ["quince", "Quillon", "Quimper", "quimper"] {
                assert!(!row.contains(word), "{name}: {table} keeps {word:?}: {row}");
            }
            if row.contains(GONE) {
                assert!(
                    table == "inbox" && row.contains("one more thing"),
                    "{name}: {table} keeps their id: {row}"
                );
            }
        }
        assert!(s.user(GONE).await.unwrap().is_none(), "{name}");
        assert!(s.model_history(GONE).await.unwrap().is_empty(), "{name}");
        assert!(s.thread_entries("D9").await.unwrap().is_empty(), "{name}");
        // Ada keeps hers, and the soul's answers to her.
        let shared: Vec<String> = s
            .thread_entries("C1:1.0")
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.content)
            .collect();
        assert!(
            shared.contains(&"hello all".to_string()),
            "{name}: {shared:?}"
        );
        assert!(
            shared.contains(&"Hello Ada".to_string()),
            "{name}: {shared:?}"
        );
        // The soul's own words there stay, its answer to them too: the others saw them.
        assert!(shared.contains(&"Soon".to_string()), "{name}: {shared:?}");
        assert_eq!(s.model_history(OTHER).await.unwrap().len(), 1, "{name}");
        let mind = s
            .psyche_mind("Wren", &Psyche::shipped(), None, anima::memory::now_ms())
            .await
            .unwrap();
        assert_eq!(
            mind.relationships.keys().collect::<Vec<_>>(),
            [OTHER],
            "{name}"
        );
        assert_eq!(mind.memories, 1, "{name}");
        // A late retry of their answered message is still known: never answered twice.
        assert_eq!(
            s.accept_inbound(&inbound("D9:21", "D9", GONE, "again"))
                .await
                .unwrap(),
            Intake::Duplicate,
            "{name}"
        );
        // The message still waiting is answered as any other, and the person starts anew.
        let next = s.load_turn("C1:1.0", GONE, "Quillon", 20).await.unwrap();
        assert_eq!(next.user.model, None, "{name}");
        assert_eq!(next.user.model_version, 0, "{name}");
        // Someone never seen is no one to forget.
        assert_eq!(
            s.forget_person("UNOBODY").await.unwrap(),
            Forgotten::default(),
            "{name}"
        );
    });
}

#[tokio::test]
async fn a_conversation_quiet_past_the_moment_given_loses_its_working_memory_and_finished_rows() {
    on_every_backend!(|s, name| {
        let s: Arc<_> = Arc::clone(s);
        // Quiet: answered long ago. Waiting: an old conversation with a message unanswered.
        answered(&*s, "C-quiet", OTHER, "Ada", "an old chat", "Old answer").await;
        answered(&*s, "C-waiting", OTHER, "Ada", "asked before", "Answered").await;
        accepted(
            &*s,
            inbound("C-waiting:2", "C-waiting", OTHER, "still to answer"),
        )
        .await;
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let quiet_since = anima::memory::now_ms();
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        // Lively: spoken in since.
        answered(&*s, "C-lively", OTHER, "Ada", "a new chat", "New answer").await;

        for (id, thread) in [("q-quiet", "C-quiet"), ("q-lively", "C-lively")] {
            s.record_trace(anima::memory::TraceRow {
                trace: id.into(),
                kind: "message".into(),
                thread: thread.into(),
                person: Some(OTHER.into()),
                inbox: None,
                process: "main".into(),
                at: quiet_since - 5,
                reply: None,
                body: "{}".into(),
                pieces: Vec::new(),
            })
            .await
            .unwrap();
        }
        let p = s.forget_quiet(quiet_since).await.unwrap();
        assert_eq!(
            p,
            Pruned {
                conversations: 1,
                traces: 1,
                entries: 4,
                inbox_rows: 1,
            },
            "{name}"
        );
        assert!(
            s.thread_entries("C-quiet").await.unwrap().is_empty(),
            "{name}"
        );
        assert_eq!(
            s.thread_entries("C-waiting").await.unwrap().len(),
            4,
            "{name}"
        );
        assert_eq!(
            s.thread_entries("C-lively").await.unwrap().len(),
            4,
            "{name}"
        );
        let rows = s.rows().await;
        assert!(
            !rows
                .iter()
                .any(|(t, r)| t == "inbox" && r.contains("an old chat")),
            "{name}"
        );
        assert!(
            rows.iter()
                .any(|(t, r)| t == "inbox" && r.contains("still to answer")),
            "{name}: a message waiting is never dropped"
        );
        // The person and their model are not working memory.
        assert_eq!(s.model_history(OTHER).await.unwrap().len(), 3, "{name}");
        // Once more: nothing left to drop.
        assert_eq!(
            s.forget_quiet(quiet_since).await.unwrap(),
            Pruned::default(),
            "{name}"
        );
    });
}

/// The newest entries of all dropped, a conversation an operator had closed still shows the
/// next message in its window (SQLite numbers it again after the newest entry left).
#[tokio::test]
async fn after_the_newest_entries_are_dropped_a_closed_conversation_still_shows_its_next_message() {
    on_every_backend!(|s, name| {
        answered(&**s, "C2", OTHER, "Ada", "the first one", "Yes").await;
        answered(&**s, "C2", OTHER, "Ada", "the second one", "Yes again").await;
        assert!(s.reset_thread("C2").await.unwrap(), "{name}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        let p = s.forget_quiet(anima::memory::now_ms()).await.unwrap();
        assert_eq!(p.entries, 8, "{name}");
        answered(&**s, "C2", OTHER, "Ada", "back again", "Welcome back").await;
        let ctx = s.load_turn("C2", OTHER, "Ada", 20).await.unwrap();
        let window: Vec<&str> = ctx.recent.iter().map(|e| e.content.as_str()).collect();
        assert!(window.contains(&"back again"), "{name}: {window:?}");
        assert!(window.contains(&"Welcome back"), "{name}: {window:?}");
    });
}
