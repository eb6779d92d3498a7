//! The dossiers' face on PostgreSQL (see `faces::Dossiers`), as on SQLite: a write is one
//! transaction holding the dossier's row, times as unix ms from the soul's clock.

use async_trait::async_trait;
use tokio_postgres::Row;

use super::{Postgres, Prepared};
use crate::memory::faces::{DossierRecord, DossierVersion, DossierWrite, Dossiers};
use crate::memory::{now_ms, StoreError};

type Result<T> = std::result::Result<T, StoreError>;

const WHOLE: &str = "SELECT d.slug, d.name, d.aliases, d.kind, d.about, v.text, d.version,
                            d.exported_version, d.updated_at
                     FROM dossiers d JOIN dossier_versions v
                       ON v.slug = d.slug AND v.version = d.version";

fn record(r: &Row) -> DossierRecord {
    let aliases: String = r.get(2);
    DossierRecord {
        slug: r.get(0),
        name: r.get(1),
        aliases: aliases.lines().map(str::to_string).collect(),
        kind: r.get(3),
        about: r.get(4),
        text: r.get(5),
        version: r.get(6),
        exported_version: r.get(7),
        updated_at: r.get(8),
    }
}

#[async_trait]
impl Dossiers for Postgres {
    async fn write_dossier(&self, d: DossierWrite) -> Result<i64> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            // The row locked (made empty on a first version), so two writers number in turn.
            tx.run(
                "INSERT INTO dossiers (slug, name, kind, version, updated_at)
                 VALUES ($1, $2, $3, 0, 0) ON CONFLICT (slug) DO NOTHING",
                &[&d.slug, &d.name, &d.kind],
            )
            .await?;
            let head = tx
                .row(
                    "SELECT version FROM dossiers WHERE slug = $1 FOR UPDATE",
                    &[&d.slug],
                )
                .await?;
            let current: i64 = head.get(0);
            let same = tx
                .maybe_row(
                    "SELECT 1 FROM dossier_versions WHERE slug = $1 AND version = $2 AND text = $3",
                    &[&d.slug, &current, &d.text],
                )
                .await?;
            if same.is_some() {
                tx.commit().await?;
                return Ok(current);
            }
            let version = current + 1;
            let at = now_ms();
            tx.run(
                "UPDATE dossiers SET name = $2, aliases = $3, kind = $4,
                     about = coalesce($5, about), version = $6, updated_at = $7
                 WHERE slug = $1",
                &[
                    &d.slug,
                    &d.name,
                    &d.aliases.join("\n"),
                    &d.kind,
                    &d.about,
                    &version,
                    &at,
                ],
            )
            .await?;
            tx.run(
                "INSERT INTO dossier_versions (slug, version, text, note, at)
                 VALUES ($1, $2, $3, $4, $5)",
                &[&d.slug, &version, &d.text, &d.note, &at],
            )
            .await?;
            tx.commit().await?;
            Ok(version)
        }
        .await;
        self.noted(result)
    }

    async fn dossier(&self, slug: &str) -> Result<Option<DossierRecord>> {
        let client = self.client().await?;
        let row = client
            .maybe_row(&format!("{WHOLE} WHERE d.slug = $1"), &[&slug])
            .await?;
        Ok(row.as_ref().map(record))
    }

    async fn dossiers(&self) -> Result<Vec<DossierRecord>> {
        let client = self.client().await?;
        let rows = client
            .rows(&format!("{WHOLE} ORDER BY d.slug"), &[])
            .await?;
        Ok(rows.iter().map(record).collect())
    }

    async fn dossiers_stamp(&self) -> Result<(i64, i64, i64)> {
        let client = self.client().await?;
        let r = client
            .row(
                "SELECT count(*), coalesce(sum(version), 0)::bigint, coalesce(max(updated_at), 0)
                 FROM dossiers WHERE version > 0",
                &[],
            )
            .await?;
        Ok((r.get(0), r.get(1), r.get(2)))
    }

    async fn dossier_history(&self, slug: &str) -> Result<Vec<(i64, String, i64)>> {
        let client = self.client().await?;
        let rows = client
            .rows(
                "SELECT version, note, at FROM dossier_versions WHERE slug = $1 ORDER BY version",
                &[&slug],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get(1), r.get(2)))
            .collect())
    }

    async fn pending_dossier_versions(&self) -> Result<Vec<DossierVersion>> {
        let client = self.client().await?;
        let rows = client
            .rows(
                "SELECT v.slug, v.version, v.text, v.note
                 FROM dossier_versions v JOIN dossiers d ON d.slug = v.slug
                 WHERE v.version > d.exported_version ORDER BY v.at, v.slug, v.version",
                &[],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| DossierVersion {
                slug: r.get(0),
                version: r.get(1),
                text: r.get(2),
                note: r.get(3),
            })
            .collect())
    }

    async fn mark_dossier_exported(&self, slug: &str, version: i64) -> Result<()> {
        let result = async {
            let client = self.client().await?;
            client
                .run(
                    "UPDATE dossiers SET exported_version = greatest(exported_version, $2)
                     WHERE slug = $1",
                    &[&slug, &version],
                )
                .await?;
            Ok(())
        }
        .await;
        self.noted(result)
    }

    async fn forget_dossiers(&self, slugs: &[String]) -> Result<u64> {
        let result = async {
            let mut client = self.client().await?;
            let tx = client.transaction().await?;
            let versions = tx
                .run(
                    "DELETE FROM dossier_versions WHERE slug = ANY($1)",
                    &[&slugs],
                )
                .await?;
            tx.run("DELETE FROM dossiers WHERE slug = ANY($1)", &[&slugs])
                .await?;
            tx.commit().await?;
            Ok(versions)
        }
        .await;
        self.noted(result)
    }
}
