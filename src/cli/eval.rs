//! `anima eval [PATH…]`: runs soul evaluations and reports them (see docs/evals.md).
//!
//! Reads every eval file first (a bad one: exit 2, every problem with its file and line),
//! then starts one child `anima eval --one-run FILE` per run, `--jobs` at a time: each run is
//! a process of its own (its throwaway home, its engine, its clock), so runs share nothing
//! and a run that dies is one failed run. Writes the table or `--json`, `--junit FILE`, and
//! keeps or compares a baseline in the home. Exit 0 when every eval meets its threshold, 1
//! when one falls short.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use clap::Args;
use futures_util::StreamExt;

use super::{load_config, CliResult, Failure};
use crate::config::Config;
use crate::eval::{self, run::Failed, Eval, EvalResult, Report};
use crate::toml_file::Problem;

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Eval files or folders of them (default: `[paths] evals_dir`).
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Runs of each eval (its threshold is the share that must pass).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Runs carried out at once (each in a process and a home of its own).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub jobs: u32,
    /// The model to run against (and to judge with), instead of `[llm] model`.
    #[arg(long, value_name = "M")]
    pub model: Option<String>,
    /// One JSON object on stdout instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Also write the results as JUnit XML into FILE, for CI.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Keep this run's results in the home as the baseline NAME.
    #[arg(long, value_name = "NAME")]
    pub save_baseline: Option<String>,
    /// Show each eval's pass rate in the baseline NAME and now.
    #[arg(long, value_name = "NAME")]
    pub compare: Option<String>,
    /// Carry out one run of this eval file and print its failures as JSON (what `anima eval`
    /// starts for each run).
    #[arg(long, hide = true, value_name = "FILE")]
    pub one_run: Option<PathBuf>,
}

pub async fn run(config_path: Option<&Path>, args: EvalArgs) -> CliResult {
    let config = load_config(config_path)?;
    if let Some(file) = &args.one_run {
        return one_run(&config, file, args.model.as_deref()).await;
    }
    for name in [&args.save_baseline, &args.compare].into_iter().flatten() {
        eval::baseline_name(name).map_err(Failure::Usage)?;
    }
    let baseline = match &args.compare {
        Some(name) => Some((name.as_str(), read_baseline(&config, name)?)),
        None => None,
    };
    let paths = if args.paths.is_empty() {
        vec![config.evals_dir.clone()]
    } else {
        args.paths.clone()
    };
    let evals = eval::find(&paths)
        .and_then(|files| eval::read_all(&files))
        .map_err(bad_files)?;

    let report = run_all(config_path, &args, &evals).await?;
    if args.json {
        let text = serde_json::to_string_pretty(&report).map_err(Failure::runtime)?;
        println!("{text}");
    } else {
        print!("{}", report.table());
    }
    if let Some((name, then)) = &baseline {
        let comparison = report.compare(then, name);
        // `--json` keeps stdout one object: the comparison goes beside it, on stderr.
        if args.json {
            eprint!("{comparison}");
        } else {
            print!("\n{comparison}");
        }
    }
    if let Some(file) = &args.junit {
        std::fs::write(file, report.junit())
            .map_err(|e| Failure::Runtime(format!("cannot write {}: {e}", file.display())))?;
    }
    if let Some(name) = &args.save_baseline {
        save_baseline(&config, name, &report)?;
    }
    let _ = std::io::stdout().flush();
    match report.failed {
        0 => Ok(()),
        n => Err(Failure::Runtime(format!(
            "{} fell short of {}",
            if n == 1 {
                "1 eval".to_string()
            } else {
                format!("{n} evals")
            },
            if n == 1 {
                "its threshold"
            } else {
                "their thresholds"
            }
        ))),
    }
}

/// Every problem of the eval files, one a line: exit 2.
fn bad_files(problems: Vec<Problem>) -> Failure {
    let lines: Vec<String> = problems.iter().map(Problem::to_string).collect();
    Failure::Usage(format!("bad eval file:\n{}", lines.join("\n")))
}

/// What a child run does: the eval's one run, its failures as one JSON line on stdout.
async fn one_run(config: &Config, file: &Path, model: Option<&str>) -> CliResult {
    let e = eval::file::read(file).map_err(bad_files)?;
    let failures = eval::run::run(config, model, &e).await;
    let line = serde_json::to_string(&failures).map_err(Failure::runtime)?;
    println!("{line}");
    Ok(())
}

/// Every eval `--repeat` times, `--jobs` runs at once, with a progress line on stderr.
async fn run_all(
    config_path: Option<&Path>,
    args: &EvalArgs,
    evals: &[Eval],
) -> Result<Report, Failure> {
    let exe = std::env::current_exe().map_err(|e| {
        Failure::Runtime(format!(
            "cannot find the anima binary to run evals with: {e}"
        ))
    })?;
    let repeat = args.repeat as usize;
    let total = evals.len() * repeat;
    let jobs: Vec<(usize, usize)> = (0..evals.len())
        .flat_map(|e| (0..repeat).map(move |r| (e, r)))
        .collect();
    let mut results: Vec<Vec<Option<Vec<Failed>>>> = vec![vec![None; repeat]; evals.len()];
    let progress = Progress::new(total);
    let mut runs = futures_util::stream::iter(jobs)
        .map(|(e, r)| {
            let exe = exe.clone();
            async move {
                let failures = child_run(&exe, config_path, &evals[e], args.model.as_deref()).await;
                (e, r, failures)
            }
        })
        .buffer_unordered(args.jobs as usize);
    let mut failing = 0;
    let mut done = 0;
    while let Some((e, r, failures)) = runs.next().await {
        done += 1;
        if !failures.is_empty() {
            failing += 1;
        }
        progress.show(done, failing, &evals[e].name, r + 1, failures.is_empty());
        results[e][r] = Some(failures);
    }
    progress.finish();
    let evals = evals
        .iter()
        .zip(results)
        .map(|(e, runs)| {
            let runs = runs.into_iter().map(Option::unwrap_or_default).collect();
            EvalResult::new(&e.name, &e.file, e.threshold, runs)
        })
        .collect();
    Ok(Report::new(evals))
}

/// One run in a child process: its failures, or one saying why the run could not be had.
async fn child_run(
    exe: &Path,
    config_path: Option<&Path>,
    e: &Eval,
    model: Option<&str>,
) -> Vec<Failed> {
    let mut cmd = tokio::process::Command::new(exe);
    if let Some(c) = config_path {
        cmd.arg("--config").arg(c);
    }
    cmd.arg("eval").arg("--one-run").arg(&e.file);
    if let Some(m) = model {
        cmd.arg("--model").arg(m);
    }
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let whole = |got: String| {
        vec![Failed {
            turn: 0,
            expectation: eval::run::RUN_COMPLETES.into(),
            got,
        }]
    };
    let out = match cmd.output().await {
        Ok(out) => out,
        Err(e) => return whole(format!("cannot start {}: {e}", exe.display())),
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    match stdout
        .lines()
        .last()
        .map(serde_json::from_str::<Vec<Failed>>)
    {
        Some(Ok(failures)) if out.status.success() => failures,
        _ => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(3).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            whole(format!(
                "the run ended with {}: {}",
                out.status,
                tail.join(" / ")
            ))
        }
    }
}

/// The progress line on stderr: rewritten in place on a terminal, a line per run otherwise.
struct Progress {
    total: usize,
    terminal: bool,
}

impl Progress {
    fn new(total: usize) -> Progress {
        Progress {
            total,
            terminal: std::io::stderr().is_terminal(),
        }
    }

    fn show(&self, done: usize, failing: usize, name: &str, run: usize, passed: bool) {
        let mut err = std::io::stderr().lock();
        let _ = if self.terminal {
            write!(
                err,
                "\r\x1b[2K[{done}/{}] runs done, {failing} failing",
                self.total
            )
        } else {
            writeln!(
                err,
                "[{done}/{}] {name}, run {run}: {}",
                self.total,
                if passed { "passed" } else { "failed" }
            )
        };
        let _ = err.flush();
    }

    fn finish(&self) {
        if self.terminal {
            eprintln!();
        }
    }
}

fn read_baseline(config: &Config, name: &str) -> Result<Report, Failure> {
    let path = eval::baseline_path(&config.home, name);
    let text = std::fs::read_to_string(&path).map_err(|e| {
        Failure::Usage(format!(
            "no baseline {name} to compare with ({}: {e}); keep one with `anima eval --save-baseline {name}`",
            path.display()
        ))
    })?;
    serde_json::from_str(&text).map_err(|e| {
        Failure::Usage(format!(
            "{} is not a baseline anima wrote: {e}",
            path.display()
        ))
    })
}

fn save_baseline(config: &Config, name: &str, report: &Report) -> CliResult {
    let path = eval::baseline_path(&config.home, name);
    let cannot = |e: std::io::Error| {
        Failure::Runtime(format!(
            "cannot keep the baseline at {}: {e}",
            path.display()
        ))
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(cannot)?;
    }
    let text = serde_json::to_string_pretty(report).map_err(Failure::runtime)?;
    std::fs::write(&path, text + "\n").map_err(cannot)?;
    eprintln!("Kept as the baseline {name}: {}", path.display());
    Ok(())
}
