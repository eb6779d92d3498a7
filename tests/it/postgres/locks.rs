//! A lock held by a session that does not end: a copy lost with its connection open lets go
//! within its idle limit, and whoever waits for a lock (a copy, a daemon) says for whom.

use super::*;

/// A copy stalled in its transaction (the journal's rows each take a while), on a connection
/// through a relay the test can freeze.
fn a_copy_in_its_transaction(home: &Home, url: &str, through: &str) -> std::process::Child {
    tokio::runtime::Runtime::new()
        .unwrap()
        .block_on(anima::memory::postgres::Postgres::connect(url, 1))
        .unwrap();
    query(
        url,
        "CREATE FUNCTION stall() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN PERFORM pg_sleep(1); RETURN NEW; END $$;
         CREATE TRIGGER stall BEFORE INSERT ON journal FOR EACH ROW EXECUTE FUNCTION stall()",
    );
    let mut copy = anima_command(
        &home.config(),
        home.dir.path(),
        &["store", "copy", "--to", "postgres"],
    );
    copy.env("ANIMA_DATABASE_URL", through);
    let child = spawn(&mut copy);
    let stalled = "SELECT count(*)::text FROM pg_stat_activity
                   WHERE datname = current_database() AND wait_event = 'PgSleep'";
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while query(url, stalled) != ["1"] {
        assert!(
            std::time::Instant::now() < deadline,
            "the copy never reached the journal"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

/// `child`'s exit and its stderr, or a failure saying what it printed if it is still running
/// after `secs` (a hang guard, not a measure).
fn finished(mut child: std::process::Child, secs: u64, what: &str) -> (i32, String) {
    let deadline = std::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            return (status.code().unwrap_or(-1), stderr);
        }
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{what} still waits after {secs} s: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// SIGKILL while the link is dead: the server never hears the copy go and keeps its session,
/// its transaction and its exclusive locks. The next copy says whom it waits for, and the
/// server ends the lost one's transaction within the copy's idle limit.
#[test]
fn a_copy_lost_with_its_connection_open_lets_the_next_one_through() {
    let Some(url) = fresh_database() else { return };
    let _dropped = DropAfter(url.clone());
    let Some((relay, through)) = support::relay::to_database(&url) else {
        return eprintln!("skipped: the test server is not on TCP");
    };
    let model = FakeModel::start();
    let home = a_soul_on_sqlite_with_a_day(&model);
    let mut lost = a_copy_in_its_transaction(&home, &url, &through);
    relay.freeze();
    lost.kill().unwrap();
    lost.wait().unwrap();
    let mut again = anima_command(
        &home.config(),
        home.dir.path(),
        &["store", "copy", "--to", "postgres"],
    );
    again.env("ANIMA_DATABASE_URL", &url);
    let (status, stderr) = finished(spawn(&mut again), 120, "the second copy");
    assert_eq!(status, 0, "{stderr}");
    assert!(
        stderr.contains("waiting for a lock held by pid") && stderr.contains("idle in transaction"),
        "{stderr}"
    );
    assert_eq!(query(&url, "SELECT entry FROM journal"), ["a day"]);
}

/// A daemon whose intake waits behind a session holding the inbox says so, and answers once it
/// is let go.
#[test]
fn a_daemon_waiting_on_a_lock_says_whose_and_goes_on() {
    let Some(url) = fresh_database() else { return };
    let _dropped = DropAfter(url.clone());
    let (model, slack) = (FakeModel::start(), FakeSlack::start());
    model.reply(&answer("Enfin 🙂"));
    let home = daemon_home(&model, &slack);
    let mut d = Daemon::start_env(&home, &[("ANIMA_DATABASE_URL", &url)]);
    slack.wait_connected_or(|| d.log());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let holder = runtime.block_on(async {
        let config: tokio_postgres::Config = url.parse().unwrap();
        let (client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        client
            .batch_execute(
                "SET application_name = 'an operator''s psql';
                 BEGIN; LOCK TABLE inbox IN EXCLUSIVE MODE",
            )
            .await
            .unwrap();
        client
    });
    slack.send_event(dm("D1", "1700000000.000100", "tu es là ?"), "Ev1", 0);
    let said = d.wait_log("waiting for a lock held by pid", 60);
    assert!(said.contains("an operator's psql"), "{said}");
    assert!(slack.posts().is_empty(), "nothing answered behind the lock");
    runtime.block_on(holder.batch_execute("ROLLBACK")).unwrap();
    slack.wait(30, "the reply", |s| !s.posts().is_empty());
    assert_eq!(slack.posts().len(), 1, "{:?}", slack.posts());
    assert_eq!(d.terminate(), 0, "{}", d.log());
}
