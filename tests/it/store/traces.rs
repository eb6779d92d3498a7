//! The window's face on every backend: traces kept, listed newest first and paged, found by
//! the message a reply went into, pruned to the newest; the inner life's samples bounded.

use anima::memory::faces::{Health, Inbox, SamePlace, Traces};
use anima::memory::{Inbound, Intake, PsycheSample, TraceRow};

use crate::on_every_backend;

fn trace(id: &str, thread: &str, at: i64, inbox: Option<i64>) -> TraceRow {
    TraceRow {
        trace: id.into(),
        kind: "message".into(),
        thread: thread.into(),
        person: Some("U1".into()),
        inbox,
        process: "main".into(),
        at,
        reply: Some(format!("réponse {id} ✨ {}", "é".repeat(300))),
        body: format!("{{\"stimulus\": \"<script>{id}</script>\"}}"),
        pieces: Vec::new(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn traces_are_kept_whole_listed_newest_first_and_paged() {
    on_every_backend!(|s, name| {
        for (i, thread) in ["C1:1.0", "C2:1.0", "C1:1.0"].iter().enumerate() {
            s.record_trace(trace(&format!("t{i}"), thread, 1_000 + i as i64, None))
                .await
                .unwrap();
        }
        let all = s.traces(None, None, 10).await.unwrap();
        let ids: Vec<&str> = all.iter().map(|t| t.trace.as_str()).collect();
        assert_eq!(ids, ["t2", "t1", "t0"], "{name}");
        // A summary's reply is cut by characters, never inside one.
        let reply = all[0].reply.as_deref().unwrap();
        assert_eq!(reply.chars().count(), 200, "{name}");
        assert!(reply.starts_with("réponse t2 ✨"), "{name}");
        let c1 = s.traces(Some("C1:1.0"), None, 10).await.unwrap();
        assert_eq!(c1.len(), 2, "{name}");
        let older = s.traces(None, Some(1_002), 1).await.unwrap();
        assert_eq!(older[0].trace, "t1", "{name}: the page before t2");
        // Whole, as written; a trace written again replaces the first.
        let mut again = trace("t1", "C2:1.0", 1_001, None);
        again.body = "{}".into();
        s.record_trace(again.clone()).await.unwrap();
        assert_eq!(s.trace("t1").await.unwrap(), Some(again), "{name}");
        assert_eq!(s.trace("nope").await.unwrap(), None, "{name}");
        let conversations = s.traced_conversations(None, 10).await.unwrap();
        let seen: Vec<(&str, u64)> = conversations
            .iter()
            .map(|c| (c.thread.as_str(), c.traces))
            .collect();
        assert_eq!(seen, [("C1:1.0", 2), ("C2:1.0", 1)], "{name}");
        // Paged one at a time, a tie on the last time included: every conversation once.
        s.record_trace(trace("t9", "C0:1.0", 1_002, None))
            .await
            .unwrap();
        let mut paged = Vec::new();
        let mut after = None;
        loop {
            let page = s.traced_conversations(after, 1).await.unwrap();
            let Some(c) = page.first() else { break };
            paged.push(c.thread.clone());
            after = Some((c.last_at, c.thread.clone()));
        }
        assert_eq!(paged, ["C0:1.0", "C1:1.0", "C2:1.0"], "{name}");
    });
}

/// The trace writer's batch: one write transaction for them all, a later one of an id
/// replacing an earlier; a conversation's pages found by thread and `before` together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_of_traces_is_one_write_and_a_conversation_pages_back() {
    on_every_backend!(|s, name| {
        let mut batch: Vec<TraceRow> = (0..6)
            .map(|i| {
                trace(
                    &format!("b{i}"),
                    ["C1:1.0", "C2:1.0"][i % 2],
                    2_000 + i as i64,
                    None,
                )
            })
            .collect();
        let mut again = trace("b0", "C1:1.0", 2_000, None);
        again.body = "{}".into();
        batch.push(again.clone());
        let writes = s.write_transactions();
        s.record_traces(batch.into()).await.unwrap();
        assert_eq!(s.write_transactions() - writes, 1, "{name}");
        s.record_traces(Vec::new().into()).await.unwrap();
        assert_eq!(s.trace("b0").await.unwrap(), Some(again), "{name}");
        let ids = |page: Vec<anima::memory::TraceSummary>| -> Vec<String> {
            page.into_iter().map(|t| t.trace).collect()
        };
        let c1 = ids(s.traces(Some("C1:1.0"), None, 2).await.unwrap());
        assert_eq!(c1, ["b4", "b2"], "{name}");
        let older = ids(s.traces(Some("C1:1.0"), Some(2_002), 2).await.unwrap());
        assert_eq!(older, ["b0"], "{name}: before b2, only C1's");
        let all_older = ids(s.traces(None, Some(2_002), 10).await.unwrap());
        assert_eq!(all_older, ["b1", "b0"], "{name}");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reply_finds_its_turns_trace_by_any_part_in_its_own_place() {
    on_every_backend!(|s, name| {
        let Intake::Accepted(row) = s
            .accept_inbound(&Inbound {
                origin: "C1:3.0".into(),
                conversation: "C1:1.0".into(),
                seq: 3.0,
                address: "C1".into(),
                user_id: "U1".into(),
                text: "why?".into(),
                requires_spoken: false,
            })
            .await
            .unwrap()
        else {
            panic!("{name}")
        };
        s.set_inbox_reply(row, "one. two.").await.unwrap();
        s.mark_part_posted(row, 1, "ts-1", false).await.unwrap();
        s.mark_part_posted(row, 2, "ts-2", true).await.unwrap();
        s.record_trace(trace("old", "C1:1.0", 10, Some(row)))
            .await
            .unwrap();
        s.record_trace(trace("new", "C1:1.0", 20, Some(row)))
            .await
            .unwrap();
        let here = || Box::new(|a: &str| a == "C1") as SamePlace;
        let elsewhere = || Box::new(|a: &str| a == "C9") as SamePlace;
        for reference in ["ts-1", "ts-2"] {
            let found = s.trace_of_reply(reference, here()).await.unwrap();
            assert_eq!(found.map(|t| t.trace).as_deref(), Some("new"), "{name}");
        }
        assert_eq!(
            s.trace_of_reply("ts-2", elsewhere()).await.unwrap(),
            None,
            "{name}"
        );
        assert_eq!(
            s.trace_of_reply("ts-7", here()).await.unwrap(),
            None,
            "{name}"
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pruning_keeps_the_newest_and_samples_stay_bounded() {
    on_every_backend!(|s, name| {
        for i in 0..5 {
            s.record_trace(trace(&format!("t{i}"), "C1:1.0", i, None))
                .await
                .unwrap();
        }
        assert_eq!(s.prune_traces(2).await.unwrap(), 3, "{name}");
        let left: Vec<String> = s
            .traces(None, None, 10)
            .await
            .unwrap()
            .into_iter()
            .map(|t| t.trace)
            .collect();
        assert_eq!(left, ["t4", "t3"], "{name}");
        assert_eq!(s.prune_traces(0).await.unwrap(), 2, "{name}: 0 keeps none");
        for at in 0..6 {
            let body = format!("{{\"mood\": {at}}}");
            s.record_psyche_sample(PsycheSample { at, body }, 4)
                .await
                .unwrap();
        }
        let kept: Vec<i64> = s
            .psyche_samples(0, 10)
            .await
            .unwrap()
            .iter()
            .map(|p| p.at)
            .collect();
        assert_eq!(kept, [2, 3, 4, 5], "{name}");
        assert_eq!(s.psyche_samples(4, 1).await.unwrap()[0].at, 4, "{name}");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_too_long_for_an_index_entry_is_kept_and_forgotten() {
    use anima::memory::faces::Forgetting;
    on_every_backend!(|s, name| {
        // Longer than a PostgreSQL B-tree entry (about 2,700 bytes), and not compressible.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let person: String = (0..4_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(b'a' + (x % 26) as u8)
            })
            .collect();
        let mut long = trace("long", "C9:1.0", 5_000, None);
        long.person = Some(person.clone());
        s.record_traces(vec![trace("short", "C8:1.0", 4_999, None), long].into())
            .await
            .unwrap();
        assert_eq!(
            s.trace("long").await.unwrap().and_then(|t| t.person),
            Some(person.clone()),
            "{name}"
        );
        let gone = s.forget_person(&person).await.unwrap();
        assert_eq!(gone.traces, 1, "{name}");
        assert!(s.trace("long").await.unwrap().is_none(), "{name}");
        assert!(s.trace("short").await.unwrap().is_some(), "{name}");
    });
}

/// A trace's pieces (a call's cached prompt prefix) come back whole and in order with it,
/// shared by traces that have the same one; a trace with none reads as written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_traces_pieces_are_read_back_in_order_and_shared() {
    on_every_backend!(|s, name| {
        let soul = format!("# Wren ✨ {}", "é".repeat(3_000));
        let mut a = trace("pa", "C1:1.0", 10, None);
        a.pieces = vec![soul.clone(), "skills ✨".into()];
        let mut b = trace("pb", "C1:1.0", 11, None);
        b.pieces = vec!["other".into(), soul.clone()];
        s.record_traces(vec![a.clone(), b.clone()].into())
            .await
            .unwrap();
        let mut c = trace("pc", "C2:1.0", 12, None);
        c.pieces = vec![soul.clone()];
        s.record_trace(c.clone()).await.unwrap();
        for t in [&a, &b, &c] {
            assert_eq!(s.trace(&t.trace).await.unwrap().as_ref(), Some(t), "{name}");
        }
        // Bodies read in bulk: newest first, paged by `before`, without their pieces.
        let bodies = s.trace_bodies(None, 2).await.unwrap();
        let seen: Vec<(&str, i64)> = bodies.iter().map(|b| (b.trace.as_str(), b.at)).collect();
        assert_eq!(seen, [("pc", 12), ("pb", 11)], "{name}");
        assert_eq!(bodies[1].body, b.body, "{name}");
        let older = s.trace_bodies(Some(11), 10).await.unwrap();
        let ids: Vec<&str> = older.iter().map(|b| b.trace.as_str()).collect();
        assert_eq!(ids, ["pa"], "{name}");
        // A piece outlives a pruned trace that listed it while another lists it still.
        s.prune_traces(1).await.unwrap();
        assert_eq!(s.trace("pc").await.unwrap(), Some(c), "{name}");
    });
}

/// On SQLite (one process: nothing writes unseen) a prune deletes the pieces no kept trace
/// lists, and each piece is kept once however many traces list it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_keeps_a_piece_once_and_prunes_it_with_the_last_trace_that_lists_it() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = anima::memory::sqlite::Sqlite::open(&dir.path().join("a.db")).unwrap();
    let s = sqlite.clone().shared();
    for (i, piece) in ["soul one", "soul one", "soul two"].iter().enumerate() {
        let mut t = trace(&format!("q{i}"), "C1:1.0", i as i64, None);
        t.pieces = vec![piece.to_string()];
        s.record_trace(t).await.unwrap();
    }
    let pieces = || {
        (sqlite.blocking().traces().conn())
            .query_row("SELECT count(*) FROM trace_pieces", [], |r| {
                r.get::<_, i64>(0)
            })
            .unwrap()
    };
    assert_eq!(pieces(), 2, "each text once");
    s.prune_traces(1).await.unwrap();
    assert_eq!(pieces(), 1, "only the kept trace's");
    s.prune_traces(0).await.unwrap();
    assert_eq!(pieces(), 0);
}
