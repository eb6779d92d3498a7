use super::*;
use crate::arbitrary;
use crate::slack::api::ts_order;
use proptest::prelude::*;
use serde_json::json;

fn cfg() -> SlackConfig {
    crate::config::parse(
        "",
        std::path::Path::new("t.toml"),
        std::path::Path::new("/"),
    )
    .unwrap()
    .slack
}

fn bot() -> BotIdentity {
    BotIdentity::for_tests()
}

fn run(event: serde_json::Value, cfg: &SlackConfig) -> Decision {
    let body: SlackEventCallbackBody = serde_json::from_value(event).unwrap();
    decide(&body, "Ev1", &bot(), cfg)
}

fn accepted(d: Decision) -> NewInbound {
    match d {
        Decision::Accept(n) => n,
        other => panic!("not accepted: {other:?}"),
    }
}

#[test]
fn a_channel_mention_is_answered_in_its_thread() {
    let n = accepted(run(
        json!({"type":"app_mention","user":"U061F7AUR","text":"<@UBOT> is it everything a river should be?","ts":"1515449522.000016","channel":"C0LAN2Q65","event_ts":"1515449522.000016"}),
        &cfg(),
    ));
    assert_eq!(n.thread_key, "C0LAN2Q65:1515449522.000016");
    assert_eq!(n.reply_thread_ts.as_deref(), Some("1515449522.000016"));
    assert_eq!(
        n.text, "is it everything a river should be?",
        "the bot's own mention is dropped"
    );
    let twin = accepted(run(
        json!({"type":"message","channel":"C0LAN2Q65","channel_type":"channel","user":"U061F7AUR","text":"<@UBOT> is it everything a river should be?","ts":"1515449522.000016"}),
        &cfg(),
    ));
    assert_eq!(
        (twin.channel, twin.ts),
        (n.channel, n.ts),
        "the twin is the same message"
    );
}

#[test]
fn a_top_level_dm_is_answered_at_top_level() {
    let n = accepted(run(
        json!({"type":"message","channel":"D024BE91L","user":"U2147483697","text":"Hello hello can you hear me?","ts":"1355517523.000005","event_ts":"1355517523.000005","channel_type":"im"}),
        &cfg(),
    ));
    assert_eq!(n.thread_key, "D024BE91L");
    assert_eq!(n.reply_thread_ts, None);
    let n = accepted(run(
        json!({"type":"message","channel":"D024BE91L","user":"U2","text":"in a thread","ts":"2.0","thread_ts":"1.0","channel_type":"im"}),
        &cfg(),
    ));
    assert_eq!(n.thread_key, "D024BE91L:1.0");
    assert_eq!(n.reply_thread_ts.as_deref(), Some("1.0"));
}

#[test]
fn files_travel_with_the_message_and_a_message_of_files_alone_is_answered() {
    let file = json!({"id":"F1","name":"screenshot.png","title":"Screenshot","mimetype":"image/png",
        "filetype":"png","size":1258291,"url_private":"https://files.slack.com/files-pri/T1-F1/screenshot.png",
        "url_private_download":"https://files.slack.com/files-pri/T1-F1/download/screenshot.png"});
    let n = accepted(run(
        json!({"type":"message","subtype":"file_share","channel":"D1","user":"U2","text":"","ts":"1.0","channel_type":"im","files":[file]}),
        &cfg(),
    ));
    assert_eq!(n.files.len(), 1);
    let f = &n.files[0];
    assert_eq!((f.id.as_str(), f.name.as_str()), ("F1", "screenshot.png"));
    assert_eq!(
        (f.mimetype.as_str(), f.filetype.as_str()),
        ("image/png", "png")
    );
    assert!(f.url.ends_with("/download/screenshot.png"), "{}", f.url);
    let mention = accepted(run(
        json!({"type":"app_mention","user":"U2","text":"<@UBOT> look","ts":"2.0","channel":"C1","files":[
            {"id":"F2","name":"a.txt","url_private":"https://files.slack.com/a.txt"}]}),
        &cfg(),
    ));
    assert_eq!(mention.files[0].url, "https://files.slack.com/a.txt");
    assert_eq!(
        run(
            json!({"type":"message","channel":"D1","user":"U2","text":" ","ts":"3.0","channel_type":"im"}),
            &cfg(),
        ),
        Decision::Ignore("message without text"),
        "neither words nor files"
    );
}

#[test]
fn thread_replies_without_a_mention_need_participation() {
    let n = accepted(run(
        json!({"type":"message","channel":"C1","channel_type":"channel","user":"U2","text":"and then?","ts":"3.0","thread_ts":"1.0"}),
        &cfg(),
    ));
    assert_eq!(n.only_if_participating, Some(("C1".into(), "1.0".into())));
    let d = run(
        json!({"type":"message","channel":"C1","channel_type":"channel","user":"U2","text":"just chatting","ts":"3.0"}),
        &cfg(),
    );
    assert_eq!(d, Decision::Ignore("unmentioned top-level channel message"));
    // Where the soul listens ([autonomy] channels), the gate hears it, in its own thread.
    let mut listening = cfg();
    listening.overheard_channels = vec!["C1".into()];
    let heard = json!({"type":"message","channel":"C1","channel_type":"channel","user":"U2","text":"just chatting","ts":"3.0"});
    match run(heard.clone(), &listening) {
        Decision::Overheard(n) => {
            assert_eq!(
                (n.thread_key.as_str(), n.reply_thread_ts.as_deref()),
                ("C1:3.0", Some("3.0"))
            );
            assert_eq!(n.text, "just chatting");
        }
        other => panic!("{other:?}"),
    }
    listening.overheard_channels = vec!["C2".into()];
    assert_eq!(
        run(heard, &listening),
        Decision::Ignore("unmentioned top-level channel message")
    );
}

#[test]
fn own_bots_edits_and_deletions_are_ignored() {
    let c = cfg();
    for (event, why) in [
        (
            json!({"type":"message","channel":"D1","channel_type":"im","user":"UBOT","bot_id":"BBOT","text":"my reply","ts":"2.0"}),
            "the soul's own message",
        ),
        (
            json!({"type":"message","channel":"D1","channel_type":"im","bot_id":"BBOT","text":"my reply","ts":"2.0"}),
            "the soul's own message",
        ),
        (
            json!({"type":"message","subtype":"bot_message","channel":"D1","channel_type":"im","bot_id":"BOTHER","text":"beep","ts":"2.0"}),
            "another bot's message",
        ),
        (
            json!({"type":"message","channel":"D1","channel_type":"im","user":"U9","bot_id":"BOTHER","text":"beep","ts":"2.0"}),
            "another bot's message",
        ),
        (
            json!({"type":"message","subtype":"message_changed","hidden":true,"channel":"D1","channel_type":"im","ts":"2.0","message":{"text":"edited","user":"U1","ts":"1.0"}}),
            "hidden message (edit, deletion or thread root change)",
        ),
        (
            json!({"type":"message","subtype":"channel_join","channel":"C1","channel_type":"channel","user":"U1","text":"joined","ts":"2.0"}),
            "a message subtype that is not user content",
        ),
        (
            json!({"type":"message","channel":"X1","channel_type":"weird","user":"U1","text":"?","ts":"2.0"}),
            "unknown channel type",
        ),
    ] {
        assert_eq!(run(event.clone(), &c), Decision::Ignore(why), "{event}");
    }
}

#[test]
fn a_mention_followed_only_by_punctuation_keeps_its_text() {
    assert_eq!(without_leading_mention("<@UBOT>:", "UBOT"), "<@UBOT>:");
    assert_eq!(
        without_leading_mention(" <@UBOT|anima> ,", "UBOT"),
        " <@UBOT|anima> ,"
    );
    assert_eq!(without_leading_mention("<@UBOT> , hi", "UBOT"), "hi");
    assert_eq!(without_leading_mention("<@UBOT>: ¿qué?", "UBOT"), "¿qué?");
    let n = accepted(run(
        json!({"type":"app_mention","user":"U1","text":"<@UBOT>,","ts":"1.0","channel":"C1"}),
        &cfg(),
    ));
    assert_eq!(n.text, "<@UBOT>,");
}

#[test]
fn an_empty_channel_is_ignored() {
    for event in [
        json!({"type":"message","channel":"","channel_type":"im","user":"U1","text":"hi","ts":"2.0"}),
        json!({"type":"app_mention","user":"U1","text":"<@UBOT> hi","ts":"2.0","channel":""}),
    ] {
        assert_eq!(
            run(event.clone(), &cfg()),
            Decision::Ignore("message with an empty channel"),
            "{event}"
        );
    }
}

#[test]
fn a_ts_that_is_not_a_slack_timestamp_is_ignored() {
    for ts in [
        "", "2", "2.", ".5", "abc", "1.2.3", "1e9.0", "-1.0", " 1.0", "１.０",
    ] {
        for event in [
            json!({"type":"message","channel":"D1","channel_type":"im","user":"U1","text":"hi","ts":ts}),
            json!({"type":"app_mention","user":"U1","text":"<@UBOT> hi","ts":ts,"channel":"C1"}),
        ] {
            assert_eq!(
                run(event.clone(), &cfg()),
                Decision::Ignore("message whose ts is not a Slack timestamp"),
                "{event}"
            );
        }
    }
}

#[test]
fn a_thread_ts_that_is_not_a_slack_timestamp_is_ignored() {
    for thread_ts in ["", "1", "x.y", "1.0 "] {
        for event in [
            json!({"type":"message","channel":"C1","channel_type":"channel","user":"U1","text":"and?","ts":"3.0","thread_ts":thread_ts}),
            json!({"type":"app_mention","user":"U1","text":"<@UBOT> hi","ts":"3.0","thread_ts":thread_ts,"channel":"C1"}),
        ] {
            assert_eq!(
                run(event.clone(), &cfg()),
                Decision::Ignore("message whose thread_ts is not a Slack timestamp"),
                "{event}"
            );
        }
    }
    let n = accepted(run(
        json!({"type":"message","channel":"C1","channel_type":"channel","user":"U1","text":"and?","ts":"3.000200","thread_ts":"1515449522.000016"}),
        &cfg(),
    ));
    assert_eq!(n.reply_thread_ts.as_deref(), Some("1515449522.000016"));
}

#[test]
fn admin_commands_come_only_by_direct_message() {
    let d = run(
        json!({"type":"message","channel":"D1","channel_type":"im","user":"U1","text":"!status","ts":"2.0"}),
        &cfg(),
    );
    assert!(
        matches!(d, Decision::Admin(ref n) if n.text == "!status"),
        "{d:?}"
    );
    let in_channel = run(
        json!({"type":"app_mention","user":"U1","text":"<@UBOT> !status","ts":"2.0","channel":"C1"}),
        &cfg(),
    );
    assert!(
        matches!(in_channel, Decision::Accept(_)),
        "a channel is conversation"
    );
    let chat = run(
        json!({"type":"message","channel":"D1","channel_type":"im","user":"U1","text":"!!! great news","ts":"2.0"}),
        &cfg(),
    );
    assert!(matches!(chat, Decision::Accept(_)));
}

#[test]
fn other_bots_when_allowed_and_allow_lists() {
    let mut c = cfg();
    c.reply_to_bots = true;
    let n = accepted(run(
        json!({"type":"message","subtype":"bot_message","channel":"D1","channel_type":"im","bot_id":"BOTHER","text":"beep","ts":"2.0"}),
        &c,
    ));
    assert_eq!(n.user_id, "BOTHER");
    let mut c = cfg();
    c.allowed_channels = vec!["C9".into()];
    let d = run(
        json!({"type":"app_mention","user":"U1","text":"<@UBOT> hi","ts":"1.0","channel":"C1"}),
        &c,
    );
    assert_eq!(d, Decision::Ignore("channel not in allowed_channels"));
    let mut c = cfg();
    c.allowed_users = vec!["U7".into()];
    let d = run(
        json!({"type":"app_mention","user":"U1","text":"<@UBOT> hi","ts":"1.0","channel":"C1"}),
        &c,
    );
    assert_eq!(d, Decision::Ignore("user not in allowed_users"));
}

#[test]
fn an_assistant_thread_started_is_remembered() {
    let d = run(
        json!({"type":"assistant_thread_started","assistant_thread":{"user_id":"U1","context":{"channel_id":"C123","team_id":"T111","enterprise_id":null},"channel_id":"D777","thread_ts":"1729999327.187299"},"event_ts":"1729999327.187299"}),
        &cfg(),
    );
    assert_eq!(
        d,
        Decision::AssistantThread {
            channel: "D777".into(),
            thread_ts: "1729999327.187299".into()
        }
    );
}

#[test]
fn the_messages_tab_opened_is_a_dm_to_greet_and_other_tabs_are_not() {
    let opened = |tab: &str, channel: &str, user: &str| json!({"type":"app_home_opened","user":user,"channel":channel,"tab":tab,"event_ts":"1.0"});
    assert_eq!(
        run(opened("messages", "D1", "U1"), &cfg()),
        Decision::MessagesOpened {
            channel: "D1".into()
        }
    );
    assert_eq!(
        run(opened("home", "D1", "U1"), &cfg()),
        Decision::Ignore("the app's home opened on a tab other than messages")
    );
    assert_eq!(
        run(opened("messages", "C1", "U1"), &cfg()),
        Decision::Ignore("the messages tab opened without a direct channel")
    );
    let mut c = cfg();
    c.allowed_users = vec!["U7".into()];
    assert_eq!(
        run(opened("messages", "D1", "U1"), &c),
        Decision::Ignore("user not in allowed_users")
    );
}

#[test]
fn a_stop_names_the_conversation_a_message_in_that_thread_has() {
    let stop = |channel: &str, thread_ts: Option<&str>| {
        let mut e = json!({"type":"agent_session_stopped","channel":channel,"streaming_message_ts":["1700000001.000200"],"user":"U1","event_ts":"1700000002.0"});
        if let Some(t) = thread_ts {
            e["thread_ts"] = json!(t);
        }
        e
    };
    assert_eq!(
        run(stop("C1", Some("1700000000.000100")), &cfg()),
        Decision::Stop {
            conversations: vec!["C1:1700000000.000100".into()],
            streams: vec!["1700000001.000200".into()]
        }
    );
    // The same key intake gives a message inside that thread.
    let n = accepted(run(
        json!({"type":"message","channel":"C1","channel_type":"channel","user":"U1","text":"<@UBOT> and?","ts":"1700000003.0","thread_ts":"1700000000.000100"}),
        &cfg(),
    ));
    assert_eq!(n.thread_key, "C1:1700000000.000100");
    assert_eq!(
        run(stop("D1", Some("5.0")), &cfg()),
        Decision::Stop {
            conversations: vec!["D1:5.0".into(), "D1".into()],
            streams: vec!["1700000001.000200".into()]
        }
    );
    assert_eq!(
        run(stop("D1", None), &cfg()),
        Decision::Ignore("a stop without a thread")
    );
    assert_eq!(
        run(stop("D1", Some("not-a-ts")), &cfg()),
        Decision::Ignore("a stop whose channel or thread_ts is unusable")
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(500))]

    #[test]
    fn any_message_text_is_decided_without_panicking(
        text in arbitrary::text(),
        channel_type in prop::sample::select(vec!["im", "channel", "group", "mpim"]),
        thread in any::<bool>(),
        mention_event in any::<bool>(),
    ) {
        let mut event = if mention_event {
            json!({"type":"app_mention","user":"U1","text":text,"ts":"2.000100","channel":"C1"})
        } else {
            json!({"type":"message","channel":"C1","channel_type":channel_type,"user":"U1","text":text,"ts":"2.000100"})
        };
        if thread {
            event["thread_ts"] = json!("1.000001");
        }
        match run(event, &cfg()) {
            Decision::Accept(n) | Decision::Admin(n) => {
                prop_assert!(!n.text.trim().is_empty(), "{:?} → {:?}", text, n.text);
                prop_assert!(text.contains(&n.text), "{:?} → {:?}", text, n.text);
                prop_assert_eq!(n.channel, "C1");
                prop_assert_eq!(n.ts, "2.000100");
            }
            Decision::Ignore(why) => {
                if text.trim().is_empty() {
                    prop_assert_eq!(why, "message without text");
                }
            }
            d => prop_assert!(false, "{:?}", d),
        }
    }

    #[test]
    fn an_unusable_channel_or_ts_is_never_accepted(
        channel in prop_oneof![Just(String::new()), Just("C1".to_string()), arbitrary::text()],
        ts in prop_oneof![Just("2.000100".to_string()), arbitrary::text()],
        thread_ts in prop::option::of(prop_oneof![Just("1.0".to_string()), arbitrary::text()]),
    ) {
        let mut event = json!({"type":"message","channel":channel,"channel_type":"channel","user":"U1","text":"<@UBOT> hi","ts":ts});
        if let Some(t) = &thread_ts {
            event["thread_ts"] = json!(t);
        }
        let usable = !channel.is_empty()
            && is_slack_ts(&ts)
            && thread_ts.as_deref().is_none_or(is_slack_ts);
        let d = run(event, &cfg());
        prop_assert_eq!(matches!(d, Decision::Accept(_)), usable, "{:?}", d);
    }

    #[test]
    fn the_leading_mention_is_dropped_and_nothing_else(
        before in prop::sample::select(vec!["", " ", "\n", "\u{a0}"]),
        mention in prop::sample::select(vec!["<@UBOT>", "<@UBOT|anima>"]),
        rest in arbitrary::text(),
    ) {
        let text = format!("{before}{mention}{rest}");
        let out = without_leading_mention(&text, "UBOT");
        prop_assert!(!out.trim().is_empty(), "{:?} → {:?}", text, out);
        prop_assert!(text.contains(&out), "{:?} → {:?}", text, out);
        let left = rest.trim_start().trim_start_matches([',', ':']).trim();
        if !left.is_empty() {
            prop_assert_eq!(out, left);
        }
        prop_assert!(mentions(&text, "UBOT"));
        let later = format!("{rest}{mention}");
        prop_assert!(mentions(&later, "UBOT"));
    }

    #[test]
    fn text_without_the_bots_id_never_mentions_it(text in arbitrary::text()) {
        let text = text.replace("UBOT", "UBOX");
        prop_assert!(!mentions(&text, "UBOT"));
        prop_assert_eq!(without_leading_mention(&text, "UBOT"), text);
    }

    #[test]
    fn slack_timestamps_sort_like_their_numbers(
        a in (0u64..4_000_000_000, 0u64..1_000_000),
        b in (0u64..4_000_000_000, 0u64..1_000_000),
        junk in arbitrary::text(),
    ) {
        let ts = |(s, m): (u64, u64)| format!("{s}.{m:06}");
        prop_assert!(is_slack_ts(&ts(a)));
        prop_assert_eq!(ts_order(&ts(a)), a);
        prop_assert_eq!(ts_order(&ts(a)).cmp(&ts_order(&ts(b))), a.cmp(&b));
        let _ = ts_order(&junk);
        let _ = is_slack_ts(&junk);
    }
}
