//! Speaking unasked, end to end: the real binary against the fake Slack, with `[autonomy]`
//! listening in one channel. Every unaddressed top-level message there moves the soul's
//! substrate; the meaningfulness gate lets the soul join a heated exchange on what it cares
//! about once, then keeps it quiet for the cooldown; small talk and other channels never.

use crate::support;

use std::time::Duration;

use serde_json::json;
use support::daemon::{home, Daemon};
use support::slack::FakeSlack;
use support::*;

fn said(channel: &str, user: &str, ts: &str, text: &str) -> serde_json::Value {
    json!({"type":"message","channel":channel,"channel_type":"channel","user":user,"text":text,"ts":ts,"event_ts":ts})
}

/// A daemon against the fake Slack and an echoing model, listening in CLISTEN with `extra`
/// config.
fn listening(extra: &str) -> (FakeModel, FakeSlack, Home, Daemon) {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    let home = home(
        &model,
        &slack,
        "socket",
        &format!("\n[autonomy]\nchannels = [\"CLISTEN\"]\n{extra}"),
    );
    let d = Daemon::start(&home);
    slack.wait_connected_or(|| d.log());
    (model, slack, home, d)
}

/// Says things in a channel: top-level messages from U1 and U2 in turn, each followed by
/// `pause`; each returns its ts.
fn talk(slack: &FakeSlack, pause: Duration) -> impl FnMut(&str, &str) -> String + '_ {
    let mut n = 0;
    move |channel, text| {
        n += 1;
        let ts = format!("1700000{n:03}.000100");
        slack.send_event(
            said(channel, ["U1", "U2"][n % 2], &ts, text),
            &format!("E{n}"),
            0,
        );
        std::thread::sleep(pause);
        ts
    }
}

const HEATED: [&str; 4] = [
    "This refactor is stupid, you broke the compiler build AGAIN!",
    "Don't you DARE call my code stupid, your test suite is useless!",
    "I hate this design, it is a failure and you refuse to listen",
    "Shut up, this bug is yours and I won't fix it",
];

#[test]
fn the_soul_joins_a_heated_exchange_once_and_never_small_talk_or_other_channels() {
    let (model, slack, home, d) = listening("cooldown_secs = 300\n");
    let mut send = talk(&slack, Duration::from_millis(150));

    for text in [
        "morning all",
        "hey! nice weekend?",
        "yeah, lunch was cool",
        "lol",
    ] {
        send("CLISTEN", text);
    }
    // The same heat in a channel the soul does not listen in.
    for text in HEATED {
        send("COTHER", text);
    }
    std::thread::sleep(Duration::from_millis(1000));
    assert!(slack.posts().is_empty(), "{:#?}", slack.posts());
    assert!(
        model.requests().is_empty(),
        "no model call for what the gate let be"
    );

    let heated: Vec<String> = HEATED.iter().map(|t| send("CLISTEN", t)).collect();
    slack.wait(15, "the unasked contribution", |s| !s.posts().is_empty());
    // More of the same during the cooldown: silence.
    for text in HEATED {
        send("CLISTEN", text);
    }
    std::thread::sleep(Duration::from_millis(1500));
    let posts = slack.posts();
    assert_eq!(posts.len(), 1, "one unasked contribution: {posts:#?}");
    let p = &posts[0];
    assert_eq!(p.channel, "CLISTEN");
    assert!(
        heated.contains(p.thread_ts.as_ref().unwrap()),
        "in the thread of the message it joined: {p:#?}"
    );
    assert_eq!(model.requests().len(), 1, "one model call in all");
    let log = d.log();
    assert!(
        log.contains("verdict=\"cooldown\"") || log.contains("verdict=cooldown"),
        "{log}"
    );
    // Every message heard where it listens was kept once, closed unless the soul spoke on it.
    let store = home.store();
    let statuses: Vec<_> = (1..=12)
        .map(|id| wait(store.inbox_item(id)).unwrap().unwrap().status)
        .collect();
    let spoken = statuses
        .iter()
        .filter(|s| **s != anima::memory::InboxStatus::Overheard)
        .count();
    assert_eq!(spoken, 1, "{statuses:?}");
    // What the soul does not listen to is not even kept.
    assert!(wait(store.inbox_item(13)).unwrap().is_none());
}

#[test]
fn reactions_to_its_messages_joinings_and_time_move_the_inner_life_once_each() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.echo();
    let home = home(&model, &slack, "socket", "");
    let d = Daemon::start(&home);
    slack.wait_connected_or(|| d.log());
    let reaction = |user: &str, name: &str, item_user: &str| {
        json!({"type":"reaction_added","user":user,"reaction":name,"item_user":item_user,
               "item":{"type":"message","channel":"C1","ts":"1700000001.000100"},"event_ts":"1700000002.000100"})
    };
    slack.send_event(reaction("U1", "heart", support::slack::BOT_USER), "R1", 0);
    // Slack's retry of the same event, a reaction to someone else's message, the soul's own.
    slack.send_event(reaction("U1", "heart", support::slack::BOT_USER), "R1", 1);
    slack.send_event(reaction("U1", "heart", "U2"), "R2", 0);
    slack.send_event(
        reaction(support::slack::BOT_USER, "eyes", support::slack::BOT_USER),
        "R3",
        0,
    );
    slack.send_event(
        json!({"type":"member_joined_channel","user":"U7","channel":"C1","channel_type":"C","team":"T111"}),
        "J1",
        0,
    );
    d.wait_log("felt", 10);
    std::thread::sleep(Duration::from_millis(800));
    let logged = wait(home.store().psyche_decisions("Wren", 100)).unwrap();
    let kinds = |k: &str| logged.iter().filter(|d| d.event_kind == k).count();
    assert_eq!(kinds("reaction"), 1, "{logged:#?}");
    assert_eq!(kinds("joined"), 1, "{logged:#?}");
    assert_eq!(
        kinds("tick"),
        1,
        "the first tick comes at start: {logged:#?}"
    );
    let r = logged.iter().find(|d| d.event_kind == "reaction").unwrap();
    assert_eq!(r.person.as_deref(), Some("U1"));
    assert_eq!(r.verdict, "not_listened");
    assert!(slack.posts().is_empty(), "nothing is said");
    assert!(model.requests().is_empty(), "no model call");
}

#[test]
fn after_the_cooldown_a_tick_brings_the_soul_back_to_the_last_heated_message_once() {
    let (model, slack, home, d) =
        listening("cooldown_secs = 4\n\n[processes]\nproactive_scan_secs = 1\n");
    let mut talk = talk(&slack, Duration::from_millis(100));
    let mut send = |text: &str| talk("CLISTEN", text);
    for text in HEATED {
        send(text);
    }
    slack.wait(15, "the unasked contribution", |s| !s.posts().is_empty());
    // The exchange goes on while the soul must keep quiet.
    let mut during = Vec::new();
    for text in HEATED {
        during.push(send(text));
    }
    assert_eq!(slack.posts().len(), 1, "{:#?}", slack.posts());

    // Once the cooldown is over, a tick finds the soul still caught up in it: it comes back
    // to the last message of the exchange, in its thread.
    slack.wait(20, "the soul coming back on a tick", |s| {
        s.posts().len() >= 2
    });
    let posts = slack.posts();
    let back = &posts[1];
    assert_eq!(back.channel, "CLISTEN");
    assert_eq!(
        back.thread_ts.as_deref(),
        Some(during[3].as_str()),
        "{back:#?}"
    );

    // Then never again for the same message, however many ticks pass.
    std::thread::sleep(Duration::from_millis(6_000));
    assert_eq!(slack.posts().len(), 2, "{:#?}", slack.posts());
    assert_eq!(
        model.requests().len(),
        2,
        "one model call each time it spoke"
    );
    let logged = wait(home.store().psyche_decisions("Wren", 1000)).unwrap();
    let ticks: Vec<_> = logged.iter().filter(|d| d.event_kind == "tick").collect();
    let spoke: Vec<_> = ticks.iter().filter(|d| d.verdict == "speak").collect();
    assert_eq!(spoke.len(), 1, "{ticks:#?}");
    assert_eq!(spoke[0].channel.as_deref(), Some("CLISTEN"));
    assert!(
        ticks.iter().any(|d| d.verdict == "cooldown"),
        "the ticks during the cooldown kept quiet: {ticks:#?}"
    );
    assert!(
        ticks
            .iter()
            .filter(|d| d.at > spoke[0].at)
            .all(|d| d.channel.is_none()),
        "after it spoke, nothing is left to come back to: {ticks:#?}"
    );
    drop(d);
}
