//! Which mentioned dossiers enter a prompt, most relevant first, and how much of each: at
//! most `max`, each cut to `each` bytes, all within `bytes`.

use super::{cut, Mention};

/// How much recall may put in a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// The most dossiers in one prompt.
    pub max: usize,
    /// The most bytes of one dossier's text.
    pub each: usize,
    /// The most bytes of all of them together.
    pub bytes: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            max: 3,
            each: 3 * 1024,
            bytes: 6 * 1024,
        }
    }
}

/// A dossier chosen for the prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recalled {
    /// Its place in the index.
    pub at: usize,
    pub score: u32,
}

/// The mentioned dossiers to recall, most relevant first: a mention in the message counts
/// three times one earlier in the thread; ties go to the first mentioned. At most
/// `budget.max`.
pub fn recall(mentions: &[Mention], budget: &Budget) -> Vec<Recalled> {
    let mut out: Vec<Recalled> = mentions
        .iter()
        .map(|m| Recalled {
            at: m.at,
            score: m.in_message.saturating_mul(3).saturating_add(m.in_thread),
        })
        .collect();
    // Stable: equal scores keep the order of first mention.
    out.sort_by_key(|r| std::cmp::Reverse(r.score));
    out.truncate(budget.max);
    out
}

impl Budget {
    /// Each text as much of it as fits, in order: cut to `each`, then to what is left of
    /// `bytes`; a text nothing of which fits, and every one after it, is left out. Each kept
    /// text comes with whether it was cut.
    pub fn fit<'a>(&self, texts: &[&'a str]) -> Vec<(&'a str, bool)> {
        let mut left = self.bytes;
        let mut out = Vec::new();
        for text in texts.iter().take(self.max) {
            let (kept, cut_each) = cut(text.trim(), self.each.min(left));
            if kept.trim().is_empty() && !text.trim().is_empty() {
                break;
            }
            left -= kept.len();
            out.push((kept, cut_each));
        }
        out
    }
}
