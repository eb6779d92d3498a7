//! A person's file out of the repository: from the working tree (a commit "forget <id>"), and on
//! request from every commit of its history.
//!
//! History is rewritten with libgit2 alone: every commit of HEAD's history is made again
//! without the file (author, committer and message kept), a commit that changed nothing else is
//! left out (its message was the person's change note), and the repository is then rebuilt from
//! what the new history reaches: a new object database, one branch, no reflog. No old commit,
//! tree or blob stays anywhere, packed or loose, and no ref or log leads to one.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use git2::{ObjectType, Oid, Repository, Signature, Tree, TreeWalkMode, TreeWalkResult};

use super::{ModelRepo, RepoError};

impl ModelRepo {
    /// Removes `users/<slug>.md` from the working tree and the index, and commits that as
    /// "forget <id>": whether the repository had the file.
    pub fn remove_model(&self, slug: &str, id: &str) -> Result<bool, RepoError> {
        let rel = self.file_of(slug)?;
        self.remove_file(&rel, id)
    }

    /// Removes `rel` from the working tree and the index and commits that as "forget <id>":
    /// whether the repository had it.
    pub(super) fn remove_file(&self, rel: &str, id: &str) -> Result<bool, RepoError> {
        match std::fs::remove_file(self.root.join(rel)) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(self.error(e)),
        }
        let mut index = self.repo.index().map_err(|e| self.error(e))?;
        index.read(false).map_err(|e| self.error(e))?;
        if index.get_path(Path::new(rel), 0).is_none() {
            return Ok(false);
        }
        index
            .remove_path(Path::new(rel))
            .map_err(|e| self.error(e))?;
        index.write().map_err(|e| self.error(e))?;
        let tree_id = index.write_tree().map_err(|e| self.error(e))?;
        let tree = self.repo.find_tree(tree_id).map_err(|e| self.error(e))?;
        let parent = self.repo.head().ok().and_then(|h| h.peel_to_commit().ok());
        let sig = Signature::now("anima", "anima@localhost").map_err(|e| self.error(e))?;
        let parents: Vec<&git2::Commit> = parent.iter().collect();
        self.repo
            .commit(
                Some("HEAD"),
                &sig,
                &sig,
                &format!("forget {id}\n"),
                &tree,
                &parents,
            )
            .map_err(|e| self.error(e))?;
        Ok(true)
    }

    /// Rewrites HEAD's history so that no commit holds `users/<slug>.md`, and rebuilds the
    /// repository from it: the commits left out (those that changed only that file). The file
    /// should be gone from the working tree first (`remove_model`). Consumes the repository:
    /// its folder holds another one afterwards.
    pub fn purge_history(self, slug: &str) -> Result<usize, RepoError> {
        let rel = self.file_of(slug)?;
        self.purge_file(&rel)
    }

    /// Rewrites HEAD's history without `rel` and rebuilds the repository (see
    /// `purge_history`).
    pub(super) fn purge_file(self, rel: &str) -> Result<usize, RepoError> {
        let (head, branch) = match self.repo.head() {
            Ok(head) => (
                head.peel_to_commit().map_err(|e| self.error(e))?.id(),
                head.name().unwrap_or("refs/heads/master").to_string(),
            ),
            Err(_) => return Ok(0),
        };
        let (new_head, dropped) = self.rewrite(head, rel)?;
        self.rebuild(new_head, &branch)?;
        Ok(dropped)
    }

    /// Makes every commit of `head`'s history again without `rel`, oldest first: the new head
    /// (none when no commit is left) and how many were left out.
    fn rewrite(&self, head: Oid, rel: &str) -> Result<(Option<Oid>, usize), RepoError> {
        let err = |e: git2::Error| self.error(e);
        let mut walk = self.repo.revwalk().map_err(err)?;
        walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)
            .map_err(err)?;
        walk.push(head).map_err(err)?;
        let mut made: HashMap<Oid, Option<Oid>> = HashMap::new();
        let mut dropped = 0;
        for oid in walk {
            let old = self.repo.find_commit(oid.map_err(err)?).map_err(err)?;
            let tree = self.without(&old.tree().map_err(err)?, rel)?;
            let mut parents = Vec::new();
            for p in old.parent_ids() {
                if let Some(Some(new)) = made.get(&p) {
                    if !parents.contains(new) {
                        parents.push(*new);
                    }
                }
            }
            let same_as_parent = match parents.as_slice() {
                [] => tree.is_empty(),
                [p] => self.repo.find_commit(*p).map_err(err)?.tree_id() == tree.id(),
                _ => false,
            };
            if same_as_parent {
                made.insert(old.id(), parents.first().copied());
                dropped += 1;
                continue;
            }
            let parents: Vec<git2::Commit> = parents
                .iter()
                .map(|p| self.repo.find_commit(*p))
                .collect::<Result<_, _>>()
                .map_err(err)?;
            let parents: Vec<&git2::Commit> = parents.iter().collect();
            let new = self
                .repo
                .commit(
                    None,
                    &old.author(),
                    &old.committer(),
                    old.message_raw().unwrap_or(""),
                    &tree,
                    &parents,
                )
                .map_err(err)?;
            made.insert(old.id(), Some(new));
        }
        Ok((made.get(&head).copied().flatten(), dropped))
    }

    /// `tree` without the file at `rel` (`users/<slug>.md`), and without `users` once empty.
    fn without(&self, tree: &Tree<'_>, rel: &str) -> Result<Tree<'_>, RepoError> {
        let err = |e: git2::Error| self.error(e);
        if tree.get_path(Path::new(rel)).is_err() {
            return self.repo.find_tree(tree.id()).map_err(err);
        }
        let (dir, file) = rel.split_once('/').expect("users/<slug>.md");
        let users = self
            .repo
            .find_tree(tree.get_path(Path::new(dir)).map_err(err)?.id())
            .map_err(err)?;
        let mut inner = self.repo.treebuilder(Some(&users)).map_err(err)?;
        inner.remove(file).map_err(err)?;
        let mut outer = self.repo.treebuilder(Some(tree)).map_err(err)?;
        if inner.is_empty() {
            outer.remove(dir).map_err(err)?;
        } else {
            let id = inner.write().map_err(err)?;
            outer.insert(dir, id, 0o040000).map_err(err)?;
        }
        let id = outer.write().map_err(err)?;
        self.repo.find_tree(id).map_err(err)
    }

    /// Replaces the repository by one holding only what `head` reaches, with `branch` at it
    /// (unborn when there is no head) and the index read from its tree. The working tree is
    /// left as it is.
    fn rebuild(self, head: Option<Oid>, branch: &str) -> Result<(), RepoError> {
        let building = self.root.join(".anima-forget");
        let set_aside = self.root.join(".anima-forgotten.git");
        for stale in [&building, &set_aside] {
            // What a rebuild cut short left.
            if stale.exists() {
                std::fs::remove_dir_all(stale).map_err(|e| self.error(e))?;
            }
        }
        let fresh = Repository::init(&building).map_err(|e| self.error(e))?;
        if let Some(head) = head {
            self.copy_reachable(&fresh, head)?;
            fresh
                .reference(branch, head, true, "anima users forget --purge-history")
                .map_err(|e| self.error(e))?;
        }
        fresh.set_head(branch).map_err(|e| self.error(e))?;
        drop(fresh);
        let ModelRepo { repo, root } = self;
        let err = |e: &dyn std::fmt::Display| RepoError {
            path: root.clone(),
            message: e.to_string(),
        };
        let old = repo.path().to_path_buf();
        drop(repo);
        std::fs::rename(&old, &set_aside).map_err(|e| err(&e))?;
        std::fs::rename(building.join(".git"), &old).map_err(|e| err(&e))?;
        std::fs::remove_dir_all(&set_aside).map_err(|e| err(&e))?;
        std::fs::remove_dir_all(&building).map_err(|e| err(&e))?;
        let repo = Repository::open(&root).map_err(|e| err(&e))?;
        let mut index = repo.index().map_err(|e| err(&e))?;
        match head {
            Some(head) => {
                let tree = repo
                    .find_commit(head)
                    .and_then(|c| c.tree())
                    .map_err(|e| err(&e))?;
                index.read_tree(&tree).map_err(|e| err(&e))?;
            }
            None => index.clear().map_err(|e| err(&e))?,
        }
        index.write().map_err(|e| err(&e))
    }

    /// Copies every commit, tree and blob `head` reaches into `to`'s object database.
    fn copy_reachable(&self, to: &Repository, head: Oid) -> Result<(), RepoError> {
        let err = |e: git2::Error| self.error(e);
        let (from, into) = (self.repo.odb().map_err(err)?, to.odb().map_err(err)?);
        let mut copied = HashSet::new();
        let mut copy = |oid: Oid| -> Result<(), git2::Error> {
            if copied.insert(oid) {
                let o = from.read(oid)?;
                into.write(o.kind(), o.data())?;
            }
            Ok(())
        };
        let mut walk = self.repo.revwalk().map_err(err)?;
        walk.push(head).map_err(err)?;
        for oid in walk {
            let commit = self.repo.find_commit(oid.map_err(err)?).map_err(err)?;
            copy(commit.id()).map_err(err)?;
            let tree = commit.tree().map_err(err)?;
            copy(tree.id()).map_err(err)?;
            let mut failed = None;
            let walked = tree.walk(TreeWalkMode::PreOrder, |_, entry| {
                let wanted = matches!(entry.kind(), Some(ObjectType::Blob | ObjectType::Tree));
                match wanted.then(|| copy(entry.id())) {
                    Some(Err(e)) => {
                        failed = Some(e);
                        TreeWalkResult::Abort
                    }
                    _ => TreeWalkResult::Ok,
                }
            });
            if let Some(e) = failed {
                return Err(err(e));
            }
            walked.map_err(err)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every object in the repository at `root`, read whole (what `git cat-file` would show),
    /// and every file under `.git` as bytes (refs, logs, the index).
    fn everything(root: &Path) -> String {
        let repo = Repository::open(root).unwrap();
        let mut all = String::new();
        let odb = repo.odb().unwrap();
        odb.foreach(|oid| {
            all.push_str(&String::from_utf8_lossy(odb.read(*oid).unwrap().data()));
            true
        })
        .unwrap();
        let mut dirs = vec![repo.path().to_path_buf()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    dirs.push(path);
                } else {
                    all.push_str(&String::from_utf8_lossy(&std::fs::read(path).unwrap()));
                }
            }
        }
        all
    }

    #[test]
    fn a_purged_file_is_in_no_commit_object_ref_or_log_and_the_others_keep_their_history() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("memory");
        let repo = ModelRepo::open_or_init(&root).unwrap();
        repo.commit_model("tom", "# Tom\nlikes quinces", "Tom's first note")
            .unwrap();
        repo.commit_model("ada", "# Ada\n", "Met Ada.").unwrap();
        repo.commit_model("tom", "# Tom\nlikes quinces and figs", "Tom's second note")
            .unwrap();
        repo.commit_model("ada", "# Ada\npoet", "Ada writes.")
            .unwrap();
        assert!(everything(&root).contains("quinces"));

        assert!(repo.remove_model("tom", "U1").unwrap());
        assert!(!root.join("users/tom.md").exists());
        assert!(
            !repo.remove_model("tom", "U1").unwrap(),
            "nothing left to remove"
        );
        assert_eq!(
            repo.purge_history("tom").unwrap(),
            3,
            "two notes and the removal"
        );

        let all = everything(&root);
        for gone in ["quinces", "Tom's", "forget U1", "tom.md"] {
            assert!(!all.contains(gone), "{gone:?} is still in the repository");
        }
        let repo = ModelRepo::open_existing(&root).unwrap();
        let notes: Vec<String> = repo
            .log("ada")
            .unwrap()
            .into_iter()
            .map(|r| r.message)
            .collect();
        assert_eq!(notes, ["Ada writes.", "Met Ada."]);
        let git = Repository::open(&root).unwrap();
        assert!(
            git.statuses(None).unwrap().is_empty(),
            "the index is the tree"
        );
        // Exports go on as before.
        repo.commit_model("ada", "# Ada\npoet and mathematician", "More.")
            .unwrap()
            .unwrap();
        assert_eq!(repo.log("ada").unwrap().len(), 3);
    }

    #[test]
    fn a_name_that_is_not_a_slug_is_refused_never_a_path() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("memory");
        let repo = ModelRepo::open_or_init(&root).unwrap();
        std::fs::write(dir.path().join("secret.md"), "keep me").unwrap();
        for name in ["../secret", "a/b", "\"tom\"", "", "..", "Tom", "tom.md"] {
            let e = repo.remove_model(name, "U1").unwrap_err();
            assert!(e.message.contains("not a user model's name"), "{name}: {e}");
            assert!(repo.commit_model(name, "x", "n").is_err(), "{name}");
        }
        assert!(dir.path().join("secret.md").exists());
        assert_eq!(repo.purge_history("tom").unwrap(), 0, "no history yet");
    }
}
