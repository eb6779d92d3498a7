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
    match config.backend {
        StoreBackend::Sqlite => {
            let path = sqlite_path.to_path_buf();
            let store = tokio::task::spawn_blocking(move || Sqlite::open(&path))
                .await
                .map_err(|e| StoreError::Task(e.to_string()))??;
            Ok(store.shared())
        }
        StoreBackend::Postgres => {
            let url = database_url()?;
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
