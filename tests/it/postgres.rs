//! anima on PostgreSQL through the real binary: chat, check, state and users on a database of
//! their own, and a soul that grew up on SQLite copied across; the rights a role needs
//! (`rights`), TLS as libpq means it (`tls`) and locks held by sessions that do not end
//! (`locks`). Each test runs when
//! `ANIMA_TEST_POSTGRES_URL` names a server, and says it was skipped otherwise.

use crate::support;

mod locks;
mod rights;
mod tls;

use std::time::Duration;

use serde_json::json;
use support::daemon::Daemon;
use support::postgres::{fresh_database, query, with_database, DropAfter};
use support::relay::Relay;
use support::slack::FakeSlack;
use support::*;

/// A home on PostgreSQL whose database and `ANIMA_DATABASE_URL` the test gives itself: to the
/// harness (`Backend::Sqlite`) it is a plain home, whatever `ANIMA_TEST_BACKEND` says.
fn postgres_home(model: &FakeModel) -> Home {
    Home::on(
        Backend::Sqlite,
        "anthropic",
        &model.url(),
        &format!("\n{ON_POSTGRES}"),
    )
}

#[test]
fn a_soul_on_postgres_chats_remembers_and_reports_from_any_process() {
    let Some(url) = fresh_database() else { return };
    let _dropped = DropAfter(url.clone());
    let model = FakeModel::start();
    model.reply(&answer("Bonjour, Zoë !"));
    model.reply(&answer("Toujours là."));
    let home = postgres_home(&model);
    let env = [("ANIMA_DATABASE_URL", url.as_str())];
    let r = home.run_env(&["chat", "--user", "Zoë"], "Salut 👋\n", &env);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(replies(&r.stdout), ["Bonjour, Zoë !"]);
    // A second process sees the first one's conversation.
    let r = home.run_env(&["chat", "--user", "Zoë"], "Encore ?\n", &env);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(
        model.requests()[1]
            .body
            .to_string()
            .contains("Bonjour, Zoë !"),
        "the history came from PostgreSQL"
    );
    assert!(
        !home.data().join("anima.db").exists(),
        "no SQLite file is made"
    );
    let state = home.run_env(&["state", "--json"], "", &env);
    assert_eq!(state.status, 0, "{}", state.stderr);
    let report: serde_json::Value = serde_json::from_str(&state.stdout).unwrap();
    assert_eq!(report["interactions"], 2, "{report}");
    assert_eq!(
        query(
            &url,
            "SELECT value::text FROM counters WHERE name = 'interactions'"
        ),
        ["2"]
    );
    let check = home.run_env(&["check"], "", &env);
    assert_eq!(check.status, 0, "{}{}", check.stdout, check.stderr);
    assert!(
        check.stdout.contains(&format!(
            "schema version {}",
            anima::memory::postgres::SCHEMA_VERSION
        )) && check.stdout.contains("PostgreSQL 1"),
        "{}",
        check.stdout
    );
    let mind = home.run_env(&["mind", "--json"], "", &env);
    assert_eq!(mind.status, 0, "{}", mind.stderr);
    let log = home.run_env(&["users", "log", "Zoë"], "", &env);
    assert_eq!(log.status, 0, "{}", log.stderr);
    // A schema from a newer anima is refused, by every command.
    query(&url, "UPDATE anima_schema SET version = 99");
    let newer = home.run_env(&["chat", "--user", "Zoë"], "hm\n", &env);
    assert_eq!(newer.status, 2, "{}", newer.stderr);
    assert!(
        newer.stderr.contains("newer than this anima"),
        "{}",
        newer.stderr
    );
    let check = home.run_env(&["check"], "", &env);
    assert_eq!(check.status, 2);
    assert!(
        check.stdout.contains("schema version 99"),
        "{}",
        check.stdout
    );
}

#[test]
fn check_names_what_is_wrong_with_the_database_and_never_the_password() {
    let Some(url) = fresh_database() else { return };
    let _dropped = DropAfter(url.clone());
    let model = FakeModel::start();
    let home = postgres_home(&model);
    let missing = home.run(&["check"], "");
    assert_eq!(missing.status, 2, "{}", missing.stdout);
    assert!(
        missing.stdout.contains("ANIMA_DATABASE_URL") && missing.stdout.contains("not set"),
        "{}",
        missing.stdout
    );
    let wrong_password = url.replacen("://postgres:", "://postgres:not-the-password-42@", 1);
    let wrong_password = match wrong_password.split_once("-42@") {
        // postgres://postgres:not-the-password-42@<old password>@host → drop the old one.
        Some((head, rest)) => format!("{head}-42@{}", rest.split_once('@').map_or(rest, |r| r.1)),
        None => wrong_password,
    };
    let refused = home.run_env(&["check"], "", &[("ANIMA_DATABASE_URL", &wrong_password)]);
    assert_eq!(refused.status, 2, "{}", refused.stdout);
    assert!(refused.stdout.contains("credentials"), "{}", refused.stdout);
    let all = format!("{}{}", refused.stdout, refused.stderr);
    assert!(!all.contains("not-the-password-42"), "{all}");
    let nowhere = with_database(&url, "anima_no_such_db");
    let no_db = home.run_env(&["check"], "", &[("ANIMA_DATABASE_URL", &nowhere)]);
    assert_eq!(no_db.status, 2, "{}", no_db.stdout);
    assert!(no_db.stdout.contains("does not exist"), "{}", no_db.stdout);
    let closed = "postgres://postgres:secret-77@127.0.0.1:9/anima";
    let unreachable = home.run_env(&["check"], "", &[("ANIMA_DATABASE_URL", closed)]);
    assert_eq!(unreachable.status, 2, "{}", unreachable.stdout);
    assert!(
        unreachable.stdout.contains("cannot reach"),
        "{}",
        unreachable.stdout
    );
    assert!(!unreachable.stdout.contains("secret-77"));
}

#[test]
fn a_soul_that_grew_up_on_sqlite_moves_to_postgres_whole_and_only_once() {
    let Some(url) = fresh_database() else { return };
    let _dropped = DropAfter(url.clone());
    let model = FakeModel::start();
    model.reply(&answer("Hello Tom."));
    model.reply(&answer("Still here, Tom."));
    let sqlite = Home::on(Backend::Sqlite, "anthropic", &model.url(), "");
    let r = sqlite.run(&["chat", "--user", "Tom"], "hi ✨\n");
    assert_eq!(r.status, 0, "{}", r.stderr);
    // The same home, now on PostgreSQL: the copy reads the SQLite file under [paths] home.
    std::fs::write(
        sqlite.config(),
        std::fs::read_to_string(sqlite.config()).unwrap() + "\n" + ON_POSTGRES,
    )
    .unwrap();
    let env = [("ANIMA_DATABASE_URL", url.as_str())];
    let copy = sqlite.run_env(&["store", "copy", "--to", "postgres"], "", &env);
    assert_eq!(copy.status, 0, "{}", copy.stderr);
    assert!(
        copy.stdout.contains("working-memory entries"),
        "{}",
        copy.stdout
    );
    assert!(
        copy.stdout.contains("every count checked"),
        "{}",
        copy.stdout
    );
    assert!(
        !copy.stdout.contains(url.split('@').next().unwrap()),
        "no password"
    );
    // Every table holds as many rows on PostgreSQL as on SQLite, the psyche's included.
    let sqlite_db = rusqlite::Connection::open(sqlite.data().join("anima.db")).unwrap();
    for table in [
        "working_memory",
        "users",
        "user_model_history",
        "threads",
        "psyche_substrate",
        "psyche_relationships",
        "psyche_memories",
        "psyche_memory_people",
        "psyche_gate_log",
        "state_moves",
    ] {
        let here: i64 = sqlite_db
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap();
        assert_eq!(
            query(&url, &format!("SELECT count(*)::text FROM {table}")),
            [here.to_string()],
            "{table}"
        );
    }
    let decided: i64 = sqlite_db
        .query_row("SELECT count(*) FROM psyche_gate_log", [], |r| r.get(0))
        .unwrap();
    assert!(
        decided > 0,
        "the decisions kept in the soul's row came along"
    );
    drop(sqlite_db);
    // The soul goes on where it was.
    let r = sqlite.run_env(&["chat", "--user", "Tom"], "again\n", &env);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert!(model.requests()[1].body.to_string().contains("Hello Tom."));
    assert_eq!(
        query(
            &url,
            "SELECT value::text FROM counters WHERE name = 'interactions'"
        ),
        ["2"]
    );
    // Not twice.
    let again = sqlite.run_env(&["store", "copy", "--to", "postgres"], "", &env);
    assert_eq!(again.status, 2, "{}", again.stdout);
    assert!(again.stderr.contains("not empty"), "{}", again.stderr);
}

/// A CA certificate that signed nothing the test server holds.
const OTHER_CA: &str = include_str!("../support/other-ca.pem");

/// A home on SQLite whose soul has had one exchange and written one journal entry (the journal
/// is one of the last tables a copy writes).
fn a_soul_on_sqlite_with_a_day(model: &FakeModel) -> Home {
    model.reply(&answer("Hi."));
    let home = Home::on(Backend::Sqlite, "anthropic", &model.url(), "");
    assert_eq!(home.run(&["chat", "--user", "Tom"], "hi\n").status, 0);
    wait(home.store().add_journal("a day")).unwrap();
    home
}

#[test]
fn a_copy_that_fails_midway_leaves_the_database_empty() {
    let Some(url) = fresh_database() else { return };
    let _dropped = DropAfter(url.clone());
    let model = FakeModel::start();
    let home = a_soul_on_sqlite_with_a_day(&model);
    // A late table holds a value that cannot be copied: the earlier ones were written first.
    rusqlite::Connection::open(home.data().join("anima.db"))
        .unwrap()
        .execute("UPDATE journal SET at = 'noon'", [])
        .unwrap();
    let env = [("ANIMA_DATABASE_URL", url.as_str())];
    let copy = home.run_env(&["store", "copy", "--to", "postgres"], "", &env);
    assert_ne!(copy.status, 0, "{}", copy.stdout);
    assert_eq!(
        query(&url, "SELECT count(*)::text FROM working_memory"),
        ["0"],
        "nothing half-copied"
    );
    // Nothing to copy from.
    let empty = Home::on(Backend::Sqlite, "anthropic", &model.url(), "");
    let none = empty.run_env(&["store", "copy", "--to", "postgres"], "", &env);
    assert_eq!(none.status, 2, "{}", none.stderr);
    assert!(none.stderr.contains("no SQLite store"), "{}", none.stderr);
}

/// A copy SIGKILLed in the middle of its transaction: the server rolls all of it back, and the
/// next copy finds the database empty and completes.
#[test]
fn a_copy_killed_midway_leaves_the_database_empty_for_the_next() {
    let Some(url) = fresh_database() else { return };
    let _dropped = DropAfter(url.clone());
    let model = FakeModel::start();
    let home = a_soul_on_sqlite_with_a_day(&model);
    // The schema first, then a late table that holds each row for a while, so the copy can be
    // caught with the earlier tables written and its transaction open.
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(anima::memory::postgres::Postgres::connect(&url, 1))
        .unwrap();
    query(
        &url,
        "CREATE FUNCTION stall() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN PERFORM pg_sleep(2); RETURN NEW; END $$;
         CREATE TRIGGER stall BEFORE INSERT ON journal FOR EACH ROW EXECUTE FUNCTION stall()",
    );
    let mut copy = anima_command(
        &home.config(),
        home.dir.path(),
        &["store", "copy", "--to", "postgres"],
    );
    copy.env("ANIMA_DATABASE_URL", &url);
    let mut child = spawn(&mut copy);
    let stalled = "SELECT count(*)::text FROM pg_stat_activity
                   WHERE datname = current_database() AND wait_event = 'PgSleep'";
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while query(&url, stalled) != ["1"] {
        assert!(
            std::time::Instant::now() < deadline,
            "the copy never reached the journal"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(
        query(&url, "SELECT count(*)::text FROM working_memory"),
        ["0"],
        "the copy's writes are its transaction's until it commits"
    );
    child.kill().unwrap();
    child.wait().unwrap();
    // The server notices its client gone once the row's wait ends, and rolls back.
    let others = "SELECT count(*)::text FROM pg_stat_activity
                  WHERE datname = current_database() AND pid <> pg_backend_pid()
                    AND backend_type = 'client backend'";
    while query(&url, others) != ["0"] {
        assert!(
            std::time::Instant::now() < deadline,
            "the copy's session never ended"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for table in ["working_memory", "users", "journal", "threads"] {
        assert_eq!(
            query(&url, &format!("SELECT count(*)::text FROM {table}")),
            ["0"],
            "{table}: nothing half-copied"
        );
    }
    query(&url, "DROP TRIGGER stall ON journal");
    let again = home.run_env(
        &["store", "copy", "--to", "postgres"],
        "",
        &[("ANIMA_DATABASE_URL", url.as_str())],
    );
    assert_eq!(again.status, 0, "{}{}", again.stdout, again.stderr);
    assert_eq!(
        query(&url, "SELECT entry FROM journal"),
        ["a day"],
        "the next copy is whole"
    );
}

/// The model answers "Got number N" to a message ending in "number N".
fn answers_the_number(model: &FakeModel) {
    model.respond_with(|turn| {
        let n = turn
            .rsplit("number ")
            .next()
            .unwrap_or("?")
            .split_whitespace()
            .next()
            .unwrap_or("?");
        answer(&format!("Got number {n}"))
    });
}

fn dm(channel: &str, ts: &str, text: &str) -> serde_json::Value {
    json!({"type":"message","channel":channel,"user":"U061F7AUR","text":text,"ts":ts,"event_ts":ts,"channel_type":"im"})
}

/// A daemon home on Slack's fake, its store in the database at `url`.
fn daemon_home(model: &FakeModel, slack: &FakeSlack) -> Home {
    let home = support::daemon::home_on(Backend::Sqlite, model, slack, "socket", "");
    let cfg = std::fs::read_to_string(home.config()).unwrap();
    std::fs::write(home.config(), format!("{cfg}\n{ON_POSTGRES}")).unwrap();
    home
}

#[test]
fn the_daemon_on_postgres_answers_each_message_once_and_in_its_place() {
    let Some(url) = fresh_database() else { return };
    let _dropped = DropAfter(url.clone());
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    answers_the_number(&model);
    let home = daemon_home(&model, &slack);
    let d = Daemon::start_env(&home, &[("ANIMA_DATABASE_URL", &url)]);
    slack.wait_connected_or(|| d.log());
    for i in 0..6 {
        slack.send_event(
            dm(
                &format!("D{i}"),
                &format!("1700000000.00000{i}"),
                &format!("number {i} ✨"),
            ),
            &format!("Ev{i}"),
            0,
        );
    }
    slack.wait(30, "six replies", |s| s.posts().len() >= 6);
    std::thread::sleep(Duration::from_millis(500));
    let posts = slack.posts();
    assert_eq!(posts.len(), 6, "{posts:?}");
    for i in 0..6 {
        let here: Vec<_> = posts
            .iter()
            .filter(|p| p.channel == format!("D{i}"))
            .collect();
        assert_eq!(here.len(), 1, "one reply in D{i}: {posts:?}");
        assert!(
            here[0].text.contains(&format!("Got number {i}")),
            "{:?}",
            here[0]
        );
    }
    assert_eq!(
        query(
            &url,
            "SELECT count(*)::text FROM inbox WHERE status = 'done'"
        ),
        ["6"]
    );
    assert!(!home.data().join("anima.db").exists());
    let health = support::daemon::http("GET", &d.url("/healthz"), &[], "");
    assert_eq!(health.0, 200, "{}", health.1);
}

#[test]
fn a_daemon_waits_for_a_database_it_cannot_reach_and_says_why() {
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    let home = daemon_home(&model, &slack);
    let mut d = Daemon::spawn(
        &home,
        &[(
            "ANIMA_DATABASE_URL",
            "postgres://anima:secret-55@127.0.0.1:9/anima",
        )],
    );
    let line = d.wait_log("health answers 503", 20);
    let addr = line
        .split("addr=")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    let (status, body) = support::daemon::http("GET", &format!("http://{addr}/healthz"), &[], "");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("waiting for the database"), "{body}");
    assert!(!body.contains("secret-55") && !d.log().contains("secret-55"));
    assert_eq!(
        slack.sockets(),
        0,
        "no door to Slack before the store can take events"
    );
    assert!(slack.calls("auth.test").is_empty());
    assert_eq!(d.terminate(), 0, "{}", d.log());
}

#[test]
fn the_database_going_away_mid_load_loses_nothing_and_answers_nothing_twice() {
    let Some(url) = fresh_database() else { return };
    let _dropped = DropAfter(url.clone());
    let server = {
        let config: tokio_postgres::Config = url.parse().unwrap();
        let host = match &config.get_hosts()[0] {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            _ => return eprintln!("skipped: the test server is not on TCP"),
        };
        format!("{host}:{}", config.get_ports()[0])
    };
    let relay = Relay::start(
        std::net::ToSocketAddrs::to_socket_addrs(&server)
            .unwrap()
            .next()
            .unwrap(),
    );
    let through = url.replacen(&server, &relay.addr.to_string(), 1);
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    answers_the_number(&model);
    let home = daemon_home(&model, &slack);
    let d = Daemon::start_env(&home, &[("ANIMA_DATABASE_URL", &through)]);
    slack.wait_connected_or(|| d.log());
    let total = 20;
    let event = |i: usize| {
        dm(
            &format!("D{i}"),
            &format!("1700000000.{i:06}"),
            &format!("number {i}"),
        )
    };
    let mut envelopes: Vec<(String, usize)> = Vec::new();
    for i in 0..total {
        envelopes.push((slack.send_event(event(i), &format!("Ev{i}"), 0), i));
        if i == total / 2 {
            relay.cut_all();
        }
    }
    std::thread::sleep(Duration::from_millis(200));
    relay.cut_all();
    // As Slack does: an event not acknowledged (anima could not store it) comes again.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut attempt = 0;
    while slack.posts().len() < total && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_secs(3));
        attempt += 1;
        let acked = slack.acks();
        let waiting: Vec<(String, usize)> = envelopes
            .iter()
            .filter(|(e, _)| !acked.contains(e))
            .cloned()
            .collect();
        envelopes.retain(|(e, _)| acked.contains(e));
        for (_, i) in waiting {
            envelopes.push((slack.send_event(event(i), &format!("Ev{i}"), attempt), i));
        }
    }
    std::thread::sleep(Duration::from_secs(1));
    let posts = slack.posts();
    for i in 0..total {
        let here = posts
            .iter()
            .filter(|p| p.channel == format!("D{i}"))
            .count();
        assert_eq!(here, 1, "D{i} answered once: {posts:#?}\n{}", d.log());
    }
    assert_eq!(
        query(
            &url,
            "SELECT count(*)::text FROM inbox WHERE status = 'done'"
        ),
        [total.to_string()]
    );
}
