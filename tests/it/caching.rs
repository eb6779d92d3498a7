//! Prompt caching that actually forms: a 20-turn conversation through `anima chat` against
//! the fake Anthropic server, which accounts cache reads and writes as Anthropic does (the
//! 1,024-token floor, breakpoints, a 20-block look-back). Billed-equivalent input tokens
//! (cache writes at 1.25×, reads at 0.1×) against the same conversation billed with no
//! caching and with the user model in every prompt. Prints the figures (docs/benchmarks.md quotes them).

use crate::support;

use support::*;

#[test]
fn a_twenty_turn_conversation_costs_at_least_sixty_percent_less_input() {
    let model = FakeModel::start();
    // The first answer writes what it learned about the person: a user model of about 3 KB,
    // as a real one grows to; then plain answers.
    let sections: String = [
        "Persona",
        "Speaking Style",
        "Conversational Context",
        "Worldview",
        "Interests & Domains",
        "Working Patterns",
        "Most Potent Memories",
    ]
    .iter()
    .map(|s| {
        format!(
            "\n## {s}\n{}\n",
            "Ada ports game engines, checks every assumption twice and likes concrete answers. "
                .repeat(5)
        )
    })
    .collect();
    model.reply(&format!(
        "<internal_monologue>She is porting a loader.</internal_monologue><external_dialogue>Tell me more.</external_dialogue><user_model_check>true</user_model_check><user_model_update># Ada\n{sections}</user_model_update><model_change_note>First impression.</model_change_note>"
    ));
    model.echo().simulate_cache();
    let home = Home::new("anthropic", &model.url(), "");
    let lines: String = (1..=20)
        .map(|i| {
            format!(
                "Turn {i}: I am porting the loader of our game to the new engine, and step {i} is about the asset cache, the shader variants and how the save files migrate between versions; what should I watch out for this time?\n"
            )
        })
        .collect();
    let r = home.run(&["chat", "--user", "Ada"], &lines);
    assert_eq!(r.status, 0, "{}", r.stderr);
    assert_eq!(replies(&r.stdout).len(), 20);

    let usage = model.cache_usage();
    let requests = model.requests();
    assert_eq!(usage.len(), 20);
    // The user model as it is shown when it is in (the latest time it was).
    let shown_model = requests
        .iter()
        .rev()
        .map(|q| q.turn_text())
        .find_map(|t| {
            let start = t.find("<user_model name=")?;
            let end = t.find("</user_model>")? + "</user_model>".len();
            Some(t[start..end].to_string())
        })
        .expect("the model is in some turn");
    assert!(shown_model.len() > 3_000, "{shown_model}");
    let model_tokens = tokens_of(&shown_model);

    let mut cached = 0.0;
    let mut baseline = 0.0;
    let (mut reads, mut writes) = (0, 0);
    for ((input, read, write), q) in usage.iter().zip(&requests) {
        cached += *input as f64 + 1.25 * *write as f64 + 0.1 * *read as f64;
        let without_model = !q.turn_text().contains("<user_model name=");
        baseline += (input + read + write) as f64
            + if without_model {
                model_tokens as f64
            } else {
                0.0
            };
        reads += read;
        writes += write;
    }
    let saved = 1.0 - cached / baseline;
    println!(
        "20 turns: {baseline:.0} input tokens with no caching and the user model always in; {cached:.0} billed-equivalent with anima's caching and gating ({reads} read from cache, {writes} written): {:.0} % fewer",
        saved * 100.0
    );
    assert!(reads > 0, "the cache forms");
    assert!(writes < reads, "each turn reads what the last wrote");
    // The target.
    assert!(saved >= 0.60, "only {:.1} % fewer", saved * 100.0);
}
