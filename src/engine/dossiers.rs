//! The dossiers of a turn, carried out: the hand-written ones read from `soul/dossiers/`
//! (re-read when they change, at most every 250 ms), the learned ones' names from the store
//! (read again only when the store's stamp moves), the detection and recall before the call
//! (`dossier`, pure), and after the commit the dossiers the soul wrote, each one write and a
//! git commit. A hand-written file is only ever read.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use crate::dossier::{self, Budget, Dossier, Head, Index, Kind, Known, Origin};
use crate::memory::faces::{DossierWrite, Dossiers};
use crate::memory::model_repo::Exporter;
use crate::memory::Entry;
use crate::parse::dossier::parse_dossiers;
use crate::prompt::RecalledDossier;

mod hand;

pub use hand::load_hand_written;
use hand::{stamps, Stamps};

const CHECK_EVERY: Duration = Duration::from_millis(250);
/// How many of the thread's latest entries recall reads besides the message.
const THREAD_ENTRIES: usize = 12;

/// What recall reads: the index of every dossier, and the hand-written ones' text.
pub(super) struct Catalogue {
    index: Index,
    hand: HashMap<String, String>,
}

struct State {
    last_check: Option<Instant>,
    stamps: Stamps,
    hand: Arc<Vec<Dossier>>,
    learned: Option<(i64, i64, i64)>,
    known: Arc<Catalogue>,
}

/// The engine's dossiers: the hand-written in force and the index, kept between turns.
pub(super) struct Keeper {
    dir: PathBuf,
    state: tokio::sync::Mutex<State>,
    pub budget: Budget,
}

/// A turn's dossiers: those recalled (with their text), the names to ask about, and which
/// learned dossiers the soul sees (only those may be rewritten).
#[derive(Debug, Default)]
pub(super) struct DossierTurn {
    recalled: Vec<(String, &'static str, bool, String, bool)>,
    in_view: Vec<String>,
    pub ask: Vec<String>,
    /// The people the message mentions the Slack way: (id, label).
    mentions: Vec<(String, String)>,
}

impl DossierTurn {
    /// The prompt's view of it; `ask` false leaves the steps out (a constrained answer).
    pub fn input(&self, ask: bool) -> (Vec<RecalledDossier<'_>>, &[String]) {
        let recalled = self
            .recalled
            .iter()
            .map(|(name, kind, hand, text, cut)| RecalledDossier {
                name,
                kind,
                hand_written: *hand,
                text,
                cut: *cut,
            })
            .collect();
        (recalled, if ask { &self.ask } else { &[] })
    }
}

impl Keeper {
    pub fn new(soul_dir: &Path) -> Keeper {
        Keeper {
            dir: soul_dir.join("dossiers"),
            state: tokio::sync::Mutex::new(State {
                last_check: None,
                stamps: Vec::new(),
                hand: Arc::new(Vec::new()),
                learned: None,
                known: Arc::new(Catalogue {
                    index: Index::default(),
                    hand: HashMap::new(),
                }),
            }),
            budget: Budget::default(),
        }
    }

    /// The index in force: the hand-written files re-read when they changed, the learned
    /// names when the store's stamp moved.
    async fn known(&self, store: &dyn Dossiers) -> Arc<Catalogue> {
        let mut s = self.state.lock().await;
        let mut changed = false;
        if s.last_check.is_none_or(|t| t.elapsed() >= CHECK_EVERY) {
            s.last_check = Some(Instant::now());
            let dir = self.dir.clone();
            let now = tokio::task::spawn_blocking(move || stamps(&dir))
                .await
                .unwrap_or_default();
            if now != s.stamps {
                let dir = self.dir.clone();
                let (hand, problems) = tokio::task::spawn_blocking(move || load_hand_written(&dir))
                    .await
                    .unwrap_or_default();
                for p in problems {
                    warn!(problem = %p, "hand-written dossier left out");
                }
                info!(dir = %self.dir.display(), dossiers = hand.len(), "hand-written dossiers read");
                s.stamps = now;
                s.hand = Arc::new(hand);
                changed = true;
            }
        }
        let stamp = match store.dossiers_stamp().await {
            Ok(stamp) => Some(stamp),
            Err(e) => {
                warn!(error = %e, "the learned dossiers could not be read; recall uses the last ones");
                s.learned
            }
        };
        let mut learned = None;
        if stamp != s.learned {
            match store.dossiers().await {
                Ok(rows) => {
                    learned = Some(rows);
                    s.learned = stamp;
                    changed = true;
                }
                Err(e) => warn!(error = %e, "the learned dossiers could not be read"),
            }
        }
        if changed {
            let mut known: Vec<Known> = s
                .hand
                .iter()
                .map(|d| Known {
                    slug: d.slug.clone(),
                    origin: Origin::Hand,
                    head: Head {
                        name: d.name.clone(),
                        aliases: d.aliases.clone(),
                        kind: d.kind,
                    },
                })
                .collect();
            let learned_rows = match learned {
                Some(rows) => rows,
                None => store.dossiers().await.unwrap_or_default(),
            };
            known.extend(learned_rows.into_iter().map(|r| Known {
                head: Head {
                    kind: Kind::from_name(&r.kind).unwrap_or(Kind::Subject),
                    name: r.name,
                    aliases: r.aliases,
                },
                slug: r.slug,
                origin: Origin::Learned,
            }));
            let hand = s
                .hand
                .iter()
                .map(|d| (d.slug.clone(), d.body.clone()))
                .collect();
            s.known = Arc::new(Catalogue {
                index: Index::new(known),
                hand,
            });
        }
        s.known.clone()
    }

    /// Detection and recall for a message: what the prompt shows and asks.
    pub async fn turn(
        &self,
        store: &dyn Dossiers,
        message: &str,
        speaker: (&str, &str),
        soul_name: &str,
        history: &[Entry],
    ) -> DossierTurn {
        let known = self.known(store).await;
        let thread: Vec<&str> = history
            .iter()
            .rev()
            .take(THREAD_ENTRIES)
            .map(|e| e.content.as_str())
            .collect();
        let speaker_slug = dossier::slug(speaker.1);
        let mut ask = dossier::named(message, &[speaker.0, speaker.1, soul_name]);
        let mentions = known.index.mentions(message, &thread);
        for m in mentions.iter().filter(|m| m.in_message > 0) {
            let k = &known.index.known()[m.at];
            if Some(&k.slug) != speaker_slug.as_ref()
                && !ask.iter().any(|a| a.eq_ignore_ascii_case(&k.head.name))
                && ask.len() < dossier::MAX_NAMED
            {
                ask.push(k.head.name.clone());
            }
        }
        let mut turn = DossierTurn {
            ask,
            mentions: dossier::slack_mentions(message),
            ..DossierTurn::default()
        };
        let mut texts: Vec<(usize, String)> = Vec::new();
        for r in dossier::recall(&mentions, &self.budget) {
            let k = &known.index.known()[r.at];
            let text = match k.origin {
                Origin::Hand => known.hand.get(&k.slug).cloned(),
                Origin::Learned => match store.dossier(&k.slug).await {
                    Ok(Some(rec)) => Some(
                        dossier::parse(&rec.text)
                            .map(|(_, body)| body.to_string())
                            .unwrap_or(rec.text),
                    ),
                    Ok(None) => None,
                    Err(e) => {
                        warn!(error = %e, dossier = %k.slug, "a dossier could not be read");
                        None
                    }
                },
            };
            if let Some(text) = text {
                texts.push((r.at, text));
            }
        }
        let bodies: Vec<&str> = texts.iter().map(|(_, t)| t.as_str()).collect();
        for ((at, _), (kept, cut)) in texts.iter().zip(self.budget.fit(&bodies)) {
            let k = &known.index.known()[*at];
            let hand = k.origin == Origin::Hand;
            // Only a learned dossier the soul saw whole may be rewritten: the update replaces
            // the text, and what a cut hid would be lost.
            if !hand && !cut {
                turn.in_view.push(k.slug.clone());
            }
            turn.recalled.push((
                k.head.name.clone(),
                k.head.kind.name(),
                hand,
                kept.to_string(),
                cut,
            ));
        }
        turn
    }

    /// Keeps what the soul wrote in its dossier steps (`raw`, its answer) when this turn asked
    /// them and its check said true: each dossier a write, the git export after. A dossier
    /// about the speaker, or one of its own it did not see (it would erase what it cannot
    /// see), is not written. How many were written.
    pub async fn keep(
        &self,
        store: &dyn Dossiers,
        models: &Arc<Exporter>,
        turn: &DossierTurn,
        raw: &str,
        speaker: (&str, &str),
    ) -> usize {
        if turn.ask.is_empty() {
            return 0;
        }
        let answer = parse_dossiers(raw);
        if answer.check != Some(true) {
            if !answer.updates.is_empty() {
                debug!("dossier_update ignored: the check did not say true");
            }
            return 0;
        }
        let speaker_slug = dossier::slug(speaker.1);
        let mut written = 0;
        for u in answer.updates {
            let Some(slug) = dossier::slug(&u.name) else {
                debug!(name = %u.name, "a dossier's name makes no slug; not kept");
                continue;
            };
            // The Slack id of the person it is about, when the message mentioned them so.
            let names = || std::iter::once(&u.name).chain(&u.aliases);
            let about = turn
                .mentions
                .iter()
                .find(|(id, label)| {
                    names().any(|n| {
                        n.eq_ignore_ascii_case(id)
                            || (!label.is_empty() && n.eq_ignore_ascii_case(label))
                    })
                })
                .map(|(id, _)| id.clone());
            let about_speaker = about.as_deref() == Some(speaker.0)
                || Some(&slug) == speaker_slug.as_ref()
                || u.name.eq_ignore_ascii_case(speaker.0)
                || u.aliases.iter().any(|a| a.eq_ignore_ascii_case(speaker.1));
            if about_speaker {
                debug!(dossier = %slug, "the speaker is modelled as a user, not in a dossier");
                continue;
            }
            match store.dossier(&slug).await {
                Ok(Some(_)) if !turn.in_view.contains(&slug) => {
                    debug!(dossier = %slug, "a dossier the soul did not see is not rewritten");
                    continue;
                }
                Err(e) => {
                    warn!(error = %e, dossier = %slug, "a dossier could not be read; not written");
                    continue;
                }
                _ => {}
            }
            let head = Head {
                name: u.name.clone(),
                aliases: u.aliases.clone(),
                kind: Kind::from_name(&u.kind).unwrap_or(Kind::Subject),
            };
            // Kept within what one recall shows whole, so the next update sees all of it.
            let (body, _) = dossier::cut(&u.text, self.budget.each);
            let write = DossierWrite {
                slug: slug.clone(),
                name: head.name.clone(),
                aliases: head.aliases.clone(),
                kind: head.kind.name().to_string(),
                about,
                text: dossier::render(&head, body),
                note: u.note.clone(),
            };
            match store.write_dossier(write).await {
                Ok(version) => {
                    info!(dossier = %slug, version, "dossier written");
                    written += 1;
                }
                Err(e) => warn!(error = %e, dossier = %slug, "a dossier was not written"),
            }
        }
        if written > 0 {
            if let Err(e) = models.export_pending_dossiers(store).await {
                warn!(error = %e, "dossiers not yet committed to git; the next export commits them");
            }
        }
        written
    }
}
