//! The engine's own cost per turn, model call excluded: `cargo bench --bench turn`.
//!
//! A realistic turn: soul.md of 4 KB, a user model of 3 KB, 20 working-memory entries and a
//! 2 KB model answer with every step. Reports the median and p99 of
//!   * build_prompt,
//!   * parse_response,
//!   * a call's answer grammar and JSON Schema (constrained output), cached as the engine
//!     caches them and built afresh, and parse_json_response,
//!   * assemble + parse + persist (begin the turn: record the message, take its number, load
//!     the context; plan, build, parse, commit the turn in one SQLite transaction): the engine
//!     work of a turn, the store called through its faces (`Turns`) as the engine calls it,
//!     each turn one `block_on` from the bench's thread,
//!   * a whole `Engine::perceive` with a zero-latency in-process provider (adds the async
//!     hand-offs and, on turns that change the user model, the git commit),
//!   * the store's part of a turn (begin, commit) with no trace (`keep_turns = 0`), with its
//!     trace written in a transaction of its own after the commit (as before the trace
//!     writer), and with its trace queued for the trace writer (as now), interleaved; and the
//!     writer's own cost per trace, in batches; then `Engine::perceive` with `keep_turns`
//!     0 and 500, interleaved,
//!   * the same for an ISM process that runs its 5 iterations (a selection and an effect each,
//!     then the closing answer: 11 calls), and from the two, the loop's own cost per
//!     iteration.

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anima::engine::{gate_input, spoken, Engine, Message, Perception};
use anima::llm::{BoxFuture, ChatRequest, Completion, Deltas, LlmError, Provider, Usage};
use anima::memory::faces::Turns;
use anima::memory::sqlite::Sqlite;
use anima::memory::{EntryType, NewEntry, SoulState, TurnRecord, TurnStart};
use anima::parse::parse_response;
use anima::process::library::MAIN_STEPS;
use anima::prompt::shape::Form;
use anima::prompt::{build_prompt, plan, Gates, ProcessInstructions, PromptInput};
use anima::soul::SoulFiles;

fn soul_4kb() -> SoulFiles {
    let mut soul =
        SoulFiles::load(Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/soul"))).unwrap();
    while soul.soul_md.len() < 4096 {
        soul.soul_md.push_str("\nYou prefer small, well-named functions and tests that read like the behaviour they check.");
    }
    soul.soul_md.truncate(4096);
    soul
}

fn user_model_3kb() -> String {
    let mut m = String::from("# Tom\n");
    for section in anima::prompt::BLUEPRINT_SECTIONS {
        m.push_str(&format!("\n## {section}\n"));
        for i in 0..5 {
            m.push_str(&format!(
                "- Observation {i} about {section}: works late, values directness.\n"
            ));
        }
    }
    m.truncate(3072);
    m
}

fn model_output_2kb(model: &str) -> String {
    let dialogue = "The port is at 93%. The remaining work is the event loop shim and two failing tests in the \
                    loader; I would start with the loader because the shim depends on it. ".repeat(2);
    format!(
        "<internal_monologue verb=\"pondered\">Tom is asking about the port again; he wants a status and a next step, \
         not a lecture. He has been working late.</internal_monologue>\n\
         <external_dialogue verb=\"explained\">{dialogue}</external_dialogue>\n\
         <user_model_check>true</user_model_check>\n\
         <user_model_update>\n{}\n</user_model_update>\n\
         <model_change_note>Tom prefers the next step before the explanation.</model_change_note>\n\
         <soul_state_check>true</soul_state_check>\n\
         <soul_state_update>\nemotionalState: focused\ncurrentTopic: BG3 port status\n</soul_state_update>",
        &model[..model.len().min(1200)]
    )
}

fn stats(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let median = samples[samples.len() / 2];
    let p99 = samples[samples.len() * 99 / 100];
    println!(
        "{name:<44} median {:>9.1} µs   p99 {:>9.1} µs   ({} runs)",
        median.as_secs_f64() * 1e6,
        p99.as_secs_f64() * 1e6,
        samples.len()
    );
}

fn time<T>(runs: usize, mut f: impl FnMut() -> T) -> Vec<Duration> {
    for _ in 0..runs / 10 {
        black_box(f());
    }
    (0..runs)
        .map(|_| {
            let t = Instant::now();
            black_box(f());
            t.elapsed()
        })
        .collect()
}

/// Answers at once, with what its function makes of the request's turn text.
struct Instant0<F>(F);

impl<F: Fn(&str) -> String + Send + Sync> Provider for Instant0<F> {
    fn name(&self) -> &'static str {
        "bench"
    }
    fn model(&self) -> &str {
        "fixed"
    }
    fn complete<'a>(
        &'a self,
        req: ChatRequest<'a>,
        _d: Option<&'a Deltas>,
    ) -> BoxFuture<'a, Result<Completion, LlmError>> {
        Box::pin(async move {
            Ok(Completion {
                text: (self.0)(req.user),
                model: "fixed".into(),
                stop_reason: Some("end_turn".into()),
                usage: Usage::default(),
                session: None,
            })
        })
    }
}

/// A zero-latency model for an ISM: selections alternate Think and Check, a Think call
/// thinks, a Check call answers its question, the closing call gives `whole`.
fn ism_answer(u: &str, whole: &str) -> String {
    if u.contains("Choose what to do next") {
        let iteration = u
            .split("<implicit_machine iteration=\"")
            .nth(1)
            .and_then(|r| r.split('"').next())
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(1);
        let action = if iteration % 2 == 1 { "Think" } else { "Check" };
        format!("<action_selection><reasoning>Step {iteration}.</reasoning><action>{action}</action></action_selection>")
    } else if u.contains("carry out `Think`") {
        "<internal_monologue verb=\"pondered\">The loader first, then the shim.</internal_monologue>".into()
    } else if u.contains("carry out `Check`") {
        "<mental_query question=\"Is it clear?\">false</mental_query>".into()
    } else {
        whole.to_string()
    }
}

const ISM_MAIN: &str = r#"name = "main"
kind = "ism"
goal = "Help with the port"
playbook = "Think, check, answer."
max_loops = 5
steps = ["external_dialogue", "user_model_check", "user_model_update", "soul_state_check", "soul_state_update"]

[[actions]]
name = "Think"
description = "Think"
effect = "think"

[[actions]]
name = "Check"
description = "Check"
effect = "query"
question = "Is it clear?"

[[actions]]
name = "Respond"
description = "Answer"
effect = "respond"
"#;

fn main() {
    let soul = soul_4kb();
    let model = user_model_3kb();
    let output = model_output_2kb(&model);
    let process = ProcessInstructions::default();
    let mut state = SoulState::default();
    state.set("emotionalState", "engaged");
    state.set("currentTopic", "BG3 port");

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = Sqlite::open(&dir.path().join("anima.db")).unwrap();
    let ctx = rt.block_on(async {
        for i in 0..10 {
            let message = format!("message {i}: how is the port going?");
            store
                .record_user_message("C1:1.0", "U1", "Tom", &message, None)
                .await
                .unwrap();
            store
                .commit_turn(TurnRecord {
                    thread: "C1:1.0".into(),
                    user_id: "U1".into(),
                    interaction: i + 1,
                    entries: vec![NewEntry::new(
                        EntryType::ExternalDialog,
                        "It is going well, thanks for asking.",
                    )],
                    ..Default::default()
                })
                .await
                .unwrap();
        }
        store.load_turn("C1:1.0", "U1", "Tom", 20).await.unwrap()
    });
    assert_eq!(ctx.recent.len(), 20);

    let history = spoken(&ctx.recent);
    let soul_state = state.non_default();
    let input = PromptInput {
        soul: anima::prompt::SoulText {
            soul: &soul.soul_md,
            skills: soul.skills_md.as_deref(),
            name: soul.name(),
        },
        soul_state: &soul_state,
        whisper: Some(anima::prompt::Intuition {
            text: "He circles back to this; he needs assurance.",
            source: "kothar",
        }),
        user_model: Some(anima::prompt::UserModel {
            name: "Tom",
            model: Some(&model),
        }),
        steps: &MAIN_STEPS,
        process: &process,
        history: &history,
        speaker: "Tom",
        process_note: None,
        quiet_minutes: None,
        machine: None,
        summary: None,
        psyche: None,
        attachments: &[],
        dossiers: anima::prompt::DossierInput::NONE,
        message: "What's the status of the BG3 port, and what should I do next?",
    };
    let built = build_prompt(&input);
    println!(
        "prompt: {} bytes; model output: {} bytes",
        built.system.len() + 2 + built.user.len(),
        output.len()
    );
    stats(
        "build_prompt",
        time(20_000, || {
            let history = spoken(&ctx.recent);
            let soul_state = state.non_default();
            build_prompt(&PromptInput {
                history: &history,
                soul_state: &soul_state,
                ..input
            })
        }),
    );
    stats(
        "parse_response",
        time(20_000, || parse_response(&output, 3000)),
    );
    // Constrained output: a call's shape from its prompt input, then its grammar or
    // schema; the engine keeps one cache for all its calls. Without constraints none of this
    // runs (the provider's `structured()` is `None`). The token budget is the default
    // `[llm] max_tokens`, short enough that the texts' bounds are fitted to it.
    const MAX_TOKENS: u32 = 2048;
    let shapes = anima::prompt::shape::Cache::default();
    for (name, form) in [
        ("answer grammar (GBNF), cached", Form::Gbnf),
        ("answer schema (JSON Schema), cached", Form::JsonSchema),
    ] {
        stats(
            name,
            time(20_000, || {
                shapes.get(anima::prompt::answer_shape(&input, 3000), form, MAX_TOKENS)
            }),
        );
    }
    stats(
        "answer grammar (GBNF), built uncached",
        time(5_000, || {
            anima::prompt::answer_shape(&input, 3000).build(Form::Gbnf, MAX_TOKENS)
        }),
    );
    stats(
        "answer schema (JSON Schema), built uncached",
        time(5_000, || {
            anima::prompt::answer_shape(&input, 3000).build(Form::JsonSchema, MAX_TOKENS)
        }),
    );
    let json_output = anima::parse::render_json(&parse_response(&output, 3000));
    stats(
        "parse_json_response",
        time(20_000, || {
            anima::parse::parse_json_response(&json_output, 3000)
        }),
    );

    let gates = Gates {
        soul_state_interval: 3,
        user_model_interval: 5,
    };
    let mut n = 0u64;
    stats(
        "assemble + parse + persist (one transaction)",
        time(3_000, || {
            n += 1;
            let thread = format!("C1:{}.0", n % 50);
            rt.block_on(async {
                let (_, ctx) = store.begin_turn(port_question(&thread)).await.unwrap();
                let plan = plan(&MAIN_STEPS, &gate_input(&ctx), gates);
                let history = spoken(&ctx.recent);
                let soul_state = ctx.soul.non_default();
                let prompt = build_prompt(&PromptInput {
                    history: &history,
                    steps: &plan.steps,
                    soul_state: &soul_state,
                    ..input
                });
                black_box(&prompt);
                let c = parse_response(&output, 3000);
                let rec = TurnRecord {
                    thread,
                    user_id: "U1".into(),
                    interaction: ctx.interaction,
                    entries: vec![
                        NewEntry::new(
                            EntryType::InternalMonologue,
                            &c.monologue.as_ref().unwrap().text,
                        ),
                        NewEntry::new(EntryType::ExternalDialog, &c.reply),
                        NewEntry::new(EntryType::MentalQuery, anima::steps::USER_MODEL_CHECK)
                            .metadata(serde_json::json!({"result": true})),
                    ],
                    soul_updates: c.soul_state_update.clone(),
                    injected_user_model: plan.inject_user_model,
                    ..Default::default()
                };
                store.commit_turn(rec).await.unwrap()
            })
        }),
    );

    let cfg_text = format!(
        "[paths]\nhome = \"{}\"\n",
        dir.path().join("engine").display()
    );
    let config =
        Arc::new(anima::config::parse(&cfg_text, Path::new("bench.toml"), dir.path()).unwrap());
    let engine_store = Sqlite::open(&config.db_path()).unwrap().shared();
    let engine = Engine::with_soul(
        config,
        engine_store,
        soul.clone(),
        Arc::new(Instant0({
            let output = output.clone();
            move |_: &str| output.clone()
        })),
    );
    let mut n = 0u64;
    let fixed = time(1_000, || {
        n += 1;
        rt.block_on(engine.perceive(&asked(&format!("C2:{}.0", n % 50))))
            .unwrap()
    });
    let fixed_median = median(&fixed);
    stats("Engine::perceive, zero-latency model (incl. git)", fixed);

    // A real turn's trace (as the engine keeps it), the template of the traces below.
    rt.block_on(engine.flush_traces());
    let template = rt.block_on(async {
        let newest = engine.store().traces(None, None, 1).await.unwrap();
        engine
            .store()
            .trace(&newest[0].trace)
            .await
            .unwrap()
            .unwrap()
    });

    // The store's part of a turn through its faces (begin, then commit), on each backend.
    let sqlite = Sqlite::open(&dir.path().join("faces.db")).unwrap().shared();
    faces_turn(&rt, &sqlite, "SQLite");
    traced_turns(&rt, &sqlite, &template, "SQLite", None);
    traced_turns(
        &rt,
        &sqlite,
        &template,
        "SQLite",
        Some(Duration::from_millis(2)),
    );
    perceive_keep(&rt, dir.path(), &soul, &output);
    if let Some(url) = postgres_url() {
        let pg: Arc<dyn anima::memory::Store> = Arc::new(
            rt.block_on(anima::memory::postgres::Postgres::connect(&url, 8))
                .unwrap(),
        );
        faces_turn(&rt, &pg, "PostgreSQL");
        traced_turns(&rt, &pg, &template, "PostgreSQL", None);
        traced_turns(
            &rt,
            &pg,
            &template,
            "PostgreSQL",
            Some(Duration::from_millis(4)),
        );
        let url2 = rt.block_on(fresh_database_async(&url));
        let pg_engine_store: Arc<dyn anima::memory::Store> = Arc::new(
            rt.block_on(anima::memory::postgres::Postgres::connect(&url2, 8))
                .unwrap(),
        );
        let pg_cfg = format!(
            "[paths]\nhome = \"{}\"\n",
            dir.path().join("engine-pg").display()
        );
        let pg_config =
            Arc::new(anima::config::parse(&pg_cfg, Path::new("bench.toml"), dir.path()).unwrap());
        let pg_engine = Engine::with_soul(
            pg_config,
            pg_engine_store,
            soul.clone(),
            Arc::new(Instant0({
                let output = output.clone();
                move |_: &str| output.clone()
            })),
        );
        let mut n = 0u64;
        stats(
            "Engine::perceive, zero-latency model, PostgreSQL",
            time(1_000, || {
                n += 1;
                rt.block_on(pg_engine.perceive(&asked(&format!("C2:{}.0", n % 50))))
                    .unwrap()
            }),
        );
    } else {
        println!("PostgreSQL figures skipped: set ANIMA_BENCH_POSTGRES_URL (a server the bench may create databases on)");
    }

    let ism_cfg = format!("[paths]\nhome = \"{}\"\n", dir.path().join("ism").display());
    let config =
        Arc::new(anima::config::parse(&ism_cfg, Path::new("bench.toml"), dir.path()).unwrap());
    let ism_store = Sqlite::open(&config.db_path()).unwrap().shared();
    let def = anima::process::def::parse(ISM_MAIN, Path::new("main.toml")).unwrap();
    let library = anima::process::Library::fixed(
        soul.clone(),
        [("main".to_string(), def)].into_iter().collect(),
    );
    let ism_engine = Engine::new(
        config,
        ism_store.clone(),
        Arc::new(library),
        Arc::new(Instant0({
            let output = output.clone();
            move |u: &str| ism_answer(u, &output)
        })),
    );
    let mut n = 0u64;
    let mut writes = 0;
    let ism = time(300, || {
        n += 1;
        let before = ism_store.write_transactions();
        let out = rt
            .block_on(ism_engine.perceive(&asked(&format!("C3:{}.0", n % 50))))
            .unwrap();
        assert_eq!((out.iterations, out.model_calls), (5, 11));
        writes = ism_store.write_transactions() - before;
        out
    });
    let ism_median = median(&ism);
    stats("Engine::perceive, ISM of 5 iterations (11 calls)", ism);
    println!(
        "{:<44} median {:>9.1} µs   ({writes} write transactions a turn)",
        "  the loop's own cost per iteration",
        (ism_median.saturating_sub(fixed_median)).as_secs_f64() * 1e6 / 5.0
    );
}

/// The start of a turn in which Tom asks about the port in `thread`.
fn port_question(thread: &str) -> TurnStart {
    TurnStart {
        thread: thread.to_string(),
        user_id: "U1".into(),
        display_name: "Tom".into(),
        text: "What's the status of the port?".into(),
        source: None,
        inbox: None,
        window: 20,
        claimant: "bench".into(),
        claim_until_ms: 0,
        conversation_claim: None,
    }
}

/// Tom asks about the port in `thread`.
fn asked(thread: &str) -> Perception {
    Perception::Message(Message {
        thread: thread.to_string(),
        user_id: "U1".into(),
        display_name: "Tom".into(),
        text: "What's the status of the port?".into(),
        attachments: Vec::new(),
        source: None,
        inbox_id: None,
        claim: None,
        newer: None,
        speech: None,
    })
}

fn median(samples: &[Duration]) -> Duration {
    let mut s = samples.to_vec();
    s.sort();
    s[s.len() / 2]
}

/// The server the bench may create a database on, as a fresh database's URL.
fn postgres_url() -> Option<String> {
    let url = std::env::var("ANIMA_BENCH_POSTGRES_URL")
        .ok()
        .filter(|u| !u.is_empty())?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    Some(rt.block_on(fresh_database_async(&url)))
}

/// A new, empty database on the server at `url`; its URL.
async fn fresh_database_async(url: &str) -> String {
    use std::str::FromStr;
    let config = tokio_postgres::Config::from_str(url).unwrap();
    let (client, connection) = config.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection);
    let name = format!("anima_bench_{}", uuid::Uuid::new_v4().simple());
    client
        .batch_execute(&format!("CREATE DATABASE {name}"))
        .await
        .unwrap();
    let mut fresh = config.clone();
    fresh.dbname(&name);
    let (client2, connection2) = fresh.connect(tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(connection2);
    drop(client2);
    let (base, query) = url.split_once('?').map_or((url, ""), |(b, q)| (b, q));
    let root = &base[..base.rfind('/').unwrap()];
    if query.is_empty() {
        format!("{root}/{name}")
    } else {
        format!("{root}/{name}?{query}")
    }
}

/// A turn's store operations through the faces: a message begun, a reply committed, `runs`
/// times after a tenth as many to warm up, round 50 threads of `channel`; the duration of each.
async fn faces_turns(
    store: Arc<dyn anima::memory::Store>,
    channel: &'static str,
    from: u64,
    runs: u64,
) -> Vec<Duration> {
    let mut samples = Vec::new();
    for n in from..from + runs + runs / 10 {
        let thread = format!("{channel}:{}.0", n % 50);
        let t = Instant::now();
        one_turn(&store, &thread).await;
        if n >= from + runs / 10 {
            samples.push(t.elapsed());
        }
    }
    samples
}

/// The store's part of a turn on `store`, measured two ways, each in threads of its own (a
/// thread's length is part of a turn's cost): from a task on the runtime, as the engine calls
/// it, and with each turn a `block_on` from the bench's own thread (which adds the hand-offs
/// between that thread and the runtime's to every call).
fn faces_turn(rt: &tokio::runtime::Runtime, store: &Arc<dyn anima::memory::Store>, backend: &str) {
    let in_task = rt
        .block_on(rt.spawn(faces_turns(store.clone(), "C1", 0, 2_000)))
        .unwrap();
    stats(
        &format!("store per turn, faces, {backend}, in a task"),
        in_task,
    );
    let mut n = 0;
    let outside = time(2_000, || {
        n += 1;
        rt.block_on(faces_turns(store.clone(), "C2", n, 1))
    });
    stats(
        &format!("store per turn, faces, {backend}, block_on"),
        outside,
    );
}

/// How a turn keeps its trace, in `traced_turns`.
#[derive(Clone, Copy, PartialEq)]
enum Keep {
    /// `keep_turns = 0`: no trace.
    None,
    /// The trace in a write transaction of its own after the commit (before the writer).
    OwnWrite,
    /// The trace queued for the trace writer, whose runner writes it in batches (now).
    Queued,
}

/// The store's part of a turn (begin, commit) on `store`, with its trace kept each way of
/// `Keep`, interleaved in rounds so each sees the same machine: per turn on the turn's path,
/// and, for the writer, its own cost per trace written in batches. Back to back (`pace`
/// none: the writer's work competes with the next turns'), or a turn every `pace` (the
/// writer works between turns, as in a daemon whose turns wait for a model).
fn traced_turns(
    rt: &tokio::runtime::Runtime,
    store: &Arc<dyn anima::memory::Store>,
    template: &anima::memory::TraceRow,
    backend: &str,
    pace: Option<Duration>,
) {
    let backend = match pace {
        None => format!("{backend}, back to back"),
        Some(p) => format!("{backend}, one every {} ms", p.as_millis()),
    };
    let writer = anima::engine::TraceWriter::new(store.clone());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let runner = rt.spawn(writer.clone().run(async {
        let _ = stopped.await;
    }));
    let modes = [
        (Keep::None, "no trace (keep_turns = 0)"),
        (Keep::OwnWrite, "+ trace, its own write (before)"),
        (Keep::Queued, "+ trace queued for the writer (now)"),
    ];
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); modes.len()];
    let mut n = 0u64;
    for _round in 0..5 {
        for (i, (keep, _)) in modes.iter().enumerate() {
            let (store, writer, template) = (store.clone(), writer.clone(), template.clone());
            let from = n;
            n += 440;
            let keep = *keep;
            let got = rt
                .block_on(rt.spawn(async move {
                    let mut got = Vec::new();
                    let mut next = tokio::time::Instant::now();
                    for k in from..from + 440 {
                        if let Some(p) = pace {
                            next += p;
                            tokio::time::sleep_until(next).await;
                        }
                        let thread = format!("T{i}:{}.0", k % 50);
                        let mut row = template.clone();
                        row.trace = format!("{k:032x}");
                        row.thread = thread.clone();
                        let t = Instant::now();
                        one_turn(&store, &thread).await;
                        match keep {
                            Keep::None => {}
                            Keep::OwnWrite => store.record_trace(row).await.unwrap(),
                            Keep::Queued => {
                                black_box(writer.push(row));
                            }
                        }
                        if k >= from + 40 {
                            got.push(t.elapsed());
                        }
                    }
                    got
                }))
                .unwrap();
            samples[i].extend(got);
        }
    }
    let base = median(&samples[0]);
    for ((_, name), got) in modes.iter().zip(samples) {
        let m = median(&got);
        stats(&format!("store per turn, {backend}, {name}"), got);
        println!(
            "{:<44} {:+.1} % of the store's part without a trace",
            "",
            (m.as_secs_f64() / base.as_secs_f64() - 1.0) * 100.0
        );
    }
    let _ = stop.send(());
    rt.block_on(runner).unwrap();
    println!(
        "{:<44} {} dropped of {} queued",
        "  the writer's queue",
        writer.dropped(),
        5 * 440
    );
    if pace.is_some() {
        return;
    }
    // The writer's own work, off the turn's path: 2,000 traces queued (from outside the
    // runtime, so nothing drains them), then written in batches by a flush.
    let idle = anima::engine::TraceWriter::with_capacity(store.clone(), 4_000);
    for k in 0..2_000u64 {
        let mut row = template.clone();
        row.trace = format!("f{k:031x}");
        idle.push(row);
    }
    let t = Instant::now();
    rt.block_on(idle.flush());
    println!(
        "{:<44} {:>9.1} µs a trace ({} bytes of body), in batches of {}",
        format!("the trace writer's own cost, {backend}"),
        t.elapsed().as_secs_f64() * 1e6 / 2_000.0,
        template.body.len(),
        anima::engine::TraceWriter::BATCH,
    );
}

/// A message begun and its reply committed in `thread`.
async fn one_turn(store: &Arc<dyn anima::memory::Store>, thread: &str) {
    let (_, ctx) = store.begin_turn(port_question(thread)).await.unwrap();
    black_box(
        store
            .commit_turn(TurnRecord {
                thread: thread.to_string(),
                user_id: "U1".into(),
                interaction: ctx.interaction,
                entries: vec![
                    NewEntry::new(EntryType::InternalMonologue, "Thinking about the port."),
                    NewEntry::new(EntryType::ExternalDialog, "The port is at 93%."),
                ],
                ..Default::default()
            })
            .await
            .unwrap(),
    );
}

/// Whole `Engine::perceive` turns with `keep_turns` 0 and 500 (the default), interleaved.
fn perceive_keep(rt: &tokio::runtime::Runtime, dir: &Path, soul: &SoulFiles, output: &str) {
    let engines: Vec<(u64, Engine)> = [0u64, 500]
        .into_iter()
        .map(|keep| {
            let cfg = format!(
                "[paths]\nhome = \"{}\"\n\n[inspect]\nkeep_turns = {keep}\n",
                dir.join(format!("keep{keep}")).display()
            );
            let config =
                Arc::new(anima::config::parse(&cfg, Path::new("bench.toml"), dir).unwrap());
            let store = Sqlite::open(&config.db_path()).unwrap().shared();
            let output = output.to_string();
            let engine = Engine::with_soul(
                config,
                store,
                soul.clone(),
                Arc::new(Instant0(move |_: &str| output.clone())),
            );
            (keep, engine)
        })
        .collect();
    let mut samples = vec![Vec::new(), Vec::new()];
    let mut n = 0u64;
    for _round in 0..4 {
        for (i, (_, engine)) in engines.iter().enumerate() {
            samples[i].extend(time(250, || {
                n += 1;
                rt.block_on(engine.perceive(&asked(&format!("K{i}:{}.0", n % 50))))
                    .unwrap()
            }));
        }
    }
    for ((keep, engine), got) in engines.iter().zip(samples) {
        rt.block_on(engine.flush_traces());
        stats(&format!("Engine::perceive, keep_turns = {keep}"), got);
    }
}
