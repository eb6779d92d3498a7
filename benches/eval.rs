//! The eval runner's own cost: `cargo bench --bench eval`.
//!
//! The real binary against a fake model that answers at once, so what is measured is anima's
//! work, not a model's. Reports the median of five tries of
//!   * `anima chat` saying N lines, and saying one: the cost of a chat turn is the difference
//!     over N − 1 turns (a process start and an engine build cancel out);
//!   * `anima eval` on an eval of N turns, and of one: the same difference, a runner's turn
//!     (the turn, the store read back for the expectations, the checks); target: within 2× a
//!     chat turn;
//!   * the fixed cost of a run beyond a chat's (the child process, the throwaway home);
//!   * four evals of N turns with `--jobs 1` and with `--jobs 4`: how much runs at once save
//!     on this machine's cores.
//!
//! Figures are printed, not asserted.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use support::{answer, FakeModel, Home};

const TURNS: usize = 30;
const TRIES: usize = 5;

fn median(mut d: Vec<Duration>) -> Duration {
    d.sort();
    d[d.len() / 2]
}

/// The median wall time of `f` over the tries.
fn timed(mut f: impl FnMut()) -> Duration {
    median(
        (0..TRIES)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed()
            })
            .collect(),
    )
}

/// An eval of `turns` turns, each expecting something of the reply and of the soul.
fn eval_text(turns: usize) -> String {
    (0..turns)
        .map(|i| {
            format!("[[turn]]\nsay = \"line {i}\"\n[turn.expect]\nreply_matches = \"(?i)fine\"\nsoul_state_matches = \"emotionalState\"\n")
        })
        .collect()
}

fn main() {
    let model = FakeModel::start();
    model.respond_with(|_| answer("Fine, thanks."));
    let home = Home::new("anthropic", &model.url(), "model = \"m\"");
    let dir = home.dir.path();
    for (name, turns) in [("one", 1), ("many", TURNS)] {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(dir.join(name).join("e.toml"), eval_text(turns)).unwrap();
    }
    std::fs::create_dir_all(dir.join("four")).unwrap();
    for i in 0..4 {
        std::fs::write(dir.join(format!("four/e{i}.toml")), eval_text(TURNS)).unwrap();
    }
    let ok = |r: support::Run, what: &str| {
        assert!(r.status == 0, "{what}: {}\n{}", r.stdout, r.stderr);
    };
    let mut thread = 0;
    let mut chat = |lines: usize| {
        thread += 1;
        let input: String = (0..lines).map(|i| format!("line {i}\n")).collect();
        let t = format!("t{thread}");
        ok(
            home.run(&["chat", "--json", "--thread", &t], &input),
            "chat",
        );
    };
    let chat_one = timed(|| chat(1));
    let chat_many = timed(|| chat(TURNS));
    let eval = |args: &[&str]| {
        let mut all = vec!["eval"];
        all.extend_from_slice(args);
        ok(home.run(&all, ""), "eval");
    };
    let eval_one = timed(|| eval(&["one"]));
    let eval_many = timed(|| eval(&["many"]));
    let serial = timed(|| eval(&["four", "--jobs", "1"]));
    let parallel = timed(|| eval(&["four", "--jobs", "4"]));

    let per = |many: Duration, one: Duration| (many.saturating_sub(one)) / (TURNS as u32 - 1);
    let chat_turn = per(chat_many, chat_one);
    let eval_turn = per(eval_many, eval_one);
    println!("a model that answers at once; medians of {TRIES} tries");
    println!(
        "anima chat, 1 turn / {TURNS} turns     {:>8.1} ms / {:>8.1} ms",
        ms(chat_one),
        ms(chat_many)
    );
    println!(
        "anima eval, 1 turn / {TURNS} turns     {:>8.1} ms / {:>8.1} ms",
        ms(eval_one),
        ms(eval_many)
    );
    println!(
        "a chat turn                        {:>8.2} ms",
        ms(chat_turn)
    );
    println!(
        "an eval turn                       {:>8.2} ms   ({:.2}× a chat turn; target ≤ 2×)",
        ms(eval_turn),
        eval_turn.as_secs_f64() / chat_turn.as_secs_f64()
    );
    println!(
        "a run's fixed cost beyond a chat's {:>8.1} ms",
        ms(eval_one.saturating_sub(chat_one))
    );
    println!(
        "4 evals of {TURNS} turns, --jobs 1 / 4   {:>8.1} ms / {:>8.1} ms   ({:.2}× faster, {} cores)",
        ms(serial),
        ms(parallel),
        serial.as_secs_f64() / parallel.as_secs_f64(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
