//! The soul, its template, its psyche file and the process files in force, reloaded when they
//! change.
//!
//! Each turn asks for the current set; at most every 250 ms that look also compares the
//! files' modification times and sizes, and re-reads what changed. A file that fails its
//! checks is logged (file, line and error) and the last good version stays in force (the
//! template included: at start a bad one is refused, later it is ignored). So an edit is
//! in force for any turn that starts a second after the write, without a restart.
//!
//! The shipped process files are compiled into the binary: when the processes folder does not
//! exist they are the set in force (and, like the built-in soul, there is nothing to watch).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use tracing::{error, info, warn};

use super::def::{self, ProcessDef, MAIN};
use crate::psyche::{self, Psyche};
use crate::soul::{self, SoulError, SoulFiles, BUILT_IN};
use crate::states::{template, Template};
use crate::steps::Step;

const CHECK_EVERY: Duration = Duration::from_millis(250);

/// The steps of the built-in `main`, used when `processes/main.toml` is missing or broken:
/// the seed's full pipeline.
pub const MAIN_STEPS: [Step; 6] = [
    Step::InternalMonologue,
    Step::ExternalDialogue,
    Step::UserModelCheck,
    Step::UserModelUpdate,
    Step::SoulStateCheck,
    Step::SoulStateUpdate,
];

/// The built-in `main` process.
pub fn builtin_main() -> ProcessDef {
    ProcessDef {
        name: MAIN.into(),
        description: "The full cognitive pipeline (built in)".into(),
        steps: MAIN_STEPS.to_vec(),
        instructions: None,
        overrides: BTreeMap::new(),
        transitions: Vec::new(),
        queries: Vec::new(),
        ism: None,
        file: PathBuf::from("(built in)"),
    }
}

/// The shipped `processes/*.toml`, compiled in: file name and text. A test keeps this list
/// equal to the folder.
pub const SHIPPED: [(&str, &str); 7] = [
    (
        "deep_work.toml",
        include_str!("../../processes/deep_work.toml"),
    ),
    (
        "deescalation.toml",
        include_str!("../../processes/deescalation.toml"),
    ),
    (
        "frustrated.toml",
        include_str!("../../processes/frustrated.toml"),
    ),
    (
        "greeting.toml",
        include_str!("../../processes/greeting.toml"),
    ),
    ("main.toml", include_str!("../../processes/main.toml")),
    (
        "proactive.toml",
        include_str!("../../processes/proactive.toml"),
    ),
    (
        "problem_solving.toml",
        include_str!("../../processes/problem_solving.toml"),
    ),
];

/// The shipped processes, from the binary (each named `(built in)/<file>`).
pub fn shipped() -> BTreeMap<String, ProcessDef> {
    SHIPPED
        .iter()
        .map(|(file, text)| {
            let d = def::parse(text, &Path::new(BUILT_IN).join(file))
                .expect("the shipped process files are valid (tested)");
            (d.name.clone(), d)
        })
        .collect()
}

/// One consistent set of files.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub soul: SoulFiles,
    pub processes: BTreeMap<String, ProcessDef>,
    /// The soul's cognitive state behaviours.
    pub template: Template,
    /// The constants of the soul's psychology substrate.
    pub psyche: Arc<Psyche>,
}

impl Loaded {
    /// A process by name; `None` if there is no such process.
    pub fn process(&self, name: &str) -> Option<&ProcessDef> {
        self.processes.get(name)
    }

    /// `main`, always there.
    pub fn main(&self) -> &ProcessDef {
        self.processes.get(MAIN).expect("main is always loaded")
    }
}

type Stamp = Option<(SystemTime, u64)>;

struct Watch {
    soul_dir: PathBuf,
    processes_dir: PathBuf,
    last_check: Instant,
    stamps: BTreeMap<PathBuf, Stamp>,
    /// The last good definition of each process file.
    good: BTreeMap<PathBuf, ProcessDef>,
}

pub struct Library {
    current: RwLock<Arc<Loaded>>,
    watch: Option<Mutex<Watch>>,
}

impl Library {
    /// Files that never change (tests, benchmarks), with the default template.
    pub fn fixed(soul: SoulFiles, processes: BTreeMap<String, ProcessDef>) -> Library {
        Self::fixed_with(soul, processes, Template::default())
    }

    /// Files that never change, with this template.
    pub fn fixed_with(
        soul: SoulFiles,
        mut processes: BTreeMap<String, ProcessDef>,
        template: Template,
    ) -> Library {
        processes.entry(MAIN.into()).or_insert_with(builtin_main);
        Library {
            current: RwLock::new(Arc::new(Loaded {
                soul,
                processes,
                template,
                psyche: Arc::new(Psyche::shipped()),
            })),
            watch: None,
        }
    }

    /// Reads the soul and its template (which must load) and the process files (broken ones
    /// are logged and left out), and watches them from then on. A folder that does not exist is the built-in
    /// soul or the shipped processes, said once at info.
    pub fn load(soul_dir: &Path, processes_dir: &Path) -> Result<Library, SoulError> {
        let soul = SoulFiles::load_or_built_in(soul_dir)?;
        let template = soul::load_template(soul_dir)?;
        let psyche = Arc::new(soul::load_psyche(soul_dir)?);
        if soul.is_built_in() {
            info!(soul_dir = %soul_dir.display(), soul = soul.name(), "no soul folder; using the soul built into anima (`anima init` writes it out for editing)");
        }
        if !processes_dir.exists() {
            info!(processes_dir = %processes_dir.display(), "no processes folder; using the processes built into anima (`anima init` writes them out for editing)");
        }
        let mut watch = Watch {
            soul_dir: soul_dir.to_path_buf(),
            processes_dir: processes_dir.to_path_buf(),
            last_check: Instant::now(),
            stamps: BTreeMap::new(),
            good: BTreeMap::new(),
        };
        watch.stamps = watch.scan();
        let files: Vec<PathBuf> = watch
            .stamps
            .keys()
            .filter(|p| watch.is_process(p))
            .cloned()
            .collect();
        for path in &files {
            match def::load_file(path) {
                Ok(d) => {
                    watch.good.insert(path.clone(), d);
                }
                Err(problems) => {
                    for p in problems {
                        error!(problem = %p, "process file rejected");
                    }
                }
            }
        }
        let processes = watch.assemble();
        Ok(Library {
            current: RwLock::new(Arc::new(Loaded {
                soul,
                processes,
                template,
                psyche,
            })),
            watch: Some(Mutex::new(watch)),
        })
    }

    /// The files in force now (re-reading any that changed, at most every 250 ms).
    pub fn current(&self) -> Arc<Loaded> {
        if let Some(watch) = &self.watch {
            let mut w = watch.lock().unwrap_or_else(|e| e.into_inner());
            if w.last_check.elapsed() >= CHECK_EVERY {
                w.last_check = Instant::now();
                let stamps = w.scan();
                if stamps != w.stamps {
                    let previous = self
                        .current
                        .read()
                        .unwrap_or_else(|e| e.into_inner())
                        .clone();
                    let next = w.reload(&previous, stamps);
                    *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(next);
                }
            }
        }
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

fn is_process_file(p: &Path) -> bool {
    p.extension().is_some_and(|x| x == "toml")
}

fn stamp(path: &Path) -> Stamp {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

impl Watch {
    /// A process file: a `.toml` in the processes folder (the soul's template is not one).
    fn is_process(&self, p: &Path) -> bool {
        is_process_file(p) && p.parent() == Some(self.processes_dir.as_path())
    }

    fn scan(&self) -> BTreeMap<PathBuf, Stamp> {
        let mut out = BTreeMap::new();
        for f in [
            "soul.md",
            "skills.md",
            "play.md",
            template::FILE,
            psyche::FILE,
        ] {
            let p = self.soul_dir.join(f);
            out.insert(p.clone(), stamp(&p));
        }
        if let Ok(entries) = std::fs::read_dir(&self.processes_dir) {
            for e in entries.flatten() {
                let p = e.path();
                if is_process_file(&p) {
                    out.insert(p.clone(), stamp(&p));
                }
            }
        }
        out
    }

    fn assemble(&self) -> BTreeMap<String, ProcessDef> {
        if !self.processes_dir.exists() {
            return shipped();
        }
        let mut processes: BTreeMap<String, ProcessDef> = self
            .good
            .values()
            .map(|d| (d.name.clone(), d.clone()))
            .collect();
        if !processes.contains_key(MAIN) {
            warn!(dir = %self.processes_dir.display(), "no usable main.toml; using the built-in main process");
            processes.insert(MAIN.into(), builtin_main());
        }
        for p in def::check_set(&processes, &self.processes_dir) {
            warn!(problem = %p, "process files");
        }
        processes
    }

    fn reload(&mut self, previous: &Loaded, stamps: BTreeMap<PathBuf, Stamp>) -> Loaded {
        let changed: Vec<PathBuf> = stamps
            .iter()
            .filter(|(p, s)| self.stamps.get(*p) != Some(s))
            .map(|(p, _)| p.clone())
            .chain(
                self.stamps
                    .keys()
                    .filter(|p| !stamps.contains_key(*p))
                    .cloned(),
            )
            .collect();
        self.stamps = stamps;
        let mut soul = previous.soul.clone();
        let mut template = previous.template.clone();
        let mut psyche = previous.psyche.clone();
        let mut processes_changed = false;
        for path in changed {
            if path.parent() == Some(self.soul_dir.as_path())
                && path.file_name().is_some_and(|n| n == template::FILE)
            {
                match soul::load_template(&self.soul_dir) {
                    Ok(t) => {
                        info!(file = %path.display(), "template reloaded");
                        template = t;
                    }
                    Err(SoulError::Template(problems)) => {
                        for p in problems {
                            error!(problem = %p, "template rejected; the last good version stays in force");
                        }
                    }
                    Err(e) => {
                        error!(error = %e, "template rejected; the last good version stays in force")
                    }
                }
            } else if path.parent() == Some(self.soul_dir.as_path())
                && path.file_name().is_some_and(|n| n == psyche::FILE)
            {
                match soul::load_psyche(&self.soul_dir) {
                    Ok(p) => {
                        info!(file = %path.display(), "psyche reloaded");
                        psyche = Arc::new(p);
                    }
                    Err(e) => {
                        error!(error = %e, "psyche file rejected; the last good version stays in force")
                    }
                }
            } else if self.is_process(&path) {
                processes_changed = true;
                if !path.exists() {
                    info!(file = %path.display(), "process file removed");
                    self.good.remove(&path);
                    continue;
                }
                match def::load_file(&path) {
                    Ok(d) => {
                        info!(file = %path.display(), process = %d.name, "process file reloaded");
                        self.good.insert(path, d);
                    }
                    Err(problems) => {
                        for p in problems {
                            error!(problem = %p, "process file rejected; the last good version stays in force");
                        }
                    }
                }
            } else {
                match SoulFiles::load_or_built_in(&self.soul_dir) {
                    Ok(s) => {
                        info!(file = %path.display(), "soul reloaded");
                        soul = s;
                    }
                    Err(e) => {
                        error!(error = %e, "soul file rejected; the last good version stays in force")
                    }
                }
            }
        }
        let processes = if processes_changed {
            self.assemble()
        } else {
            previous.processes.clone()
        };
        Loaded {
            soul,
            processes,
            template,
            psyche,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FOLDER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/processes");

    #[test]
    fn the_compiled_in_list_is_the_processes_folder() {
        let mut files: Vec<(String, String)> = std::fs::read_dir(FOLDER)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| is_process_file(p))
            .map(|p| {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                (name, std::fs::read_to_string(&p).unwrap())
            })
            .collect();
        files.sort();
        let compiled: Vec<(String, String)> = SHIPPED
            .iter()
            .map(|(f, t)| (f.to_string(), t.to_string()))
            .collect();
        assert_eq!(
            compiled, files,
            "add or remove the file in library::SHIPPED too"
        );
    }

    #[test]
    fn the_shipped_set_is_whole_and_valid() {
        let set = shipped();
        assert!(set.contains_key(MAIN) && set.contains_key("greeting"));
        assert_eq!(def::check_set(&set, Path::new(BUILT_IN)), vec![]);
        let (from_folder, problems) = def::load_dir(Path::new(FOLDER));
        assert!(problems.is_empty());
        for (name, d) in &set {
            assert_eq!(d.steps, from_folder[name].steps, "{name}");
            assert_eq!(d.transitions, from_folder[name].transitions, "{name}");
        }
    }

    #[test]
    fn a_template_edit_is_in_force_and_a_bad_one_keeps_the_last_good() {
        let dir = tempfile::tempdir().unwrap();
        let (soul, procs) = (dir.path().join("soul"), dir.path().join("processes"));
        std::fs::create_dir_all(&soul).unwrap();
        std::fs::create_dir_all(&procs).unwrap();
        std::fs::write(soul.join("soul.md"), "# Kit\n").unwrap();
        let lib = Library::load(&soul, &procs).unwrap();
        assert!(lib.current().template.behaviors.wakeup.enabled);
        let write_and_wait = |text: &str| {
            std::fs::write(soul.join("template.toml"), text).unwrap();
            std::thread::sleep(CHECK_EVERY + Duration::from_millis(50));
            lib.current()
        };
        let now = write_and_wait(crate::states::ARCHETYPES[2].1); // scout
        assert_eq!(now.template.name.as_deref(), Some("scout"));
        let now = write_and_wait("[cognitive_state_behaviors.wakeup]\nenabled = false\n#x\n");
        assert_eq!(
            now.template.name.as_deref(),
            Some("scout"),
            "a rejected template leaves the last good one"
        );
        // At start, a bad template is refused.
        let err = Library::load(&soul, &procs).err().unwrap().to_string();
        assert!(err.contains("template.toml:2"), "{err}");
    }

    #[test]
    fn a_psyche_edit_is_in_force_and_a_bad_one_keeps_the_last_good() {
        let dir = tempfile::tempdir().unwrap();
        let (soul, procs) = (dir.path().join("soul"), dir.path().join("processes"));
        std::fs::create_dir_all(&soul).unwrap();
        std::fs::create_dir_all(&procs).unwrap();
        std::fs::write(soul.join("soul.md"), "# Kit\n").unwrap();
        let lib = Library::load(&soul, &procs).unwrap();
        assert_eq!(
            lib.current().psyche.memory.top_k,
            4,
            "the shipped constants"
        );
        let write_and_wait = |text: String| {
            std::fs::write(soul.join("psyche.toml"), text).unwrap();
            std::thread::sleep(CHECK_EVERY + Duration::from_millis(50));
            lib.current()
        };
        let now = write_and_wait(psyche::SHIPPED_PSYCHE.replace("top_k = 4", "top_k = 7"));
        assert_eq!(now.psyche.memory.top_k, 7);
        let now = write_and_wait(psyche::SHIPPED_PSYCHE.replace("top_k = 4", "top_k = -1"));
        assert_eq!(
            now.psyche.memory.top_k, 7,
            "a rejected file leaves the last good one"
        );
        let err = Library::load(&soul, &procs).err().unwrap().to_string();
        assert!(
            err.contains("psyche.toml:") && err.contains("memory.top_k"),
            "{err}"
        );
    }

    #[test]
    fn missing_folders_are_the_built_in_soul_and_processes() {
        let dir = tempfile::tempdir().unwrap();
        let lib = Library::load(&dir.path().join("soul"), &dir.path().join("processes")).unwrap();
        let now = lib.current();
        assert!(now.soul.is_built_in());
        assert_eq!(
            now.processes.keys().collect::<Vec<_>>(),
            shipped().keys().collect::<Vec<_>>()
        );

        // An empty folder is the user's choice: only the built-in main.
        std::fs::create_dir(dir.path().join("processes")).unwrap();
        let lib = Library::load(&dir.path().join("soul"), &dir.path().join("processes")).unwrap();
        assert_eq!(lib.current().processes.keys().collect::<Vec<_>>(), [MAIN]);
    }
}
