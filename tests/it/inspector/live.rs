//! The inspector on a running daemon: a reply's turn links the Slack message it went into
//! (the workspace's URL from auth.test, Slack's permalink form), escaped.

use super::*;

/// Polls `f` until it gives something, for at most `secs`.
fn poll<T>(secs: u64, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(found) = f() {
            return found;
        }
        assert!(Instant::now() < deadline, "waited {secs} s for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn on_the_daemon_a_reply_s_turn_links_its_slack_message() {
    const TOKEN: &str = "inspect-live-0123456789";
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.respond_with(|turn| answer(&format!("heard: {}", current_message(turn))));
    let home = daemon_home(&model, &slack, "socket", "");
    let d = Daemon::start_env(&home, &[("ANIMA_INSPECT_TOKEN", TOKEN)]);
    slack.wait_connected_or(|| d.log());
    let text = format!("<@{}> where are you?", crate::support::slack::BOT_USER);
    slack.send_event(
        json!({"type": "app_mention", "user": "U061F7AUR", "text": text, "ts": "1515449522.000016",
               "channel": "C0LAN2Q65", "event_ts": "1515449522.000016"}),
        "Ev01",
        0,
    );
    let post = poll(20, "the reply in Slack", || {
        slack
            .posts()
            .into_iter()
            .find(|p| p.text.contains("heard: where are you?"))
    });
    let link = format!(
        "https://fake.slack.test/archives/C0LAN2Q65/p{}?thread_ts=1515449522.000016&cid=C0LAN2Q65",
        post.ts.replace('.', "")
    );
    let bearer = format!("Bearer {TOKEN}");
    let h = [("authorization", bearer.as_str())];
    // The trace may be written a moment after the reply: asked again until it is there.
    let turn = poll(20, "the reply's turn, posted", || {
        let list = get(&d.url("/api/inspect/turns?limit=20"), &h).json();
        let trace = list["turns"].as_array()?.iter().find_map(|t| {
            let reply = t["reply"].as_str()?;
            reply
                .contains("heard: where")
                .then(|| t["trace"].as_str().unwrap().to_string())
        })?;
        let turn = get(&d.url(&format!("/api/inspect/turns/{trace}")), &h).json();
        (!turn["posted"].is_null()).then_some(turn)
    });
    assert_eq!(turn["posted"]["link"], link.as_str(), "{turn}");
    assert_eq!(
        turn["posted"]["text"],
        format!("C0LAN2Q65 {} (in the thread 1515449522.000016)", post.ts)
    );
    let page = get(
        &d.url(&format!(
            "/inspect/turn/{}",
            turn["trace"].as_str().unwrap()
        )),
        &h,
    )
    .body;
    let href = format!(
        "<a class=\"slack\" href=\"{}\" rel=\"noopener noreferrer\">",
        link.replace('&', "&amp;")
    );
    assert!(page.contains(&href), "{page}");
}
