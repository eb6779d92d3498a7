//! `anima init [DIR] [--force]`: writes the soul and processes built into the binary, and a
//! commented anima.toml whose paths point at them, into DIR (default `~/.anima`) for editing,
//! the example MCP server the commented `[[tools.servers]]` table names, so that table runs
//! as written once uncommented, and the shipped soul evaluations (evals/). Never overwrites a
//! file without `--force`.

use std::path::{Path, PathBuf};

use clap::Args;

use super::{CliResult, Failure};
use crate::assistant::SHIPPED_ASSISTANT_TOML;
use crate::process::library;
use crate::psyche::SHIPPED_PSYCHE;
use crate::soul::{SHIPPED_PLAY_MD, SHIPPED_SKILLS_MD, SHIPPED_SOUL_MD};
use crate::states::{ARCHETYPES, SHIPPED_TEMPLATE};

const EXAMPLE: &str = include_str!("../../config.example.toml");
/// The example MCP server (Python, standard library only), where config.example.toml's
/// `[[tools.servers]]` table and docs/soul.md look for it: beside the config file.
const KB_SERVER_PATH: &str = "examples/mcp/kb_server.py";
const KB_SERVER: &str = include_str!("../../examples/mcp/kb_server.py");

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The folder to write into (created if needed).
    #[arg(value_name = "DIR", default_value = "~/.anima")]
    pub dir: PathBuf,
    /// Overwrite files that already exist (edits in them are lost).
    #[arg(long)]
    pub force: bool,
}

pub fn run(args: InitArgs) -> CliResult {
    let dir = absolute(&args.dir)?;
    let files = files(&dir);
    if !args.force {
        let existing: Vec<String> = files
            .iter()
            .filter(|(p, _)| p.exists())
            .map(|(p, _)| p.strip_prefix(&dir).unwrap_or(p).display().to_string())
            .collect();
        if !existing.is_empty() {
            return Err(Failure::Runtime(format!(
                "{} already holds {}; nothing was written. Run `anima init --force {}` to overwrite them (edits in them are lost), or give another folder",
                dir.display(),
                existing.join(", "),
                dir.display()
            )));
        }
    }
    for (path, text) in &files {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|e| {
                Failure::Runtime(format!("cannot create {}: {e}", parent.display()))
            })?;
        }
        std::fs::write(path, text)
            .map_err(|e| Failure::Runtime(format!("cannot write {}: {e}", path.display())))?;
    }
    let config = dir.join("anima.toml");
    println!("Wrote into {}:", dir.display());
    println!("  anima.toml   the configuration, every key commented with its default");
    println!("  soul/        soul.md (the personality), skills.md, play.md: edit them freely;");
    println!("               template.toml (cognitive states; archetypes echo, ally, scout in templates/);");
    println!(
        "               assistant.toml (greeting, suggested prompts, loading messages in Slack);"
    );
    println!(
        "               psyche.toml (drives, mood, relationships: the inner life's constants)"
    );
    println!(
        "  processes/   {} process files, one per mental mode",
        library::SHIPPED.len()
    );
    println!(
        "  evals/       {} soul evaluations for `anima eval` (tools/: one that needs the tool server)",
        crate::eval::SHIPPED.len()
    );
    println!("  {KB_SERVER_PATH}   an example MCP tool server (see [[tools.servers]])");
    println!();
    println!(
        "Next: export ANIMA_CONFIG={} (or pass --config, or run anima from that folder),",
        config.display()
    );
    println!("then `anima check`, and `anima chat` to talk. Edits apply without a restart.");
    Ok(())
}

/// `dir` made absolute, with a leading `~` expanded.
fn absolute(dir: &Path) -> Result<PathBuf, Failure> {
    let home = || {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .ok_or_else(|| {
                Failure::Usage("$HOME is not set; give the folder: `anima init DIR`".into())
            })
    };
    let expanded = match dir.strip_prefix("~") {
        Ok(rest) => home()?.join(rest),
        Err(_) => dir.to_path_buf(),
    };
    std::path::absolute(&expanded)
        .map_err(|e| Failure::Usage(format!("cannot use {}: {e}", dir.display())))
}

/// Every file `init` writes, with its text.
fn files(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = vec![
        (dir.join("anima.toml"), config_text(dir)),
        (dir.join("soul/soul.md"), SHIPPED_SOUL_MD.to_string()),
        (dir.join("soul/skills.md"), SHIPPED_SKILLS_MD.to_string()),
        (dir.join("soul/play.md"), SHIPPED_PLAY_MD.to_string()),
        (dir.join("soul/template.toml"), SHIPPED_TEMPLATE.to_string()),
        (
            dir.join("soul/assistant.toml"),
            SHIPPED_ASSISTANT_TOML.to_string(),
        ),
        (dir.join("soul/psyche.toml"), SHIPPED_PSYCHE.to_string()),
    ];
    for (name, text) in ARCHETYPES {
        out.push((dir.join("soul/templates").join(name), text.to_string()));
    }
    for (name, text) in library::SHIPPED {
        out.push((dir.join("processes").join(name), text.to_string()));
    }
    for (name, text) in crate::eval::SHIPPED {
        out.push((dir.join("evals").join(name), text.to_string()));
    }
    out.push((dir.join(KB_SERVER_PATH), KB_SERVER.to_string()));
    out
}

/// A TOML string for a path (quoted and escaped).
fn quoted(p: &Path) -> String {
    toml::Value::String(p.to_string_lossy().into_owned()).to_string()
}

/// The configuration: `[paths]` set to the folders written, every other key as in
/// config.example.toml, commented out.
fn config_text(dir: &Path) -> String {
    let mut out = String::from(
        "# anima configuration, written by `anima init`. Every key has a default: uncomment and\n\
         # change only what should differ. Found via --config FILE, else $ANIMA_CONFIG, else\n\
         # ./anima.toml. Secrets (API keys, Slack tokens) never go here: they come only from the\n\
         # environment.\n\n",
    );
    out += "[paths]\n";
    for (key, path, what) in [
        (
            "home",
            dir.to_path_buf(),
            "anima.db (SQLite) and memory/ (git repository of user models)",
        ),
        (
            "soul_dir",
            dir.join("soul"),
            "soul.md (required), skills.md (optional)",
        ),
        (
            "processes_dir",
            dir.join("processes"),
            "one .toml file per mental process",
        ),
        (
            "evals_dir",
            dir.join("evals"),
            "the eval files `anima eval` runs (see docs/evals.md)",
        ),
    ] {
        out += &format!("{:<30} # {what}\n", format!("{key} = {}", quoted(&path)));
    }
    let rest = EXAMPLE.find("\n[llm]").map_or("", |i| &EXAMPLE[i + 1..]);
    for line in rest.lines() {
        out.push('\n');
        if !line.trim().is_empty() {
            out += "# ";
            out += line;
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_written_config_points_at_the_written_folders_and_keeps_every_default() {
        let dir = Path::new("/srv/my \"anima\"");
        let text = config_text(dir);
        let c = crate::config::parse(&text, &dir.join("anima.toml"), dir).unwrap();
        assert_eq!(c.home, dir);
        assert_eq!(c.soul_dir, dir.join("soul"));
        assert_eq!(c.processes_dir, dir.join("processes"));
        assert_eq!(c.evals_dir, dir.join("evals"));
        let defaults =
            crate::config::parse("", Path::new("/x/anima.toml"), Path::new("/x")).unwrap();
        assert_eq!(format!("{:?}", c.llm), format!("{:?}", defaults.llm));
        assert!(text.contains("# [llm]\n# provider = \"auto\""), "{text}");
        assert!(text.contains("# [http]"), "{text}");
    }

    #[test]
    fn init_writes_every_shipped_file() {
        let names: Vec<String> = files(Path::new("/a"))
            .iter()
            .map(|(p, _)| p.display().to_string())
            .collect();
        assert!(names.contains(&"/a/soul/soul.md".to_string()));
        assert!(names.contains(&"/a/processes/main.toml".to_string()));
        assert!(names.contains(&"/a/soul/template.toml".to_string()));
        assert!(names.contains(&"/a/soul/psyche.toml".to_string()));
        assert!(names.contains(&"/a/soul/templates/ally.toml".to_string()));
        assert!(names.contains(&"/a/soul/assistant.toml".to_string()));
        assert!(names.contains(&"/a/examples/mcp/kb_server.py".to_string()));
        assert!(names.contains(&"/a/evals/remembers_a_name.toml".to_string()));
        assert!(names.contains(&"/a/evals/tools/looks_up_first.toml".to_string()));
        assert_eq!(
            names.len(),
            8 + ARCHETYPES.len() + library::SHIPPED.len() + crate::eval::SHIPPED.len()
        );
    }
}
