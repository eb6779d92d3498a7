//! `anima chat`: one message per line on stdin, one reply per turn on stdout.

use std::io::{IsTerminal, Write};
use std::path::Path;

use clap::Args;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::{load_config, CliResult, Failure};
use crate::engine::{Engine, Message, Perception, Speech, TurnOutcome};

#[derive(Debug, Args)]
pub struct ChatArgs {
    /// The conversation to continue (a thread id; the same id keeps its memory across runs).
    #[arg(long, default_value = "terminal")]
    pub thread: String,
    /// Who is talking (names the user model).
    #[arg(long)]
    pub user: Option<String>,
    /// Print the internal monologue, checks and state changes on stderr.
    #[arg(long)]
    pub show_thoughts: bool,
    /// One line of JSON per turn on stdout.
    #[arg(long)]
    pub json: bool,
    /// Print the reply as the model writes it (the default when stdout is a terminal; not
    /// with --json). The model is asked to stream.
    #[arg(long)]
    pub stream: bool,
}

pub async fn run(config_path: Option<&Path>, args: ChatArgs) -> CliResult {
    let mut config = load_config(config_path)?;
    let stream = !args.json && (args.stream || std::io::stdout().is_terminal());
    if stream && !config.llm.stream {
        let mut streaming = (*config).clone();
        streaming.llm.stream = true;
        config = std::sync::Arc::new(streaming);
    }
    let engine = Engine::build(&config)
        .await
        .map_err(super::Failure::from)?
        .start_tools();

    let name = args
        .user
        .clone()
        .or_else(|| std::env::var("USER").ok())
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| "you".to_string());
    let user_id = format!("terminal:{}", crate::memory::slug(&name, "user"));
    let interactive = std::io::stdin().is_terminal();
    // Said once, at any log level: who answers, through which provider and model.
    let soul = engine.library().current().soul.clone();
    eprintln!(
        "Talking to {}{} through {} ({}).{}",
        soul.name(),
        if soul.is_built_in() {
            " (the soul built into anima)"
        } else {
            ""
        },
        engine.provider().name(),
        engine.provider().model(),
        if interactive {
            " One message per line; Ctrl-D ends."
        } else {
            ""
        }
    );

    let mut lines = BufReader::new(tokio::io::stdin()).lines();
    loop {
        if interactive {
            eprint!("> ");
        }
        let line = match lines.next_line().await {
            Ok(Some(line)) => line,
            Ok(None) => break,
            Err(e) => return Err(Failure::Runtime(format!("reading stdin: {e}"))),
        };
        if line.trim().is_empty() {
            continue;
        }
        let outcome = engine
            .perceive(&Perception::Message(Message {
                thread: args.thread.clone(),
                user_id: user_id.clone(),
                display_name: name.clone(),
                text: line,
                attachments: Vec::new(),
                source: None,
                inbox_id: None,
                claim: None,
                newer: None,
                speech: stream.then(|| {
                    Speech::new(|text| {
                        let mut out = std::io::stdout().lock();
                        let _ = out.write_all(text.as_bytes());
                        let _ = out.flush();
                    })
                }),
            }))
            .await
            .map_err(Failure::runtime)?;
        if let Some(err) = &outcome.error {
            eprintln!("anima: model error: {err}");
        }
        if args.show_thoughts {
            show_thoughts(&outcome);
        }
        print_outcome(&outcome, args.json)?;
    }
    engine.flush_traces().await;
    engine.stop_tools().await;
    Ok(())
}

fn print_outcome(outcome: &TurnOutcome, json: bool) -> CliResult {
    let mut out = std::io::stdout().lock();
    let written = if json {
        let line = serde_json::to_string(outcome).map_err(Failure::runtime)?;
        writeln!(out, "{line}")
    } else if outcome.streamed.is_empty() {
        writeln!(out, "{}\n", outcome.reply)
    } else if let Some(rest) = outcome.reply.strip_prefix(outcome.streamed.as_str()) {
        // What streamed was the reply's beginning: the rest, then the empty line.
        writeln!(out, "{rest}\n")
    } else {
        // The final reply differs from what streamed (the parse tidied it, a retry, or the
        // model failed half-way): it is said again, whole.
        writeln!(out, "\n[the reply, as it stands:]\n{}\n", outcome.reply)
    };
    written
        .and_then(|_| out.flush())
        .map_err(|e| Failure::Runtime(format!("writing stdout: {e}")))
}

/// Text from a tool or the model, for the terminal: no control characters (a tool's result
/// cannot move the cursor or recolour the screen), at most `max` characters.
fn printable(text: &str, max: usize) -> String {
    let clean: String = text
        .chars()
        .map(|c| if c.is_control() && c != '\n' { ' ' } else { c })
        .collect();
    crate::tools::cut(&clean, max)
}

fn show_thoughts(outcome: &TurnOutcome) {
    let mut err = std::io::stderr().lock();
    for it in &outcome.machine_log {
        let chosen = if it.chosen.is_empty() {
            "no usable choice".to_string()
        } else {
            it.chosen.join(", ")
        };
        let _ = write!(err, "[iteration {}] {chosen}", it.number);
        if !it.unknown.is_empty() {
            let _ = write!(err, " (skipped, not actions: {})", it.unknown.join(", "));
        }
        if !it.reasoning.is_empty() {
            let _ = write!(err, " — {}", it.reasoning);
        }
        let _ = writeln!(err);
        for c in &it.calls {
            let _ = writeln!(
                err,
                "    [tool] {} {} → {} ({} ms)",
                c.tool,
                printable(&c.arguments, 300),
                c.outcome,
                c.ms
            );
        }
        for (action, produced) in &it.produced {
            let _ = writeln!(err, "    {action} → {}", printable(produced, 600));
        }
    }
    let Some(c) = &outcome.cognition else {
        return;
    };
    if let Some(m) = &c.monologue {
        let _ = writeln!(
            err,
            "[{}] {}",
            m.verb.as_deref().unwrap_or("thought"),
            m.text
        );
    }
    for q in &c.mental_queries {
        let answer = match q.answer {
            Some(true) => "yes",
            Some(false) => "no",
            None => "no answer",
        };
        let _ = writeln!(err, "[mental query] {} → {answer}", q.question);
    }
    if let Some(b) = c.user_model_check {
        let _ = writeln!(err, "[user model check] {b}");
    }
    if outcome.user_model_updated {
        let _ = writeln!(
            err,
            "[user model updated] {}",
            c.model_change_note.as_deref().unwrap_or("")
        );
    }
    if let Some(b) = c.soul_state_check {
        let _ = writeln!(err, "[soul state check] {b}");
    }
    for s in &outcome.state_changes {
        let _ = writeln!(err, "[soul state] {}: \"{}\" → \"{}\"", s.key, s.from, s.to);
    }
}
