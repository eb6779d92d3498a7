//! The dossiers' cost before a call: `cargo bench --bench dossiers`.
//!
//! 1,000 dossiers (half hand-written, half learned; each a two-word name and two aliases),
//! indexed once as the engine keeps them between turns. One turn's work, as the engine does it
//! before the call: the names the message brings up (`dossier::named`), the dossiers the
//! message and the thread's last 12 entries mention (`Index::mentions`), the recall ranking
//! and the budget cut over the recalled texts. Three kinds of turn take turns: an ordinary
//! message (no name), one naming a colleague the soul has no dossier of, and one naming two
//! known dossiers by name and alias. Reports the median and p99 of each kind, and what
//! building the index costs (paid only when a dossier changes).
//!
//! Target: detection and recall ≤ 50 µs per turn with 1,000 dossiers.

use std::hint::black_box;
use std::time::{Duration, Instant};

use anima::dossier::{named, recall, Budget, Head, Index, Kind, Known, Origin};

const FIRST: [&str; 25] = [
    "Ada",
    "Grace",
    "Alan",
    "Edsger",
    "Barbara",
    "Donald",
    "Frances",
    "John",
    "Margaret",
    "Ken",
    "Dennis",
    "Radia",
    "Leslie",
    "Niklaus",
    "Tony",
    "Hedy",
    "Katherine",
    "Claude",
    "Sophie",
    "Linus",
    "Guido",
    "Bjarne",
    "Yukihiro",
    "Rasmus",
    "Larry",
];
const LAST: [&str; 40] = [
    "Lovelace",
    "Hopper",
    "Turing",
    "Dijkstra",
    "Liskov",
    "Knuth",
    "Allen",
    "McCarthy",
    "Hamilton",
    "Thompson",
    "Ritchie",
    "Perlman",
    "Lamport",
    "Wirth",
    "Hoare",
    "Lamarr",
    "Johnson",
    "Shannon",
    "Wilson",
    "Torvalds",
    "Rossum",
    "Stroustrup",
    "Matsumoto",
    "Lerdorf",
    "Wall",
    "Kay",
    "Backus",
    "Naur",
    "Engelbart",
    "Sutherland",
    "Cerf",
    "Kahn",
    "Berners",
    "Postel",
    "Metcalfe",
    "Boggs",
    "Floyd",
    "Tarjan",
    "Karp",
    "Cook",
];

fn dossiers(n: usize) -> Vec<Known> {
    (0..n)
        .map(|i| {
            let (first, last) = (FIRST[i % FIRST.len()], LAST[(i / FIRST.len()) % LAST.len()]);
            let name = format!("{first} {last} {i}");
            Known {
                slug: format!("d{i}"),
                origin: if i % 2 == 0 {
                    Origin::Hand
                } else {
                    Origin::Learned
                },
                head: Head {
                    aliases: vec![format!("{last}{i}"), format!("{first}-{i}")],
                    name,
                    kind: if i % 3 == 0 {
                        Kind::Subject
                    } else {
                        Kind::Person
                    },
                },
            }
        })
        .collect()
}

fn stats(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    (v[v.len() / 2], v[v.len() * 99 / 100])
}

fn main() {
    let n = 1_000;
    let started = Instant::now();
    let index = Index::new(dossiers(n));
    let built = started.elapsed();
    let started = Instant::now();
    let big = Index::new(dossiers(10_000));
    let built_big = started.elapsed();
    drop(big);
    let body = "Leads the compiler team; prefers written proposals to meetings. ".repeat(20);
    let thread: Vec<String> = (0..12)
        .map(|i| format!("message {i}: we talked about the release plan, the migration and the bug in the parser that shows up on long inputs, and what to do about it next week."))
        .collect();
    let thread: Vec<&str> = thread.iter().map(String::as_str).collect();
    let kinds = [
        ("ordinary", "hello, how are you today? I think the release can go out on friday after the tests pass."),
        ("a new name", "I had lunch with Priya Raman today, she runs the platform team and wants to talk."),
        ("two known", "Did Ada Lovelace 0 ever meet Turing27? I would ask Grace-1 first."),
    ];
    let budget = Budget::default();
    let exclude = ["U1", "Tom Baker", "Wren"];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); kinds.len()];
    let mut recalled = [0usize; 3];
    for _round in 0..5 {
        for (k, (_, message)) in kinds.iter().enumerate() {
            for _ in 0..2_000 {
                let t = Instant::now();
                let names = named(message, &exclude);
                let mentions = index.mentions(message, &thread);
                let chosen = recall(&mentions, &budget);
                let texts: Vec<&str> = chosen.iter().map(|_| body.as_str()).collect();
                let fitted = budget.fit(&texts);
                times[k].push(t.elapsed());
                recalled[k] = fitted.len();
                black_box((names, fitted));
            }
        }
    }
    println!("dossiers: {n} indexed in {built:?} (10,000 in {built_big:?})");
    for (k, (kind, _)) in kinds.iter().enumerate() {
        let (median, p99) = stats(std::mem::take(&mut times[k]));
        println!(
            "detection + recall, {kind:<10} median {:>6.1} µs  p99 {:>6.1} µs  ({} recalled)",
            median.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6,
            recalled[k]
        );
    }
}
