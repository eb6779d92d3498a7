//! `anima store copy --to postgres`: moves a soul that grew up on SQLite into the empty
//! PostgreSQL database at `ANIMA_DATABASE_URL`, all of it or nothing, and says what it copied.

use std::path::Path;

use clap::{Subcommand, ValueEnum};

use super::{load_config, CliResult, Failure};
use crate::memory::postgres::{self, Postgres};
use crate::memory::sqlite::Sqlite;

#[derive(Debug, Subcommand)]
pub enum StoreCommand {
    /// Copy everything in the SQLite store of [paths] home (conversations, processes, users
    /// and their model versions, soul state and counters, cognitive state and its moves,
    /// journal, dreams, psyche, feedback) into the empty database at ANIMA_DATABASE_URL, in
    /// one transaction.
    Copy {
        /// The backend to copy into.
        #[arg(long, value_enum)]
        to: Target,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Target {
    Postgres,
}

pub async fn run(config_path: Option<&Path>, command: StoreCommand) -> CliResult {
    let StoreCommand::Copy {
        to: Target::Postgres,
    } = command;
    let config = load_config(config_path)?;
    let db = config.db_path();
    if !db.exists() {
        return Err(Failure::Usage(format!(
            "no SQLite store to copy: {} does not exist",
            db.display()
        )));
    }
    let from = Sqlite::open(&db).map_err(super::store_failure)?;
    let url = crate::memory::open::database_url().map_err(super::store_failure)?;
    let to = Postgres::connect(url.expose(), 2)
        .await
        .map_err(super::store_failure)?;
    let copied = postgres::copy_from_sqlite(from.blocking(), &to)
        .await
        .map_err(super::store_failure)?;
    let total: u64 = copied.iter().map(|(_, n)| n).sum();
    for (kind, n) in &copied {
        println!("{n:>8}  {kind}");
    }
    println!(
        "copied {total} rows from {} into {}; every count checked",
        db.display(),
        to.place()
    );
    Ok(())
}
