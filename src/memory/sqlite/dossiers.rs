//! The dossiers' face on SQLite: a write is one transaction (the head and a version row), a
//! read one statement.

use async_trait::async_trait;
use rusqlite::{params, OptionalExtension, Row};

use super::{Result, Sqlite};
use crate::memory::faces::{DossierRecord, DossierVersion, DossierWrite, Dossiers};
use crate::memory::now_ms;

const WHOLE: &str = "SELECT d.slug, d.name, d.aliases, d.kind, d.about, v.text, d.version,
                            d.exported_version, d.updated_at
                     FROM dossiers d JOIN dossier_versions v
                       ON v.slug = d.slug AND v.version = d.version";

fn record(r: &Row) -> rusqlite::Result<DossierRecord> {
    let aliases: String = r.get(2)?;
    Ok(DossierRecord {
        slug: r.get(0)?,
        name: r.get(1)?,
        aliases: aliases.lines().map(str::to_string).collect(),
        kind: r.get(3)?,
        about: r.get(4)?,
        text: r.get(5)?,
        version: r.get(6)?,
        exported_version: r.get(7)?,
        updated_at: r.get(8)?,
    })
}

#[async_trait]
impl Dossiers for Sqlite {
    async fn write_dossier(&self, d: DossierWrite) -> Result<i64> {
        self.call(move |db| {
            db.write(|tx| {
                let current: Option<(i64, String)> = tx
                    .prepare_cached(
                        "SELECT d.version, v.text FROM dossiers d JOIN dossier_versions v
                           ON v.slug = d.slug AND v.version = d.version WHERE d.slug = ?1",
                    )?
                    .query_row([&d.slug], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?;
                if let Some((version, text)) = &current {
                    if *text == d.text {
                        return Ok(*version);
                    }
                }
                let version = current.map_or(1, |(v, _)| v + 1);
                let at = now_ms();
                tx.prepare_cached(
                    "INSERT INTO dossiers (slug, name, aliases, kind, about, version, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT (slug) DO UPDATE SET name = excluded.name,
                         aliases = excluded.aliases, kind = excluded.kind,
                         about = coalesce(excluded.about, dossiers.about),
                         version = excluded.version, updated_at = excluded.updated_at",
                )?
                .execute(params![
                    d.slug,
                    d.name,
                    d.aliases.join("\n"),
                    d.kind,
                    d.about,
                    version,
                    at
                ])?;
                tx.prepare_cached(
                    "INSERT INTO dossier_versions (slug, version, text, note, at)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                )?
                .execute(params![d.slug, version, d.text, d.note, at])?;
                Ok(version)
            })
        })
        .await
    }

    async fn dossier(&self, slug: &str) -> Result<Option<DossierRecord>> {
        let slug = slug.to_owned();
        self.call(move |db| {
            Ok(db
                .conn()
                .prepare_cached(&format!("{WHOLE} WHERE d.slug = ?1"))?
                .query_row([slug], record)
                .optional()?)
        })
        .await
    }

    async fn dossiers(&self) -> Result<Vec<DossierRecord>> {
        self.call(|db| {
            let conn = db.conn();
            let mut stmt = conn.prepare_cached(&format!("{WHOLE} ORDER BY d.slug"))?;
            let rows = stmt
                .query_map([], record)?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
        .await
    }

    async fn dossiers_stamp(&self) -> Result<(i64, i64, i64)> {
        self.call(|db| {
            Ok(db.conn().prepare_cached(
                "SELECT count(*), coalesce(sum(version), 0), coalesce(max(updated_at), 0) FROM dossiers",
            )?
            .query_row([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?)
        })
        .await
    }

    async fn dossier_history(&self, slug: &str) -> Result<Vec<(i64, String, i64)>> {
        let slug = slug.to_owned();
        self.call(move |db| {
            let conn = db.conn();
            let mut stmt = conn.prepare_cached(
                "SELECT version, note, at FROM dossier_versions WHERE slug = ?1 ORDER BY version",
            )?;
            let rows = stmt
                .query_map([slug], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
        .await
    }

    async fn pending_dossier_versions(&self) -> Result<Vec<DossierVersion>> {
        self.call(|db| {
            let conn = db.conn();
            let mut stmt = conn.prepare_cached(
                "SELECT v.slug, v.version, v.text, v.note
                 FROM dossier_versions v JOIN dossiers d ON d.slug = v.slug
                 WHERE v.version > d.exported_version ORDER BY v.at, v.slug, v.version",
            )?;
            let rows = stmt
                .query_map([], |r| {
                    Ok(DossierVersion {
                        slug: r.get(0)?,
                        version: r.get(1)?,
                        text: r.get(2)?,
                        note: r.get(3)?,
                    })
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            Ok(rows)
        })
        .await
    }

    async fn mark_dossier_exported(&self, slug: &str, version: i64) -> Result<()> {
        let slug = slug.to_owned();
        self.call(move |db| {
            db.write(|tx| {
                tx.prepare_cached(
                    "UPDATE dossiers SET exported_version = max(exported_version, ?2)
                     WHERE slug = ?1",
                )?
                .execute(params![slug, version])?;
                Ok(())
            })
        })
        .await
    }

    async fn forget_dossiers(&self, slugs: &[String]) -> Result<u64> {
        let slugs = slugs.to_vec();
        self.call(move |db| {
            db.write(|tx| {
                let mut versions = 0;
                for slug in &slugs {
                    versions += tx
                        .prepare_cached("DELETE FROM dossier_versions WHERE slug = ?1")?
                        .execute([slug])? as u64;
                    tx.prepare_cached("DELETE FROM dossiers WHERE slug = ?1")?
                        .execute([slug])?;
                }
                Ok(versions)
            })
        })
        .await
    }
}
