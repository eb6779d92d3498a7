//! The PostgreSQL backend behind the store's faces: a pool of connections (deadpool-postgres
//! over tokio-postgres), its own numbered migrations, and one file per concern implementing
//! that concern's face.
//!
//! Owns every PostgreSQL statement. Promises what the SQLite store promises, by PostgreSQL's
//! own means: a unique key makes a message's retries one row, row locks and `SKIP LOCKED`
//! make counters and claims exact under concurrency, and what is one transaction on SQLite is
//! one transaction here. Knows nothing about prompts, providers or Slack.

mod budgets;
mod claims;
mod conninfo;
mod copy;
mod dossiers;
mod dreams;
mod errors;
mod forget;
mod inbox;
mod locks;
mod migrate;
mod operator;
mod psyche;
mod records;
mod states;
mod tls;
mod traces;
mod turns;
mod wire;
mod working;

use std::sync::atomic::{AtomicU64, Ordering};

use deadpool_postgres::{GenericClient, Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use tokio_postgres::types::ToSql;
use tokio_postgres::{NoTls, Row};

use super::{StoreError, WriteHealth};

pub use copy::{copy_from_sqlite, Copied};
pub use errors::describe;
pub use migrate::SCHEMA_VERSION;

/// The store in a PostgreSQL database.
pub struct Postgres {
    pool: Pool,
    /// "PostgreSQL user@host:port/db": for logs and `anima check`; never the password.
    place: String,
    health: WriteHealth,
    writes: AtomicU64,
    /// Names this opening of the store (see `SqliteStore::instance`).
    instance: String,
}

/// How long the server lets a transaction sit idle before ending it (see `connect_with`):
/// shorter than the shortest claim lease the configuration accepts (5 s).
const STALLED_TRANSACTION: std::time::Duration = std::time::Duration::from_secs(4);

impl Postgres {
    /// Connects to the database at `url` with a pool of `pool_size` connections, and migrates
    /// it (once, however many processes start together). Every failure says which part of the
    /// connection string is wrong, and never shows the password.
    pub async fn connect(url: &str, pool_size: usize) -> Result<Postgres, StoreError> {
        let conninfo = conninfo::parse(url)?;
        Postgres::open(conninfo.config, &conninfo.tls, pool_size).await
    }

    /// `connect`, with the connection string already read (its `sslmode` as libpq means it:
    /// `require` without a check of the certificate).
    pub async fn connect_with(
        config: tokio_postgres::Config,
        pool_size: usize,
    ) -> Result<Postgres, StoreError> {
        let tls = tls::Settings::of(config.get_ssl_mode());
        Postgres::open(config, &tls, pool_size).await
    }

    async fn open(
        mut config: tokio_postgres::Config,
        tls: &tls::Settings,
        pool_size: usize,
    ) -> Result<Postgres, StoreError> {
        let place = place(&config);
        // A transaction of anima's waits on nothing but the server between its statements: one
        // left open for seconds belongs to a process that stalled (stopped, swapped out, cut
        // off), and the rows it holds would stall every other daemon. The server ends it
        // within the shortest claim lease, so the daemons that take over are not blocked.
        //
        // Every statement anima sends (and every one inside its functions) finds its rows by a
        // key or a short range after one: its best plan does not hang on the values, so each
        // is planned once per connection. PostgreSQL's default plans a statement's first five
        // runs with their values and then goes on doing so whenever the generic plan's
        // estimate looks dearer, as a range on an id always does (a turn's window): a turn's
        // statements were planned again at every turn. A limit a plan hangs on is written into
        // the statement, not bound (a bound one is planned as a tenth of the table), and a
        // filter that may be absent (`$2 IS NULL OR person = $2`) makes two statements. No
        // statement of anima's gains from compiling its plan (JIT), which a generic plan's
        // estimate could set off.
        let options = format!(
            "{} -c idle_in_transaction_session_timeout={} -c plan_cache_mode=force_generic_plan \
             -c jit=off",
            config.get_options().unwrap_or_default(),
            STALLED_TRANSACTION.as_millis()
        );
        config.options(options.trim_start());
        let instance = super::instance_name();
        let name = match config.get_application_name() {
            Some(theirs) => theirs.to_string(),
            None => locks::name(&instance),
        };
        config.application_name(&name);
        let recycling = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let manager = match tls::connector(tls, &place)? {
            Some(tls) => Manager::from_config(config, tls, recycling),
            None => Manager::from_config(config, NoTls, recycling),
        };
        let pool = Pool::builder(manager)
            .max_size(pool_size.max(1))
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .build()
            .map_err(|e| StoreError::Connect {
                place: place.clone(),
                why: e.to_string(),
            })?;
        locks::watch(&pool, name, place.clone());
        let store = Postgres {
            pool,
            place,
            health: WriteHealth::default(),
            writes: AtomicU64::new(0),
            instance,
        };
        let mut client = store.client().await?;
        migrate::migrate(&mut client, &store.place).await?;
        keep_servers_time(&client).await?;
        Ok(store)
    }

    /// Connects without keeping anything and reports the server's version and the schema's;
    /// a schema newer than this anima's is refused, as at start.
    pub async fn inspect(url: &str) -> Result<(String, String, i64), StoreError> {
        let (client, running, place) = Postgres::once(url).await?;
        let server: String = client.query_one("SHOW server_version", &[]).await?.get(0);
        let found = migrate::version(&client).await;
        running.abort();
        let found = found?;
        if found > SCHEMA_VERSION {
            return Err(StoreError::TooNewDatabase {
                place,
                found,
                supported: SCHEMA_VERSION,
            });
        }
        Ok((place, server, found))
    }

    /// `inspect`, after proving the role can do what anima needs (for `anima check`): create
    /// and migrate the schema, or write to every table of the current one, in a transaction
    /// that is rolled back.
    pub async fn prove(url: &str) -> Result<(String, String, i64), StoreError> {
        let (mut client, running, place) = Postgres::once(url).await?;
        let server = client.query_one("SHOW server_version", &[]).await;
        let proved = migrate::prove(&mut client, &place).await;
        running.abort();
        Ok((place, server?.get(0), proved?))
    }

    /// One connection outside any pool, and the task that runs it.
    async fn once(
        url: &str,
    ) -> Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>, String), StoreError> {
        let conninfo::Conninfo { mut config, tls } = conninfo::parse(url)?;
        config.connect_timeout(std::time::Duration::from_secs(5));
        let place = place(&config);
        let failed = |e: tokio_postgres::Error| errors::connect_error(&place, &e);
        let (client, running) = match tls::connector(&tls, &place)? {
            Some(tls) => {
                let (client, connection) = config.connect(tls).await.map_err(failed)?;
                (client, tokio::spawn(async move { drop(connection.await) }))
            }
            None => {
                let (client, connection) = config.connect(NoTls).await.map_err(failed)?;
                (client, tokio::spawn(async move { drop(connection.await) }))
            }
        };
        Ok((client, running, place))
    }

    /// A connection from the pool. A server that cannot be reached, a database that does not
    /// exist or credentials it refuses is one clear error each.
    pub(super) async fn client(&self) -> Result<Object, StoreError> {
        self.pool.get().await.map_err(|e| match e {
            deadpool_postgres::PoolError::Backend(e) => errors::connect_error(&self.place, &e),
            e => StoreError::Unreachable {
                place: self.place.clone(),
                why: e.to_string(),
            },
        })
    }

    /// Remembers a write's outcome for the health check, and counts it.
    pub(super) fn noted<T>(&self, result: Result<T, StoreError>) -> Result<T, StoreError> {
        self.writes.fetch_add(1, Ordering::Relaxed);
        self.health.note(&result, &self.place);
        result
    }

    pub(super) fn instance(&self) -> &str {
        &self.instance
    }

    pub fn place(&self) -> &str {
        &self.place
    }

    pub(super) fn health(&self) -> &WriteHealth {
        &self.health
    }

    pub(super) fn writes(&self) -> u64 {
        self.writes.load(Ordering::Relaxed)
    }
}

/// Sets this process's clock (`memory::now_ms`) to the server's: every daemon of the soul
/// keeps one time, whatever its machine's clock says. Asked at connect and at every heartbeat,
/// timing one round trip (the statement is prepared first), whose midpoint is taken for the
/// moment the server answered. A later sample moves the clock only when it differs by more
/// than its own uncertainty (half its round trip) and a few milliseconds: jitter never steps the
/// soul's time back and forth, a machine's clock that jumped is followed.
pub(super) async fn keep_servers_time(client: &impl GenericClient) -> Result<(), StoreError> {
    static SET: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let now = client
        .prepare_cached("SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint")
        .await?;
    let before = crate::memory::machine_us();
    let server: i64 = client.query_one(&now, &[]).await?.get(0);
    let after = crate::memory::machine_us();
    let offset = server - (before + after) / 2;
    let moved = (offset - crate::memory::clock_offset_us()).abs();
    if SET.swap(true, Ordering::Relaxed) && moved <= (after - before) / 2 + 5_000 {
        return Ok(());
    }
    if offset.abs() > 1_000_000 && !SAID.swap(true, Ordering::Relaxed) {
        tracing::warn!(
            offset_ms = offset / 1000,
            "this machine's clock is off the database server's; anima keeps the server's time"
        );
    }
    crate::memory::set_clock_offset(offset);
    Ok(())
}

/// A fence refused a write (SQLSTATE AN409, `anima_fence` or `anima_fence_row`): another
/// daemon holds the conversation now (the server's detail names it, else `conversation`).
pub(super) fn fenced(e: tokio_postgres::Error, conversation: &str) -> StoreError {
    match e.as_db_error() {
        Some(db) if db.code().code() == "AN409" => StoreError::Fenced {
            conversation: db.detail().unwrap_or(conversation).to_string(),
        },
        _ => e.into(),
    }
}

/// A read-only transaction whose statements all see one snapshot (SQLite's reads run under its
/// lock: one state, never half of a write).
pub(super) async fn snapshot(
    client: &mut Object,
) -> Result<deadpool_postgres::Transaction<'_>, StoreError> {
    Ok(client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await?)
}

/// Statements prepared once per connection and kept with it (deadpool's cache), so each is one
/// round trip, not a prepare and then an execute. The faces send every statement through these
/// (the psyche's, which it pipelines, through `prepare_cached` itself); the copy's, built per
/// row, and the migrations' are not kept.
#[async_trait::async_trait]
pub(super) trait Prepared: GenericClient {
    async fn rows(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        let statement = self.prepare_cached(sql).await?;
        self.query(&statement, params).await
    }

    async fn row(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, tokio_postgres::Error> {
        let statement = self.prepare_cached(sql).await?;
        self.query_one(&statement, params).await
    }

    async fn maybe_row(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, tokio_postgres::Error> {
        let statement = self.prepare_cached(sql).await?;
        self.query_opt(&statement, params).await
    }

    async fn run(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, tokio_postgres::Error> {
        let statement = self.prepare_cached(sql).await?;
        self.execute(&statement, params).await
    }
}

impl<T: GenericClient> Prepared for T {}

/// "PostgreSQL postgres@127.0.0.1:5432/anima": who, where, which database; no password.
fn place(c: &tokio_postgres::Config) -> String {
    let host = c
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(name) => name.clone(),
            tokio_postgres::config::Host::Unix(path) => path.display().to_string(),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = c.get_ports().first().copied().unwrap_or(5432);
    format!(
        "PostgreSQL {}@{host}:{port}/{}",
        c.get_user().unwrap_or("?"),
        c.get_dbname().unwrap_or(c.get_user().unwrap_or("?"))
    )
}
