//! The learned dossiers in the repository beside the user models: `dossiers/<slug>.md`, one
//! commit per version, its change note as the message; removed and purged from history as a
//! forgotten person's model is. The slug is checked as a user model's is (`file_in`): a name
//! from outside never becomes a path.

use std::sync::Arc;

use git2::Oid;

use super::{hold_exports, Exporter, ModelRepo, RepoError, Revision};
use crate::memory::faces::Dossiers;

const DIR: &str = "dossiers";

impl ModelRepo {
    /// Writes `dossiers/<slug>.md` and commits it; `None` when git already had this text.
    pub fn commit_dossier(
        &self,
        slug: &str,
        text: &str,
        note: &str,
    ) -> Result<Option<Oid>, RepoError> {
        let rel = self.file_in(DIR, slug)?;
        let note = note.trim();
        let message = if note.is_empty() {
            "Update dossier".to_string()
        } else {
            format!("{note}\n")
        };
        self.commit_file(&rel, text, &message)
    }

    /// The commits that changed `dossiers/<slug>.md`, newest first.
    pub fn dossier_log(&self, slug: &str) -> Result<Vec<Revision>, RepoError> {
        let rel = self.file_in(DIR, slug)?;
        self.log_file(&rel)
    }

    /// Removes `dossiers/<slug>.md`, committed as "forget <id>": whether git had it.
    pub fn remove_dossier(&self, slug: &str, id: &str) -> Result<bool, RepoError> {
        let rel = self.file_in(DIR, slug)?;
        self.remove_file(&rel, id)
    }

    /// Rewrites history so that no commit holds `dossiers/<slug>.md` (see `purge_history`).
    pub fn purge_dossier_history(self, slug: &str) -> Result<usize, RepoError> {
        let rel = self.file_in(DIR, slug)?;
        self.purge_file(&rel)
    }
}

impl Exporter {
    /// Commits every version of every learned dossier that git does not have, oldest first,
    /// each marked exported as it goes (under the same locks as the user models): the commits
    /// made.
    pub async fn export_pending_dossiers(
        self: &Arc<Self>,
        store: &dyn Dossiers,
    ) -> Result<usize, RepoError> {
        export_pending_dossiers(self, store).await
    }
}

/// See [`Exporter::export_pending_dossiers`].
async fn export_pending_dossiers(
    exporter: &Arc<Exporter>,
    store: &dyn Dossiers,
) -> Result<usize, RepoError> {
    let err = |e: &dyn std::fmt::Display| RepoError {
        path: exporter.root.clone(),
        message: e.to_string(),
    };
    if !exporter.here.load(std::sync::atomic::Ordering::SeqCst) {
        return Ok(0);
    }
    if store
        .pending_dossier_versions()
        .await
        .map_err(|e| err(&e))?
        .is_empty()
    {
        return Ok(0);
    }
    let _one = exporter.exporting.lock().await;
    let root = exporter.root.clone();
    let _lock = tokio::task::spawn_blocking(move || hold_exports(&root))
        .await
        .map_err(|e| err(&e))??;
    let mut commits = 0;
    for v in store
        .pending_dossier_versions()
        .await
        .map_err(|e| err(&e))?
    {
        let me = exporter.clone();
        let (slug, text, note) = (v.slug.clone(), v.text, v.note);
        let made = tokio::task::spawn_blocking(move || {
            me.with_repo(|repo| Ok(repo.commit_dossier(&slug, &text, &note)?.is_some()))
        })
        .await
        .map_err(|e| err(&e))??;
        commits += usize::from(made);
        store
            .mark_dossier_exported(&v.slug, v.version)
            .await
            .map_err(|e| err(&e))?;
        tracing::info!(dossier = %v.slug, version = v.version, "dossier committed");
    }
    Ok(commits)
}
