//! The `Budgets` face: a token bucket per name (a fourth of the limit at once, the rest over
//! the minute), taken all or none; a bucket drained by a 429 refills from then; refusals last
//! their while. On PostgreSQL every daemon of the soul spends from the same buckets.

use std::time::Duration;

use anima::memory::faces::Budgets;

use crate::on_every_backend;
use crate::store::backends;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bucket_gives_a_fourth_of_its_limit_at_once_and_pairs_are_taken_all_or_none() {
    on_every_backend!(|s, name| {
        let take = |buckets: &'static [(&'static str, u32)]| s.take_budget(buckets);
        let taken = {
            let mut n = 0;
            while take(&[("start", 20)]).await.unwrap() {
                n += 1;
                assert!(n <= 20, "{name}: never ends");
            }
            n
        };
        assert_eq!(taken, 5, "{name}: 20 a minute, 5 at once");
        // A pair whose one half is spent takes nothing of the other.
        assert!(
            !take(&[("start", 20), ("stop", 20)]).await.unwrap(),
            "{name}"
        );
        let stops = {
            let mut n = 0;
            while take(&[("stop", 20)]).await.unwrap() {
                n += 1;
                assert!(n <= 20, "{name}: never ends");
            }
            n
        };
        assert_eq!(stops, 5, "{name}: the refused pair spent no stop");
        // A 429 empties a bucket; another is untouched.
        assert!(take(&[("append", 100)]).await.unwrap(), "{name}");
        s.drain_budget("append").await.unwrap();
        assert!(!take(&[("append", 100)]).await.unwrap(), "{name}");
        // 75 a minute after the burst: one every 0.8 s.
        tokio::time::sleep(Duration::from_millis(900)).await;
        assert!(take(&[("append", 100)]).await.unwrap(), "{name}: refilled");
        assert!(!take(&[("append", 100)]).await.unwrap(), "{name}: only one");
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refusals_are_found_for_their_kinds_while_they_last() {
    on_every_backend!(|s, name| {
        s.note_refusal("channel", "channel_type_not_supported")
            .await
            .unwrap();
        let within = Duration::from_secs(600);
        assert_eq!(
            s.refusal(&["all", "channel"], within)
                .await
                .unwrap()
                .as_deref(),
            Some("channel_type_not_supported"),
            "{name}"
        );
        assert_eq!(
            s.refusal(&["all", "dm"], within).await.unwrap(),
            None,
            "{name}"
        );
        s.note_refusal("all", "missing_scope").await.unwrap();
        assert_eq!(
            s.refusal(&["all", "channel"], within)
                .await
                .unwrap()
                .as_deref(),
            Some("missing_scope"),
            "{name}: the first kind asked first"
        );
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert_eq!(
            s.refusal(&["all", "channel"], Duration::from_millis(50))
                .await
                .unwrap(),
            None,
            "{name}: over"
        );
    });
}

/// Two daemons on one database spend from one bucket: together they get what one would.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemons_sharing_a_database_share_its_budgets_and_refusals() {
    let Some(fresh) = backends::postgres().await else {
        return;
    };
    let (a, b) = (&fresh.store, backends::another(&fresh).await);
    let mut taken = 0;
    for i in 0..20 {
        let s: &dyn Budgets = if i % 2 == 0 { a.as_ref() } else { &b };
        if s.take_budget(&[("chat.startStream", 20)]).await.unwrap() {
            taken += 1;
        }
    }
    assert_eq!(taken, 5, "one burst between the two");
    a.note_refusal("slack:channel", "channel_type_not_supported")
        .await
        .unwrap();
    assert!(b
        .refusal(&["slack:channel"], Duration::from_secs(600))
        .await
        .unwrap()
        .is_some());
    // Many at once from both never take more than the burst.
    let (a2, b2) = (
        std::sync::Arc::new(backends::another(&fresh).await),
        std::sync::Arc::new(b),
    );
    let tasks: Vec<_> = (0..16)
        .map(|i| {
            let s = if i % 2 == 0 { a2.clone() } else { b2.clone() };
            tokio::spawn(async move { s.take_budget(&[("chat.appendStream", 100)]).await.unwrap() })
        })
        .collect();
    let mut at_once = 0;
    for t in tasks {
        at_once += t.await.unwrap() as u32;
    }
    assert_eq!(at_once, 16, "all sixteen fit in a burst of 25");
    let mut more = 0;
    while a2.take_budget(&[("chat.appendStream", 100)]).await.unwrap() {
        more += 1;
        assert!(more <= 100, "never ends");
    }
    assert_eq!(at_once + more, 25, "the burst, not one per daemon");
}
