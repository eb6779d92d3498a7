//! The dossiers' scenario: versions written (one identical, one after another), read, listed,
//! exported and forgotten, in the same account on both backends.

use anima::memory::faces::{DossierWrite, Store};

use super::Seen;

fn write(slug: &str, text: &str, note: &str) -> DossierWrite {
    DossierWrite {
        slug: slug.into(),
        name: format!("Dossier “{slug}” ✨"),
        aliases: vec!["Ada".into(), "the Countess".into()],
        kind: "person".into(),
        about: Some("U2".into()),
        text: text.into(),
        note: note.into(),
    }
}

pub(super) async fn written_exported_forgotten(s: &dyn Store, seen: &mut Seen) {
    for (slug, text, note) in [
        ("ada", "v1 é", "first"),
        ("ada", "v1 é", "same again"),
        ("ada", "v2 \u{1F980}", "second"),
        ("rust", "a language", "met"),
    ] {
        seen.note(
            "written",
            s.write_dossier(write(slug, text, note)).await.unwrap(),
        );
    }
    let (count, versions, _) = s.dossiers_stamp().await.unwrap();
    seen.note("stamp", (count, versions));
    let strip = |mut d: anima::memory::faces::DossierRecord| {
        d.updated_at = 0;
        d
    };
    seen.note("ada", s.dossier("ada").await.unwrap().map(strip));
    let all: Vec<_> = s.dossiers().await.unwrap().into_iter().map(strip).collect();
    seen.note("all", all);
    let history: Vec<(i64, String)> = s
        .dossier_history("ada")
        .await
        .unwrap()
        .into_iter()
        .map(|(v, n, _)| (v, n))
        .collect();
    seen.note("history", history);
    seen.note("pending", s.pending_dossier_versions().await.unwrap());
    s.mark_dossier_exported("ada", 2).await.unwrap();
    s.mark_dossier_exported("ada", 1).await.unwrap();
    seen.note("pending after", s.pending_dossier_versions().await.unwrap());
    seen.note(
        "forgotten",
        s.forget_dossiers(&["ada".into(), "nobody".into()])
            .await
            .unwrap(),
    );
    seen.note("left", s.dossiers().await.unwrap().len());
}
