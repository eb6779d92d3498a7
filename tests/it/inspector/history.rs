//! What the inspector reads back over time, through `anima inspect` on a home the test fills
//! through the store's faces: any two versions of a user model diffed (exported to git or
//! not), people paged, the process graph's counts from the moves the traces recorded, each
//! person's relationship charted, and the Slack message a reply went into named.

use super::*;
use anima::memory::{Inbound, Intake, PsycheSample, TurnRecord, TurnStart};
use anima::window::TraceBody;

fn session(s: &Served) -> String {
    format!("anima_inspect={}", s.token)
}

/// A turn of `user` (`name`) that leaves `model` as their user model.
async fn model_turn(
    store: &dyn anima::memory::Store,
    user: &str,
    name: &str,
    model: &str,
    n: usize,
) {
    let (_, ctx) = store
        .begin_turn(TurnStart {
            thread: format!("D-{user}"),
            user_id: user.into(),
            display_name: name.into(),
            text: "hi".into(),
            source: None,
            inbox: None,
            window: 20,
            claimant: format!("c{n}"),
            claim_until_ms: anima::memory::now_ms() + 60_000,
            conversation_claim: None,
        })
        .await
        .unwrap();
    store
        .commit_turn(TurnRecord {
            thread: format!("D-{user}"),
            user_id: user.into(),
            interaction: ctx.interaction,
            user_model: Some((model.into(), format!("note {n}"))),
            ..TurnRecord::default()
        })
        .await
        .unwrap();
}

#[test]
fn any_two_versions_of_a_user_model_are_diffed_and_people_are_paged() {
    let model = FakeModel::start();
    let home = Home::new("anthropic", &model.url(), "");
    let store = home.store();
    let long = format!("# Ada\n{}", "<b>é</b>".repeat(30_000));
    let versions = [
        "# Ada\nlikes rivers\nfirst line".to_string(),
        "# Ada\nlikes rivers\n<script>alert(1)</script>".to_string(),
        "# Ada\nlikes the sea\n<script>alert(1)</script>".to_string(),
        long.clone(),
    ];
    wait(async {
        for (n, m) in versions.iter().enumerate() {
            model_turn(&*store, "U1", "<script>Ada</script>", m, n).await;
        }
        // Versions 1 and 2 went to git: the store's history still gives their text.
        store.mark_exported("U1", 2).await.unwrap();
        for n in 0..150 {
            store
                .record_user_message("D0", &format!("P{n:03}"), &format!("Person {n}"), "x", None)
                .await
                .unwrap();
        }
    });
    let s = Served::start(&home);
    let url = |p: &str| format!("{}{p}", s.base);
    let session = session(&s);
    let h = [("cookie", session.as_str())];
    // Versions 1 → 3, both long exported or not: their lines marked, escaped.
    let page = get(&url("/inspect/person?id=U1&a=1&b=3"), &h);
    assert_eq!(page.status, 200, "{}", page.body);
    let diff = page.body.split("<pre class=\"diff\">").nth(1).unwrap();
    let diff = diff.split("</pre>").next().unwrap();
    assert!(
        diff.contains("<span class=\"same\">  # Ada</span>"),
        "{diff}"
    );
    assert!(
        diff.contains("<span class=\"del\">- likes rivers</span>"),
        "{diff}"
    );
    assert!(
        diff.contains("<span class=\"add\">+ likes the sea</span>"),
        "{diff}"
    );
    assert!(
        diff.contains("<span class=\"del\">- first line</span>"),
        "{diff}"
    );
    assert!(
        diff.contains("<span class=\"add\">+ &lt;script&gt;alert(1)&lt;/script&gt;</span>"),
        "{diff}"
    );
    assert!(!page.body.contains("<script>alert"), "nothing unescaped");
    // Every version is offered on both sides.
    assert_eq!(page.body.matches("<option").count(), 8, "{}", page.body);
    // Without a choice, the two newest; the long model is cut, with a link to it whole.
    let newest = get(&url("/inspect/person?id=U1"), &h);
    assert!(
        newest.body.contains("<span class=\"add\">+ &lt;b&gt;é"),
        "v3 → v4"
    );
    assert!(newest.body.len() < 400_000, "{} bytes", newest.body.len());
    let link = "/inspect/person/model?id=U1&amp;v=4";
    assert!(newest.body.contains(link), "{}", &newest.body[..2_000]);
    let whole = get(&url("/inspect/person/model?id=U1&v=4"), &h);
    assert_eq!(
        whole.header("content-type"),
        Some("text/plain; charset=utf-8")
    );
    assert_eq!(whole.body, long);
    let first = get(&url("/inspect/person/model?id=U1&v=1"), &h);
    assert_eq!(first.body, versions[0], "an exported version, whole");
    assert_eq!(get(&url("/inspect/person/model?id=U1&v=9"), &h).status, 404);
    let gone = get(&url("/inspect/person?id=U1&a=1&b=9"), &h);
    assert!(gone
        .body
        .contains("v1 or v9 is not in this person's history"));
    // 151 people: 100 a page, the next page linked, a name of markup as text.
    let people = get(&url("/inspect/people"), &h);
    assert_eq!(people.body.matches("<a class=\"person\"").count(), 100);
    assert!(
        people.body.contains("Page 1 of 2 (151 people)"),
        "{}",
        people.body
    );
    assert!(people.body.contains("href=\"?page=1\">Next</a>"));
    let second = get(&url("/inspect/people?page=1"), &h);
    assert!(second.body.contains("&lt;script&gt;Ada") && !second.body.contains("<script>Ada"));
    assert_eq!(second.body.matches("<a class=\"person\"").count(), 51);
    assert!(second.body.contains(">Previous</a>") && !second.body.contains(">Next</a>"));
    let beyond = get(&url("/inspect/people?page=99"), &h);
    assert_eq!(
        beyond.body.matches("<a class=\"person\"").count(),
        51,
        "the last page"
    );
    assert_eq!(get(&url("/inspect/people?page=-1"), &h).status, 400);
}

/// A message turn's trace in `thread` that recorded `moves` as process decisions and stood
/// in `process` after.
fn moved(n: u64, thread: &str, process: &str, moves: &[&str], at: i64) -> TraceRow {
    let mut row = trace(n, thread, "p", "m", "r", at);
    let mut body = TraceBody::from_json(&row.body).unwrap();
    body.decisions = moves
        .iter()
        .map(|m| Decision {
            kind: "process".into(),
            text: m.to_string(),
        })
        .collect();
    body.decisions.push(Decision {
        kind: "gate".into(),
        text: "main → deep_work (not a move)".into(),
    });
    row.body = body.to_json();
    row.process = process.into();
    row
}

#[test]
fn the_graph_counts_recorded_moves_relationships_are_charted_and_a_reply_names_its_message() {
    let model = FakeModel::start();
    let home = Home::new("anthropic", &model.url(), "");
    let store = home.store();
    let now = anima::memory::now_ms();
    // Two moves within one turn count; a conversation found in another process after a
    // restart (no move recorded) counts none.
    record(
        &home,
        moved(
            1,
            "C1",
            "main",
            &[
                "main → deep_work (rule 0)",
                "deep_work → main (the action rest, at once)",
            ],
            now - 5_000,
        ),
    );
    record(
        &home,
        moved(2, "C1", "main", &["main → deep_work (rule 0)"], now - 4_000),
    );
    record(&home, moved(3, "C2", "main", &[], now - 3_000));
    record(&home, moved(4, "C2", "frustrated", &[], now - 2_000));
    // A reply delivered to Slack, its message's ts kept on its inbox row.
    let row = wait(async {
        let Intake::Accepted(row) = store
            .accept_inbound(&Inbound {
                origin: "C9:1.0".into(),
                conversation: "C9:1.0".into(),
                seq: 1.0,
                address: r#"{"channel":"C9","ts":"1.0","thread_ts":"1.0"}"#.into(),
                user_id: "U1".into(),
                text: "hi".into(),
                requires_spoken: false,
            })
            .await
            .unwrap()
        else {
            panic!("accepted")
        };
        store
            .mark_part_posted(row, 1, "1700000000.000200", true)
            .await
            .unwrap();
        for (at, warmth) in [(now - 60_000, 0.1), (now - 30_000, 0.6)] {
            let body = json!({"valence": 0.2, "relationships": {
                "U1": {"warmth": warmth, "trust": 0.3, "tension": 0.1, "comfort": 0.4},
                "<script>": {"warmth": -0.2, "trust": 0.0, "tension": 0.5, "comfort": 0.1}}});
            store
                .record_psyche_sample(
                    PsycheSample {
                        at,
                        body: body.to_string(),
                    },
                    100,
                )
                .await
                .unwrap();
        }
        row
    });
    let mut posted = trace(5, "C9:1.0", "Ada", "hi", "hello", now - 1_000);
    posted.inbox = Some(row);
    record(&home, posted);
    let s = Served::start(&home);
    let url = |p: &str| format!("{}{p}", s.base);
    let session = session(&s);
    let h = [("cookie", session.as_str())];
    let graph = get(&url("/inspect/process"), &h).body;
    assert!(
        graph.contains("data-from=\"main\" data-to=\"deep_work\" data-taken=\"2\""),
        "{graph}"
    );
    assert!(graph.contains("×2"), "{graph}");
    assert!(
        graph.contains("data-from=\"deep_work\" data-to=\"main\" data-taken=\"1\""),
        "{graph}"
    );
    assert!(
        graph.contains("data-from=\"main\" data-to=\"frustrated\" data-taken=\"0\""),
        "a conversation found elsewhere with no move recorded (a restart) counts none: {graph}"
    );

    let inner = get(&url("/inspect/inner"), &h).body;
    let chart = inner
        .split("id=\"chart-relationship-U1\"")
        .nth(1)
        .expect("U1's chart");
    let chart = chart.split("</svg>").next().unwrap();
    assert_eq!(
        chart.matches("<polyline").count(),
        4,
        "warmth, trust, tension, comfort"
    );
    assert_eq!(chart.matches("<circle").count(), 8, "two samples each");
    assert!(
        inner.contains("id=\"chart-relationship-&lt;script&gt;\""),
        "escaped"
    );
    assert!(!inner.contains("<script>"));
    assert!(
        !inner.contains("data-series=\"relationships."),
        "not in the general charts"
    );
    let one = get(&url("/inspect/inner?person=U1"), &h).body;
    assert_eq!(one.matches("<section class=\"relationship\"").count(), 1);

    // No workspace known (no bot token here): the message is named, not linked.
    let page = get(&url(&format!("/inspect/turn/{}", id(5))), &h).body;
    assert!(
        page.contains("<p class=\"posted\">Posted: C9 1700000000.000200 (in the thread 1.0)</p>"),
        "{page}"
    );
    let api = get(&url(&format!("/api/inspect/turns/{}", id(5))), &h).json();
    assert_eq!(
        api["posted"]["text"],
        "C9 1700000000.000200 (in the thread 1.0)"
    );
    assert_eq!(api["posted"]["link"], Value::Null);
    let api = get(&url(&format!("/api/inspect/turns/{}", id(1))), &h).json();
    assert_eq!(
        api["posted"],
        Value::Null,
        "a turn that answered no inbox row"
    );
}
