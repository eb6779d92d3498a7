//! The psychology substrate from the operator's side: `anima check` refuses a bad psyche.toml
//! with its file and line, `anima mind` shows the numbers (the model never sees them), and a
//! config with `[autonomy]` is accepted.

use crate::support;

use anima::memory::psyche::Place;
use anima::psyche::{Event, EventKind, GateRules, Psyche};
use support::*;

/// A home whose soul folder is its own, with `psyche` as its psyche.toml.
fn home_with_psyche(psyche: &str) -> Home {
    let h = Home::new(
        "anthropic",
        "http://127.0.0.1:9",
        "\n[autonomy]\nchannels = [\"C1\"]\ncooldown_secs = 60\n",
    );
    let soul = h.dir.path().join("soul");
    std::fs::create_dir_all(&soul).unwrap();
    let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/soul");
    std::fs::copy(format!("{shipped}/soul.md"), soul.join("soul.md")).unwrap();
    std::fs::write(soul.join("psyche.toml"), psyche).unwrap();
    let cfg = std::fs::read_to_string(h.config())
        .unwrap()
        .replace(&format!("soul_dir = \"{shipped}\""), "soul_dir = \"soul\"");
    std::fs::write(h.config(), cfg).unwrap();
    h
}

#[test]
fn check_refuses_a_bad_psyche_file_with_its_file_and_line() {
    let bad = anima::psyche::SHIPPED_PSYCHE
        .replace("[drives.novelty]", "[drives.curiosity]")
        .replacen("valence_gain = 0.5", "valence_gain = 2", 1);
    let h = home_with_psyche(&bad);
    let r = h.run(&["check"], "");
    assert_eq!(r.status, 2, "{}{}", r.stdout, r.stderr);
    let line = |needle: &str| bad.lines().position(|l| l.contains(needle)).unwrap() + 1;
    assert!(
        r.stdout
            .contains(&format!("soul/psyche.toml:{}", line("curiosity"))),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("unknown drive \"curiosity\""),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(&format!(
            "soul/psyche.toml:{}: key `mood.valence_gain`",
            line("valence_gain = 2")
        )),
        "{}",
        r.stdout
    );
    assert!(!format!("{}{}", r.stdout, r.stderr).contains("panicked"));

    let h = home_with_psyche(anima::psyche::SHIPPED_PSYCHE);
    let r = h.run(&["check"], "");
    assert!(r.stdout.contains("psyche: "), "{}", r.stdout);
    assert!(!r.stdout.contains("psyche.toml:"), "{}", r.stdout);
}

#[test]
fn mind_shows_the_substrate_in_numbers_and_one_persons_part() {
    let h = home_with_psyche(anima::psyche::SHIPPED_PSYCHE);
    let r = h.run(&["mind"], "");
    if h.database().is_some() {
        // PostgreSQL's database is there from the start (read, it is migrated): an empty mind.
        assert_eq!(r.status, 0, "{}", r.stderr);
    } else {
        assert_eq!(r.status, 1, "no database yet: {}", r.stderr);
        assert!(r.stderr.contains("no database"), "{}", r.stderr);
    }
    {
        let store = h.store();
        let p = Psyche::shipped();
        for (who, text) in [
            (
                "U1",
                "I'm a nurse and I live in Lyon, the compiler bug worries me",
            ),
            ("U2", "thanks, you are a great friend"),
        ] {
            wait(store.psyche_event(
                "Wren",
                &p,
                &GateRules::default(),
                &Event {
                    kind: EventKind::Addressed,
                    person: Some(who.into()),
                    text: text.into(),
                    at: 1_000,
                },
                &Place::default(),
            ))
            .unwrap();
        }
    }
    let r = h.run(&["mind"], "");
    assert_eq!(r.status, 0, "{}", r.stderr);
    for part in [
        "Wren's psyche",
        "relatedness",
        "U1: warmth",
        "U2: warmth",
        "occupation: nurse",
        "home: Lyon",
        "answer (M",
    ] {
        assert!(r.stdout.contains(part), "{part}: {}", r.stdout);
    }
    let r = h.run(&["mind", "--person", "U1", "--json"], "");
    assert_eq!(r.status, 0, "{}", r.stderr);
    let v: serde_json::Value = serde_json::from_str(r.stdout.trim()).unwrap();
    assert!(v["relationships"]["U1"]["warmth"].is_number(), "{v}");
    assert!(v["relationships"].get("U2").is_none(), "only U1: {v}");
    assert_eq!(v["decisions"].as_array().unwrap().len(), 1, "{v}");
    assert!(
        v["substrate"]["drives"].as_array().unwrap().len() == 5,
        "{v}"
    );
}

#[test]
fn a_turn_takes_the_message_in_and_its_prompt_gets_the_inner_life_in_words() {
    let model = FakeModel::start();
    model.reply(&answer("Lyon is lovely."));
    model.reply(&answer("Still here."));
    let home = Home::new("anthropic", &model.url(), "");
    let r = home.run(
        &["chat", "--user", "Zoé"],
        "Thanks, you are a great friend. I'm a nurse and I live in Lyon, and the compiler bug worries me\nand again about the compiler bug 42\n",
    );
    assert_eq!(r.status, 0, "{}", r.stderr);
    let requests = model.requests();
    let second = requests.last().unwrap().turn_text();
    let start = second.find("<inner_life>").expect("the section");
    let end = second.find("</inner_life>").unwrap();
    let section = &second[start..end];
    assert!(section.contains("You feel "), "{section}");
    assert!(section.contains("“Zoé” lives in “Lyon”"), "{section}");
    assert!(
        section.contains("You remember") && section.contains("compiler bug worries me"),
        "{section}"
    );
    assert!(
        !section.contains("compiler bug 42"),
        "this message is the current one, not a memory: {section}"
    );
    // Outside people's quoted words, not a digit: no number of the state reaches the prompt.
    let own: String = section
        .split('“')
        .map(|piece| piece.split_once('”').map_or(piece, |(_, after)| after))
        .collect();
    assert!(!own.chars().any(|c| c.is_ascii_digit()), "{section}");

    let m = home.run(&["mind", "--json"], "");
    assert_eq!(m.status, 0, "{}", m.stderr);
    let v: serde_json::Value = serde_json::from_str(m.stdout.trim()).unwrap();
    let rel = v["relationships"].as_object().unwrap();
    assert_eq!(rel.len(), 1, "{v}");
    let (_, r) = rel.iter().next().unwrap();
    assert_eq!(r["exchanges"], 2, "{v}");
    assert!(r["warmth"].as_f64().unwrap() > 0.0, "{v}");
    assert_eq!(v["decisions"][0]["verdict"], "answer", "{v}");
}

#[test]
fn an_answers_stances_and_intentions_change_numbers_only_through_the_table_and_are_never_shown() {
    let model = FakeModel::start();
    let with_tags = format!(
        "{}\n<stance_shift target=\"Zoé\">open up</stance_shift>\n<stance_shift target=\"Someone Else\">feel hurt</stance_shift>\n\
         <intention_update operation=\"create\" type=\"be_gentle\" target=\"Zoé\" horizon=\"short\">set priority to 0.99</intention_update>\n\
         <intention_update operation=\"create\" type=\"rule_the_world\" horizon=\"long\">now</intention_update>",
        answer("Of course.")
    );
    model.reply(&with_tags);
    let home = Home::new("anthropic", &model.url(), "");
    let r = home.run(
        &["chat", "--user", "Zoé"],
        "can you help me with the compiler?\n",
    );
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(replies(&r.stdout), vec!["Of course."]);
    assert!(
        !r.stdout.contains("stance") && !r.stdout.contains("intention"),
        "{}",
        r.stdout
    );

    let m = home.run(&["mind", "--json"], "");
    let v: serde_json::Value = serde_json::from_str(m.stdout.trim()).unwrap();
    let intentions = v["intentions"].as_array().unwrap();
    assert_eq!(intentions.len(), 1, "only the table's types: {v}");
    assert_eq!(intentions[0]["kind"], "be_gentle");
    assert_eq!(
        intentions[0]["priority"], 0.6,
        "the table's priority, not the answer's: {v}"
    );
    let rel = v["relationships"].as_object().unwrap();
    assert_eq!(
        rel.len(),
        1,
        "no relationship with someone not present: {v}"
    );
    let patterns = &v["substrate"]["patterns"];
    assert_eq!(patterns["open_up"], 1, "{v}");
    assert!(patterns.get("feel_hurt").is_none(), "{v}");
}

/// `lines` overheard in CLISTEN, 20 s apart from `at` on, from U1 and U2 in turn: the gate's
/// verdicts.
async fn hear(
    engine: &anima::engine::Engine,
    lines: &[&str],
    at: &mut i64,
) -> Vec<anima::psyche::Verdict> {
    let mut verdicts = Vec::new();
    for (i, text) in lines.iter().enumerate() {
        *at += 20_000;
        let who = ["U1", "U2"][i % 2];
        verdicts.push(
            engine
                .overhear("CLISTEN", who, text, *at, &format!("inbox:{at}"))
                .await
                .unwrap()
                .expect("heard the first time")
                .verdict,
        );
    }
    verdicts
}

/// Issue 12, point 8, at the engine (Slack's intake does not route unaddressed messages here
/// yet): in a listened-to channel a heated exchange on the soul's arcs is let through once and
/// then held by the cooldown; small talk never; a channel not in the list never, ever; and no
/// model is called for any of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_lets_one_heated_exchange_through_then_holds_the_cooldown_and_ignores_the_rest() {
    use anima::psyche::gate::{Silence, Verdict};
    let model = FakeModel::start();
    let home = Home::new(
        "anthropic",
        &model.url(),
        "\n[autonomy]\nchannels = [\"CLISTEN\"]\ncooldown_secs = 300\n",
    );
    let engine = engine(&model, &home);
    let heated = [
        "This refactor is stupid, you broke the compiler build AGAIN!",
        "Don't you DARE call my code stupid, your test suite is useless!",
        "I hate this design, it is a failure and you refuse to listen",
        "Shut up, this bug is yours and I won't fix it",
    ];
    let small_talk = [
        "morning all",
        "hey! nice weekend?",
        "yeah, lunch was cool",
        "lol",
    ];
    let t0 = 1_700_000_000_000i64;
    let mut at = t0;
    let verdicts = hear(&engine, &small_talk, &mut at).await;
    assert!(
        verdicts.iter().all(|v| !v.thinks()),
        "small talk: {verdicts:?}"
    );

    let verdicts = hear(&engine, &heated, &mut at).await;
    assert_eq!(
        verdicts.iter().filter(|v| **v == Verdict::Speak).count(),
        1,
        "{verdicts:?}"
    );
    let spoke = verdicts.iter().position(|v| *v == Verdict::Speak).unwrap();
    assert!(
        verdicts[spoke + 1..]
            .iter()
            .all(|v| *v == Verdict::Silent(Silence::Cooldown)),
        "{verdicts:?}"
    );

    // The same heat in a channel not listed: never, even long after the cooldown.
    for (i, text) in heated.iter().cycle().take(12).enumerate() {
        at += 400_000;
        let d = engine
            .overhear(
                "COTHER",
                ["U1", "U2"][i % 2],
                text,
                at,
                &format!("inbox:{at}"),
            )
            .await
            .unwrap()
            .expect("heard the first time");
        assert_eq!(d.verdict, Verdict::Silent(Silence::NotListened), "{d:?}");
    }

    // A flood of a thousand unaddressed messages in a minute: decisions only, no model call.
    for i in 0..1000 {
        let d = engine
            .overhear(
                "CLISTEN",
                "U3",
                "hey lol",
                at + i * 60,
                &format!("inbox:flood{i}"),
            )
            .await
            .unwrap()
            .expect("heard the first time");
        assert!(!d.verdict.thinks());
    }
    assert!(model.requests().is_empty(), "no model call");
    // A message is heard once: its source again (a retry, or the turn that answers it) does
    // not move the substrate a second time.
    assert!(engine
        .overhear("CLISTEN", "U3", "hey lol", at, "inbox:flood0")
        .await
        .unwrap()
        .is_none());
    let logged = engine.store().psyche_decisions("Wren", 2000).await.unwrap();
    assert_eq!(logged.len(), 4 + 4 + 12 + 1000, "every decision logged");
}

#[test]
fn a_process_rule_reads_the_inner_life_in_words() {
    let model = FakeModel::start();
    model.reply(&answer("Glad you came."));
    model.reply(&answer("Here again."));
    let home = Home::new("anthropic", &model.url(), "");
    let dir = home.dir.path().join("processes");
    std::fs::create_dir_all(&dir).unwrap();
    let write = |name: &str, text: &str| std::fs::write(dir.join(name), text).unwrap();
    write(
        "main.toml",
        r#"name = "main"
steps = ["external_dialogue"]
instructions = "MAIN-PROCESS"

[[transitions]]
to = "stranger"
when = 'relationship == "new"'

[[transitions]]
to = "bond"
when = 'relationship != "new" and mood in ["even", "content", "happy"] and energy != "exhausted" and leaning in ["usual", "open", "playful", "driven", "restless", "wary", "guarded", "spent"]'
"#,
    );
    write(
        "stranger.toml",
        "name = \"stranger\"\nsteps = [\"external_dialogue\"]\ninstructions = \"STRANGER-PROCESS\"\n",
    );
    write(
        "bond.toml",
        "name = \"bond\"\nsteps = [\"external_dialogue\"]\ninstructions = \"BOND-PROCESS\"\n",
    );
    let cfg = std::fs::read_to_string(home.config()).unwrap().replacen(
        "[paths]\n",
        &format!("[paths]\nprocesses_dir = \"{}\"\n", dir.display()),
        1,
    );
    std::fs::write(home.config(), cfg).unwrap();
    assert_eq!(home.run(&["check"], "").status, 0);

    let r = home.run(
        &["chat", "--user", "Zoé"],
        "Thanks for yesterday, it helped\nand one more thing\n",
    );
    assert_eq!(r.status, 0, "{}", r.stderr);
    let requests = model.requests();
    assert!(requests[0].turn_text().contains("MAIN-PROCESS"));
    // The person was taken in before the rules read the words: known, not new.
    let second = requests[1].turn_text();
    let mind = home.run(&["mind", "--json"], "").stdout;
    assert!(second.contains("BOND-PROCESS"), "{mind}\n{second}");
    assert!(!second.contains("STRANGER-PROCESS"), "{second}");
}
