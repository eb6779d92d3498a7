//! One named test per way models break a tagged answer (docs/llm.md), plus the property
//! tests: parsing never panics, the reply never carries a cognitive tag nor (as a fallback)
//! a prompt section, render → parse round-trips, and every text helper holds its promise on
//! arbitrary Unicode.

use super::*;
use proptest::prelude::*;

const MAX: usize = 3000;

fn p(raw: &str) -> Cognition {
    parse_response(raw, MAX)
}

const WELL_FORMED: &str = r#"<internal_monologue verb="pondered">They want the status.</internal_monologue>
<external_dialogue verb="explained">The port is at 93%.</external_dialogue>
<user_model_check>false</user_model_check>"#;

#[test]
fn well_formed_answer() {
    let c = p(WELL_FORMED);
    assert_eq!(
        c.monologue,
        Some(Said {
            text: "They want the status.".into(),
            verb: Some("pondered".into())
        })
    );
    assert_eq!(c.reply, "The port is at 93%.");
    assert_eq!(c.reply_source, ReplySource::Dialogue);
    assert_eq!(c.dialogue.unwrap().verb.as_deref(), Some("explained"));
    assert_eq!(c.user_model_check, Some(false));
}

#[test]
fn m01_missing_closing_tag() {
    let c = p("<internal_monologue>thinking\n<external_dialogue verb=\"said\">Hello there");
    assert_eq!(c.monologue.unwrap().text, "thinking");
    assert_eq!(c.reply, "Hello there");
}

#[test]
fn m02_truncated_mid_tag_and_mid_attribute() {
    let c = p("<internal_monologue>ok</internal_monologue><external_dialogue verb=\"expl");
    assert_eq!(c.reply_source, ReplySource::Apology);
    assert!(!c.reply.contains('<'));
    let c = p("<external_dialogue>Sure thing.</external_dialogue>\n<user_model_ch");
    assert_eq!(c.reply, "Sure thing.");
    let c = p("<external_dialogue>Sure thing.</external_dia");
    assert_eq!(c.reply, "Sure thing.");
}

#[test]
fn m03_closing_tag_eaten_by_a_stop_sequence() {
    let c = p("<internal_monologue>hm</internal_monologue>\n<external_dialogue verb=\"replied\">Done, pushed it.\n");
    assert_eq!(c.reply, "Done, pushed it.");
}

#[test]
fn m04_missing_opening_tag() {
    let c =
        p("I should be brief.</internal_monologue>\n<external_dialogue>Yes.</external_dialogue>");
    assert_eq!(c.monologue.unwrap().text, "I should be brief.");
    assert_eq!(c.reply, "Yes.");
    let c =
        p("<internal_monologue>brief</internal_monologue>\nYes, it works.\n</external_dialogue>");
    assert_eq!(c.reply, "Yes, it works.");
    assert_eq!(c.reply_source, ReplySource::Dialogue);
}

#[test]
fn m05_tags_inside_xml_fences() {
    let c = p("```xml\n<internal_monologue>x</internal_monologue>\n<external_dialogue>Fenced hello</external_dialogue>\n```");
    assert_eq!(c.reply, "Fenced hello");
    let c = p(
        "Here you go:\n```xml\n<external_dialogue>Inner</external_dialogue>\n```\nHope that helps",
    );
    assert_eq!(c.reply, "Inner");
    let c = p("```\nplain words, no tags\n```");
    assert_eq!(c.reply, "plain words, no tags");
}

#[test]
fn m06_prose_around_the_tags_or_no_tags_at_all() {
    let c = p(
        "Sure! Here's my answer.\n<external_dialogue>The answer.</external_dialogue>\nLet me know.",
    );
    assert_eq!(c.reply, "The answer.");
    let c = p("Just a plain answer with no tags.");
    assert_eq!(c.reply, "Just a plain answer with no tags.");
    assert_eq!(c.reply_source, ReplySource::Fallback);
    let c = p("<internal_monologue>secret plan</internal_monologue>\nVisible words.");
    assert_eq!(c.reply, "Visible words.");
    assert!(!c.reply.contains("secret"));
}

#[test]
fn m07_speaker_prefix_inside_the_content() {
    let c = p("<external_dialogue>Wren said: \"Good morning.\"</external_dialogue>");
    assert_eq!(c.reply, "Good morning.");
    let c = p("<external_dialogue>Wren explained: it is fine</external_dialogue>");
    assert_eq!(c.reply, "it is fine");
    let c = p("<external_dialogue>“Quoted whole.”</external_dialogue>");
    assert_eq!(c.reply, "Quoted whole.");
    let c = p("<external_dialogue>\"Hi\" is what I \"said\"</external_dialogue>");
    assert_eq!(c.reply, "\"Hi\" is what I \"said\"");
}

#[test]
fn m08_duplicated_tags_and_echoed_examples() {
    let c = p("<external_dialogue verb=\"VERB\">\nwhat you say\n</external_dialogue>\n<external_dialogue verb=\"said\">Real one</external_dialogue><external_dialogue>Second</external_dialogue>");
    assert_eq!(c.reply, "Real one");
    let c = p("<user_model_check>true or false</user_model_check><user_model_check>true</user_model_check><user_model_check>false</user_model_check>");
    assert_eq!(c.user_model_check, Some(false), "the last check wins");
    let c = p(
        "<internal_monologue verb=\"VERB\">your private reasoning</internal_monologue>Only prose.",
    );
    assert_eq!(c.monologue, None);
}

#[test]
fn m09_nested_or_overlapping_tags() {
    let c = p("<external_dialogue>Hi <internal_monologue>secret</internal_monologue> there</external_dialogue>");
    assert_eq!(c.reply, "Hi");
    assert_eq!(c.monologue.unwrap().text, "secret");
    let c =
        p("<internal_monologue>a<external_dialogue>b</internal_monologue>c</external_dialogue>");
    assert_eq!(c.monologue.unwrap().text, "a");
    assert!(!c.reply.contains('<'));
}

#[test]
fn m10_attribute_quoting_variants() {
    for raw in [
        "<external_dialogue verb='noted'>x</external_dialogue>",
        "<external_dialogue verb=noted>x</external_dialogue>",
        "<external_dialogue verb=“noted”>x</external_dialogue>",
        "<external_dialogue verb=\\\"noted\\\">x</external_dialogue>",
        "<external_dialogue verb=\"noted>x</external_dialogue>",
        "<external_dialogue tone=\"dry\" verb=\"noted\" lang=en>x</external_dialogue>",
    ] {
        let c = p(raw);
        assert_eq!(c.reply, "x", "{raw}");
        assert_eq!(c.dialogue.unwrap().verb.as_deref(), Some("noted"), "{raw}");
    }
}

#[test]
fn m11_tag_name_variants() {
    let c = p("<Internal-Monologue>m</Internal-Monologue><EXTERNAL_DIALOG>d</EXTERNAL_DIALOG>");
    assert_eq!(c.monologue.unwrap().text, "m");
    assert_eq!(c.reply, "d");
    let c = p("<external_dialogue>hi</external_dialogue><user_model_check/>");
    assert_eq!(c.user_model_check, None);
    assert_eq!(c.reply, "hi");
}

#[test]
fn m12_entities_and_slack_markup_stay_text() {
    let c = p("<external_dialogue>Ask <@U123> about &lt;b&gt; tags, see <https://x.test|docs>; a < b &amp; c</external_dialogue>");
    assert_eq!(
        c.reply,
        "Ask <@U123> about <b> tags, see <https://x.test|docs>; a < b & c"
    );
}

#[test]
fn m13_boolean_spellings() {
    for (raw, want) in [
        ("True", true),
        ("yes", true),
        ("\"true\"", true),
        ("true.", true),
        ("False.", false),
        ("no", false),
    ] {
        let c = p(&format!(
            "<external_dialogue>x</external_dialogue><user_model_check>{raw}</user_model_check><soul_state_check>{raw}</soul_state_check>"
        ));
        assert_eq!(c.user_model_check, Some(want), "{raw}");
        assert_eq!(c.soul_state_check, Some(want), "{raw}");
    }
}

#[test]
fn m14_reasoning_blocks_are_removed() {
    let c = p("<think>The user wants X. <external_dialogue>draft</external_dialogue></think><external_dialogue>Final</external_dialogue>");
    assert_eq!(c.reply, "Final");
    let c = p("hidden chain of thought</think>\nVisible answer");
    assert_eq!(c.reply, "Visible answer");
    let c = p("<thinking>unclosed reasoning <external_dialogue>Answer</external_dialogue>");
    assert_eq!(c.reply, "Answer");
    let c = p("<think>only thinking, cut off");
    assert_eq!(c.reply_source, ReplySource::Apology);
}

#[test]
fn m15_tags_split_across_stream_chunks() {
    // Chunks are joined before parsing; the join of arbitrary splits parses like the whole.
    let chunks = [
        "<internal_mono",
        "logue verb=\"mu",
        "sed\">hm</internal_",
        "monologue><external_dia",
        "logue>Joined</external_dialogue>",
    ];
    let c = p(&chunks.concat());
    assert_eq!(c.reply, "Joined");
    assert_eq!(c.monologue.unwrap().verb.as_deref(), Some("mused"));
}

#[test]
fn m16_cdata_or_a_whole_xml_document() {
    let c = p("<external_dialogue><![CDATA[Use <T> & friends]]></external_dialogue>");
    assert_eq!(c.reply, "Use <T> & friends");
    let c = p("<?xml version=\"1.0\"?>\n<response>\n<internal_monologue>m</internal_monologue>\n<external_dialogue>From a document</external_dialogue>\n</response>");
    assert_eq!(c.reply, "From a document");
}

#[test]
fn m17_empty_content() {
    let c = p("<external_dialogue></external_dialogue>");
    assert_eq!(c.reply, EMPTY_REPLY_APOLOGY);
    assert_eq!(c.reply_source, ReplySource::Apology);
    assert_eq!(c.dialogue, None);
    let c = p("");
    assert_eq!(c.reply_source, ReplySource::Apology);
    let c = p(
        "<external_dialogue>  </external_dialogue><external_dialogue>second</external_dialogue>",
    );
    assert_eq!(c.reply, "second");
}

#[test]
fn m18_echoed_prompt_sections_never_reach_the_fallback() {
    let echo = "<user_model name=\"Tom\">\n# Tom\n\n## Persona\nIndependent scholar.\n</user_model>\n\n<instructions>\nRespond with the XML-tagged sections below, in this order.\n</instructions>";
    let c = p(&format!("{echo}\nHappy to help, Tom."));
    assert_eq!(c.reply, "Happy to help, Tom.");
    assert_eq!(c.reply_source, ReplySource::Fallback);
    let c = p(echo);
    assert_eq!(c.reply, EMPTY_REPLY_APOLOGY);
    assert_eq!(c.reply_source, ReplySource::Apology);
    for name in crate::steps::PROMPT_SECTIONS {
        let c = p(&format!(
            "Before.\n<{name} x=\"1\">\nechoed {name}\n</{name}>\nAfter."
        ));
        assert_eq!(c.reply, "Before.\n\nAfter.", "{name}");
    }
}

#[test]
fn m18_unclosed_unopened_and_chained_sections() {
    let c = p("Hello.\n<current_message>\nTom: hi there");
    assert_eq!(c.reply, "Hello.", "an unclosed section runs to the end");
    let c = p("# Tom\nA scholar.\n</user_model>\nHi Tom!");
    assert_eq!(
        c.reply, "Hi Tom!",
        "a lone closing tag claims the text before it"
    );
    let c = p("<soul>\nI am Wren.\n<SKILLS>\n- Conversation\n</SKILLS>\n<soul_state>\n- currentTask: x\nHi.");
    assert_eq!(
        c.reply, EMPTY_REPLY_APOLOGY,
        "each section closes the one before"
    );
    let c = p("<instructions>\nDo not copy the placeholder text.\n<internal_monologue verb=\"VERB\">\nyour private reasoning\n</internal_monologue>\nVERB is one of: thought.\n</instructions>\nSure.");
    assert_eq!(
        c.reply, "Sure.",
        "echoed instructions, examples and all, are dropped"
    );
    let c = p("<process name=\"main\"/>Fine.");
    assert_eq!(c.reply, "Fine.");
    let c = p("<inter<user_model>x</user_model>nal_monologue>secret thoughts");
    assert_eq!(
        c.reply, EMPTY_REPLY_APOLOGY,
        "a tag joined by the removal is still structure"
    );
}

#[test]
fn m18_section_names_stay_text_when_they_are_not_tags() {
    for (raw, reply) in [
        ("My soul is tired.", "My soul is tired."),
        ("Use <soulful> tags.", "Use <soulful> tags."),
        (
            "Write &lt;soul&gt; in the file.",
            "Write <soul> in the file.",
        ),
        ("a <soul\nb", "a <soul\nb"),
    ] {
        assert_eq!(p(raw).reply, reply, "{raw}");
    }
}

#[test]
fn m18_with_a_dialogue_echoed_sections_change_nothing() {
    let c = p("<user_model>\n# Tom\n</user_model>\n<instructions>obey</instructions>\n<external_dialogue>Hi Tom.</external_dialogue>\n<user_model_check>true</user_model_check>");
    assert_eq!(c.reply, "Hi Tom.");
    assert_eq!(c.reply_source, ReplySource::Dialogue);
    assert_eq!(c.user_model_check, Some(true));
    let c = p("<external_dialogue>Your <soul> section looks fine.</external_dialogue>");
    assert_eq!(c.reply, "Your <soul> section looks fine.");
}

#[test]
fn updates_and_mental_queries() {
    let c = p("<external_dialogue>ok</external_dialogue>\n<mental_query question=\"Is the user angry?\">yes</mental_query>\n<user_model_check>true</user_model_check>\n<user_model_update>\n# Tom\n\n## Persona\nScholar.\n</user_model_update>\n<model_change_note>Learned he is a scholar.</model_change_note>\n<soul_state_check>true</soul_state_check>\n<soul_state_update>\nemotionalState: engaged\ncurrentTopic: Minoan scripts\n</soul_state_update>");
    assert_eq!(
        c.mental_queries,
        vec![MentalQuery {
            question: "Is the user angry?".into(),
            answer: Some(true)
        }]
    );
    assert_eq!(
        c.user_model_update.as_deref(),
        Some("# Tom\n\n## Persona\nScholar.")
    );
    assert_eq!(
        c.model_change_note.as_deref(),
        Some("Learned he is a scholar.")
    );
    assert_eq!(
        c.soul_state_update,
        vec![
            ("emotionalState".into(), "engaged".into()),
            ("currentTopic".into(), "Minoan scripts".into())
        ]
    );
}

#[test]
fn the_reply_is_cut_to_the_limit() {
    let long = "word ".repeat(1000);
    let c = parse_response(
        &format!("<external_dialogue>{long}</external_dialogue>"),
        100,
    );
    assert_eq!(c.reply.chars().count(), 100);
    assert!(c.reply.ends_with('…'));
}

const KNOWN: [&str; 8] = [
    "internal_monologue",
    "external_dialog",
    "mental_query",
    "user_model_check",
    "user_model_update",
    "model_change_note",
    "soul_state_check",
    "soul_state_update",
];

fn has_cognitive_tag(s: &str) -> bool {
    let lower = s.to_lowercase().replace('-', "_");
    KNOWN
        .iter()
        .any(|t| lower.contains(&format!("<{t}")) || lower.contains(&format!("</{t}")))
}

fn tagged_soup() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("<internal_monologue verb=\"mused\">".to_string()),
        Just("</internal_monologue>".to_string()),
        Just("<external_dialogue>".to_string()),
        Just("</external_dialogue>".to_string()),
        Just("<user_model_check>".to_string()),
        Just("<soul_state_update>".to_string()),
        Just("<think>".to_string()),
        Just("</think>".to_string()),
        Just("```xml\n".to_string()),
        Just("<![CDATA[".to_string()),
        Just("&amp;".to_string()),
        Just("<@U1>".to_string()),
        Just("\"".to_string()),
        "[a-zA-Z <>/=\"'&;:\n]{0,12}",
        any::<String>(),
    ];
    proptest::collection::vec(piece, 0..16).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn never_panics_and_never_replies_with_a_cognitive_tag(raw in tagged_soup()) {
        let c = parse_response(&raw, 500);
        prop_assert!(!c.reply.trim().is_empty());
        prop_assert!(c.reply.chars().count() <= 500);
        // A cognitive tag in the reply could only come from an entity the model escaped
        // on purpose (`&lt;external_dialogue&gt;`), which the soup does not produce.
        prop_assert!(!has_cognitive_tag(&c.reply), "reply {:?} from {:?}", c.reply, raw);
    }

    #[test]
    fn arbitrary_bytes_never_panic(raw in any::<String>()) {
        let _ = parse_response(&raw, 50);
    }

    #[test]
    fn render_then_parse_round_trips(
        mono in "[a-zA-Z][a-zA-Z ,.?!&<>]{0,40}[a-zA-Z.]",
        dia in "[a-zA-Z][a-zA-Z ,.?!&<>]{0,40}[a-zA-Z.]",
        verb in prop::sample::select(vec!["said", "explained", "quipped"]),
        check in any::<Option<bool>>(),
        state in any::<Option<bool>>(),
    ) {
        let c = Cognition {
            monologue: Some(Said { text: mono.trim().to_string(), verb: Some("mused".into()) }),
            dialogue: Some(Said { text: dia.trim().to_string(), verb: Some(verb.to_string()) }),
            reply: dia.trim().to_string(),
            reply_source: ReplySource::Dialogue,
            user_model_check: check,
            user_model_update: None,
            model_change_note: None,
            soul_state_check: state,
            soul_state_update: vec![("currentTopic".into(), "rust".into())],
            mental_queries: vec![],
        };
        prop_assume!(!has_cognitive_tag(&c.reply));
        prop_assert_eq!(parse_response(&render(&c), MAX), c);
    }
}

fn has_section_tag(s: &str) -> bool {
    let lower = s.to_lowercase().replace('-', "_");
    crate::steps::PROMPT_SECTIONS.iter().any(|t| {
        [format!("<{t}>"), format!("<{t} "), format!("</{t}")]
            .iter()
            .any(|tag| lower.contains(tag))
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn unicode_answers_give_a_reply_without_structure(
        raw in crate::arbitrary::tagged(),
        max in 1usize..400,
    ) {
        let c = parse_response(&raw, max);
        prop_assert!(!c.reply.trim().is_empty(), "{:?}", raw);
        prop_assert!(c.reply.chars().count() <= max);
        prop_assert!(!has_cognitive_tag(&c.reply), "reply {:?} from {:?}", c.reply, raw);
        if c.reply_source == ReplySource::Fallback {
            prop_assert!(!has_section_tag(&c.reply), "reply {:?} from {:?}", c.reply, raw);
        }
        if let Some(d) = &c.dialogue {
            prop_assert!(!d.text.is_empty());
        }
    }

    #[test]
    fn a_rendered_unicode_dialogue_parses_back(raw in crate::arbitrary::tagged()) {
        let d = clean_dialogue(&raw);
        prop_assume!(!d.is_empty() && clean_dialogue(&d) == d);
        prop_assume!(!EXAMPLE_TEXTS.iter().any(|x| d.eq_ignore_ascii_case(x)));
        let c = Cognition {
            monologue: None,
            dialogue: Some(Said { text: d.clone(), verb: None }),
            reply: d.clone(),
            reply_source: ReplySource::Dialogue,
            user_model_check: None,
            user_model_update: None,
            model_change_note: None,
            soul_state_check: None,
            soul_state_update: vec![],
            mental_queries: vec![],
        };
        let back = parse_response(&render(&c), usize::MAX);
        prop_assert_eq!(back.reply, d);
        prop_assert_eq!(back.reply_source, ReplySource::Dialogue);
    }

    #[test]
    fn scanned_contents_are_pieces_of_the_text(raw in crate::arbitrary::tagged()) {
        let s = scan::scan(&raw);
        for e in &s.elements {
            prop_assert!(raw.contains(e.content), "{:?}", e);
        }
        prop_assert!(s.outside.len() <= raw.len());
        if !raw.contains('<') {
            prop_assert!(s.elements.is_empty());
            prop_assert_eq!(s.outside, raw);
        }
    }

    #[test]
    fn reasoning_fences_and_sections_only_ever_remove(raw in crate::arbitrary::tagged()) {
        let stripped = text::strip_reasoning(&raw);
        prop_assert!(stripped.len() <= raw.len());
        if !raw.to_ascii_lowercase().contains("think") {
            prop_assert_eq!(&stripped, &raw);
        }
        let unwrapped = text::unwrap_fence(&raw);
        prop_assert!(raw.contains(unwrapped));
        let dropped = text::drop_fence_lines(&raw);
        prop_assert!(dropped.len() <= raw.len());
        for line in dropped.lines() {
            let t = line.trim();
            prop_assert!(
                !(t.starts_with("```") && t[3..].chars().all(|c| c.is_ascii_alphanumeric())),
                "{:?}", line
            );
        }
        if !raw.contains("```") {
            prop_assert_eq!(&dropped, &raw);
        }
        let sections = text::drop_prompt_sections(&raw);
        prop_assert!(sections.len() <= raw.len());
        let lower = raw.to_ascii_lowercase().replace('-', "_");
        if !crate::steps::PROMPT_SECTIONS.iter().any(|s| lower.contains(s)) {
            prop_assert_eq!(&sections, &raw);
        }
    }

    #[test]
    fn a_whole_answer_fence_unwraps_to_its_body(
        body in crate::arbitrary::text(),
        info in prop::sample::select(vec!["", "xml", "html"]),
    ) {
        let body = body.replace('`', "'");
        let fenced = format!("```{info}\n{body}\n```");
        prop_assert_eq!(text::unwrap_fence(&fenced), format!("{body}\n"));
    }

    #[test]
    fn entities_decode_what_escaping_wrote(s in crate::arbitrary::text()) {
        prop_assert_eq!(text::decode_entities(&quick_xml::escape::escape(&s)), s.clone());
        if !s.contains('&') {
            prop_assert_eq!(text::decode_entities(&s), s.clone());
        }
        if !s.contains("]]>") {
            prop_assert_eq!(text::decode_content(&format!("<![CDATA[{s}]]>")), s.clone());
        }
        let _ = text::decode_content(&s);
    }

    #[test]
    fn prefixes_and_quotes_only_ever_trim(s in crate::arbitrary::text()) {
        let p = text::strip_speaker_prefix(&s);
        prop_assert!(s.ends_with(p), "{:?} → {:?}", s, p);
        if !s.contains(':') {
            prop_assert_eq!(p, s.as_str());
        }
        let q = text::strip_wrapping_quotes(&s);
        prop_assert!(s.contains(q), "{:?} → {:?}", s, q);
        prop_assert_eq!(q, q.trim());
    }

    #[test]
    fn speaker_prefixes_go_and_what_follows_stays(
        name in prop::sample::select(vec!["Wren", "Élodie", "Wren Ashby", "Юлия"]),
        verb in prop::sample::select(vec!["said", "explained", "pointed out", "mused"]),
        rest in crate::arbitrary::text(),
    ) {
        let said = format!("{name} {verb}: {rest}");
        let want = rest.trim_start();
        prop_assert_eq!(text::strip_speaker_prefix(&said), want);
    }

    #[test]
    fn booleans_are_read_only_from_their_words(
        s in crate::arbitrary::text(),
        word in prop::sample::select(vec![("true", true), ("Yes", true), ("FALSE", false), ("no", false)]),
        before in "[ \"'*(\n]{0,3}",
        after in "[ .!\"'*)\n]{0,3}",
    ) {
        if let Some(b) = text::parse_bool(&s) {
            let lower = s.to_lowercase();
            let words: &[&str] = if b { &["true", "yes", "y", "1"] } else { &["false", "no", "n", "0"] };
            prop_assert!(words.iter().any(|w| lower.contains(w)), "{:?} → {}", s, b);
        }
        let (w, want) = word;
        prop_assert_eq!(text::parse_bool(&format!("{before}{w}{after}")), Some(want));
    }

    #[test]
    fn key_values_have_plain_keys(s in crate::arbitrary::text()) {
        let kv = text::parse_key_values(&s);
        prop_assert!(kv.len() <= s.lines().count());
        for (k, _) in &kv {
            prop_assert!(!k.is_empty() && !k.contains(' ') && !k.contains(':'), "{:?}", k);
        }
    }

    #[test]
    fn truncation_respects_the_character_count(s in crate::arbitrary::text(), max in 0usize..80) {
        let t = text::truncate_chars(&s, max);
        prop_assert!(t.chars().count() <= max, "{:?} → {:?}", s, t);
        if s.chars().count() <= max {
            prop_assert_eq!(&t, &s);
        } else if max > 0 {
            let kept = t.strip_suffix('…');
            prop_assert!(kept.is_some_and(|k| s.starts_with(k)), "{:?} → {:?}", s, t);
        }
    }

    #[test]
    fn tidy_trims_and_keeps_every_visible_character(s in crate::arbitrary::text()) {
        let t = text::tidy(&s);
        prop_assert_eq!(t.as_str(), t.trim());
        prop_assert!(!t.replace('\r', "").contains("\n\n\n"), "{:?}", t);
        let visible = |x: &str| x.chars().filter(|c| !c.is_whitespace()).collect::<String>();
        prop_assert_eq!(visible(&t), visible(&s));
    }
}
