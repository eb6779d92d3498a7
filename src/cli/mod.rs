//! The command line: argument parsing and one function per command.
//!
//! Owns exit codes (0 success, 1 runtime failure, 2 bad usage or configuration) and the
//! wording of errors a person reads. Each command wires modules together; none holds logic
//! of its own that another command would need.

mod chat;
mod check;
mod check_daimons;
mod check_processes;
mod dossiers;
mod dream;
mod eval;
mod init;
mod inspect;
mod mind;
mod processes;
mod service;
mod slack;
mod state;
mod store;
mod tools;
mod users;
mod watch;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand};

use crate::config::StoreBackend;
use crate::config::{self, Config};
use crate::engine::BuildError;
use crate::memory::sqlite::Sqlite;
use crate::memory::Store;
use crate::telemetry::{self, LogFormat};

#[derive(Debug, Parser)]
#[command(
    name = "anima",
    version,
    about = "A Slack chat-bot daemon with an embedded soul engine"
)]
pub struct Cli {
    /// The configuration file (else $ANIMA_CONFIG, else ./anima.toml, else defaults).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Log format on stderr.
    #[arg(long, global = true, value_enum, default_value = "human")]
    pub log_format: LogFormat,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// A conversation in the terminal, through the same engine and store as Slack.
    Chat(chat::ChatArgs),
    /// The long-running Slack daemon.
    Run,
    /// Validate configuration, soul and process files, the database, the model provider and
    /// the Slack tokens; print every problem.
    Check {
        /// Ask Slack nothing: the tokens are checked by their form only.
        #[arg(long)]
        offline: bool,
    },
    /// Write the built-in soul, processes and a commented anima.toml into DIR for editing.
    Init(init::InitArgs),
    /// Run soul evaluations: scripted conversations with expectations, each run in a
    /// throwaway home; exit 1 when an eval falls short of its threshold.
    Eval(eval::EvalArgs),
    /// The inspector in a browser, without a daemon: prints its login URL.
    Inspect(inspect::InspectArgs),
    /// Dossiers: what the soul knows of the people and subjects it hears about.
    Dossiers {
        #[command(subcommand)]
        command: dossiers::DossiersCommand,
    },
    /// User models and their history.
    Users {
        #[command(subcommand)]
        command: users::UsersCommand,
    },
    /// Mental processes: the files, their graph, a thread's state.
    Processes {
        #[command(subcommand)]
        command: processes::ProcessesCommand,
    },
    /// Install, remove or describe anima as a service (systemd or launchd).
    Service {
        #[command(subcommand)]
        command: service::ServiceCommand,
    },
    /// The soul's state, read-only (works while the daemon runs).
    State(state::StateArgs),
    /// One memory consolidation now (works while the daemon runs); prints its report.
    Dream(dream::DreamArgs),
    /// The psychology substrate in numbers, for the operator (the model never sees them).
    Mind(mind::MindArgs),
    /// Setting up the Slack app: its manifest.
    Slack {
        #[command(subcommand)]
        command: slack::SlackCommand,
    },
    /// The store: copy a soul from SQLite into PostgreSQL.
    Store {
        #[command(subcommand)]
        command: store::StoreCommand,
    },
    /// The MCP tool servers of `[[tools.servers]]` and their tools.
    Tools {
        #[command(subcommand)]
        command: tools::ToolsCommand,
    },
    /// Follow the soul stream of the running daemon(s), one line per record (needs
    /// ANIMA_INSPECT_TOKEN, as the daemon does).
    Watch(watch::WatchArgs),
}

/// A failure with the exit code it deserves.
#[derive(Debug)]
pub enum Failure {
    /// Bad usage or invalid configuration: exit 2.
    Usage(String),
    /// Something went wrong at run time: exit 1.
    Runtime(String),
}

impl Failure {
    pub fn runtime(e: impl std::fmt::Display) -> Self {
        Failure::Runtime(e.to_string())
    }
}

impl From<BuildError> for Failure {
    fn from(e: BuildError) -> Self {
        match e {
            BuildError::Config(m) => Failure::Usage(m),
            BuildError::Runtime(m) => Failure::Runtime(m),
        }
    }
}

impl From<crate::daemon::DaemonError> for Failure {
    fn from(e: crate::daemon::DaemonError) -> Self {
        match e {
            crate::daemon::DaemonError::Usage(m) => Failure::Usage(m),
            crate::daemon::DaemonError::Runtime(m) => Failure::Runtime(m),
        }
    }
}

pub type CliResult = Result<(), Failure>;

/// Runs the parsed command line; prints errors and maps them to an exit code.
pub fn run(cli: Cli) -> ExitCode {
    let default_filter = match cli.command {
        Command::Run => "anima=info",
        // `chat` says a failed model call itself, once per turn: the retries' warnings and
        // the engine's would say it again (ANIMA_LOG shows them).
        Command::Chat(_) => "anima=warn,anima::llm::retry=error,anima::engine::commit=error",
        _ => "anima=warn",
    };
    telemetry::init(cli.log_format, default_filter);
    crate::tls::install();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("anima: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let result = runtime.block_on(dispatch(cli));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(msg)) => {
            eprintln!("anima: {msg}");
            ExitCode::from(2)
        }
        Err(Failure::Runtime(msg)) => {
            eprintln!("anima: {msg}");
            ExitCode::from(1)
        }
    }
}

async fn dispatch(cli: Cli) -> CliResult {
    let config_path = cli.config.as_deref();
    match cli.command {
        Command::Chat(args) => chat::run(config_path, args).await,
        Command::Run => Ok(crate::daemon::run(load_config(config_path)?).await?),
        Command::Check { offline } => check::run(config_path, offline).await,
        Command::Init(args) => init::run(args),
        Command::Eval(args) => eval::run(config_path, args).await,
        Command::Inspect(args) => inspect::run(config_path, args).await,
        Command::Users { command } => users::run(config_path, command).await,
        Command::Dossiers { command } => dossiers::run(config_path, command).await,
        Command::Processes { command } => processes::run(config_path, command).await,
        Command::Service { command } => service::run(config_path, command),
        Command::State(args) => state::run(config_path, args).await,
        Command::Dream(args) => dream::run(config_path, args).await,
        Command::Mind(args) => mind::run(config_path, args).await,
        Command::Slack { command } => slack::run(config_path, command),
        Command::Store { command } => store::run(config_path, command).await,
        Command::Tools { command } => tools::run(config_path, command).await,
        Command::Watch(args) => watch::run(config_path, args).await,
    }
}

/// Loads the configuration or fails with exit 2.
fn load_config(path: Option<&std::path::Path>) -> Result<Arc<Config>, Failure> {
    config::load(path)
        .map(Arc::new)
        .map_err(|e| Failure::Usage(e.to_string()))
}

/// "1 turn", "2 turns".
pub(crate) fn plural(n: u64, noun: &str) -> String {
    match n {
        1 => format!("1 {noun}"),
        n => format!("{n} {noun}s"),
    }
}

/// Opens the store if it exists, for commands that only read: they never create a SQLite
/// database (a PostgreSQL one is there to be used).
pub(crate) async fn open_existing_store(
    config: &Config,
) -> Result<Option<Arc<dyn Store>>, Failure> {
    if config.store.backend == StoreBackend::Sqlite && !config.db_path().exists() {
        return Ok(None);
    }
    open_store(config).await.map(Some)
}

/// Opens the existing store to read. SQLite's is opened without migrating it: a home with no
/// database yet, or one another version wrote, is the person's to fix (exit 2 for the
/// version).
pub(crate) async fn read_store(config: &Config) -> Result<Arc<dyn Store>, Failure> {
    if config.store.backend == StoreBackend::Postgres {
        return open_store(config).await;
    }
    let db = config.db_path();
    if !db.exists() {
        return Err(Failure::Runtime(format!(
            "no database at {} yet: the soul has not had a conversation (run `anima chat` or `anima run`)",
            db.display()
        )));
    }
    Sqlite::open_read_only(&db)
        .map(Sqlite::shared)
        .map_err(store_failure)
}

/// Opens the store `[store]` names. A missing connection string names the config file that
/// chose PostgreSQL.
pub(crate) async fn open_store(config: &Config) -> Result<Arc<dyn Store>, Failure> {
    crate::memory::open::open(&config.store, &config.db_path())
        .await
        .map_err(|e| match e {
            e if e.is_unset_url() => Failure::Usage(format!("{}: {e}", config.origin())),
            e => store_failure(e),
        })
}

/// A store that is newer than this anima, that cannot be reached or logged into, or whose
/// address is missing is a configuration problem (exit 2); anything else a runtime failure.
pub(crate) fn store_failure(e: crate::memory::StoreError) -> Failure {
    use crate::memory::StoreError as E;
    match e {
        e @ (E::TooNew { .. }
        | E::Outdated { .. }
        | E::TooNewDatabase { .. }
        | E::Connect { .. }
        | E::Unreachable { .. }
        | E::NotEmpty { .. }
        | E::HomeInUse { .. }) => Failure::Usage(e.to_string()),
        e => Failure::runtime(e),
    }
}
