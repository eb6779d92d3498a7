//! Replies streamed into Slack as they are written: the real binary against the fake Slack
//! (whose stream methods keep each message's text and streaming state) and a fake model that
//! streams with scripted timing.

use crate::support;

use std::time::{Duration, Instant};

use serde_json::{json, Value};
use support::daemon::{http, Daemon};
use support::slack::{self, FakeSlack, Post};
use support::*;

const SPEAKER: &str = "U061F7AUR";

fn mention(channel: &str, ts: &str, text: &str) -> Value {
    json!({"type":"app_mention","user":SPEAKER,"text":format!("<@{}> {text}", slack::BOT_USER),"ts":ts,"channel":channel,"event_ts":ts})
}

fn dm(channel: &str, ts: &str, thread_ts: Option<&str>, text: &str) -> Value {
    let mut m = json!({"type":"message","channel":channel,"user":SPEAKER,"text":text,"ts":ts,"event_ts":ts,"channel_type":"im"});
    if let Some(t) = thread_ts {
        m["thread_ts"] = json!(t);
    }
    m
}

/// A home with `[llm] stream` on (so `[slack] stream_replies`, on by default, applies);
/// `slack_extra` joins `[slack]`, `more` follows as further tables.
fn home(model: &FakeModel, slack: &FakeSlack, slack_extra: &str, more: &str) -> Home {
    Home::new(
        "anthropic",
        &model.url(),
        &format!(
            "stream = true\n\n[slack]\nmode = \"socket\"\napi_base_url = \"{}\"\n{slack_extra}\n\n[http]\nlisten = \"127.0.0.1:0\"\n\n[daemon]\nshutdown_grace_secs = 10\n{more}\n",
            slack.api_url()
        ),
    )
}

fn start(home: &Home, slack: &FakeSlack) -> Daemon {
    let d = Daemon::start(home);
    slack.wait_connected_or(|| d.log());
    d
}

/// A bot message that is finished (not streaming any more).
fn finished(s: &FakeSlack) -> Vec<Post> {
    s.posts().into_iter().filter(|p| !p.streaming).collect()
}

/// Everything sent as text by the stream methods, in order.
fn streamed_text(s: &FakeSlack) -> String {
    let mut all: Vec<(Instant, Value)> =
        ["chat.startStream", "chat.appendStream", "chat.stopStream"]
            .iter()
            .flat_map(|m| s.timed_calls(m))
            .collect();
    all.sort_by_key(|(at, _)| *at);
    all.iter()
        .filter_map(|(_, v)| v["markdown_text"].as_str().map(str::to_string))
        .collect()
}

/// An answer whose dialogue arrives in pieces of `n` characters every `ms`.
fn slow(dialogue: &str, n: usize, ms: u64) -> Script {
    Script::SlowStream(pieces(&answer(dialogue), n), ms)
}

#[test]
fn a_mention_streams_into_one_message_that_shows_only_the_dialogue() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let dialogue = "The river is **fine**, thanks. It runs clear and cold today, <!here> and all.";
    model.push(slow(dialogue, 5, 40));
    let home = home(&model, &slack, "", "");
    let d = start(&home, &slack);
    slack.send_event(
        mention("C0LAN2Q65", "1515449522.000016", "how is the river?"),
        "Ev1",
        0,
    );
    slack.wait(20, "the streamed reply to finish", |s| {
        finished(s).len() == 1
    });
    std::thread::sleep(Duration::from_millis(300));

    let posts = slack.posts();
    assert_eq!(posts.len(), 1, "one message: {posts:#?}");
    let p = &posts[0];
    assert!(p.streamed && p.markdown, "{p:#?}");
    assert_eq!(p.thread_ts.as_deref(), Some("1515449522.000016"));
    let neutral = dialogue.replace("<!here>", "@\u{2060}here");
    assert_eq!(
        p.text, neutral,
        "Markdown as written, the broadcast neutralised"
    );
    assert_eq!(p.updates, 0, "nothing to correct");
    assert!(slack.calls("chat.postMessage").is_empty());
    // Only the dialogue ever went to Slack, and exactly once.
    assert_eq!(streamed_text(&slack), neutral);
    let start = &slack.calls("chat.startStream")[0];
    assert_eq!(
        start["recipient_user_id"], SPEAKER,
        "a channel stream names its recipient"
    );
    assert_eq!(start["recipient_team_id"], "T111");
    let stop = &slack.calls("chat.stopStream")[0];
    assert_eq!(stop["metadata"]["event_type"], "anima_reply");
    let feedback = &p.blocks.as_ref().expect("the final message has blocks")[0];
    assert_eq!(feedback["type"], "context_actions", "{feedback}");
    assert_eq!(feedback["elements"][0]["type"], "feedback_buttons");
    // Appends are coalesced: about one a second while the answer is written.
    let appends = slack.calls("chat.appendStream").len();
    assert!(appends <= 5, "{appends} appends for a 3 s answer");
    // The message is remembered for the row as soon as it began.
    let row = wait(home.store().inbox_item(1)).unwrap().unwrap();
    assert_eq!(row.stream_ref.as_deref(), Some(p.ts.as_str()));
    let (_, metrics) = http("GET", &d.url("/metrics"), &[], "");
    assert!(
        metrics.contains("anima_replies_total{mode=\"streamed\"} 1"),
        "{metrics}"
    );
}

#[test]
fn a_top_level_dm_is_answered_whole_and_a_dm_thread_streams() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.push(slow("Top level, whole.", 4, 20));
    model.push(slow("In the thread, streamed.", 4, 20));
    let home = home(&model, &slack, "", "");
    let _d = start(&home, &slack);
    slack.send_event(dm("D1", "5.000001", None, "hello"), "E1", 0);
    slack.wait(15, "the DM reply", |s| finished(s).len() == 1);
    assert!(
        slack.calls("chat.startStream").is_empty(),
        "a stream must be in a thread"
    );
    assert_eq!(slack.posts()[0].text, "Top level, whole.");
    slack.send_event(dm("D1", "6.000001", Some("5.000001"), "and here?"), "E2", 0);
    slack.wait(15, "the thread reply", |s| finished(s).len() == 2);
    let start = &slack.calls("chat.startStream")[0];
    assert!(
        start.get("recipient_user_id").is_none(),
        "a DM stream needs no recipient"
    );
    assert_eq!(slack.posts()[1].text, "In the thread, streamed.");
    assert!(slack.posts()[1].streamed);
}

#[test]
fn each_refusal_falls_back_to_one_whole_reply_and_is_remembered_for_that_kind_of_channel() {
    for code in [
        "missing_scope",
        "channel_type_not_supported",
        "not_in_channel",
        "some_new_error",
    ] {
        let (model, slack) = (FakeModel::start(), FakeSlack::start());
        model.push(slow("First, whole.", 4, 10));
        model.push(slow("Second, whole too.", 4, 10));
        model.push(slow("A DM thread.", 4, 10));
        slack.refuse_once("chat.startStream", code);
        let home = home(&model, &slack, "", "");
        let d = start(&home, &slack);
        slack.send_event(mention("C1", "1.000001", "one"), "E1", 0);
        slack.wait(15, "the first reply", |s| finished(s).len() == 1);
        assert_eq!(slack.posts()[0].text, "First, whole.", "{code}");
        assert!(!slack.posts()[0].streamed, "{code}");
        // The next reply in a channel does not try again at once.
        slack.send_event(mention("C2", "2.000001", "two"), "E2", 0);
        slack.wait(15, "the second reply", |s| finished(s).len() == 2);
        assert_eq!(
            slack.calls("chat.startStream").len(),
            1,
            "{code}: tried again at once"
        );
        assert_eq!(slack.posts()[1].text, "Second, whole too.");
        // A DM thread is another kind of conversation, unless the app lacks the scope.
        slack.send_event(dm("D1", "3.000002", Some("3.000001"), "three"), "E3", 0);
        slack.wait(15, "the DM reply", |s| finished(s).len() == 3);
        let tried = slack.calls("chat.startStream").len();
        assert_eq!(tried, if code == "missing_scope" { 1 } else { 2 }, "{code}");
        assert_eq!(slack.posts().len(), 3, "{code}: one message per reply");
        assert_eq!(
            d.log().matches("a streamed reply fell back").count(),
            1,
            "{code}: one warning"
        );
    }
}

#[test]
fn a_stream_that_expires_mid_way_is_rewritten_in_place() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let dialogue = "Slowly, slowly, the answer comes, one word and then another and another.";
    // Within the home's 5 s model timeout: about 3 s in all.
    model.push(slow(dialogue, 6, 60));
    let home = home(&model, &slack, "", "");
    let _d = start(&home, &slack);
    // The stream expires between its start and its next call, however fast the rest comes.
    slack.expire_next_stream();
    slack.send_event(mention("C1", "1.000001", "take your time"), "E1", 0);
    slack.wait(20, "the reply", |s| s.posts().iter().any(|p| p.updates > 0));
    assert_eq!(slack.calls("chat.startStream").len(), 1);
    std::thread::sleep(Duration::from_millis(300));
    let posts = slack.posts();
    assert_eq!(posts.len(), 1, "{posts:#?}");
    assert_eq!(posts[0].text, dialogue);
    assert!(slack.calls("chat.postMessage").is_empty());
    let update = &slack.calls("chat.update")[0];
    assert_eq!(update["metadata"]["event_type"], "anima_reply");
}

#[test]
fn killed_mid_stream_the_restart_finishes_the_same_message() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    // Dialogue from the first piece, slow enough to be killed in the middle of it.
    let unfinished = "<external_dialogue verb=\"said\">This answer is cut short by a kill, it never gets to its end</external_dialogue>";
    model.push(Script::SlowStream(pieces(unfinished, 4), 150));
    let home = home(&model, &slack, "", "");
    let mut d = start(&home, &slack);
    slack.send_event(mention("C1", "1.000001", "a question"), "E1", 0);
    slack.wait(15, "the stream to show words", |s| {
        s.posts().first().is_some_and(|p| !p.text.is_empty())
    });
    d.kill9();
    let shown = slack.posts()[0].text.clone();
    assert!(slack.posts()[0].streaming);

    model.push(slow("Answered after the restart.", 5, 10));
    let _d = start(&home, &slack);
    slack.wait(20, "the message to be finished", |s| {
        s.posts().iter().all(|p| !p.streaming) && s.posts()[0].updates > 0
    });
    std::thread::sleep(Duration::from_millis(500));
    let posts = slack.posts();
    assert_eq!(posts.len(), 1, "exactly one bot message: {posts:#?}");
    assert_eq!(
        posts[0].text, "Answered after the restart.",
        "was {shown:?}"
    );
    assert!(slack.calls("chat.postMessage").is_empty());
    assert_eq!(
        slack.calls("chat.startStream").len(),
        1,
        "not streamed again"
    );
}

#[test]
fn a_model_failure_mid_stream_ends_the_same_message_with_the_apology() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    // The first attempt shows half an answer; the retries fail too.
    for _ in 0..3 {
        model.push(Script::StreamCutOff);
    }
    let home = home(&model, &slack, "", "");
    let _d = start(&home, &slack);
    slack.send_event(mention("C1", "1.000001", "say something"), "E1", 0);
    slack.wait(30, "the reply", |s| finished(s).len() == 1);
    std::thread::sleep(Duration::from_millis(300));
    let posts = slack.posts();
    assert_eq!(posts.len(), 1, "{posts:#?}");
    assert!(posts[0].streamed);
    assert!(
        posts[0].text.starts_with("Half an ans"),
        "{:?}",
        posts[0].text
    );
    assert!(posts[0].text.contains("Sorry"), "{:?}", posts[0].text);
    // The working sign went on every path.
    slack.wait(5, "the working sign to go", |s| {
        !s.calls("reactions.remove").is_empty()
    });
}

#[test]
fn a_flood_of_replies_stays_within_the_workspace_stream_budget_and_answers_each_once() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.slow_echo(1500);
    slack.enforce_stream_tiers();
    let home = home(&model, &slack, "max_concurrent_turns = 8", "");
    let _d = start(&home, &slack);
    let threads = 40;
    for i in 0..threads {
        slack.send_event(
            mention(
                &format!("C{i}"),
                &format!("{}.000001", 100 + i),
                &format!("message {i}"),
            ),
            &format!("E{i}"),
            0,
        );
    }
    slack.wait(90, "every reply", |s| finished(s).len() == threads);
    std::thread::sleep(Duration::from_millis(500));
    let posts = slack.posts();
    assert_eq!(posts.len(), threads, "one message per message");
    for i in 0..threads {
        let here: Vec<_> = posts
            .iter()
            .filter(|p| p.channel == format!("C{i}"))
            .collect();
        assert_eq!(here.len(), 1, "C{i}: {here:#?}");
        assert_eq!(here[0].text, format!("echo: message {i}"));
    }
    // Never past Slack's tiers: no 429 in any minute.
    assert_eq!(slack.rate_limited(), 0, "a stream call went past its tier");
    let starts = slack.calls("chat.startStream").len();
    assert!(
        starts > 0 && starts < threads,
        "some streamed, some went whole: {starts}"
    );
    assert_eq!(slack.calls("chat.postMessage").len() + starts, threads);
}

#[test]
fn a_megabyte_of_dialogue_streams_no_more_than_max_response_chars() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let long = "word ".repeat(4000);
    model.push(Script::Stream(pieces(&answer(&long), 997)));
    let home = home(
        &model,
        &slack,
        "",
        "\n[pipeline]\nmax_response_chars = 3000\n",
    );
    let _d = start(&home, &slack);
    slack.send_event(mention("C1", "1.000001", "talk"), "E1", 0);
    slack.wait(20, "the reply", |s| finished(s).len() == 1);
    std::thread::sleep(Duration::from_millis(300));
    let posts = slack.posts();
    assert_eq!(posts.len(), 1);
    assert!(
        posts[0].text.chars().count() <= 3000,
        "{}",
        posts[0].text.len()
    );
    assert!(streamed_text(&slack).chars().count() <= 3000);
}

#[test]
fn the_stop_button_mid_stream_ends_the_message_with_what_was_said_and_nothing_more() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let long = "<external_dialogue verb=\"said\">Let me tell you a long story about rivers, which goes on and on and on until someone stops it</external_dialogue>";
    model.push(Script::SlowStream(pieces(long, 4), 120));
    let home = home(&model, &slack, "", "");
    let d = start(&home, &slack);
    slack.send_event(mention("C1", "1.000001", "tell me a story"), "E1", 0);
    slack.wait(15, "the stream to show words", |s| {
        s.posts().first().is_some_and(|p| p.text.len() > 10)
    });
    // A stop naming a message anima never sent is not this turn's.
    slack.send_event(
        json!({"type":"agent_session_stopped","channel":"C1","thread_ts":"1.000001","streaming_message_ts":["1.999999"],"user":SPEAKER,"event_ts":"1.5"}),
        "E1b",
        0,
    );
    d.wait_log("a stop for a conversation with no running turn", 5);
    assert!(slack.posts()[0].streaming, "still streaming");
    slack.send_event(
        json!({"type":"agent_session_stopped","channel":"C1","thread_ts":"1.000001","streaming_message_ts":[slack.posts()[0].ts],"user":SPEAKER,"event_ts":"2.0"}),
        "E2",
        0,
    );
    slack.wait(10, "the stream to stop", |s| finished(s).len() == 1);
    std::thread::sleep(Duration::from_millis(1500));
    let posts = slack.posts();
    assert_eq!(posts.len(), 1, "nothing more is posted: {posts:#?}");
    let said = posts[0].text.clone();
    assert!(said.starts_with("Let me tell you"), "{said:?}");
    assert!(
        !said.contains("until someone stops it"),
        "the model call was abandoned: {said:?}"
    );
    assert_eq!(posts[0].updates, 0);
    let row = wait(home.store().inbox_item(1)).unwrap().unwrap();
    assert_eq!(row.status, anima::memory::InboxStatus::Stopped);
    assert_eq!(
        row.reply.as_deref(),
        Some(said.as_str()),
        "the turn records what was said"
    );
    let (_, metrics) = http("GET", &d.url("/metrics"), &[], "");
    assert!(metrics.contains("anima_turns_stopped_total 1"), "{metrics}");
}

#[test]
fn a_streamed_reply_given_up_gets_the_apology_in_its_own_message() {
    // The failpoint panics while delivering any reply holding 💥: after every attempt the
    // row is given up, and the apology goes into the message that streamed, not a new one.
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.push(slow("Here it comes 💥 and it breaks.", 4, 20));
    let home = home(&model, &slack, "", "");
    let d = Daemon::start_env(&home, &[("ANIMA_FAILPOINTS", "reply")]);
    slack.wait_connected_or(|| d.log());
    slack.send_event(mention("C1", "1.000001", "go"), "E1", 0);
    slack.wait(30, "the apology", |s| {
        s.posts()
            .first()
            .is_some_and(|p| p.text.contains("Sorry") && !p.streaming)
    });
    std::thread::sleep(Duration::from_millis(500));
    let posts = slack.posts();
    assert_eq!(posts.len(), 1, "{posts:#?}");
    assert!(slack.calls("chat.postMessage").is_empty());
    assert_eq!(
        wait(home.store().inbox_item(1)).unwrap().unwrap().status,
        anima::memory::InboxStatus::Failed
    );
}

#[test]
fn a_start_whose_outcome_is_unknown_is_found_and_the_reply_goes_into_it() {
    // Slack took the start but its answer was lost (500 after storing): the message is found
    // in the thread, so the reply is not posted a second time.
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.push(slow("One message, however the start went.", 4, 20));
    slack.fail_next_stream_start_after_storing();
    let home = home(&model, &slack, "", "");
    let _d = start(&home, &slack);
    slack.send_event(mention("C1", "1.000001", "go"), "E1", 0);
    slack.wait(20, "the reply", |s| {
        s.posts()
            .first()
            .is_some_and(|p| !p.streaming && p.text.contains("however"))
    });
    std::thread::sleep(Duration::from_millis(500));
    let posts = slack.posts();
    assert_eq!(posts.len(), 1, "{posts:#?}");
    assert_eq!(posts[0].text, "One message, however the start went.");
    assert!(slack.calls("chat.postMessage").is_empty());
}
