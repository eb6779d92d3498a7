//! The dossiers' face on every backend: versions numbered in order with their notes, an
//! identical text writing nothing, the stamp moving with every write, what git has marked and
//! never taken back, and forgetting removing every version.

use anima::memory::faces::{DossierWrite, Dossiers};

use crate::on_every_backend;

fn write(slug: &str, text: &str, note: &str) -> DossierWrite {
    DossierWrite {
        slug: slug.into(),
        name: format!("Name of {slug}"),
        aliases: vec!["Alias ✨".into(), "second".into()],
        kind: "person".into(),
        about: None,
        text: text.into(),
        note: note.into(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dossiers_are_versioned_exported_and_forgotten() {
    on_every_backend!(|s, name| {
        assert_eq!(s.dossiers_stamp().await.unwrap(), (0, 0, 0), "{name}");
        assert_eq!(
            s.write_dossier(write("priya", "v1 ✨", "first"))
                .await
                .unwrap(),
            1
        );
        let stamp = s.dossiers_stamp().await.unwrap();
        assert_eq!(
            s.write_dossier(write("priya", "v1 ✨", "same"))
                .await
                .unwrap(),
            1,
            "{name}: nothing new"
        );
        assert_eq!(s.dossiers_stamp().await.unwrap(), stamp, "{name}");
        assert_eq!(
            s.write_dossier(write("priya", "v2", "second"))
                .await
                .unwrap(),
            2
        );
        assert_ne!(s.dossiers_stamp().await.unwrap(), stamp, "{name}");
        s.write_dossier(write("rust", "a language", "met"))
            .await
            .unwrap();

        let d = s.dossier("priya").await.unwrap().unwrap();
        assert_eq!(
            (d.text.as_str(), d.version, d.exported_version),
            ("v2", 2, 0),
            "{name}"
        );
        assert_eq!(d.aliases, vec!["Alias ✨", "second"], "{name}");
        assert_eq!(s.dossier("nobody").await.unwrap(), None, "{name}");
        let slugs: Vec<String> = s
            .dossiers()
            .await
            .unwrap()
            .into_iter()
            .map(|d| d.slug)
            .collect();
        assert_eq!(slugs, ["priya", "rust"], "{name}");
        let notes: Vec<String> = s
            .dossier_history("priya")
            .await
            .unwrap()
            .into_iter()
            .map(|(v, n, _)| format!("{v} {n}"))
            .collect();
        assert_eq!(notes, ["1 first", "2 second"], "{name}");

        let pending: Vec<(String, i64)> = s
            .pending_dossier_versions()
            .await
            .unwrap()
            .into_iter()
            .map(|v| (v.slug, v.version))
            .collect();
        assert_eq!(pending.len(), 3, "{name}: {pending:?}");
        assert!(
            pending.iter().position(|p| *p == ("priya".into(), 1))
                < pending.iter().position(|p| *p == ("priya".into(), 2))
        );
        s.mark_dossier_exported("priya", 2).await.unwrap();
        s.mark_dossier_exported("priya", 1).await.unwrap();
        assert_eq!(
            s.dossier("priya").await.unwrap().unwrap().exported_version,
            2,
            "{name}: never taken back"
        );
        assert_eq!(
            s.pending_dossier_versions().await.unwrap().len(),
            1,
            "{name}"
        );

        assert_eq!(
            s.forget_dossiers(&["priya".into()]).await.unwrap(),
            2,
            "{name}"
        );
        assert_eq!(s.dossier("priya").await.unwrap(), None, "{name}");
        assert!(
            s.dossier_history("priya").await.unwrap().is_empty(),
            "{name}"
        );
        assert_eq!(s.dossiers_stamp().await.unwrap().0, 1, "{name}");
    });
}
