//! The git repository of user models: `<home>/memory/users/<slug>.md`, one commit per change,
//! the model's change note as the message, author "anima".
//!
//! Uses libgit2 directly: no shell ever sees a note or a model, and nothing is pushed anywhere.
//! The slug is the only part of a path that comes from outside: `users::slug` admits only
//! `a-z`, `0-9` and `-`, and every path is built through `file_of`, which refuses anything else
//! (a store another program wrote is outside too).
//!
//! `forget` removes a person's file, and with it, on request, every version from history.
//!
//! `Exporter` brings git up to date with the store: every version not yet committed, in order,
//! each with its own note, under a file lock so that processes sharing a home (`anima run`
//! beside `anima chat`) never commit at once. Of several daemons sharing a store, only the one
//! leading exports (`export_here`): one repository at a time receives the versions. A repository that cannot be written (for a
//! while) only delays the export: the next export commits everything that waited.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use git2::{Oid, Repository, Signature};

use super::faces::Users;

mod dossiers;
mod forget;

#[derive(Debug, thiserror::Error)]
#[error("user-model repository {path}: {message}")]
pub struct RepoError {
    pub path: PathBuf,
    pub message: String,
}

/// One entry of a model's history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    pub id: String,
    pub time: i64,
    pub message: String,
}

pub struct ModelRepo {
    repo: Repository,
    root: PathBuf,
}

impl ModelRepo {
    /// Opens the repository at `root`, creating it on first use.
    pub fn open_or_init(root: &Path) -> Result<ModelRepo, RepoError> {
        let err = |e: &dyn std::fmt::Display| RepoError {
            path: root.to_path_buf(),
            message: e.to_string(),
        };
        let repo = match Repository::open(root) {
            Ok(r) => r,
            Err(_) => {
                std::fs::create_dir_all(root.join("users")).map_err(|e| err(&e))?;
                Repository::init(root).map_err(|e| err(&e))?
            }
        };
        Ok(ModelRepo {
            repo,
            root: root.to_path_buf(),
        })
    }

    /// Opens an existing repository; `None` when there is none yet.
    pub fn open_existing(root: &Path) -> Option<ModelRepo> {
        Repository::open(root).ok().map(|repo| ModelRepo {
            repo,
            root: root.to_path_buf(),
        })
    }

    fn error(&self, e: impl std::fmt::Display) -> RepoError {
        RepoError {
            path: self.root.clone(),
            message: e.to_string(),
        }
    }

    /// The path of a model's file in the repository: `users/<slug>.md`, for a slug of `a-z`,
    /// `0-9` and `-` only; any other (quotes, slashes, `..`) is refused, never a path.
    fn file_of(&self, slug: &str) -> Result<String, RepoError> {
        self.file_in("users", slug)
    }

    /// `<dir>/<slug>.md`, for a slug of `a-z`, `0-9` and `-` only.
    fn file_in(&self, dir: &str, slug: &str) -> Result<String, RepoError> {
        let safe = !slug.is_empty()
            && slug
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
        if !safe {
            return Err(self.error(format!(
                "{slug:?} is not a user model's name (a-z, 0-9 and - only)"
            )));
        }
        Ok(format!("{dir}/{slug}.md"))
    }

    /// Writes the model file and commits it. A model identical to the committed one makes no
    /// commit and returns `None`.
    pub fn commit_model(
        &self,
        slug: &str,
        model: &str,
        note: &str,
    ) -> Result<Option<Oid>, RepoError> {
        let rel = self.file_of(slug)?;
        self.commit_file(&rel, model, &commit_message(note))
    }

    /// Writes `rel` (a path `file_in` made) and commits it with `message`; `None` when git
    /// already had exactly this text.
    fn commit_file(&self, rel: &str, text: &str, message: &str) -> Result<Option<Oid>, RepoError> {
        let mut content = text.trim_end().to_string();
        content.push('\n');
        if let Some(dir) = Path::new(rel).parent() {
            std::fs::create_dir_all(self.root.join(dir)).map_err(|e| self.error(e))?;
        }
        std::fs::write(self.root.join(rel), &content).map_err(|e| self.error(e))?;

        let mut index = self.repo.index().map_err(|e| self.error(e))?;
        // Read again if another process changed it (a person forgotten meanwhile), so that
        // its removal is not undone by this process's older copy.
        index.read(false).map_err(|e| self.error(e))?;
        index.add_path(Path::new(rel)).map_err(|e| self.error(e))?;
        index.write().map_err(|e| self.error(e))?;
        let tree_id = index.write_tree().map_err(|e| self.error(e))?;
        let parent = self.repo.head().ok().and_then(|h| h.peel_to_commit().ok());
        if let Some(p) = &parent {
            if p.tree_id() == tree_id {
                return Ok(None);
            }
        }
        let tree = self.repo.find_tree(tree_id).map_err(|e| self.error(e))?;
        let sig = Signature::now("anima", "anima@localhost").map_err(|e| self.error(e))?;
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        let oid = self
            .repo
            .commit(Some("HEAD"), &sig, &sig, message, &tree, &parents)
            .map_err(|e| self.error(e))?;
        Ok(Some(oid))
    }

    /// The commits that changed `users/<slug>.md`, newest first.
    pub fn log(&self, slug: &str) -> Result<Vec<Revision>, RepoError> {
        let rel = self.file_of(slug)?;
        self.log_file(&rel)
    }

    /// The commits that changed `rel`, newest first.
    fn log_file(&self, rel: &str) -> Result<Vec<Revision>, RepoError> {
        let mut walk = self.repo.revwalk().map_err(|e| self.error(e))?;
        if walk.push_head().is_err() {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for oid in walk {
            let oid = oid.map_err(|e| self.error(e))?;
            let commit = self.repo.find_commit(oid).map_err(|e| self.error(e))?;
            let blob_of = |c: &git2::Commit| {
                c.tree()
                    .ok()
                    .and_then(|t| t.get_path(Path::new(rel)).ok())
                    .map(|e| e.id())
            };
            let mine = blob_of(&commit);
            let before = commit.parent(0).ok().and_then(|p| blob_of(&p));
            if mine.is_some() && mine != before {
                out.push(Revision {
                    id: oid.to_string(),
                    time: commit.time().seconds(),
                    message: commit.message().unwrap_or("").trim_end().to_string(),
                });
            }
        }
        Ok(out)
    }
}

/// Exports user models from the store to the repository at `root`, opening it on first use.
pub struct Exporter {
    root: PathBuf,
    repo: Mutex<Option<ModelRepo>>,
    /// One export at a time within the process (the file lock keeps other processes out).
    exporting: tokio::sync::Mutex<()>,
    /// Whether this process exports at all: of several daemons sharing a store, only the one
    /// leading the soul's scheduled work does, so that one repository at a time receives the
    /// versions, each once and in order.
    here: std::sync::atomic::AtomicBool,
}

impl Exporter {
    pub fn new(root: &Path) -> Self {
        Exporter {
            root: root.to_path_buf(),
            repo: Mutex::new(None),
            exporting: tokio::sync::Mutex::new(()),
            here: std::sync::atomic::AtomicBool::new(true),
        }
    }

    /// Whether this process exports (see `here`); it does unless told otherwise.
    pub fn export_here(&self, here: bool) {
        self.here.store(here, std::sync::atomic::Ordering::SeqCst);
    }

    /// Commits every version of every user model that the store has and git does not, oldest
    /// first, marking each exported as it goes. Returns the commits made.
    pub async fn export_pending(self: &Arc<Self>, store: &dyn Users) -> Result<usize, RepoError> {
        let err = |e: &dyn std::fmt::Display| RepoError {
            path: self.root.clone(),
            message: e.to_string(),
        };
        if !self.here.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(0);
        }
        if store
            .unexported_models()
            .await
            .map_err(|e| err(&e))?
            .is_empty()
        {
            return Ok(0);
        }
        let _one = self.exporting.lock().await;
        // One exporter at a time across processes (creating the repository included); what is
        // pending is read again under the lock.
        let root = self.root.clone();
        let _lock = tokio::task::spawn_blocking(move || hold_exports(&root))
            .await
            .map_err(|e| err(&e))??;
        let mut commits = 0;
        for user in store.unexported_models().await.map_err(|e| err(&e))? {
            for (version, model, note) in store
                .pending_model_versions(&user.user_id)
                .await
                .map_err(|e| err(&e))?
            {
                let (me, slug) = (self.clone(), user.slug.clone());
                if tokio::task::spawn_blocking(move || me.commit(&slug, &model, &note))
                    .await
                    .map_err(|e| err(&e))??
                {
                    commits += 1;
                }
                store
                    .mark_exported(&user.user_id, version)
                    .await
                    .map_err(|e| err(&e))?;
                tracing::info!(user = %user.slug, version, "user model committed");
            }
        }
        Ok(commits)
    }

    /// Commits one version, opening the repository on first use; false when git already had
    /// exactly this text. Blocking.
    fn commit(&self, slug: &str, model: &str, note: &str) -> Result<bool, RepoError> {
        self.with_repo(|repo| Ok(repo.commit_model(slug, model, note)?.is_some()))
    }

    /// Runs `f` on the repository, opening it on first use. Blocking.
    fn with_repo<T>(
        &self,
        f: impl FnOnce(&ModelRepo) -> Result<T, RepoError>,
    ) -> Result<T, RepoError> {
        let mut guard = self.repo.lock().unwrap_or_else(|e| e.into_inner());
        if guard.is_none() {
            *guard = Some(ModelRepo::open_or_init(&self.root)?);
        }
        f(guard.as_ref().expect("opened above"))
    }
}

/// Waits for, and holds until dropped, the lock every export of the repository at `root` takes
/// (a file beside it), so that nothing is committed there meanwhile, by any process. Blocking.
pub fn hold_exports(root: &Path) -> Result<std::fs::File, RepoError> {
    let err = |e: std::io::Error| RepoError {
        path: root.to_path_buf(),
        message: e.to_string(),
    };
    let lock = std::fs::File::create(root.with_extension("lock")).map_err(err)?;
    lock.lock().map_err(err)?;
    Ok(lock)
}

/// The commit message: the change note, as data. Empty notes get a plain default.
fn commit_message(note: &str) -> String {
    let note = note.trim();
    if note.is_empty() {
        "Update user model".to_string()
    } else {
        format!("{note}\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_change_is_one_commit_with_the_note_as_message() {
        let dir = tempfile::tempdir().unwrap();
        let repo = ModelRepo::open_or_init(&dir.path().join("memory")).unwrap();
        repo.commit_model("tom", "# Tom\nv1", "First impression.")
            .unwrap()
            .unwrap();
        repo.commit_model("ada", "# Ada\n", "Met Ada.")
            .unwrap()
            .unwrap();
        let hostile = "$(rm -rf ~); `reboot` \"quoted\"\n\nsecond paragraph";
        repo.commit_model("tom", "# Tom\nv2", hostile)
            .unwrap()
            .unwrap();
        assert!(repo
            .commit_model("tom", "# Tom\nv2", "same again")
            .unwrap()
            .is_none());

        let log = repo.log("tom").unwrap();
        let messages: Vec<&str> = log.iter().map(|r| r.message.as_str()).collect();
        assert_eq!(messages, vec![hostile, "First impression."]);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("memory/users/tom.md")).unwrap(),
            "# Tom\nv2\n"
        );

        let git = git2::Repository::open(dir.path().join("memory")).unwrap();
        let head = git.head().unwrap().peel_to_commit().unwrap();
        assert_eq!(head.author().name().ok(), Some("anima"));
        let mut walk = git.revwalk().unwrap();
        walk.push_head().unwrap();
        assert_eq!(walk.count(), 3);
    }
}
