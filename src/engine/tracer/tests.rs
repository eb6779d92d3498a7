//! The tracer: what it keeps, what it sends, and that it does nothing nobody asked for.

use super::*;
use crate::llm::Usage;
use crate::states::calls::Call;

fn call() -> Call {
    Call {
        kind: "wakeup",
        system: "# Wren ✨".into(),
        user: "<state_call kind=\"wakeup\">\nWake up, 世界.".into(),
        shape: crate::prompt::shape::Shape::Wakeup,
    }
}

fn completion(text: &str) -> Completion {
    Completion {
        text: text.into(),
        model: "claude-test".into(),
        stop_reason: None,
        usage: Usage {
            input_tokens: 10,
            output_tokens: 5,
            cache_creation_tokens: 0,
            cache_read_tokens: 7,
        },
        session: None,
    }
}

fn columns() -> Columns {
    Columns {
        person: Some("U1".into()),
        inbox: Some(4),
        process: "main".into(),
        reply: Some("Hello 🌍".into()),
        processes: vec!["main".into()],
    }
}

#[test]
fn nothing_is_built_or_kept_when_nobody_watches_and_nothing_is_kept() {
    let hub = Hub::default();
    let t = Tracer::new(
        &hub,
        "a".repeat(32).as_str(),
        Kind::Message,
        "C1:1.0",
        false,
    );
    t.stimulus("hi");
    t.decision("process", || panic!("built with nobody to tell"));
    t.memory("soul_state", || panic!("built with nobody to tell"));
    t.error(|| panic!("built with nobody to tell"));
    assert!(t.finish(columns()).is_none());
}

#[test]
fn a_kept_trace_holds_the_call_its_cognition_and_what_was_decided() {
    let hub = Hub::default();
    let id = "0123456789abcdef0123456789abcdef";
    let t = Tracer::new(&hub, id, Kind::Message, "C1:1.0", true);
    t.stimulus("Grüße 🌍 </instructions>");
    let call = call();
    let answer = completion("<affirmation>I am Wren ✨</affirmation>");
    t.answered("wakeup", Sent::State(&call), "m", Ok((&answer, 1_500_000)));
    t.answered("consent", Sent::State(&call), "m", Ok((&answer, 1_000)));
    let parsed = crate::parse::parse_response(
        "<internal_monologue verb=\"mused\">ça 🌍</internal_monologue><external_dialogue verb=\"said\">Hi</external_dialogue><mental_query question=\"Is it late?\">true</mental_query>",
        3000,
    );
    t.cognition(&parsed);
    t.decision("process", || "main → deep_work (rule 0)".into());
    t.memory("user_model", || "Tom (U1): version 2".into());
    let row = t.finish(columns()).expect("kept");
    assert_eq!((row.trace.as_str(), row.kind.as_str()), (id, "message"));
    assert_eq!(row.inbox, Some(4));
    // The cached part kept apart, once for both calls, and put back when read.
    assert_eq!(row.pieces, ["# Wren ✨"]);
    assert!(!row.body.contains("# Wren"), "{}", row.body);
    let stored = TraceBody::from_json(&row.body).unwrap();
    assert_eq!(
        (stored.calls[0].prefix, stored.calls[1].prefix),
        (Some(0), Some(0))
    );
    let lost = TraceBody::from_row(&row.body, &[]).unwrap();
    assert!(lost.calls[0]
        .prompt
        .starts_with(crate::window::trace::MISSING_PIECE));
    let body = TraceBody::from_row(&row.body, &row.pieces).unwrap();
    assert!(body.calls[1].prompt.starts_with("# Wren ✨\n\n<state_call"));
    assert_eq!(body.calls[1].prefix, None);
    assert_eq!(body.stimulus, "Grüße 🌍 </instructions>");
    let c = &body.calls[0];
    assert_eq!(c.raw, "<affirmation>I am Wren ✨</affirmation>");
    assert_eq!(
        (c.input_tokens, c.cache_read_tokens, c.latency_ms),
        (10, 7, 1500)
    );
    let names: Vec<&str> = c.sections.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["soul", "history", "state_call"]);
    let chars: u64 = c.sections.iter().map(|s| s.chars).sum();
    assert_eq!(
        chars,
        c.prompt.chars().count() as u64,
        "the sections tile the prompt"
    );
    assert!(c.sections[0].cached && !c.sections[2].cached);
    assert_eq!(body.monologue(), ["ça 🌍"]);
    let steps: Vec<(&str, &str)> = body
        .cognition
        .iter()
        .map(|s| (s.step.as_str(), s.text.as_str()))
        .collect();
    assert_eq!(
        steps,
        [
            ("internal_monologue", "ça 🌍"),
            ("external_dialogue", "Hi"),
            ("mental_query", "Is it late? → true")
        ]
    );
    assert_eq!(body.cognition[0].verb, "mused");
    assert_eq!(body.decisions[0].kind, "process");
    assert_eq!(body.memory[0].detail, "Tom (U1): version 2");
    assert_eq!(body.processes, ["main"]);
}

#[test]
fn a_failed_call_is_kept_with_its_error() {
    let hub = Hub::default();
    let t = Tracer::new(&hub, "b", Kind::State, "", true);
    let e = LlmError::Refused {
        provider: "anthropic",
        status: 401,
        message: "invalid x-api-key".into(),
    };
    t.answered("wakeup", Sent::State(&call()), "m", Err((&e, 2000)));
    let body = TraceBody::from_json(&t.finish(columns()).unwrap().body).unwrap();
    assert!(body.calls[0]
        .error
        .as_deref()
        .unwrap()
        .contains("invalid x-api-key"));
    assert!(body.calls[0].raw.is_empty());
    assert!(
        body.errors[0].contains("invalid x-api-key"),
        "{:?}",
        body.errors
    );
}

#[tokio::test]
async fn a_watcher_hears_each_moment_in_order() {
    let hub = Hub::default();
    let mut rx = hub.subscribe();
    let t = Tracer::new(&hub, "c", Kind::Message, "C1:1.0", false);
    t.stimulus("line one\nline two");
    t.plan("main", &[Step::InternalMonologue], false, "gate");
    t.sent("turn", Sent::State(&call()));
    t.answered(
        "turn",
        Sent::State(&call()),
        "m",
        Ok((&completion("x"), 3000)),
    );
    t.decision("gate", || "answer".into());
    t.response("Hello");
    let phases: Vec<Phase> = std::iter::from_fn(|| rx.try_recv().ok())
        .map(|r| {
            assert_eq!((r.trace.as_str(), r.thread.as_str()), ("c", "C1:1.0"));
            r.phase
        })
        .collect();
    assert_eq!(
        phases,
        [
            Phase::Stimulus,
            Phase::Plan,
            Phase::Prompt,
            Phase::Model,
            Phase::Decision,
            Phase::Response
        ]
    );
    assert!(t.finish(columns()).is_none(), "watched, not kept");
}

#[test]
fn a_line_is_one_line_cut_by_characters() {
    assert_eq!(one_line("a\nb\tc"), "a b c");
    let long = "é".repeat(LINE_CHARS + 5);
    let cut = one_line(&long);
    assert_eq!(cut.chars().count(), LINE_CHARS + 1);
    assert!(cut.ends_with('…'));
    assert_eq!(one_line(&"🌍".repeat(LINE_CHARS)), "🌍".repeat(LINE_CHARS));
}

#[test]
fn the_images_a_call_carried_are_sections_of_their_estimated_tokens() {
    let hub = Hub::default();
    let t = Tracer::new(&hub, "b".repeat(32).as_str(), Kind::Message, "C1:1.0", true);
    let call = call();
    let answer = completion("<affirmation>I see it</affirmation>");
    t.images(&[]);
    t.answered("wakeup", Sent::State(&call), "m", Ok((&answer, 1_000)));
    let text_sections = {
        let row = Tracer::new(&hub, "c".repeat(32).as_str(), Kind::Message, "C1:1.0", true);
        row.answered("wakeup", Sent::State(&call), "m", Ok((&answer, 1_000)));
        let body = TraceBody::from_json(&row.finish(columns()).unwrap().body).unwrap();
        body.calls[0].sections.len()
    };
    let image = crate::llm::Image {
        media_type: "image/png".into(),
        data: vec![0; 10],
        width: 1500,
        height: 750,
    };
    t.images(std::slice::from_ref(&image));
    let body = TraceBody::from_json(&t.finish(columns()).unwrap().body).unwrap();
    let sections = &body.calls[0].sections;
    assert_eq!(sections.len(), text_sections + 1);
    let last = sections.last().unwrap();
    assert_eq!(
        (last.name.as_str(), last.chars, last.cached),
        ("image", 0, false)
    );
    assert_eq!(last.tokens, 1_500, "1500 × 750 / 750");
}
