//! The checks every run of `cargo bench --bench load` ends with: each message sent answered
//! exactly once, each conversation answered in order, nothing posted in a DM that answers no
//! message sent.

use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

use super::support::daemon::Daemon;
pub use super::support::many::first;
use super::support::many::first_recorded;
use super::support::slack::{FakeSlack, Post};

/// Two messages recorded (first acknowledged) within this of each other may have reached the
/// store in either order (see `check`).
const ACK_SLACK: Duration = Duration::from_secs(1);

/// (conversation, message) a reply answers: `echo: t<t> m<m>` in `D<t>`.
pub fn answers(p: &Post) -> Option<(usize, usize)> {
    let rest = p.text.strip_prefix("echo: t")?;
    let (t, m) = rest.split_once(" m")?;
    let (t, m): (usize, usize) = (t.parse().ok()?, m.parse().ok()?);
    (p.channel == format!("D{t:04}")).then_some((t, m))
}

/// What the replies to a load say: each message sent answered once, each conversation in
/// order.
#[derive(Default)]
pub struct Checked {
    pub replies: usize,
    pub duplicates: Vec<String>,
    pub lost: Vec<String>,
    pub out_of_order: Vec<String>,
    /// Answered after a later message of its conversation, but it reached the store only
    /// about when that one did or after (its envelope waited in a dead daemon's socket until
    /// Slack sent it again): no daemon could answer it first. Shown, not a fault.
    pub late: Vec<String>,
    /// Posts in a DM that answer no message sent (an apology, a stray).
    pub strays: Vec<String>,
}

impl Checked {
    pub fn clean(&self) -> bool {
        self.duplicates.is_empty()
            && self.lost.is_empty()
            && self.out_of_order.is_empty()
            && self.strays.is_empty()
    }

    pub fn line(&self, sent: usize) -> String {
        format!(
            "{} replies to {sent} messages: {} duplicates, {} out of order, {} lost, {} stray (late arrivals {})",
            self.replies,
            self.duplicates.len(),
            self.out_of_order.len(),
            self.lost.len(),
            self.strays.len(),
            self.late.len()
        )
    }

    /// Fails the bench loudly, with every fault and the daemons' warnings, unless clean.
    pub fn or_fail(&self, sent: usize, ds: &[Daemon]) {
        if self.clean() {
            return;
        }
        let mut why = vec![format!("FAILED: {}", self.line(sent))];
        for (what, list) in [
            ("DUPLICATE", &self.duplicates),
            ("LOST", &self.lost),
            ("OUT OF ORDER", &self.out_of_order),
            ("STRAY", &self.strays),
            ("late arrival", &self.late),
        ] {
            if !list.is_empty() {
                why.push(format!("{what}: {}", first(list)));
            }
        }
        for (i, d) in ds.iter().enumerate() {
            let log = d.log();
            let troubles: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("WARN") || l.contains("ERROR"))
                .collect();
            why.push(format!(
                "daemon {i} (pid {}): {} warnings/errors, the last: {}",
                d.pid(),
                troubles.len(),
                troubles[troubles.len().saturating_sub(10)..].join("\n")
            ));
        }
        panic!("{}", why.join("\n"));
    }
}

/// Checks the replies in the DMs against the messages sent, `(conversation, number, event
/// id)`, each conversation's sent in the order of their numbers.
///
/// Out of order: a message answered after a later one of its conversation that reached the
/// store well after it. When each reached the store is known from above only (its first
/// acknowledgement, which a daemon sends once the store has it): two first acknowledged
/// within `ACK_SLACK` of each other may have been recorded in either order, and one recorded
/// after the later one's turn (its first envelope went to a daemon that died) is a late
/// arrival, not a fault.
pub fn check(slack: &FakeSlack, sent: &[(usize, usize, String)]) -> Checked {
    let mut out = Checked::default();
    let event: HashMap<(usize, usize), &str> = sent
        .iter()
        .map(|(t, m, e)| ((*t, *m), e.as_str()))
        .collect();
    let mut count: HashMap<(usize, usize), usize> = HashMap::new();
    let mut order: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for p in slack.posts().iter().filter(|p| p.channel.starts_with('D')) {
        match answers(p).filter(|k| event.contains_key(k)) {
            Some((t, m)) => {
                out.replies += 1;
                let n = count.entry((t, m)).or_default();
                *n += 1;
                if *n == 1 {
                    order.entry(t).or_default().push(m);
                }
            }
            None => out.strays.push(format!("{:?} in {}", p.text, p.channel)),
        }
    }
    for (t, m, _) in sent {
        match count.get(&(*t, *m)).copied().unwrap_or(0) {
            0 => out.lost.push(format!("t{t} m{m}")),
            1 => {}
            n => out.duplicates.push(format!("t{t} m{m} ×{n}")),
        }
    }
    let recorded = first_recorded(slack);
    for (t, ms) in &order {
        for (i, j) in ms.iter().enumerate() {
            for k in ms[i + 1..].iter().filter(|k| *k < j) {
                let later = recorded.get(event[&(*t, *j)]);
                let earlier = recorded.get(event[&(*t, *k)]);
                match (later, earlier) {
                    (Some(later), Some(earlier)) if *earlier + ACK_SLACK > *later => {
                        out.late.push(format!(
                            "t{t} m{k} after m{j} (first acknowledged {:+.2} s from it)",
                            signed(*earlier, *later)
                        ))
                    }
                    _ => out
                        .out_of_order
                        .push(format!("t{t}: m{k} answered after m{j}")),
                }
            }
        }
    }
    out
}

/// `a − b` in seconds.
fn signed(a: Instant, b: Instant) -> f64 {
    if a >= b {
        a.duration_since(b).as_secs_f64()
    } else {
        -b.duration_since(a).as_secs_f64()
    }
}
