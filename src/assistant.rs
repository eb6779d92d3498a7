//! The soul's own words on a chat surface's assistant features: the greeting when a person
//! opens a conversation, up to four suggested prompts, the status shown while it works and up
//! to ten loading messages shown in turn. They live in `soul/assistant.toml`; every key is
//! optional and the shipped words (compiled in) stand in for a missing key, file or folder.
//!
//! Owns reading, checking (every problem with file and line) and hot-reloading that file: a
//! `Words` source re-reads it at most every 250 ms when its modification time or size
//! changes, so an edit is in force for any turn that starts a second after the write; a
//! broken edit is logged and the last good words stay. Knows nothing of Slack or models.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use serde::Deserialize;
use toml::Spanned;
use tracing::{error, info};

use crate::soul::BUILT_IN;
use crate::toml_file::{Problem, TomlFile};

/// The file in the soul folder.
pub const FILE: &str = "assistant.toml";
/// The shipped `soul/assistant.toml`, compiled in.
pub const SHIPPED_ASSISTANT_TOML: &str = include_str!("../soul/assistant.toml");
/// Slack shows at most this many suggested prompts.
pub const MAX_PROMPTS: usize = 4;
/// Slack rotates at most this many loading messages.
pub const MAX_LOADING_MESSAGES: usize = 10;

const CHECK_EVERY: Duration = Duration::from_millis(250);

/// A suggested prompt: what the person sees, and what they send by clicking it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    pub title: String,
    pub message: String,
}

/// The words in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AssistantWords {
    pub greeting: String,
    pub status: String,
    pub loading_messages: Vec<String>,
    pub prompts: Vec<Prompt>,
    /// Where they came from (`(built in)/assistant.toml` for the shipped words).
    pub file: PathBuf,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    greeting: Option<Spanned<String>>,
    status: Option<Spanned<String>>,
    loading_messages: Option<Spanned<Vec<Spanned<String>>>>,
    prompts: Option<Spanned<Vec<Spanned<RawPrompt>>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrompt {
    title: Spanned<String>,
    message: Spanned<String>,
}

/// Reads the words from `text` (the file at `path`); a missing key keeps the shipped words.
/// Every problem is returned, each with the file and line.
pub fn parse(text: &str, path: &Path) -> Result<AssistantWords, Vec<Problem>> {
    parse_over(text, path, &built_in())
}

fn parse_over(
    text: &str,
    path: &Path,
    defaults: &AssistantWords,
) -> Result<AssistantWords, Vec<Problem>> {
    let file = path.display().to_string();
    let f = TomlFile::new(&file, text);
    let raw: Raw = f.read()?;
    let mut problems = Vec::new();
    let mut text_of = |s: Spanned<String>, key: &str| {
        let line = f.line(s.span().start);
        let value = s.into_inner();
        if value.trim().is_empty() {
            problems.push(f.problem(
                line,
                key,
                "is empty; write the words, or remove the key to keep the built-in ones".into(),
            ));
        }
        value.trim().to_string()
    };
    let greeting = raw
        .greeting
        .map(|g| text_of(g, "greeting"))
        .unwrap_or_else(|| defaults.greeting.clone());
    let status = raw
        .status
        .map(|s| text_of(s, "status"))
        .unwrap_or_else(|| defaults.status.clone());
    let mut loading_line = None;
    let loading_messages = match raw.loading_messages {
        None => defaults.loading_messages.clone(),
        Some(list) => {
            loading_line = Some(f.line(list.span().start));
            list.into_inner()
                .into_iter()
                .map(|m| text_of(m, "loading_messages"))
                .collect()
        }
    };
    let mut prompts_line = None;
    let prompts = match raw.prompts {
        None => defaults.prompts.clone(),
        Some(list) => {
            prompts_line = Some(f.line(list.span().start));
            list.into_inner()
                .into_iter()
                .map(|p| {
                    let p = p.into_inner();
                    Prompt {
                        title: text_of(p.title, "prompts.title"),
                        message: text_of(p.message, "prompts.message"),
                    }
                })
                .collect()
        }
    };
    if let Some(line) = loading_line.filter(|_| loading_messages.len() > MAX_LOADING_MESSAGES) {
        problems.push(f.problem(
            line,
            "loading_messages",
            format!(
                "has {} messages; Slack shows at most {MAX_LOADING_MESSAGES}: keep the best {MAX_LOADING_MESSAGES}",
                loading_messages.len()
            ),
        ));
    }
    if let Some(line) = prompts_line.filter(|_| prompts.len() > MAX_PROMPTS) {
        problems.push(f.problem(
            line,
            "prompts",
            format!(
                "has {} prompts; Slack shows at most {MAX_PROMPTS}: keep the best {MAX_PROMPTS}",
                prompts.len()
            ),
        ));
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(AssistantWords {
        greeting,
        status,
        loading_messages,
        prompts,
        file: path.to_path_buf(),
    })
}

/// The shipped words, from the binary.
pub fn built_in() -> AssistantWords {
    let path = Path::new(BUILT_IN).join(FILE);
    let empty = AssistantWords {
        greeting: String::new(),
        status: String::new(),
        loading_messages: Vec::new(),
        prompts: Vec::new(),
        file: path.clone(),
    };
    parse_over(SHIPPED_ASSISTANT_TOML, &path, &empty)
        .expect("the shipped assistant.toml is valid (tested)")
}

/// The words in `soul_dir`: the file's, the shipped words where it is missing (or the
/// folder is), every problem otherwise.
pub fn load(soul_dir: &Path) -> Result<AssistantWords, Vec<Problem>> {
    let path = soul_dir.join(FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => parse(&text, &path),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(built_in()),
        Err(e) => Err(vec![Problem::unreadable(&path, "file", &e, "")]),
    }
}

type Stamp = Option<(SystemTime, u64)>;

fn stamp(path: &Path) -> Stamp {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

struct Watch {
    path: PathBuf,
    soul_dir: PathBuf,
    stamp: Stamp,
    last_check: Instant,
}

/// The words in force, re-read when the file changes.
pub struct Words {
    current: RwLock<Arc<AssistantWords>>,
    watch: Option<Mutex<Watch>>,
}

impl Words {
    /// Words that never change (tests).
    pub fn fixed(words: AssistantWords) -> Words {
        Words {
            current: RwLock::new(Arc::new(words)),
            watch: None,
        }
    }

    /// The words in `soul_dir`, watched from now on. A broken file is logged (file and line)
    /// and the shipped words stand in until it is fixed: the conversation never depends on it.
    pub fn load(soul_dir: &Path) -> Words {
        let path = soul_dir.join(FILE);
        let first = stamp(&path);
        let words = load(soul_dir).unwrap_or_else(|problems| {
            for p in problems {
                error!(problem = %p, "assistant words rejected; the built-in words stand in");
            }
            built_in()
        });
        Words {
            current: RwLock::new(Arc::new(words)),
            watch: Some(Mutex::new(Watch {
                path,
                soul_dir: soul_dir.to_path_buf(),
                stamp: first,
                last_check: Instant::now(),
            })),
        }
    }

    /// The words in force now (re-reading the file if it changed, at most every 250 ms).
    pub fn current(&self) -> Arc<AssistantWords> {
        if let Some(watch) = &self.watch {
            let mut w = watch.lock().unwrap_or_else(|e| e.into_inner());
            if w.last_check.elapsed() >= CHECK_EVERY {
                w.last_check = Instant::now();
                let now = stamp(&w.path);
                if now != w.stamp {
                    w.stamp = now;
                    match load(&w.soul_dir) {
                        Ok(words) => {
                            info!(file = %w.path.display(), "assistant words reloaded");
                            *self.current.write().unwrap_or_else(|e| e.into_inner()) =
                                Arc::new(words);
                        }
                        Err(problems) => {
                            for p in problems {
                                error!(problem = %p, "assistant words rejected; the last good words stay in force");
                            }
                        }
                    }
                }
            }
        }
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<String> {
        parse(text, Path::new("/s/assistant.toml"))
            .unwrap_err()
            .iter()
            .map(|p| p.to_string())
            .collect()
    }

    #[test]
    fn the_shipped_words_are_the_soul_folders_file() {
        let shipped = load(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/soul"))).unwrap();
        let built_in = built_in();
        assert_eq!(shipped.greeting, built_in.greeting);
        assert_eq!(shipped.prompts, built_in.prompts);
        assert!(!built_in.greeting.is_empty() && !built_in.status.is_empty());
        assert!((1..=MAX_PROMPTS).contains(&built_in.prompts.len()));
        assert!((1..=MAX_LOADING_MESSAGES).contains(&built_in.loading_messages.len()));
    }

    #[test]
    fn a_missing_key_or_file_keeps_the_built_in_words() {
        let w = parse(
            "greeting = \"Hello there.\"\n",
            Path::new("/s/assistant.toml"),
        )
        .unwrap();
        assert_eq!(w.greeting, "Hello there.");
        assert_eq!(w.prompts, built_in().prompts);
        assert_eq!(w.loading_messages, built_in().loading_messages);
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(load(dir.path()).unwrap(), built_in());
        assert_eq!(load(&dir.path().join("nowhere")).unwrap(), built_in());
        let none = parse(
            "loading_messages = []\nprompts = []\n",
            Path::new("/a.toml"),
        )
        .unwrap();
        assert!(none.loading_messages.is_empty() && none.prompts.is_empty());
    }

    #[test]
    fn too_many_prompts_or_loading_messages_are_named_with_their_line() {
        let mut text = String::from("greeting = \"hi\"\n\n");
        for i in 0..5 {
            text += &format!("[[prompts]]\ntitle = \"t{i}\"\nmessage = \"m{i}\"\n");
        }
        let found = problems(&text);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(
            found[0].starts_with("/s/assistant.toml:3: key `prompts`: has 5 prompts"),
            "{found:?}"
        );
        let many: Vec<String> = (0..11).map(|i| format!("\"m{i}\"")).collect();
        let found = problems(&format!("\nloading_messages = [{}]\n", many.join(", ")));
        assert!(
            found[0].starts_with("/s/assistant.toml:2: key `loading_messages`: has 11"),
            "{found:?}"
        );
    }

    #[test]
    fn empty_words_and_unknown_keys_are_named_with_their_line() {
        let found = problems("greeting = \"  \"\nloading_messages = [\"a\",\n  \"\"]\n[[prompts]]\ntitle = \"x\"\nmessage = \"\"\n");
        assert_eq!(
            found,
            [
                "/s/assistant.toml:1: key `greeting`: is empty; write the words, or remove the key to keep the built-in ones",
                "/s/assistant.toml:3: key `loading_messages`: is empty; write the words, or remove the key to keep the built-in ones",
                "/s/assistant.toml:6: key `prompts.message`: is empty; write the words, or remove the key to keep the built-in ones",
            ]
        );
        let found = problems("greeting = \"hi\"\ngreetings = \"typo\"\n");
        assert!(found[0].starts_with("/s/assistant.toml:2:"), "{found:?}");
        assert!(found[0].contains("greetings"), "{found:?}");
        let found = problems("[[prompts]]\ntitle = \"x\"\n");
        assert!(found[0].contains("message"), "{found:?}");
    }

    #[test]
    fn an_edit_is_in_force_after_the_check_interval_and_a_broken_one_is_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(FILE);
        std::fs::write(&path, "greeting = \"first\"\n").unwrap();
        let words = Words::load(dir.path());
        assert_eq!(words.current().greeting, "first");
        std::fs::write(&path, "greeting = \"second, longer\"\n").unwrap();
        std::thread::sleep(CHECK_EVERY + Duration::from_millis(50));
        assert_eq!(words.current().greeting, "second, longer");
        std::fs::write(&path, "greeting = \"\"\nand_a_typo = 1\n").unwrap();
        std::thread::sleep(CHECK_EVERY + Duration::from_millis(50));
        assert_eq!(
            words.current().greeting,
            "second, longer",
            "the last good words stay"
        );
    }
}
