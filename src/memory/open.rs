//! Opening the store `[store]` names: SQLite under the soul's home (the default), or the
//! PostgreSQL database at `ANIMA_DATABASE_URL`.

use std::path::Path;
use std::sync::Arc;

use super::postgres::Postgres;
use super::sqlite::Sqlite;
use super::{Store, StoreError};
use crate::config::secret::Secret;
use crate::config::{StoreBackend, StoreConfig, DATABASE_URL_VAR};

/// Opens (creating and migrating if needed) the store. SQLite's file is `sqlite_path`.
pub async fn open(config: &StoreConfig, sqlite_path: &Path) -> Result<Arc<dyn Store>, StoreError> {
    open_with(config, sqlite_path, None).await
}

/// `open`, with PostgreSQL's connection string given rather than read from the environment
/// (`None`: from the environment): for a process that holds several databases, as tests do.
pub async fn open_with(
    config: &StoreConfig,
    sqlite_path: &Path,
    database_url: Option<&Secret>,
) -> Result<Arc<dyn Store>, StoreError> {
    match config.backend {
        StoreBackend::Sqlite => {
            let path = sqlite_path.to_path_buf();
            let store = tokio::task::spawn_blocking(move || Sqlite::open(&path))
                .await
                .map_err(|e| StoreError::Task(e.to_string()))??;
            Ok(store.shared())
        }
        StoreBackend::Postgres => {
            // The soul's home (SQLite's folder) exists on every backend: its locks and the
            // user-model repository live there.
            if let Some(home) = sqlite_path.parent() {
                std::fs::create_dir_all(home).map_err(|source| StoreError::CreateDir {
                    path: home.to_path_buf(),
                    source,
                })?;
            }
            let url = match database_url {
                Some(url) => url.clone(),
                None => self::database_url()?,
            };
            let store = Postgres::connect(url.expose(), config.pool_size as usize).await?;
            Ok(Arc::new(store))
        }
    }
}

/// The PostgreSQL connection string, from the environment only.
pub fn database_url() -> Result<Secret, StoreError> {
    Secret::from_env(DATABASE_URL_VAR).ok_or_else(|| StoreError::Connect {
        place: DATABASE_URL_VAR.into(),
        why: "not set: with [store] backend = \"postgres\" the connection string comes from it (postgres://user:password@host:port/db)".into(),
    })
}

impl StoreError {
    /// Whether this is [`database_url`]'s error: the connection string is not set.
    pub fn is_unset_url(&self) -> bool {
        matches!(self, StoreError::Connect { place, .. } if place == DATABASE_URL_VAR)
    }
}
