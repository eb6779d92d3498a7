//! Every integration suite, as the modules of one test binary (`it`): the crate and its
//! dependencies are linked once instead of once per suite. A suite is a module named after it,
//! and a filter on its name runs it alone: `cargo test --locked --test it -- chat::` (several
//! filters run several suites). Top-level module names are chosen so that `<suite>::` matches no
//! other suite's tests, except `daemon::`, which also runs `tools_daemon::`; `-- --list` shows
//! what a filter selects.
//!
//! The harness runs the tests in the order of their names, two at a time on two cores, so a
//! suite's tests still run beside each other: the many-daemon suites (`many_daemons`,
//! `many_daemons_faults`, `many_daemons_shared`) run one test at a time through one lock
//! (`support::many::one_at_a_time`). Nothing here sets an environment variable or changes the
//! working directory of the test process: a test passes its own to the `anima` it starts.

#[path = "../support/mod.rs"]
mod support;

mod admin;
mod architecture;
mod assistant;
mod autonomy;
mod caching;
mod chat;
mod cli;
mod constrained;
mod daemon;
mod daimons;
mod dossiers;
mod eval;
mod files;
mod files_told;
mod first_hour;
mod hardening;
mod images;
mod inspector;
mod ism;
mod local_model;
mod many_daemons;
mod many_daemons_faults;
mod many_daemons_shared;
mod parser_corpus;
mod postgres;
mod processes;
mod psyche;
mod service;
mod states;
mod store;
mod streaming;
mod tools;
mod tools_daemon;
mod watch;
mod why;
mod window;
