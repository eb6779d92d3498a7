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
}

/// A fresh SQLite store.
pub fn sqlite() -> Fresh<Sqlite> {
    let dir = tempfile::tempdir().unwrap();
    let store = Sqlite::open(&dir.path().join("anima.db")).unwrap();
    Fresh {
        name: "sqlite",
        store: Arc::new(store),
        _dir: Some(dir),
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
    })
}

/// Runs `check` on a fresh store of every backend available.
#[macro_export]
macro_rules! on_every_backend {
    (|$s:ident, $name:ident| $body:expr) => {{
        {
            let fresh = $crate::backends::sqlite();
            let ($s, $name) = (&fresh.store, fresh.name);
            $body;
        }
        if let Some(fresh) = $crate::backends::postgres().await {
            let ($s, $name) = (&fresh.store, fresh.name);
            $body;
        }
    }};
}
