//! The dossiers' face: what the soul learned of the people and subjects it hears about, each
//! dossier a row with its versions (the file text and a change note), exported to the git
//! repository beside the user models (`dossiers/<slug>.md`). Hand-written dossiers are the
//! soul's files, never the store's.

use async_trait::async_trait;

use super::Result;

/// A learned dossier as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DossierRecord {
    /// `a-z`, `0-9` and `-` only (`dossier::slug`); the key.
    pub slug: String,
    pub name: String,
    pub aliases: Vec<String>,
    /// `person` or `subject`.
    pub kind: String,
    /// The Slack id of the person it is about, when the soul knew it (a mention).
    pub about: Option<String>,
    /// The current version's file text (frontmatter and markdown).
    pub text: String,
    pub version: i64,
    pub exported_version: i64,
    /// When the current version was written (unix ms).
    pub updated_at: i64,
}

/// A new version of a learned dossier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DossierWrite {
    pub slug: String,
    pub name: String,
    pub aliases: Vec<String>,
    pub kind: String,
    pub about: Option<String>,
    /// The whole file text of the new version.
    pub text: String,
    /// What changed, in a sentence (the git commit's message).
    pub note: String,
}

/// One version of a dossier not yet in git.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DossierVersion {
    pub slug: String,
    pub version: i64,
    pub text: String,
    pub note: String,
}

/// The learned dossiers and their versions.
#[async_trait]
pub trait Dossiers: Send + Sync {
    /// Writes a new version of `d.slug` (the dossier made on its first), with its note: the
    /// version written. A text identical to the current one writes nothing and returns the
    /// current version. One write transaction.
    async fn write_dossier(&self, d: DossierWrite) -> Result<i64>;
    /// One dossier with its current text; `None` when there is none. A read.
    async fn dossier(&self, slug: &str) -> Result<Option<DossierRecord>>;
    /// Every dossier, by slug, each with its current text. A read.
    async fn dossiers(&self) -> Result<Vec<DossierRecord>>;
    /// What changes whenever a dossier is written or removed: (how many, the sum of their
    /// versions, the latest write's time); a reader keeps its index until it moves. A read.
    async fn dossiers_stamp(&self) -> Result<(i64, i64, i64)>;
    /// A dossier's history: (version, change note, unix ms), oldest first. A read.
    async fn dossier_history(&self, slug: &str) -> Result<Vec<(i64, String, i64)>>;
    /// Versions not yet committed to git, of every dossier, oldest first. A read.
    async fn pending_dossier_versions(&self) -> Result<Vec<DossierVersion>>;
    /// The dossier is in git up to `version`: never taken back by an older one. One write.
    async fn mark_dossier_exported(&self, slug: &str, version: i64) -> Result<()>;
    /// Removes these dossiers and every version of them: how many versions went. One write
    /// transaction.
    async fn forget_dossiers(&self, slugs: &[String]) -> Result<u64>;
}
