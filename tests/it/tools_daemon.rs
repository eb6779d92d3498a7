//! MCP tool servers in the running daemon (`anima run` against the fake Slack, the fake model
//! and the fake stdio MCP server): a SIGHUP puts a rewritten `[[tools.servers]]` in force
//! (added, removed, changed, untouched) and refuses a broken config; a SIGKILL while a tool
//! call is in flight still leaves one reply per message.

use crate::support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::json;
use support::daemon::{home as daemon_home, Daemon};
use support::mcp::*;
use support::slack::FakeSlack;
use support::*;

/// A research process whose tool actions call `lookup` on the servers `a`, `b` and `c`
/// (each may be configured or not), and `wait` on `kb`.
const RESEARCH: &str = r#"name = "research"
kind = "ism"
goal = "Answer with what the tools say"
steps = ["external_dialogue", "user_model_check", "user_model_update", "soul_state_check", "soul_state_update"]

[[actions]]
name = "UseA"
description = "Look it up in A"
effect = "tool"
tool = "a.lookup"

[[actions]]
name = "UseB"
description = "Look it up in B"
effect = "tool"
tool = "b.lookup"

[[actions]]
name = "UseC"
description = "Look it up in C"
effect = "tool"
tool = "c.lookup"

[[actions]]
name = "Wait"
description = "Wait for the slow page"
effect = "tool"
tool = "kb.wait"

[[actions]]
name = "Respond"
description = "Answer the person"
effect = "respond"
"#;

/// A daemon home running `RESEARCH` for every thread; returns it and its config without
/// tool servers (append `[[tools.servers]]` tables to it).
fn research_home(model: &FakeModel, slack: &FakeSlack) -> (Home, String) {
    let home = daemon_home(model, slack, "socket", "");
    let procs = home.dir.path().join("processes");
    std::fs::create_dir_all(&procs).unwrap();
    std::fs::write(procs.join("research.toml"), RESEARCH).unwrap();
    std::fs::write(
        procs.join("main.toml"),
        "name = \"main\"\nsteps = [\"external_dialogue\"]\n",
    )
    .unwrap();
    let base = std::fs::read_to_string(home.config()).unwrap().replacen(
        "[paths]\n",
        &format!("[paths]\nprocesses_dir = \"{}\"\n", procs.display()),
        1,
    ) + "\n[processes]\ninitial = \"research\"\n";
    (home, base)
}

/// The model's side: a selection calls each of `actions` in turn until the loop's log shows
/// what it returned, then answers; the answer says `re: <the message>`.
fn respond_by_calling(model: &FakeModel, actions: &'static [&'static str]) {
    model.respond_with(move |turn| {
        let message = current_message(turn);
        if !is_selection(turn) {
            return said(&format!("re: {message}"));
        }
        let next = actions.iter().find(|a| !tool_returned(turn, a));
        match next {
            Some(&"Wait") if message.starts_with("slow") => select("Wait", None),
            Some(&"Wait") | None => select("Respond", None),
            Some(a) => select(a, Some(r#"{"term": "rust"}"#)),
        }
    });
}

fn dm(channel: &str, user: &str, ts: &str, text: &str) -> serde_json::Value {
    json!({"type":"message","channel":channel,"user":user,"text":text,"ts":ts,"event_ts":ts,"channel_type":"im"})
}

fn hangup(d: &Daemon) {
    let ok = Command::new("kill")
        .args(["-HUP", &d.child.id().to_string()])
        .status()
        .unwrap()
        .success();
    assert!(ok, "kill -HUP");
}

/// The texts posted in `channel`.
fn posted(slack: &FakeSlack, channel: &str) -> Vec<String> {
    slack
        .posts()
        .into_iter()
        .filter(|p| p.channel == channel)
        .map(|p| p.text)
        .collect()
}

fn needle(log: &Path) -> String {
    log.display().to_string()
}

#[test]
fn a_sighup_starts_added_servers_stops_removed_ones_and_restarts_changed_ones() {
    let dir = tempfile::tempdir().unwrap();
    let log = |name: &str| dir.path().join(format!("calls-{name}"));
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    respond_by_calling(&model, &["UseA", "UseB", "UseC"]);
    let (home, base) = research_home(&model, &slack);
    // `d` is never used by a turn: it only has to keep running.
    let before = [
        server_toml("a", &log("a"), &[]),
        server_toml("c", &log("c-old"), &[]),
        server_toml("d", &log("d"), &[]),
    ]
    .concat();
    std::fs::write(home.config(), format!("{base}{before}")).unwrap();
    let d = Daemon::start(&home);
    slack.wait_connected_or(|| d.log());
    slack.send_event(dm("D1", "U1", "1700000000.000100", "first"), "Ev1", 0);
    slack.wait(30, "the first answer", |s| s.posts().len() == 1);
    let d_pids = pids_with(&needle(&log("d")));
    assert_eq!(d_pids.len(), 1, "{}", d.log());
    assert_eq!(processes_with(&needle(&log("a"))), 1);

    // A removed, B added, C changed (it logs elsewhere now), D as it was; and a section a
    // reload cannot apply.
    let after = [
        server_toml("b", &log("b"), &[]),
        server_toml("c", &log("c-new"), &[]),
        server_toml("d", &log("d"), &[]),
    ]
    .concat();
    let base = base.replace("shutdown_grace_secs = 10", "shutdown_grace_secs = 12");
    std::fs::write(home.config(), format!("{base}{after}")).unwrap();
    hangup(&d);
    let line = d.wait_log("config reloaded", 20);
    assert!(line.contains("added=b"), "{line}");
    assert!(line.contains("removed=a"), "{line}");
    assert!(line.contains("restarted=c"), "{line}");
    assert!(line.contains("unchanged=d"), "{line}");
    let later = d.wait_log("take effect at the next start", 5);
    assert!(later.contains("changes to [daemon] take"), "{later}");
    assert!(
        later.ends_with("sections=daemon"),
        "[tools] is applied: {later}"
    );

    assert!(
        eventually(10, || processes_with(&needle(&log("a"))) == 0),
        "A's child is gone"
    );
    assert!(
        eventually(10, || processes_with(&needle(&log("c-old"))) == 0),
        "C's old child is gone"
    );
    assert!(
        eventually(20, || processes_with(&needle(&log("c-new"))) == 1
            && processes_with(&needle(&log("b"))) == 1),
        "B and the new C run: {}",
        d.log()
    );
    assert_eq!(
        pids_with(&needle(&log("d"))),
        d_pids,
        "D kept running untouched"
    );

    // The next turn sees the new set: A is gone, B and the new C answer.
    let asked = model.requests().len();
    slack.send_event(dm("D1", "U1", "1700000000.000200", "second"), "Ev2", 0);
    slack.wait(30, "the second answer", |s| s.posts().len() == 2);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(posted(&slack, "D1"), ["re: first", "re: second"]);
    assert_eq!(called(&log("a")), ["lookup"], "only the first message");
    assert_eq!(called(&log("b")), ["lookup"], "only the second message");
    assert_eq!(called(&log("c-old")), ["lookup"]);
    assert_eq!(called(&log("c-new")), ["lookup"]);
    assert_eq!(called(&log("d")), Vec::<String>::new());
    let second: Vec<String> = model.requests()[asked..]
        .iter()
        .map(|r| r.turn_text())
        .collect();
    assert!(
        second[0].contains(
            "- UseB: Look it up in B (a tool; its arguments, a JSON object: {term: string})"
        ),
        "B's schema is shown: {}",
        second[0]
    );
    assert!(
        second[1].contains("there is no tool server `a`"),
        "{}",
        second[1]
    );
}

#[test]
fn a_config_broken_on_reload_changes_nothing_and_its_problems_are_logged() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls-a");
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    respond_by_calling(&model, &["UseA"]);
    let (home, base) = research_home(&model, &slack);
    std::fs::write(
        home.config(),
        format!("{base}{}", server_toml("a", &log, &[])),
    )
    .unwrap();
    let d = Daemon::start(&home);
    slack.wait_connected_or(|| d.log());
    d.wait_log("tool server ready", 20);
    let pids = pids_with(&needle(&log));
    assert_eq!(pids.len(), 1, "{}", d.log());

    // A removed, and a server whose timeout is out of range.
    let broken = format!("{base}\n[[tools.servers]]\nname = \"b\"\ntimeout_secs = 0\n");
    std::fs::write(home.config(), &broken).unwrap();
    hangup(&d);
    let summary = d.wait_log("config not reloaded: fix the problems", 20);
    assert!(summary.contains("problems=1"), "{}", d.log());
    let line = broken
        .lines()
        .position(|l| l == "timeout_secs = 0")
        .unwrap()
        + 1;
    d.wait_log(
        &format!(
            "config not reloaded: {}:{line}: key `tools.servers.timeout_secs`: found 0",
            home.config().display()
        ),
        5,
    );
    assert!(!d.log().contains("config reloaded"), "{}", d.log());

    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        pids_with(&needle(&log)),
        pids,
        "A still runs, the same child"
    );
    slack.send_event(
        dm("D1", "U1", "1700000000.000100", "still there?"),
        "Ev1",
        0,
    );
    slack.wait(30, "the answer", |s| s.posts().len() == 1);
    assert_eq!(posted(&slack, "D1"), ["re: still there?"]);
    assert_eq!(called(&log), ["lookup"], "A's tool still answers");
}

#[test]
fn a_sigkill_mid_tool_call_still_gives_each_message_exactly_one_reply() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls-kb");
    let release = dir.path().join("release");
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    respond_by_calling(&model, &["Wait"]);
    let (home, base) = research_home(&model, &slack);
    let server = server_toml("kb", &log, &["--release", &release.display().to_string()]);
    std::fs::write(home.config(), format!("{base}{server}")).unwrap();
    let mut d = Daemon::start(&home);
    slack.wait_connected_or(|| d.log());

    slack.send_event(dm("D1", "U1", "1700000000.000100", "quick one"), "Ev1", 0);
    slack.wait(30, "the first answer", |s| s.posts().len() == 1);
    slack.send_event(dm("D2", "U2", "1700000000.000200", "slow two"), "Ev2", 0);
    assert!(
        eventually(30, || called(&log) == ["wait"]),
        "the call is in flight: {}",
        d.log()
    );
    // One more message, taken in (acknowledged) but perhaps not answered before the kill.
    let envelope = slack.send_event(dm("D3", "U3", "1700000000.000300", "quick three"), "Ev3", 0);
    slack.wait(10, "the third message's ack", |s| {
        s.acks().contains(&envelope)
    });
    d.kill9();
    assert!(
        posted(&slack, "D2").is_empty(),
        "no reply while the call hung"
    );

    std::fs::write(&release, "").unwrap();
    let d = Daemon::start(&home);
    slack.wait(20, "a new Socket Mode connection", |s| s.sockets() > 0);
    slack.send_event(dm("D4", "U4", "1700000000.000400", "quick four"), "Ev4", 0);
    slack.wait(30, "four answers", |s| s.posts().len() >= 4);
    std::thread::sleep(Duration::from_millis(800));
    for (channel, text) in [
        ("D1", "quick one"),
        ("D2", "slow two"),
        ("D3", "quick three"),
        ("D4", "quick four"),
    ] {
        assert_eq!(
            posted(&slack, channel),
            [format!("re: {text}")],
            "exactly one reply in {channel}: {}",
            d.log()
        );
    }
    let waits = called(&log);
    assert!(
        !waits.is_empty() && waits.len() <= 2 && waits.iter().all(|w| w == "wait"),
        "the call was made, and repeated at most once: {waits:?}"
    );
    drop(d);
    // The first daemon's server was orphaned by the SIGKILL; released, it ends by itself.
    // Whatever of ours is left is ended by its id.
    if !eventually(10, || processes_with(&needle(&log)) == 0) {
        for pid in pids_with(&needle(&log)) {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    }
}
