//! `anima mind [--person NAME] [--json]`: the psychology substrate in numbers, for the
//! operator, read-only beside a running daemon: drives, mood, arcs, energy, relationships,
//! facts, intentions, the newest memories and gate decisions with their inputs. The model
//! never sees these numbers; this is the one place they are shown. Times are dates in UTC
//! (RFC 3339, to the second).

use std::fmt::Write as _;
use std::path::Path;

use clap::Args;

use super::{load_config, CliResult, Failure};
use crate::memory::psyche::Mind;
use crate::memory::Store;
use crate::psyche::{Drive, Psyche};
use crate::soul::{self, SoulFiles};

#[derive(Debug, Args)]
pub struct MindArgs {
    /// Only this person's part: a Slack user id or a display name.
    #[arg(long, value_name = "NAME")]
    pub person: Option<String>,
    /// One JSON object on stdout.
    #[arg(long)]
    pub json: bool,
}

pub async fn run(config_path: Option<&Path>, args: MindArgs) -> CliResult {
    let config = load_config(config_path)?;
    let soul =
        SoulFiles::load_or_built_in(&config.soul_dir).map_err(|e| Failure::Usage(e.to_string()))?;
    let psyche = soul::load_psyche(&config.soul_dir).map_err(|e| Failure::Usage(e.to_string()))?;
    let store = super::read_store(&config).await?;
    let person = match &args.person {
        None => None,
        Some(name) => Some(resolve(store.as_ref(), name).await?),
    };
    let now = crate::memory::now_ms();
    let mind = store
        .psyche_mind(
            soul.name(),
            &psyche,
            person.as_ref().map(|p| p.id.as_str()),
            now,
        )
        .await
        .map_err(Failure::runtime)?;
    if let Some(p) = person.filter(|p| !p.known && knows_nothing_of(&mind)) {
        return Err(Failure::Runtime(format!(
            "no user named `{}`; `anima users list` shows who there is",
            p.id
        )));
    }
    if args.json {
        let line = serde_json::to_string(&mind).map_err(Failure::runtime)?;
        println!("{line}");
    } else {
        print!("{}", human(&mind, &psyche, soul.name()));
    }
    Ok(())
}

/// The person `--person` names.
struct Person {
    /// Their user id.
    id: String,
    /// Whether they are among the users (else only the substrate may know them).
    known: bool,
}

/// A user id as given, or the id of the user whose display name (or slug) it is.
async fn resolve(store: &dyn Store, name: &str) -> Result<Person, Failure> {
    let users = store.users().await.map_err(Failure::runtime)?;
    let wanted = name.trim().trim_start_matches('@');
    if let Some(u) = users.iter().find(|u| {
        u.user_id == wanted || u.display_name.eq_ignore_ascii_case(wanted) || u.slug == wanted
    }) {
        return Ok(Person {
            id: u.user_id.clone(),
            known: true,
        });
    }
    // Maybe someone the substrate knows but the users table does not (an overheard person).
    Ok(Person {
        id: wanted.to_string(),
        known: false,
    })
}

/// Whether one person's part of the substrate is empty: it has never heard of them.
fn knows_nothing_of(m: &Mind) -> bool {
    m.relationships.is_empty()
        && m.facts.is_empty()
        && m.intentions.is_empty()
        && m.recent_memories.is_empty()
        && m.decisions.is_empty()
}

/// A time in ms since the epoch as a date: RFC 3339 in UTC, to the second.
fn date(ms: i64) -> String {
    let t = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_seconds(t).to_string()
}

fn bar(x: f64) -> String {
    format!("{x:>6.3}")
}

/// The psyche for the operator, in numbers: the soul itself, the people it knows, what it
/// remembers and how its gate decided.
fn human(m: &Mind, psyche: &Psyche, soul: &str) -> String {
    let mut out = String::new();
    write_substrate(&mut out, m, psyche, soul);
    write_people(&mut out, m);
    write_memories(&mut out, m);
    out
}

/// Mood, energy, drives, arcs and when the soul last spoke unasked.
fn write_substrate(out: &mut String, m: &Mind, psyche: &Psyche, soul: &str) {
    let s = &m.substrate;
    let _ = writeln!(
        out,
        "{soul}'s psyche (numbers for the operator; the model sees words)"
    );
    let _ = writeln!(
        out,
        "mood: valence {} arousal {}",
        bar(s.valence.get()),
        bar(s.arousal.get())
    );
    let _ = writeln!(out, "energy: {}", bar(s.energy.get()));
    let _ = writeln!(out, "drives (pressure / baseline):");
    for d in Drive::ALL {
        let _ = writeln!(
            out,
            "  {:<12} {} / {}",
            d.name(),
            bar(s.drive(d).get()),
            bar(s.baseline(psyche, d).get())
        );
    }
    if !s.arcs.is_empty() {
        let _ = writeln!(out, "arcs:");
        for (topic, i) in &s.arcs {
            let _ = writeln!(out, "  {} {topic}", bar(i.get()));
        }
    }
    match s.last_unasked_at {
        Some(at) => {
            let _ = writeln!(out, "last spoke unasked: {}", date(at));
        }
        None => {
            let _ = writeln!(out, "last spoke unasked: never");
        }
    }
}

/// Each relationship with the facts known of that person, and the intentions held.
fn write_people(out: &mut String, m: &Mind) {
    let _ = writeln!(out, "relationships ({}):", m.relationships.len());
    for (who, r) in &m.relationships {
        let _ = writeln!(
            out,
            "  {who}: warmth {} trust {} tension {} comfort {} volatility {} exchanges {} last seen {}",
            bar(r.warmth.get()),
            bar(r.trust.get()),
            bar(r.tension.get()),
            bar(r.comfort.get()),
            bar(r.volatility.get()),
            r.exchanges,
            r.last_seen.map_or_else(|| "never".to_string(), date)
        );
        for f in m.facts.get(who).into_iter().flatten() {
            let _ = writeln!(out, "    {}: {}", f.kind.name(), f.value);
        }
    }
    let _ = writeln!(out, "intentions ({}):", m.intentions.len());
    for i in &m.intentions {
        let _ = writeln!(
            out,
            "  {} {} {} target {}",
            bar(i.priority.get()),
            i.kind,
            i.horizon.name(),
            i.target.as_deref().unwrap_or("-")
        );
    }
}

/// The newest episodic memories and gate decisions.
fn write_memories(out: &mut String, m: &Mind) {
    let _ = writeln!(
        out,
        "episodic memories: {} (newest {}):",
        m.memories,
        m.recent_memories.len()
    );
    for mem in &m.recent_memories {
        let _ = writeln!(
            out,
            "  {} importance {} salience {} [{}] {}",
            date(mem.at),
            bar(mem.importance.get()),
            bar(mem.salience.get()),
            mem.people.join(", "),
            crate::psyche::text::clip(&mem.text.replace('\n', " "), 80)
        );
    }
    let _ = writeln!(out, "gate decisions (newest {}):", m.decisions.len());
    for d in &m.decisions {
        let i = &d.inputs;
        let _ = writeln!(
            out,
            "  {} {} {} in {}: {} (M {} vs {}; salience {} drives {} arcs {} stakes {} energy {})",
            date(d.at),
            d.event_kind,
            d.person.as_deref().unwrap_or("-"),
            d.channel.as_deref().unwrap_or("-"),
            d.verdict,
            bar(d.meaning),
            bar(d.threshold),
            bar(i.salience_max.get()),
            bar(i.drive_pressure_max.get()),
            bar(i.arc_hot.get()),
            bar(i.rel_stakes.get()),
            bar(i.energy.get()),
        );
    }
}
