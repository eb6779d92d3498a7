//! The inspector in headless Chromium, driven through chromedriver (`webdriver.rs`): logging
//! in through the login URL, a turn appearing live (recorded by the test, and a real one after
//! a message through the fake Slack), its context window opened, the mood chart's points, the
//! chat pane's answer, and markup from outside staying text.

use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::webdriver::Browser;
use super::*;

const XSS_IMG: &str = "<img src=x onerror=alert(1)>";
const XSS_SCRIPT: &str = "</script><script>alert(1)</script>";

/// No dialog open and no element the page's own markup did not make: no `img`, one script.
fn nothing_injected(b: &Browser) {
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(b.alert(), None, "an alert dialog opened");
    let counts = b.script(
        "return [document.querySelectorAll('img').length, document.scripts.length, \
         document.scripts[0] ? document.scripts[0].getAttribute('src') : null]",
        json!([]),
    );
    assert_eq!(counts, json!([0, 1, "/inspect/static/inspector.js"]));
}

fn wait_until(secs: u64, what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f() {
        assert!(Instant::now() < deadline, "not within {secs} s: {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn sample(home: &Home, at: i64, valence: f64, curiosity: f64) {
    let body = json!({"mood": {"valence": valence, "arousal": 0.5}, "drives": {"curiosity": curiosity}, "energy": 0.8});
    wait(home.store().record_psyche_sample(
        anima::memory::PsycheSample {
            at,
            body: body.to_string(),
        },
        1_000,
    ))
    .unwrap();
}

#[test]
fn in_a_browser_a_turn_appears_live_its_context_window_opens_and_the_mood_is_charted() {
    let model = FakeModel::start();
    let home = Home::new("anthropic", &model.url(), "");
    let Some(b) = Browser::start("in_a_browser_a_turn_appears_live") else {
        return;
    };
    let now = anima::memory::now_ms();
    record(
        &home,
        trace(
            1,
            "C1:1.0",
            "Ada",
            "hello there",
            "Hello, Ada.",
            now - 60_000,
        ),
    );
    for i in 0..6 {
        sample(
            &home,
            now - 50_000 + i * 5_000,
            -0.5 + 0.2 * i as f64,
            0.1 * i as f64,
        );
    }
    let s = in_process(&model, &home);
    // The login link: the cookie set, the token gone from the address, the cookie out of
    // the script's reach.
    b.goto(&format!("{}/inspect/?token={}", s.base, s.token));
    assert_eq!(b.current_url(), format!("{}/inspect/", s.base));
    assert_eq!(b.script("return document.cookie", json!([])), json!(""));
    b.wait_for(&format!("li.turn[data-trace=\"{}\"]", id(1)), 5);
    wait_until(5, "the page to follow the stream", || {
        b.script("return document.body.classList.contains('live')", json!([])) == json!(true)
    });
    wait_until(5, "the stream to be watched", || s.engine.hub().watched());
    // A turn happens: its trace is kept and its response goes by on the stream.
    let said = format!("look {XSS_IMG} and {XSS_SCRIPT}");
    record(&home, trace(2, "C1:1.0", "<script>", &said, XSS_IMG, now));
    s.engine.hub().emit(|| response(2, "C1:1.0"));
    let item = b.wait_for(&format!("li.turn[data-trace=\"{}\"]", id(2)), 5);
    let text = b.text(&item);
    assert!(
        text.contains("<script>") && text.contains(XSS_IMG),
        "shown as text: {text}"
    );
    let order: Vec<String> = b
        .all("li.turn")
        .iter()
        .map(|e| b.attr(e, "data-trace").unwrap())
        .collect();
    assert_eq!(order, [id(2), id(1)], "newest first");
    nothing_injected(&b);
    // Its page: every section of the context window, each opening to its text.
    b.click(&b.all(&format!("li.turn[data-trace=\"{}\"] a", id(2)))[0]);
    b.wait_for("table.sections", 5);
    let sections: Vec<String> = b
        .all("details.section")
        .iter()
        .map(|e| b.attr(e, "data-section").unwrap())
        .collect();
    assert_eq!(sections, SECTIONS);
    let message = b.all("details.section[data-section=\"message\"]")[0].clone();
    assert_eq!(b.attr(&message, "open"), None);
    b.click(&b.all("details.section[data-section=\"message\"] summary")[0]);
    let shown = b.text(&b.all("details.section[data-section=\"message\"] pre")[0]);
    assert_eq!(shown.trim(), format!("<message>\n{said}\n</message>"));
    let raw = b.text(&b.all("pre.raw")[0]);
    assert!(
        raw.contains(&format!("<external_dialogue verb=\"said\">{XSS_IMG}")),
        "{raw}"
    );
    let tags: Vec<String> = b
        .all("pre.raw span.tag")
        .iter()
        .map(|e| b.text(e))
        .collect();
    assert_eq!(
        tags.first().map(String::as_str),
        Some("<internal_monologue verb=\"mused\">"),
        "the answer's tags marked: {tags:?}"
    );
    assert_eq!(
        tags.last().map(String::as_str),
        Some("</external_dialogue>")
    );
    assert!(b
        .text(&b.all("section.cognition")[0])
        .contains("internal_monologue"));
    nothing_injected(&b);
    if std::env::var("ANIMA_SCREENSHOT").is_ok_and(|v| v == "1") {
        b.goto(&format!("{}/inspect/turn/{}", s.base, id(1)));
        b.click(&b.all("details.section[data-section=\"soul\"] summary")[0]);
        b.script("window.scrollTo(0, 0)", json!([]));
        let png = b.screenshot();
        assert!(png.starts_with(b"\x89PNG"));
        std::fs::write(
            concat!(env!("CARGO_MANIFEST_DIR"), "/docs/inspector.png"),
            png,
        )
        .unwrap();
    }
    // The inner life: the mood chart's SVG with a point per sample and series.
    b.goto(&format!("{}/inspect/inner", s.base));
    b.wait_for("svg#chart-mood", 5);
    assert_eq!(
        b.all("svg#chart-mood polyline").len(),
        2,
        "valence and arousal"
    );
    assert_eq!(b.all("svg#chart-mood circle").len(), 12);
    assert_eq!(b.all("svg#chart-drives circle").len(), 6);
    let points = b
        .attr(
            &b.all("svg#chart-mood g[data-series=\"mood.valence\"] polyline")[0],
            "points",
        )
        .unwrap();
    assert_eq!(points.split(' ').count(), 6, "{points}");
    let size = b.script(
        "return document.querySelector('svg#chart-mood').getBoundingClientRect().width",
        json!([]),
    );
    assert!(size.as_f64().unwrap() > 100.0, "drawn: {size}");
}

#[test]
fn in_a_browser_the_printed_url_logs_in_and_the_chat_pane_answers_with_markup_as_text() {
    let model = FakeModel::start();
    model.respond_with(|turn| answer(&format!("you said {}", current_message(turn))));
    let home = Home::new("anthropic", &model.url(), "");
    let Some(b) = Browser::start("in_a_browser_the_chat_pane_answers") else {
        return;
    };
    let s = Served::start(&home);
    b.goto(&s.login);
    assert_eq!(b.current_url(), format!("{}/inspect/", s.base));
    b.wait_for("nav", 5);
    b.click(&b.all("nav a[href=\"/inspect/chat\"]")[0]);
    let send = |text: &str, n: usize| {
        let area = b.wait_for("form#chat textarea", 5);
        b.type_in(&area, text);
        b.click(&b.all("form#chat button")[0]);
        wait_until(20, "the reply", || {
            b.all("#exchange li.answered").len() == n
        });
        let li = b.all("#exchange li.answered")[0].clone();
        let reply = b.text(&b.all("#exchange li.answered .reply")[0]);
        let monologue = b.text(&b.all("#exchange li.answered .monologue")[0]);
        (li, reply, monologue)
    };
    let (_, reply, monologue) = send("Hello, soul", 1);
    assert_eq!(reply, "you said Hello, soul");
    assert_eq!(monologue, "Thinking about: you said Hello, soul");
    let (_, reply, _) = send(&format!("{XSS_IMG} {XSS_SCRIPT}"), 2);
    assert!(reply.contains("alert(1)"), "{reply}");
    nothing_injected(&b);
    assert_eq!(model.requests().len(), 2);
    let _: Value = Value::Null;
}

#[test]
fn in_a_browser_a_slack_message_s_turn_appears_live_with_every_section_of_its_context() {
    const TOKEN: &str = "inspect-0123456789abcdef";
    let (model, slack) = (
        FakeModel::start(),
        crate::support::slack::FakeSlack::start(),
    );
    model.respond_with(|turn| answer(&format!("heard: {}", current_message(turn))));
    let Some(b) = Browser::start("in_a_browser_a_slack_message_s_turn_appears_live") else {
        return;
    };
    let home = crate::support::daemon::home(&model, &slack, "socket", "");
    let d = crate::support::daemon::Daemon::start_env(&home, &[("ANIMA_INSPECT_TOKEN", TOKEN)]);
    slack.wait_connected_or(|| d.log());
    b.goto(&d.url(&format!("/inspect/?token={TOKEN}")));
    wait_until(10, "the page to follow the stream", || {
        b.script("return document.body.classList.contains('live')", json!([])) == json!(true)
    });
    let text = format!(
        "<@{}> look {XSS_IMG} {XSS_SCRIPT}",
        crate::support::slack::BOT_USER
    );
    slack.send_event(
        json!({"type": "app_mention", "user": "U061F7AUR", "text": text, "ts": "1515449522.000016",
               "channel": "C0LAN2Q65", "event_ts": "1515449522.000016"}),
        "Ev01",
        0,
    );
    // The soul's wakeup left a trace of its own: the message's turn is the one that heard it.
    // Read in one script: the list is drawn again as each of the turn's records goes by.
    let mut found = None;
    wait_until(20, "the message's turn in the timeline", || {
        let items = b.script(
            "return [...document.querySelectorAll('li.turn')].map(li => [li.dataset.trace, li.textContent])",
            json!([]),
        );
        found = items.as_array().unwrap().iter().find_map(|i| {
            let text = i[1].as_str()?;
            text.contains("heard: look")
                .then(|| (i[0].as_str().unwrap().to_string(), text.to_string()))
        });
        found.is_some()
    });
    let (trace, shown) = found.unwrap();
    assert!(shown.contains(&format!("heard: look {XSS_IMG}")), "{shown}");
    nothing_injected(&b);
    let api = get(
        &d.url(&format!("/api/inspect/turns/{trace}")),
        &[("authorization", &format!("Bearer {TOKEN}"))],
    )
    .json();
    let expected: Vec<String> = api["calls"][0]["sections"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        expected.iter().any(|n| n == "message") && expected.len() > 3,
        "{expected:?}"
    );
    b.goto(&d.url(&format!("/inspect/turn/{trace}")));
    b.wait_for("table.sections", 5);
    let sections: Vec<String> = b
        .all("section.call:first-of-type details.section")
        .iter()
        .map(|e| b.attr(e, "data-section").unwrap())
        .collect();
    assert_eq!(sections, expected);
    b.click(&b.all("details.section[data-section=\"message\"] summary")[0]);
    let message = b.text(&b.all("details.section[data-section=\"message\"] pre")[0]);
    // The prompt fences the person's words with their markup as entities: the page shows
    // the prompt as it was sent, entities and all.
    assert!(
        message.contains("look &lt;img src=x onerror=alert(1)&gt; &lt;/script&gt;&lt;script&gt;"),
        "{message}"
    );
    nothing_injected(&b);
}
