//! A database of its own on the test PostgreSQL server (`ANIMA_TEST_POSTGRES_URL`), for the
//! tests that run anima on PostgreSQL; they say so and pass when no server is configured.

use std::str::FromStr;

pub const POSTGRES_URL: &str = "ANIMA_TEST_POSTGRES_URL";

/// The connection string of a new, empty database, or `None` (said on stderr) when no test
/// server is configured.
pub fn fresh_database() -> Option<String> {
    let Some(url) = std::env::var(POSTGRES_URL).ok().filter(|u| !u.is_empty()) else {
        eprintln!("PostgreSQL skipped: {POSTGRES_URL} is not set");
        return None;
    };
    Some(fresh_database_on(&url))
}

/// The connection string of a new, empty database on the server at `url`.
pub fn fresh_database_on(url: &str) -> String {
    off_runtime(|| fresh_database_made(url))
}

fn fresh_database_made(url: &str) -> String {
    let url = url.to_string();
    let name = format!("anima_test_{}", uuid::Uuid::new_v4().simple());
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let config = tokio_postgres::Config::from_str(&url).expect("a connection string");
        let (client, connection) = config
            .connect(tokio_postgres::NoTls)
            .await
            .expect("the test server answers");
        tokio::spawn(connection);
        client
            .batch_execute(&format!("CREATE DATABASE {name}"))
            .await
            .expect("a test database");
    });
    with_database(&url, &name)
}

/// `url` with its database replaced by `name`.
pub fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let root = match base.rfind('/') {
        Some(at) if base[..at].contains("//") && at > base.find("//").unwrap() + 1 => &base[..at],
        _ => base,
    };
    format!("{root}/{name}{query}")
}

/// Runs SQL on the database at `url` and returns the first column of each row, as text.
pub fn query(url: &str, sql: &str) -> Vec<String> {
    off_runtime(|| query_here(url, sql))
}

/// Runs `f`, which starts a runtime of its own, on a thread of its own when this one is
/// already inside a runtime (an async test), where it may not.
fn off_runtime<T: Send>(f: impl FnOnce() -> T + Send) -> T {
    if tokio::runtime::Handle::try_current().is_err() {
        return f();
    }
    std::thread::scope(|s| match s.spawn(f).join() {
        Ok(out) => out,
        Err(panic) => std::panic::resume_unwind(panic),
    })
}

fn query_here(url: &str, sql: &str) -> Vec<String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let config = tokio_postgres::Config::from_str(url).unwrap();
        let (client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
        tokio::spawn(connection);
        client
            .simple_query(sql)
            .await
            .unwrap()
            .into_iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
                _ => None,
            })
            .collect()
    })
}

/// Drops the database at this URL (one `fresh_database` made) when the test is done with it;
/// a failed test's is kept, to look into.
pub struct DropAfter(pub String);

impl Drop for DropAfter {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            drop_database(&self.0);
        }
    }
}

/// Drops a database `fresh_database` made, whoever is still connected to it.
pub fn drop_database(url: &str) {
    let Some(name) = url
        .split('?')
        .next()
        .and_then(|base| base.rsplit('/').next())
        .filter(|n| n.starts_with("anima_test_"))
    else {
        return;
    };
    let admin = std::env::var(POSTGRES_URL).unwrap_or_else(|_| with_database(url, "postgres"));
    query(
        &admin,
        &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
    );
}

/// `url` with its user and password replaced (`postgres://user:password@…`; no password when
/// `password` is empty).
pub fn as_user(url: &str, user: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a postgres:// URL");
    let host = rest.rsplit_once('@').map_or(rest, |(_, host)| host);
    match password {
        "" => format!("{scheme}://{user}@{host}"),
        p => format!("{scheme}://{user}:{p}@{host}"),
    }
}

/// A login role of its own on the test server, which may connect to the database at `url`
/// and nothing more (not even create in its `public` schema, whatever the server's version);
/// dropped with what it was granted when the test is done with it (made after the database's
/// `DropAfter`, it is dropped before the database).
pub struct Role {
    pub name: String,
    /// `url` as this role.
    pub url: String,
    admin: String,
    /// `url` as the test server's superuser.
    database: String,
}

impl Role {
    pub fn new(url: &str) -> Role {
        let name = format!(
            "anima_role_{}",
            &uuid::Uuid::new_v4().simple().to_string()[..12]
        );
        let password = format!("pw-{}", uuid::Uuid::new_v4().simple());
        let admin = std::env::var(POSTGRES_URL).unwrap_or_else(|_| with_database(url, "postgres"));
        query(
            &admin,
            &format!("CREATE ROLE {name} LOGIN PASSWORD '{password}'"),
        );
        query(url, "REVOKE CREATE ON SCHEMA public FROM PUBLIC");
        Role {
            url: as_user(url, &name, &password),
            name,
            admin,
            database: url.to_string(),
        }
    }
}

impl Drop for Role {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            query(&self.database, &format!("DROP OWNED BY {}", self.name));
            query(&self.admin, &format!("DROP ROLE {}", self.name));
        }
    }
}
