//! The `Claims` face: one daemon at a time holds a conversation, a claim that changes hands is
//! a new epoch, a turn under an old one is refused, and daemons join and leave one at a time.
//! A store one process uses (SQLite) grants every claim to it.

use std::time::Duration;

use anima::memory::faces::{Claims, Inbox, Turns};
use anima::memory::{Inbound, StoreError, TurnRecord};

use crate::store::backends;

const LEASE: Duration = Duration::from_secs(30);

fn turn(thread: &str, claim: i64) -> TurnRecord {
    TurnRecord {
        thread: thread.into(),
        user_id: "U1".into(),
        claim: Some(claim),
        proactive: true,
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_grants_every_claim_to_its_one_process() {
    let fresh = backends::sqlite();
    let s = &fresh.store;
    assert_eq!(s.claim("C1:1.0", LEASE).await.unwrap(), Some(0));
    assert!(s.holds("C1:1.0", 0, LEASE).await.unwrap());
    assert_eq!(
        s.join("host", 1, "127.0.0.1:8080", LEASE).await.unwrap(),
        0,
        "always alone"
    );
    s.commit_turn(turn("C1:1.0", 0)).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_daemon_at_a_time_holds_a_conversation_and_a_turn_under_a_lost_claim_is_refused() {
    let Some(fresh) = backends::postgres().await else {
        return;
    };
    let (a, b) = (&fresh.store, backends::another(&fresh).await);
    let c = "C1:1.0";
    let first = a
        .claim(c, LEASE)
        .await
        .unwrap()
        .expect("a free conversation");
    assert_eq!(b.claim(c, LEASE).await.unwrap(), None, "A's lease runs");
    assert_eq!(
        a.claim(c, LEASE).await.unwrap(),
        Some(first),
        "renewed, not taken again"
    );
    assert!(a.holds(c, first, Duration::from_secs(1)).await.unwrap());
    assert!(
        !a.holds(c, first, LEASE * 2).await.unwrap(),
        "not with more margin than the lease has"
    );
    assert!(!b.holds(c, first, Duration::ZERO).await.unwrap());

    // A lets it go: B takes it at a new epoch, and A's no longer holds.
    assert!(
        !a.release(c, first).await.unwrap(),
        "nothing open there to look at again"
    );
    let second = b.claim(c, LEASE).await.unwrap().expect("let go");
    assert!(second > first, "{second} after {first}");
    assert!(!a.holds(c, first, Duration::ZERO).await.unwrap());
    assert_eq!(a.claim(c, LEASE).await.unwrap(), None, "B's now");

    // A turn run under A's old claim commits nothing; B's commits.
    match a.commit_turn(turn(c, first)).await {
        Err(StoreError::Fenced { conversation }) => assert_eq!(conversation, c),
        other => panic!("A's commit should be fenced: {other:?}"),
    }
    b.commit_turn(turn(c, second)).await.unwrap();
    assert!(
        b.commit_turn(turn(c, first)).await.is_err(),
        "B's own old epoch is not its claim"
    );
    // A turn that carries no claim is not checked (a turn outside the router).
    a.commit_turn(TurnRecord {
        claim: None,
        ..turn(c, 0)
    })
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_claim_is_anyones_and_its_old_holder_cannot_renew_it_back() {
    let Some(fresh) = backends::postgres().await else {
        return;
    };
    let (a, b) = (&fresh.store, backends::another(&fresh).await);
    let c = "C2:1.0";
    let first = a
        .claim(c, Duration::from_millis(200))
        .await
        .unwrap()
        .unwrap();
    // A's heartbeat renews what it holds while it holds it.
    a.heartbeat(&[c.to_string()], Duration::from_millis(400))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert_eq!(b.claim(c, LEASE).await.unwrap(), None, "renewed");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = b.claim(c, LEASE).await.unwrap().expect("lapsed");
    assert_eq!(second, first + 1);
    // A wakes late and renews: what it renews is no longer its own.
    a.heartbeat(&[c.to_string()], LEASE).await.unwrap();
    assert!(!a.holds(c, first, Duration::ZERO).await.unwrap());
    assert!(b.holds(c, second, Duration::from_secs(1)).await.unwrap());

    // A lapsed claim taken again by its own old holder is a new epoch too.
    let d = "C3:1.0";
    let e = a
        .claim(d, Duration::from_millis(50))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(a.claim(d, LEASE).await.unwrap(), Some(e + 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_with_open_rows_and_no_holder_are_found() {
    let Some(fresh) = backends::postgres().await else {
        return;
    };
    let (a, b) = (&fresh.store, backends::another(&fresh).await);
    for (origin, conversation) in [("m1", "C1:1.0"), ("m2", "C2:1.0")] {
        a.accept_inbound(&Inbound {
            origin: origin.into(),
            conversation: conversation.into(),
            seq: 1.0,
            address: "C1".into(),
            user_id: "U1".into(),
            text: "hello 👋".into(),
            requires_spoken: false,
        })
        .await
        .unwrap();
    }
    let mut unheld = b.unheld_conversations().await.unwrap();
    unheld.sort();
    assert_eq!(unheld, ["C1:1.0", "C2:1.0"]);
    let e = a.claim("C1:1.0", LEASE).await.unwrap().unwrap();
    assert_eq!(b.unheld_conversations().await.unwrap(), ["C2:1.0"]);
    assert!(
        a.release("C1:1.0", e).await.unwrap(),
        "its row is still open: the holder looks at it again"
    );
    assert_eq!(b.unheld_conversations().await.unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemons_join_and_leave_one_at_a_time() {
    let Some(fresh) = backends::postgres().await else {
        return;
    };
    let (a, b) = (&fresh.store, backends::another(&fresh).await);
    // Two starting together: exactly one finds no one else.
    let (ja, jb) = tokio::join!(
        a.join("one", 1, "127.0.0.1:8081", LEASE),
        b.join("two", 2, "127.0.0.1:8082", LEASE)
    );
    let mut joined = [ja.unwrap(), jb.unwrap()];
    joined.sort();
    assert_eq!(joined, [0, 1]);
    let e = a.claim("C1:1.0", LEASE).await.unwrap().unwrap();
    let daemons = b.daemons().await.unwrap();
    assert_eq!(daemons.len(), 2, "{daemons:?}");
    let one = daemons.iter().find(|d| d.host == "one").unwrap();
    assert_eq!((one.pid, one.conversations), (1, 1));
    // Two stopping together: exactly one is the last.
    let (la, lb) = tokio::join!(a.leave(), b.leave());
    let mut left = [la.unwrap(), lb.unwrap()];
    left.sort();
    assert_eq!(left, [0, 1]);
    assert!(b.daemons().await.unwrap().is_empty());
    // Leaving keeps the claims until they are let go.
    assert!(a.holds("C1:1.0", e, Duration::ZERO).await.unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_daemon_leads_and_the_lead_passes_when_it_leaves_or_lapses() {
    let sqlite = backends::sqlite();
    assert!(sqlite.store.lead(LEASE).await.unwrap(), "alone, it leads");
    let Some(fresh) = backends::postgres().await else {
        return;
    };
    let (a, b) = (&fresh.store, backends::another(&fresh).await);
    a.join("one", 1, "127.0.0.1:8081", LEASE).await.unwrap();
    b.join("two", 2, "127.0.0.1:8082", LEASE).await.unwrap();
    assert!(a.lead(LEASE).await.unwrap());
    assert!(!b.lead(LEASE).await.unwrap(), "one leader at a time");
    assert!(a.lead(LEASE).await.unwrap(), "renewed");
    let leads: Vec<(String, bool, u64)> = b
        .daemons()
        .await
        .unwrap()
        .into_iter()
        .map(|d| (d.host, d.leads, d.conversations))
        .collect();
    assert_eq!(
        leads,
        [("one".to_string(), true, 0), ("two".to_string(), false, 0)],
        "the lead is not a conversation held"
    );
    a.leave().await.unwrap();
    assert!(b.lead(LEASE).await.unwrap(), "the leader left: at once");
    // A lead that is not renewed lapses to another daemon.
    assert!(b.lead(Duration::from_millis(100)).await.unwrap());
    assert!(!a.lead(LEASE).await.unwrap());
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(a.lead(LEASE).await.unwrap(), "lapsed");
    assert!(!b.lead(LEASE).await.unwrap());
}

/// The writes to a row beside the commit are fenced too: while another daemon holds the row's
/// conversation, a daemon that lost it begins no turn there and changes nothing of its rows;
/// a part marked late never takes the count back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_that_lost_a_conversation_begins_no_turn_and_writes_nothing_to_its_rows() {
    let Some(fresh) = backends::postgres().await else {
        return;
    };
    let (a, b) = (&fresh.store, backends::another(&fresh).await);
    let c = "C5:1.0";
    let id = match a
        .accept_inbound(&Inbound {
            origin: "C5:1.0".into(),
            conversation: c.into(),
            seq: 1.0,
            address: "C5".into(),
            user_id: "U1".into(),
            text: "héllo 👋".into(),
            requires_spoken: false,
        })
        .await
        .unwrap()
    {
        anima::memory::Intake::Accepted(id) => id,
        other => panic!("{other:?}"),
    };
    let first = a
        .claim(c, Duration::from_millis(100))
        .await
        .unwrap()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let second = b.claim(c, LEASE).await.unwrap().expect("lapsed");
    let begin = |claim: i64| anima::memory::TurnStart {
        thread: c.into(),
        user_id: "U1".into(),
        display_name: "Zoë".into(),
        text: "héllo 👋".into(),
        source: Some(format!("inbox:{id}")),
        inbox: Some(id),
        window: 20,
        claimant: "t".into(),
        claim_until_ms: 0,
        conversation_claim: Some(claim),
    };
    let fenced = |what: &str, r: Result<(), StoreError>| match r {
        Err(StoreError::Fenced { conversation }) => assert_eq!(conversation, c, "{what}"),
        other => panic!("{what} should be fenced: {other:?}"),
    };
    fenced("the begin", a.begin_turn(begin(first)).await.map(|_| ()));
    fenced("the reply", a.set_inbox_reply(id, "stale").await);
    fenced("the stream", a.set_stream_ref(id, "1.1").await);
    fenced("a part", a.mark_part_posted(id, 1, "1.2", false).await);
    fenced("the end", a.mark_done(id).await);
    fenced("the failure", a.mark_failed(id, "stale", None).await);
    fenced("the stop", a.mark_stopped(id, "stale").await.map(|_| ()));
    let row = b.inbox_item(id).await.unwrap().unwrap();
    assert_eq!(
        (row.attempts, row.reply, row.stream_ref, row.parts_posted),
        (0, None, None, 0),
        "nothing of A's"
    );
    assert_eq!(row.status, anima::memory::InboxStatus::Pending);

    // B, which holds it, writes; parts marked out of order keep the higher count.
    b.begin_turn(begin(second)).await.unwrap();
    b.set_inbox_reply(id, "la réponse").await.unwrap();
    b.mark_part_posted(id, 2, "2.2", false).await.unwrap();
    b.mark_part_posted(id, 1, "2.1", false).await.unwrap();
    b.mark_part_posted(id, 2, "2.2", true).await.unwrap();
    let row = b.inbox_item(id).await.unwrap().unwrap();
    assert_eq!((row.attempts, row.parts_posted), (1, 2));
    assert_eq!(row.status, anima::memory::InboxStatus::Done);
    let mut held = b.references_held(id).await.unwrap();
    held.sort();
    assert_eq!(held, ["2.1", "2.2"], "each reference once");
    // A row answered stays answered: a late give-up leaves it done.
    b.mark_failed(id, "late", None).await.unwrap();
    assert_eq!(
        b.inbox_item(id).await.unwrap().unwrap().status,
        anima::memory::InboxStatus::Done
    );
}

/// The first daemon to join is the soul's waker, from its join on: a daemon joining next sees
/// the soul waking until the waker says it woke, or until a waker that died lapses. The waker's
/// hold is no conversation another daemon would count or adopt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_daemon_wakes_the_soul_and_the_others_see_it_waking() {
    let sqlite = backends::sqlite();
    assert!(
        !sqlite.store.waking().await.unwrap(),
        "alone, it wakes the soul itself"
    );
    let Some(fresh) = backends::postgres().await else {
        return;
    };
    let (a, b) = (&fresh.store, backends::another(&fresh).await);
    assert_eq!(a.join("one", 1, "127.0.0.1:8081", LEASE).await.unwrap(), 0);
    assert!(!a.waking().await.unwrap(), "not another's");
    assert_eq!(b.join("two", 2, "127.0.0.1:8082", LEASE).await.unwrap(), 1);
    assert!(b.waking().await.unwrap(), "the first is waking the soul");
    assert!(b.unheld_conversations().await.unwrap().is_empty());
    let daemons = b.daemons().await.unwrap();
    assert!(daemons.iter().all(|d| d.conversations == 0), "{daemons:?}");
    a.woke().await.unwrap();
    assert!(!b.waking().await.unwrap(), "awake");

    // A waker that dies mid-wakeup: its hold lapses with its lease.
    let (c, d) = (
        backends::another(&fresh).await,
        backends::another(&fresh).await,
    );
    a.leave().await.unwrap();
    b.leave().await.unwrap();
    assert_eq!(
        c.join("three", 3, "127.0.0.1:8083", Duration::from_millis(200))
            .await
            .unwrap(),
        0
    );
    d.join("four", 4, "127.0.0.1:8084", LEASE).await.unwrap();
    assert!(d.waking().await.unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!d.waking().await.unwrap(), "the waker's lease ended");
}
