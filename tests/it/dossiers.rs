//! Dossiers end to end: the real `anima run` against the fake Slack and the fake model. A
//! colleague named in passing gets a dossier; a message in another conversation naming her
//! brings it into the prompt, fenced, and the soul's update becomes its second version; an
//! ordinary message's prompt has no dossier step and no dossier; a hand-written dossier is
//! recalled and never overwritten (what the soul learns goes beside it); the git repository has
//! every version in order; `anima dossiers` shows them; a subject named `../../etc` is a slug;
//! a 1 MB hand-written file and 10,000 dossiers are bounded.

use std::path::{Path, PathBuf};

use crate::support;

use anima::memory::faces::DossierWrite;
use serde_json::{json, Value};
use support::daemon::{home, Daemon};
use support::slack::FakeSlack;
use support::*;

fn dm(channel: &str, ts: &str, text: &str) -> Value {
    dm_from("U1", channel, ts, text)
}

fn dm_from(user: &str, channel: &str, ts: &str, text: &str) -> Value {
    json!({"type":"message","channel":channel,"user":user,"text":text,"ts":ts,"event_ts":ts,"channel_type":"im"})
}

const ADA: &str = "---\nname: Ada Lovelace\naliases: [Ada, Countess of Lovelace]\nkind: person\n---\nWrote the first published algorithm, for the Analytical Engine.\n";

/// Copies the shipped soul into the home, with these hand-written dossiers, and points the
/// home's config at the copy.
fn own_soul(home: &Home, dossiers: &[(&str, &str)]) -> PathBuf {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("soul");
    let soul = home.dir.path().join("soul");
    copy_dir(&shipped, &soul);
    std::fs::create_dir_all(soul.join("dossiers")).unwrap();
    for (file, text) in dossiers {
        std::fs::write(soul.join("dossiers").join(file), text).unwrap();
    }
    let cfg = std::fs::read_to_string(home.config()).unwrap();
    let cfg = cfg.replace(
        &format!("soul_dir = \"{}\"", shipped.display()),
        &format!("soul_dir = \"{}\"", soul.display()),
    );
    std::fs::write(home.config(), cfg).unwrap();
    soul
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            copy_dir(&p, &to.join(e.file_name()));
        } else {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// The soul's answers: when the dossier steps are asked, a dossier for whoever the message
/// names (an attempt to rewrite Ada's, and one named `../../etc`).
fn respond(turn: &str) -> String {
    let message = current_message(turn);
    let mut out = answer("Noted.");
    if !turn.contains("<dossier_check>") {
        return out;
    }
    let (name, text, note) = if message.contains("Priya Raman") {
        (
            "Priya Raman",
            "Runs the compiler team.",
            "Heard of her at lunch.",
        )
    } else if message.contains("Priya") {
        (
            "Priya Raman",
            "Runs the compiler team. Loves Rust.",
            "She loves Rust.",
        )
    } else if message.contains("|bob") {
        ("bob", "Owns the release plan.", "Mentioned by Slack.")
    } else if message.contains("Lovelace") {
        ("Ada Lovelace", "I REWROTE HER.", "Tried to rewrite Ada.")
    } else if message.contains("again") {
        ("../../etc", "root:x:0:0 and more", "Written blind.")
    } else {
        ("../../etc", "root:x:0:0", "A path.")
    };
    out += &format!(
        "\n<dossier_check>true</dossier_check>\n<dossier_update name=\"{name}\" kind=\"person\" aliases=\"{}\">{text}</dossier_update>\n<dossier_change_note>{note}</dossier_change_note>",
        name.split(' ').next().unwrap()
    );
    out
}

#[test]
fn dossiers_are_learned_recalled_kept_in_git_and_never_overwrite_the_hand_written() {
    let model = FakeModel::start();
    model.respond_with(respond);
    let slack = FakeSlack::start();
    let home = home(&model, &slack, "socket", "");
    let soul = own_soul(&home, &[("ada.md", ADA)]);
    let mut d = Daemon::start(&home);
    slack.wait_connected_or(|| d.log());
    let store = home.store();
    let said = |n: usize, what: &str| slack.wait(20, what, |s| s.posts().len() >= n);

    // Named in passing: the steps are asked, her dossier is written.
    slack.send_event(
        dm(
            "D1",
            "1.000001",
            "I had lunch with Priya Raman, she leads a team.",
        ),
        "E1",
        0,
    );
    said(1, "the first reply");
    let first = model.requests().last().unwrap().turn_text();
    assert!(
        first.contains("<dossier_check>") && first.contains("“Priya Raman”"),
        "{first}"
    );
    assert!(!first.contains("<dossier name="), "nothing to recall yet");
    let priya = wait(store.dossier("priya-raman"))
        .unwrap()
        .expect("her dossier");
    assert_eq!((priya.version, priya.name.as_str()), (1, "Priya Raman"));

    // Another conversation names her: her dossier is in the prompt, fenced, and updated.
    slack.send_event(
        dm("D2", "2.000001", "Would Priya like the <b>talk</b>?"),
        "E2",
        0,
    );
    said(2, "the second reply");
    let second = model.requests().last().unwrap().turn_text();
    assert!(
        second.contains("<dossier name=\"Priya Raman\" kind=\"person\">"),
        "{second}"
    );
    assert_eq!(
        wait(store.dossier("priya-raman")).unwrap().unwrap().version,
        2
    );

    // An ordinary message pays nothing: no dossier step, no dossier.
    slack.send_event(dm("D3", "3.000001", "hello, how are you today?"), "E3", 0);
    said(3, "the third reply");
    let ordinary = model.requests().last().unwrap().turn_text();
    assert!(!ordinary.contains("dossier"), "{ordinary}");

    // A hand-written dossier is recalled, and the soul's rewrite goes beside it.
    slack.send_event(
        dm("D3", "3.000002", "What did the Countess of Lovelace write?"),
        "E4",
        0,
    );
    said(4, "the fourth reply");
    let recalled = model.requests().last().unwrap().turn_text();
    assert!(
        recalled.contains("Analytical Engine") && recalled.contains("written by hand"),
        "{recalled}"
    );
    assert_eq!(
        std::fs::read_to_string(soul.join("dossiers/ada.md")).unwrap(),
        ADA
    );
    let learned = wait(store.dossier("ada-lovelace"))
        .unwrap()
        .expect("the soul's own");
    assert!(learned.text.contains("I REWROTE HER."));

    // A hand-written dossier added while the daemon runs is recalled at the next turn.
    let grace = "---\nname: Grace Hopper\nkind: person\n---\nFound the first actual bug.\n";
    std::fs::write(soul.join("dossiers/grace.md"), grace).unwrap();
    // The folder is looked at again at most every 250 ms (the documented delay), not sooner.
    std::thread::sleep(std::time::Duration::from_millis(300));
    slack.send_event(dm("D3", "3.000003", "and what about grace hopper"), "E6", 0);
    said(5, "the reply after the new file");
    let reloaded = model.requests().last().unwrap().turn_text();
    assert!(
        reloaded.contains("Found the first actual bug."),
        "{reloaded}"
    );

    // A subject named `../../etc` is a slug inside the repository, never a path.
    slack.send_event(
        dm("D4", "4.000001", "I met Bob at the conference."),
        "E5",
        0,
    );
    said(5, "the fifth reply");
    assert!(wait(store.dossier("etc")).unwrap().is_some());
    let memory = home.data().join("memory");
    assert!(memory.join("dossiers/etc.md").exists());
    assert!(!home.dir.path().join("etc").exists() && !home.data().join("etc").exists());
    assert!(!memory.join("etc").exists() && !memory.join("etc.md").exists());

    // A dossier of its own the soul did not see in the prompt is not rewritten.
    slack.send_event(dm("D4", "4.000002", "I met Bob again."), "E7", 0);
    said(7, "the seventh reply");
    let blind = wait(store.dossier("etc")).unwrap().unwrap();
    assert_eq!((blind.version, blind.text.contains("and more")), (1, false));
    d.terminate();

    // Git has every version, in order, its note as the message.
    let repo = anima::memory::model_repo::ModelRepo::open_existing(&memory).unwrap();
    let log: Vec<String> = repo
        .dossier_log("priya-raman")
        .unwrap()
        .into_iter()
        .map(|r| r.message)
        .collect();
    assert_eq!(log, ["She loves Rust.", "Heard of her at lunch."]);
    let file = std::fs::read_to_string(memory.join("dossiers/priya-raman.md")).unwrap();
    assert!(
        file.starts_with("---\nname: Priya Raman\nkind: person\n") && file.contains("Loves Rust."),
        "{file}"
    );

    let list = home.run(&["dossiers", "list"], "");
    assert!(list.status == 0, "{}", list.stderr);
    for slug in ["ada-lovelace", "priya-raman", "etc"] {
        assert!(list.stdout.contains(slug), "{}", list.stdout);
    }
    assert!(list.stdout.contains("hand"), "{}", list.stdout);
    let show = home.run(&["dossiers", "show", "Priya"], "");
    assert!(
        show.stdout.contains("Loves Rust.") && !show.stdout.contains("---"),
        "{}",
        show.stdout
    );
    let log = home.run(&["dossiers", "log", "priya-raman"], "");
    assert_eq!(log.stdout.lines().count(), 2, "{}", log.stdout);
    assert!(
        log.stdout.lines().next().unwrap().contains("v2"),
        "{}",
        log.stdout
    );
    let none = home.run(&["dossiers", "show", "Nobody"], "");
    assert!(
        none.status != 0 && none.stderr.contains("no dossier named `Nobody`"),
        "{}",
        none.stderr
    );
}

#[test]
fn forgetting_a_person_with_dossiers_removes_those_about_them() {
    let model = FakeModel::start();
    model.respond_with(respond);
    let slack = FakeSlack::start();
    let home = home(&model, &slack, "socket", "");
    own_soul(&home, &[]);
    let mut d = Daemon::start(&home);
    slack.wait_connected_or(|| d.log());
    slack.send_event(
        dm(
            "D1",
            "1.000001",
            "I had lunch with Priya Raman, she leads a team.",
        ),
        "E1",
        0,
    );
    slack.wait(20, "the reply", |s| !s.posts().is_empty());
    // Someone mentioned the Slack way: their dossier is kept with their id; then they speak.
    slack.send_event(
        dm("D1", "1.000002", "ask <@U2|bob> about the plan"),
        "E2",
        0,
    );
    slack.wait(20, "the second reply", |s| s.posts().len() >= 2);
    slack.send_event(dm_from("U2", "D2", "2.000001", "hello"), "E3", 0);
    slack.wait(20, "the third reply", |s| s.posts().len() >= 3);
    d.terminate();
    let memory = home.data().join("memory");
    let repo = || anima::memory::model_repo::ModelRepo::open_existing(&memory).unwrap();
    assert_eq!(repo().dossier_log("bob").unwrap().len(), 1);
    let store = home.store();
    // A dossier about the speaker, as an older anima or another tool might have kept one.
    wait(store.write_dossier(DossierWrite {
        slug: "person-u1".into(),
        name: "Person U1".into(),
        aliases: vec![],
        kind: "person".into(),
        about: Some("U1".into()),
        text: "---\nname: Person U1\nkind: person\n---\nTalks.\n".into(),
        note: "kept".into(),
    }))
    .unwrap();
    // `anima check` names a bad hand-written dossier's file and line.
    let bad = home.dir.path().join("soul/dossiers/bad.md");
    std::fs::write(&bad, "---\nname: Bad\nkind: wizard\n---\n").unwrap();
    let check = home.run(&["check", "--offline"], "");
    let said = format!("{}{}", check.stdout, check.stderr);
    assert!(
        said.contains(&format!("{}:3: `kind` is \"wizard\"", bad.display())),
        "{said}"
    );
    let out = home.run(&["users", "forget", "U1", "--dossiers", "--yes"], "");
    assert!(out.status == 0, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stdout
            .contains("1 dossier about them (person-u1) removed"),
        "{}",
        out.stdout
    );
    assert!(wait(store.dossier("person-u1")).unwrap().is_none());
    assert!(
        wait(store.dossier("priya-raman")).unwrap().is_some(),
        "only those about them"
    );

    // Found by the id it was kept with, and purged from git's history.
    let bob = wait(store.dossier("bob")).unwrap().unwrap();
    assert_eq!(bob.about.as_deref(), Some("U2"));
    let out = home.run(
        &[
            "users",
            "forget",
            "U2",
            "--dossiers",
            "--purge-history",
            "--yes",
        ],
        "",
    );
    assert!(out.status == 0, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("(bob) removed"), "{}", out.stdout);
    assert!(wait(store.dossier("bob")).unwrap().is_none());
    assert!(
        repo().dossier_log("bob").unwrap().is_empty(),
        "no commit holds it"
    );
    assert_eq!(repo().dossier_log("priya-raman").unwrap().len(), 1);
}

#[test]
fn a_huge_hand_written_dossier_bad_frontmatter_and_ten_thousand_are_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().join("dossiers");
    std::fs::create_dir_all(&folder).unwrap();
    for i in 0..10_000 {
        let text = format!(
            "---\nname: Person {i:05}\naliases: [p{i}]\nkind: person\n---\nNotes on {i}.\n"
        );
        std::fs::write(folder.join(format!("p{i:05}.md")), text).unwrap();
    }
    let huge = format!("---\nname: Huge\n---\n{}", "x".repeat(1024 * 1024));
    std::fs::write(folder.join("huge.md"), huge).unwrap();
    std::fs::write(
        folder.join("zbad.md"),
        "---\nname: Bad\nkind: wizard\n---\n",
    )
    .unwrap();

    let started = std::time::Instant::now();
    let (loaded, problems) = anima::engine::load_hand_written(&folder);
    assert_eq!(loaded.len(), 10_000);
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(
        problems[0].contains("huge.md") && problems[0].contains("at most 65536"),
        "{problems:?}"
    );
    assert!(
        problems[1].contains("zbad.md:3:") && problems[1].contains("person"),
        "{problems:?}"
    );

    use anima::dossier::{recall, Budget, Head, Index, Known, Origin};
    let index = Index::new(
        loaded
            .into_iter()
            .map(|d| Known {
                slug: d.slug,
                origin: Origin::Hand,
                head: Head {
                    name: d.name,
                    aliases: d.aliases,
                    kind: d.kind,
                },
            })
            .collect(),
    );
    let names: Vec<String> = (0..50).map(|i| format!("p{i}")).collect();
    let message = format!("{} and Person 09999", names.join(", "));
    let mentions = index.mentions(&message, &[]);
    assert_eq!(mentions.len(), 51);
    let budget = Budget::default();
    assert_eq!(recall(&mentions, &budget).len(), budget.max);
    assert!(started.elapsed().as_secs() < 10, "{:?}", started.elapsed());
}
