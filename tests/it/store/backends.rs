//! The backends a conformance test runs on, each store fresh and empty.

use std::str::FromStr;
use std::sync::Arc;

use anima::memory::postgres::Postgres;
use anima::memory::sqlite::Sqlite;

/// The variable naming a PostgreSQL server the tests may create databases on.
pub const POSTGRES_URL: &str = "ANIMA_TEST_POSTGRES_URL";

/// One fresh store on one backend; the temporary folder lives as long as it does.
pub struct Fresh<S> {
    pub name: &'static str,
    pub store: Arc<S>,
    _dir: Option<tempfile::TempDir>,
    /// Dropped after the store (fields drop in order).
    _database: Option<Dropped>,
}

/// A test database, dropped when its test is done with it (whoever is still connected); a
/// failed test's is kept, to look into.
struct Dropped {
    server: String,
    name: String,
}

impl Drop for Dropped {
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let (server, name) = (self.server.clone(), self.name.clone());
        // On a thread and a runtime of its own: the test's runtime may be the one dropping it.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let config = tokio_postgres::Config::from_str(&server).unwrap();
                let (client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
                tokio::spawn(connection);
                client
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await
                    .unwrap();
            })
        });
        dropped.join().expect("the test database is dropped");
    }
}

/// A fresh SQLite store.
pub fn sqlite() -> Fresh<Sqlite> {
    let dir = tempfile::tempdir().unwrap();
    let store = Sqlite::open(&dir.path().join("anima.db")).unwrap();
    Fresh {
        name: "sqlite",
        store: Arc::new(store),
        _dir: Some(dir),
        _database: None,
    }
}

/// A fresh PostgreSQL store in a database of its own, or `None` (said once per test) when no
/// server is configured.
pub async fn postgres() -> Option<Fresh<Postgres>> {
    let Some(url) = std::env::var(POSTGRES_URL).ok().filter(|u| !u.is_empty()) else {
        eprintln!("PostgreSQL skipped: {POSTGRES_URL} is not set");
        return None;
    };
    let name = format!("anima_test_{}", uuid::Uuid::new_v4().simple());
    let admin = tokio_postgres::Config::from_str(&url).expect("a PostgreSQL connection string");
    let (client, connection) = admin
        .connect(tokio_postgres::NoTls)
        .await
        .expect("the test server answers");
    tokio::spawn(connection);
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .expect("a test database");
    let mut config = admin.clone();
    config.dbname(&name);
    let store = Postgres::connect_with(config, 4).await.unwrap();
    Some(Fresh {
        name: "postgres",
        store: Arc::new(store),
        _dir: None,
        _database: Some(Dropped { server: url, name }),
    })
}

/// A second daemon's store on `fresh`'s database (another process would open the same).
pub async fn another(fresh: &Fresh<Postgres>) -> Postgres {
    let database = fresh._database.as_ref().expect("a PostgreSQL store");
    let mut config = tokio_postgres::Config::from_str(&database.server).unwrap();
    config.dbname(&database.name);
    Postgres::connect_with(config, 2).await.unwrap()
}

/// The sessions on `fresh`'s database that sit inside a transaction with nothing running.
pub async fn idle_in_transaction(fresh: &Fresh<Postgres>) -> i64 {
    let database = fresh._database.as_ref().expect("a PostgreSQL store");
    let config = tokio_postgres::Config::from_str(&database.server).unwrap();
    let (client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity
             WHERE datname = $1 AND state LIKE 'idle in transaction%'",
            &[&database.name],
        )
        .await
        .unwrap()
        .get(0)
}

/// Runs `check` on a fresh store of every backend available.
#[macro_export]
macro_rules! on_every_backend {
    (|$s:ident, $name:ident| $body:expr) => {{
        {
            let fresh = $crate::store::backends::sqlite();
            let ($s, $name) = (&fresh.store, fresh.name);
            $body;
        }
        if let Some(fresh) = $crate::store::backends::postgres().await {
            let ($s, $name) = (&fresh.store, fresh.name);
            $body;
        }
    }};
}
