use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    anima::cli::run(anima::cli::Cli::parse())
}
