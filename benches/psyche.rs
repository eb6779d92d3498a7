//! The psychology substrate's cost: `cargo bench --bench psyche`.
//!
//! A store holding 1,000 people and 10,000 episodic memories. Reports the median and p99 of
//!   * the pure update of one event (`psyche::update::apply`: classify, drives, mood, arcs,
//!     relationship, energy, memory, gate inputs), no I/O,
//!   * one event through the store as the daemon applies it (the `Psychology` face's
//!     `psyche_event_once` on SQLite, from a task on a runtime, keyed by its source: the
//!     hand-off to the blocking pool and back, and one write transaction that marks the key
//!     seen, reads the state and the author's relationship, runs the update and the gate,
//!     writes the state, relationship,
//!     memory, facts and salience and logs the decision), three ways: people coming back after
//!     a quiet spell (each author's first event in hours, which also makes their last memory
//!     more salient), lines of conversations (every author spoke minutes ago), and a stream of
//!     the two where one event in four is a return. The three take turns, in five rounds of
//!     400 events each, so that a slow spell of the machine falls on all of them alike.
//!     Its cost is mostly the pages it writes to the WAL, a few µs each: two for an event
//!     without a memory (the soul's row, with the state and the event's key and decision as
//!     lines that move to their tables together, a dozen events at a time, and the
//!     relationship), the same when the person comes back (the salience their last memory
//!     gains waits on their relationship row, unless it changes the most salient memories,
//!     until their next memory is made), about seventeen for one that makes a memory (its row,
//!     indexes and full text); each kind reports its mean,
//!   * the context packet for a turn (the face's `psyche_packet`, likewise: state, three people's
//!     relationships and facts, FTS5 + recency + salience candidates, BM25 top-K, words),
//!     rendered.
//!
//! Targets: update under 50 µs median, packet under 1 ms median. Each kind of event
//! through the store is reported on its own, not only in a mix.

use std::hint::black_box;
use std::time::{Duration, Instant};

use anima::memory::faces::Psychology;
use anima::memory::psyche::Place;
use anima::memory::sqlite::Sqlite;
use anima::psyche::update::apply;
use anima::psyche::{Event, EventKind, GateRules, Psyche, Substrate};

const PEOPLE: usize = 1_000;
const MEMORIES: i64 = 10_000;
const RUNS: usize = 2_000;

/// Words people use, most common first; `sentence` picks them with a Zipf-like skew (a few
/// words everywhere, most words rare), among them accented, CJK and the arcs' keywords.
fn vocabulary() -> Vec<String> {
    let mut out: Vec<String> = [
        "the", "a", "to", "and", "is", "i", "you", "it", "of", "in", "that", "we", "this", "build",
        "compiler", "release", "garden", "coffee", "deadline", "design", "review", "meeting",
        "holiday", "family", "bug", "rust", "test", "train", "weather", "music", "book", "project",
        "refactor", "team", "manager", "lonely", "tired", "happy", "café", "naïve", "東京",
        "friend", "sorry", "thanks", "why", "again", "tomorrow", "weekend",
    ]
    .iter()
    .map(|w| w.to_string())
    .collect();
    let syllables = [
        "ka", "lo", "mi", "ren", "tas", "vo", "zu", "pel", "dri", "shan", "ot", "bé",
    ];
    for a in syllables {
        for b in syllables {
            for c in syllables {
                out.push(format!("{a}{b}{c}"));
            }
        }
    }
    out
}

fn sentence(rng: &mut fastrand::Rng, vocabulary: &[String], n: usize) -> String {
    (0..n)
        .map(|_| {
            // Log-uniform rank: P(rank) ∝ 1/rank, Zipf's law for word frequencies.
            let rank = (vocabulary.len() as f64).powf(rng.f64()) as usize - 1;
            vocabulary[rank.min(vocabulary.len() - 1)].as_str()
        })
        .collect::<Vec<_>>()
        .join(" ")
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

/// Copies the WAL back into the database, as the store's checkpointer does between bursts;
/// the next write starts it over. The pages it held.
fn checkpoint(db: &std::path::Path) -> i64 {
    let c = rusqlite::Connection::open(db).unwrap();
    let (busy, log, copied): (i64, i64, i64) = c
        .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })
        .unwrap();
    assert_eq!((busy, copied), (0, log), "nothing else reads or writes");
    log
}

/// Waits for the store's checkpointer to run (see `memory::checkpoint`).
async fn settle() {
    tokio::time::sleep(Duration::from_secs(3)).await;
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(rt.spawn(measure())).unwrap();
}

/// Everything, in a task on the runtime, as the daemon calls the store.
async fn measure() {
    let dir = tempfile::tempdir().unwrap();
    let store = Sqlite::open(&dir.path().join("anima.db")).unwrap();
    let psyche = Psyche::shipped();
    let rules = GateRules::default();
    let mut rng = fastrand::Rng::with_seed(12);
    let people: Vec<String> = (0..PEOPLE).map(|i| format!("U{i:05}")).collect();
    let vocabulary = vocabulary();

    // Fill: every person speaks, and addressed messages that touch an arc become memories
    // until there are 10,000 of them.
    let fill = Instant::now();
    let mut at = 1_700_000_000_000i64;
    let mut memories = 0;
    let mut i = 0usize;
    while memories < MEMORIES {
        at += 1_000;
        let who = &people[i % PEOPLE];
        let text = format!("I'm worried about {}", sentence(&mut rng, &vocabulary, 12));
        let event = Event {
            kind: EventKind::Addressed,
            person: Some(who.clone()),
            text,
            at,
        };
        let (fx, _) = store
            .psyche_event("Wren", &psyche, &rules, &event, &Place::default())
            .await
            .unwrap();
        memories += fx.memory.is_some() as i64;
        i += 1;
    }
    println!(
        "filled {PEOPLE} people, {memories} memories in {:.1} s ({i} events)",
        fill.elapsed().as_secs_f64()
    );

    // The fill wrote without pause, so the WAL holds it all: let the checkpointer (which runs
    // once the store has been quiet for a second) copy it back, as it does between bursts in
    // a running daemon, so what follows measures the steady state and not the checkpoint.
    settle().await;

    let mut says = fastrand::Rng::with_seed(13);
    let mut event = |n: usize, person: &str, at: i64| {
        let len = 5 + says.usize(..30);
        Event {
            kind: if n.is_multiple_of(3) {
                EventKind::Addressed
            } else {
                EventKind::Overheard
            },
            person: Some(person.to_string()),
            text: sentence(&mut says, &vocabulary, len),
            at,
        }
    };
    // One event through the store, three kinds, in rounds that take turns, so that the
    // machine's slow spells fall on all three alike. Each round begins after a quiet spell:
    //   * people coming back: 400 people, each once, in a random order;
    //   * lines of conversations: 400 lines a second apart by those people, who all spoke
    //     within minutes, so none of them is coming back;
    //   * a stream: one event in four is someone else coming back, the others are lines by
    //     people who came back earlier in it (a real channel has fewer returns than that: one
    //     per person per quiet spell).
    const ROUNDS: usize = 5;
    const PER: usize = RUNS / ROUNDS;
    const SPELL: i64 = 2 * 3_600_000;
    const KINDS: [&str; 3] = [
        "through the store, someone coming back",
        "through the store, a line of a conversation",
        "through the store, a stream (1 in 4 back)",
    ];
    // (kind, the events with whether each is a return), in the order they are applied.
    let mut phases: Vec<(usize, Vec<(Event, bool)>)> = Vec::new();
    let mut n = 0usize;
    for _ in 0..ROUNDS {
        at += SPELL;
        let mut order: Vec<usize> = (0..PEOPLE).collect();
        rng.shuffle(&mut order);
        let mut next = |who: usize, back: bool, at: &mut i64| {
            *at += 1_000;
            n += 1;
            (event(n, &people[who], *at), back)
        };
        let back: Vec<(Event, bool)> = order[..PER]
            .iter()
            .map(|&who| next(who, true, &mut at))
            .collect();
        let lines: Vec<(Event, bool)> = (0..PER)
            .map(|_| next(order[rng.usize(..PER)], false, &mut at))
            .collect();
        let mut came: Vec<usize> = Vec::new();
        let stream: Vec<(Event, bool)> = (0..PER)
            .map(|k| {
                if k.is_multiple_of(4) {
                    let who = order[PER + k / 4];
                    came.push(who);
                    next(who, true, &mut at)
                } else {
                    next(came[rng.usize(..came.len())], false, &mut at)
                }
            })
            .collect();
        phases.extend([(0, back), (1, lines), (2, stream)]);
    }
    let events: Vec<Event> = phases
        .iter()
        .filter(|(kind, _)| *kind == 1)
        .flat_map(|(_, set)| set.iter().map(|(e, _)| e.clone()))
        .collect();

    // The pure update.
    let state = Substrate::new(&psyche, at);
    let rel = anima::psyche::Relationship::new(&psyche);
    let mut samples = Vec::with_capacity(RUNS);
    for e in &events {
        let t = Instant::now();
        black_box(apply(black_box(&state), Some(&rel), e, &psyche));
        samples.push(t.elapsed());
    }
    stats("update (pure, per event)", samples);

    let place = Place {
        channel: Some("C1".into()),
        listened: true,
    };
    let db = dir.path().join("anima.db");
    let mut samples: [Vec<Duration>; 3] = Default::default();
    let mut pages = [0i64; 3];
    for (phase, (kind, set)) in phases.iter().enumerate() {
        // The WAL starts over: what it holds at the end is this phase's pages.
        checkpoint(&db);
        for (k, (e, back)) in set.iter().enumerate() {
            let key = format!("inbox:{phase}:{k}");
            let t = Instant::now();
            let applied = store
                .psyche_event_once("Wren", &psyche, &rules, e, &place, &key)
                .await
                .unwrap();
            samples[*kind].push(t.elapsed());
            let (fx, _) = black_box(applied).expect("every event is new");
            assert_eq!(fx.salience_boost.is_some(), *back, "{}: {k}", KINDS[*kind]);
        }
        pages[*kind] += checkpoint(&db);
    }
    for (kind, samples) in samples.into_iter().enumerate() {
        stats(KINDS[kind], samples);
        println!(
            "{:<44} {:.2} pages per event",
            "",
            pages[kind] as f64 / RUNS as f64
        );
    }

    // The context packet with top-K retrieval.
    let now = at + 10_000;
    let mut samples = Vec::with_capacity(RUNS);
    for n in 0..RUNS {
        let present: Vec<(String, String)> = (0..3)
            .map(|k| {
                let id = people[(n * 7 + k * 131) % PEOPLE].clone();
                (id.clone(), format!("Person {id}"))
            })
            .collect();
        let query = &events[n].text;
        let t = Instant::now();
        let packet = store
            .psyche_packet("Wren", &psyche, &present, query, now)
            .await
            .unwrap();
        black_box(packet.render(&|q| format!("«{q}»")));
        samples.push(t.elapsed());
    }
    stats("context packet + top-K (store, rendered)", samples);

    // The pure part of it: BM25 top-K over a candidate set the size the store gives, the
    // packet built and rendered.
    let candidates: Vec<anima::psyche::Memory> = (0..60)
        .map(|id| anima::psyche::Memory {
            id,
            text: sentence(&mut rng, &vocabulary, 12),
            importance: anima::psyche::Unit::new(0.5),
            salience: anima::psyche::Unit::new(0.5),
            at: at - id * 60_000,
            people: vec![people[id as usize].clone()],
        })
        .collect();
    let rels = [anima::psyche::Relationship::new(&psyche)];
    let present = [anima::psyche::packet::Present {
        id: &people[0],
        name: "Zoé",
        relationship: Some(&rels[0]),
        facts: &[],
    }];
    let mut samples = Vec::with_capacity(RUNS);
    for e in &events {
        let t = Instant::now();
        let packet = anima::psyche::Packet::build(&anima::psyche::packet::Input {
            substrate: &state,
            psyche: &psyche,
            people: &present,
            query: &e.text,
            memories: &candidates,
            intentions: &[],
            now,
        });
        black_box(packet.render(&|q| format!("«{q}»")));
        samples.push(t.elapsed());
    }
    stats("packet + top-K of 60 candidates (pure)", samples);
}
