//! Which sections of the config file differ between two checked configurations, for a reload
//! to say what it could not put in force.
//!
//! Owns the map from `Config`'s fields back to the file's sections. Decides nothing about
//! what a reload does: the daemon applies `[[tools.servers]]` and names the rest.

use super::{Config, SlackConfig};

/// The sections, in file order, whose values differ between `old` and `new`, leaving out
/// `[tools]` (a reload applies it). A key written out with its default value is no change.
pub fn changed_sections(old: &Config, new: &Config) -> Vec<&'static str> {
    // Every field is named, so a new one cannot be forgotten here.
    let Config {
        source: _,
        home,
        soul_dir,
        processes_dir,
        evals_dir,
        llm,
        pipeline,
        slack,
        shutdown_grace_secs,
        ops_channel,
        states,
        memory,
        initial_process,
        max_chain,
        ism,
        proactive_idle_minutes,
        proactive_scan_secs,
        listen,
        admin_users,
        inspect,
        files,
        autonomy,
        tools: _,
        store,
        daimons,
    } = old;
    let sections = [
        (
            "paths",
            (home, soul_dir, processes_dir, evals_dir)
                != (&new.home, &new.soul_dir, &new.processes_dir, &new.evals_dir),
        ),
        ("llm", *llm != new.llm),
        ("pipeline", *pipeline != new.pipeline),
        ("slack", own_slack(slack) != own_slack(&new.slack)),
        (
            "daemon",
            (shutdown_grace_secs, ops_channel) != (&new.shutdown_grace_secs, &new.ops_channel),
        ),
        (
            "states",
            states.solitude_after_idle_minutes != new.states.solitude_after_idle_minutes,
        ),
        (
            "dream",
            states.dream_keep_recent != new.states.dream_keep_recent,
        ),
        ("memory", *memory != new.memory),
        (
            "guardrails",
            states.crisis_keywords != new.states.crisis_keywords,
        ),
        (
            "processes",
            (
                initial_process,
                max_chain,
                proactive_idle_minutes,
                proactive_scan_secs,
            ) != (
                &new.initial_process,
                &new.max_chain,
                &new.proactive_idle_minutes,
                &new.proactive_scan_secs,
            ),
        ),
        ("ism", *ism != new.ism),
        ("autonomy", *autonomy != new.autonomy),
        ("admin", *admin_users != new.admin_users),
        ("inspect", *inspect != new.inspect),
        ("files", *files != new.files),
        ("http", *listen != new.listen),
        ("store", *store != new.store),
        ("daimons", *daimons != new.daimons),
    ];
    sections
        .into_iter()
        .filter(|(_, changed)| *changed)
        .map(|(name, _)| name)
        .collect()
}

/// `[slack]` as written: the channels it overhears come from `[autonomy]`.
fn own_slack(s: &SlackConfig) -> SlackConfig {
    SlackConfig {
        overheard_channels: Vec::new(),
        ..s.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn parse(text: &str) -> Config {
        super::super::parse(
            text,
            Path::new("/etc/anima/anima.toml"),
            Path::new("/etc/anima"),
        )
        .unwrap()
    }

    #[test]
    fn the_same_values_are_no_change_however_written() {
        let a = parse("");
        let b = parse("[llm]\nmax_retries = 3\n\n[http]\nlisten = \"127.0.0.1:3000\"\n");
        assert_eq!(changed_sections(&a, &b), Vec::<&str>::new());
    }

    #[test]
    fn each_changed_section_is_named_once_in_file_order_and_tools_never() {
        let a = parse("");
        let b = parse(
            "[http]\nlisten = \"127.0.0.1:4000\"\n\n[llm]\nmax_tokens = 99\n\n[dream]\nkeep_recent = 7\n\n[autonomy]\nenabled = true\nchannels = [\"C1\"]\n\n[[tools.servers]]\nname = \"kb\"\nurl = \"http://127.0.0.1:1/mcp\"\n",
        );
        assert_eq!(
            changed_sections(&a, &b),
            ["llm", "dream", "autonomy", "http"],
            "[autonomy] alone, though it sets what [slack] overhears"
        );
    }
}
