use super::*;

fn known(slug: &str, name: &str, aliases: &[&str], origin: Origin) -> Known {
    Known {
        slug: slug.into(),
        origin,
        head: Head {
            name: name.into(),
            aliases: aliases.iter().map(|a| a.to_string()).collect(),
            kind: Kind::Person,
        },
    }
}

#[test]
fn a_slug_is_never_a_path() {
    assert_eq!(slug("../../etc").as_deref(), Some("etc"));
    assert_eq!(slug("Ada Lovelace").as_deref(), Some("ada-lovelace"));
    assert_eq!(slug("José  Martí!").as_deref(), Some("jose-marti"));
    assert_eq!(slug("/etc/passwd").as_deref(), Some("etc-passwd"));
    assert_eq!(slug(".."), None);
    assert_eq!(slug(""), None);
    assert_eq!(slug("李"), None);
    assert_eq!(slug(&"a".repeat(500)).unwrap().len(), MAX_SLUG);
}

#[test]
fn frontmatter_reads_name_aliases_and_kind() {
    let text = "---\nname: Ada Lovelace\naliases: [Ada, \"Countess of Lovelace\"]\nkind: person\n---\n# Ada\nWrote the first program.\n";
    let (head, body) = parse(text).unwrap();
    assert_eq!(head.name, "Ada Lovelace");
    assert_eq!(head.aliases, vec!["Ada", "Countess of Lovelace"]);
    assert_eq!(head.kind, Kind::Person);
    assert_eq!(body, "# Ada\nWrote the first program.\n");

    let block = "---\nname: Rust\nkind: subject\naliases:\n  - rustlang\n  - 'the crab language'\n---\nbody";
    let (head, body) = parse(block).unwrap();
    assert_eq!(head.aliases, vec!["rustlang", "the crab language"]);
    assert_eq!((head.kind, body), (Kind::Subject, "body"));
}

#[test]
fn bad_frontmatter_names_its_line() {
    let line = |t: &str| parse(t).unwrap_err().line;
    assert_eq!(line("# no frontmatter\n"), 1);
    assert_eq!(line("---\nname: A\nkind: wizard\n---\n"), 3);
    assert_eq!(line("---\nname: A\ncolour: red\n---\n"), 3);
    assert_eq!(line("---\nkind: person\n---\n"), 1);
    assert_eq!(line("---\nname: A\n"), 1);
    assert_eq!(line("---\nname: A\naliases: [a, b\n---\n"), 3);
    assert_eq!(line("---\nname: A\n- stray\n---\n"), 3);
    let e = parse("---\nname: A\nkind: wizard\n---\n").unwrap_err();
    assert!(e.to_string().contains("person"), "{e}");
}

#[test]
fn render_then_parse_round_trips_and_a_name_cannot_add_a_key() {
    let head = Head {
        name: "Eve\n---\nkind: person".into(),
        aliases: vec!["E\nname: x".into()],
        kind: Kind::Subject,
    };
    let text = render(&head, "Notes.\n---\nmore");
    let (back, body) = parse(&text).unwrap();
    assert_eq!(back.name, "Eve --- kind: person");
    assert_eq!(back.aliases, vec!["E name: x"]);
    assert_eq!(back.kind, Kind::Subject);
    assert_eq!(body, "Notes.\n---\nmore\n");
}

#[test]
fn mentions_are_whole_words_any_case_and_multi_word_aliases() {
    let index = Index::new(vec![
        known("ada", "Ada Lovelace", &["Ada"], Origin::Hand),
        known("rust", "Rust", &["the crab language"], Origin::Learned),
        known("al", "Al", &[], Origin::Learned),
    ]);
    let m = index.mentions(
        "did ADA like The Crab Language?",
        &["ada lovelace said rust"],
    );
    assert_eq!(m.len(), 2);
    assert_eq!((m[0].at, m[0].in_message, m[0].in_thread), (0, 1, 2));
    assert_eq!((m[1].at, m[1].in_message, m[1].in_thread), (1, 1, 1));
    assert!(
        index.mentions("always adapt", &[]).is_empty(),
        "whole words only"
    );
    assert!(index.mentions("the crab", &[]).is_empty());
}

#[test]
fn recall_puts_the_message_first_and_keeps_to_the_budget() {
    let mentions = [
        Mention {
            at: 0,
            in_message: 0,
            in_thread: 2,
        },
        Mention {
            at: 1,
            in_message: 1,
            in_thread: 0,
        },
        Mention {
            at: 2,
            in_message: 0,
            in_thread: 1,
        },
        Mention {
            at: 3,
            in_message: 0,
            in_thread: 1,
        },
    ];
    let budget = Budget {
        max: 3,
        each: 10,
        bytes: 25,
    };
    let chosen: Vec<usize> = recall(&mentions, &budget).iter().map(|r| r.at).collect();
    assert_eq!(chosen, vec![1, 0, 2]);
    let long = "x".repeat(40);
    let fitted = budget.fit(&["short", &long, &long, &long]);
    assert_eq!(
        fitted,
        vec![("short", false), (&long[..10], true), (&long[..10], true)]
    );
    let tight = Budget {
        max: 3,
        each: 10,
        bytes: 12,
    };
    assert_eq!(tight.fit(&[&long, &long, &long]).len(), 2);
    assert_eq!(cut("héllo", 2), ("h", true));
}

#[test]
fn named_finds_other_people_not_the_speaker() {
    let got = named(
        "I had lunch with Priya Raman and <@U2|bob> today; ask <@U1> too. Monday works.",
        &["U1", "Tom Baker", "Wren"],
    );
    assert_eq!(got, vec!["bob", "Priya Raman"]);
    assert!(named("hello, how are you today?", &["U1", "Tom"]).is_empty());
    assert!(named("Tom here. I think Wren is kind", &["U1", "Tom", "Wren"]).is_empty());
    assert!(named("Can you check the API and the URL?", &[]).is_empty());
    assert_eq!(
        named("Ada Lovelace wrote it, said Charles.", &[]),
        vec!["Charles"]
    );
    assert_eq!(
        named("see <https://x.org|The Site> and <#C1|General>", &[]),
        Vec::<String>::new()
    );
    assert_eq!(named(&"and Bob ".repeat(10_000), &[]), vec!["Bob"]);
}

#[test]
fn slack_mentions_give_ids_and_labels() {
    assert_eq!(
        slack_mentions("ask <@U2|bob> and <@W3> not <@bad id> or <#C1|x>"),
        vec![
            ("U2".to_string(), "bob".to_string()),
            ("W3".to_string(), String::new())
        ]
    );
    assert!(slack_mentions("<@U2").is_empty());
}

proptest::proptest! {
    #[test]
    fn nothing_here_panics(text in "\\PC{0,200}") {
        let _ = parse(&text);
        let _ = slug(&text);
        let _ = named(&text, &["x"]);
        let _ = slack_mentions(&text);
        let index = Index::new(vec![known("a", &text, &[&text], Origin::Hand)]);
        let _ = index.mentions(&text, &[&text]);
        if let Some(s) = slug(&text) {
            proptest::prop_assert!(s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-'));
            proptest::prop_assert!(!s.starts_with('-') && !s.ends_with('-'));
        }
    }
}
