//! Slack: both doors events come in by (Socket Mode in `socket`, the Events API route with
//! its signature check in `events`), the rules of what is answered (`intake`), replies out
//! (`out`, the router's surface: Markdown, posting once or streaming, the working sign), and
//! the AI-app surfaces (`assistant`: greeting, prompts, title, status; `feedback`: the buttons
//! and their clicks; the stop button; `why`: the "Why did you say that?" shortcut). `manifest` is the Slack app's manifest: the scopes and
//! events all of this needs.
//!
//! `Gate` is where every event and interaction enters: decide, hand the message to the router
//! (which records it durably before Slack is acknowledged), or carry out the surface's part.
//! Knows nothing about prompts or models.

pub mod api;
pub mod assistant;
pub mod budget;
pub mod credentials;
pub mod error;
pub mod events;
pub mod feedback;
pub mod files;
pub mod intake;
pub mod manifest;
pub mod mark;
pub mod markdown;
pub mod out;
pub mod signature;
pub mod socket;
pub mod stream;
pub mod why;

use std::sync::Arc;

use slack_morphism::prelude::{SlackInteractionEvent, SlackPushEventCallback};
use tracing::{debug, info, warn};

use crate::admin;
use crate::assistant::Words;
use crate::config::{InspectConfig, SlackConfig};
use crate::memory::{Inbound, Intake, Judged, Store};
use crate::metrics::{FeedbackLabels, Metrics};
use crate::router::Router;
use api::{BotIdentity, SlackApi};
use intake::Decision;
use out::{SlackAddress, ASSISTANT};

/// Whether a conversation (its key, as `intake` writes it) is a direct message: the soul and
/// one person alone. A DM's channel id begins with `D`; a group DM's (`G`…) and a channel's
/// (`C`…) do not.
pub fn one_to_one(conversation: &str) -> bool {
    conversation.starts_with('D')
}

/// A message the rules accept, in Slack's terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewInbound {
    pub event_id: Option<String>,
    pub channel: String,
    pub ts: String,
    /// The conversation: `channel:thread_ts`, or the channel for a DM's top level.
    pub thread_key: String,
    /// Where the reply goes; `None`: the channel's top level.
    pub reply_thread_ts: Option<String>,
    pub user_id: String,
    pub text: String,
    /// Accept only if the soul has spoken in this (channel, thread_ts).
    pub only_if_participating: Option<(String, String)>,
    /// The files shared with it, kept with the row (in its address) and read in its turn.
    pub files: Vec<crate::files::Attachment>,
}

impl NewInbound {
    /// The same message for the router: its origin (channel and ts, so Slack's retries and
    /// the app_mention/message twins are one row), order and address.
    fn into_inbound(self) -> Inbound {
        let (secs, micros) = api::ts_order(&self.ts);
        Inbound {
            origin: format!("{}:{}", self.channel, self.ts),
            seq: secs as f64 + micros as f64 / 1e6,
            address: SlackAddress {
                channel: self.channel,
                ts: self.ts,
                thread_ts: self.reply_thread_ts,
                files: self.files,
            }
            .encode(),
            conversation: self.thread_key,
            user_id: self.user_id,
            // A NUL (JSON's \u0000) is nothing a person meant, and PostgreSQL's text cannot
            // hold one: the message is kept with U+FFFD in its place, never refused.
            text: self.text.replace('\0', "\u{FFFD}"),
            requires_spoken: self.only_if_participating.is_some(),
        }
    }
}

/// Where every Slack event enters: decide, record, hand off. Acknowledge only after this
/// returns `Ok`: the message is then durable.
pub struct Gate {
    pub bot: BotIdentity,
    pub config: SlackConfig,
    pub router: Arc<Router>,
    pub metrics: Arc<Metrics>,
    /// Answers admin commands in DMs.
    pub api: Arc<SlackApi>,
    pub store: Arc<dyn Store>,
    /// Slack user ids allowed to send admin commands.
    pub admins: Vec<String>,
    /// The soul's words for opening a conversation (hot-reloaded).
    pub words: Arc<Words>,
    /// `[inspect]`: who may ask why the soul said something.
    pub inspect: InspectConfig,
}

/// What the openings remember, once per place.
const GREETING: &str = "greeting";
const TITLE: &str = "title";

impl Gate {
    pub async fn handle(&self, ev: SlackPushEventCallback) -> anyhow::Result<()> {
        Metrics::inc(&self.metrics.events_received);
        let event_id = ev.event_id.to_string();
        match intake::decide(&ev.event, &event_id, &self.bot, &self.config) {
            Decision::Accept(inbound) => {
                let (channel, ts) = (inbound.channel.clone(), inbound.ts.clone());
                let first = (
                    inbound.thread_key.clone(),
                    inbound.reply_thread_ts.clone(),
                    inbound.text.clone(),
                );
                match self.router.accept(inbound.into_inbound()).await? {
                    Intake::Accepted(id) => {
                        Metrics::inc(&self.metrics.events_accepted);
                        info!(inbox = id, event = %event_id, channel = %channel, ts = %ts, "message accepted");
                        let (key, thread_ts, text) = first;
                        if let Some(thread_ts) = thread_ts {
                            self.title(key, channel, thread_ts, &text).await;
                        }
                    }
                    Intake::Duplicate => {
                        Metrics::inc(&self.metrics.events_duplicate);
                        debug!(event = %event_id, channel = %channel, ts = %ts, "duplicate dropped");
                    }
                    Intake::NotParticipating => {
                        Metrics::inc(&self.metrics.events_ignored);
                        debug!(event = %event_id, "thread message in a thread the soul is not part of");
                    }
                }
            }
            Decision::Admin(m) => self.admin(m).await?,
            Decision::Felt(f) => {
                let felt = self
                    .router
                    .feel(f.happening, &f.channel, &f.user, &f.text, &f.source)
                    .await?;
                if felt {
                    info!(event = %event_id, channel = %f.channel, happening = ?f.happening, "felt");
                } else {
                    Metrics::inc(&self.metrics.events_duplicate);
                    debug!(event = %event_id, "felt before; dropped");
                }
            }
            Decision::Overheard(m) => {
                let (channel, ts) = (m.channel.clone(), m.ts.clone());
                match self.router.overhear(m.into_inbound(), &channel).await? {
                    Some(true) => {
                        info!(event = %event_id, channel = %channel, ts = %ts, "overheard: the soul speaks unasked")
                    }
                    Some(false) => {
                        debug!(event = %event_id, channel = %channel, "overheard: the soul stays silent")
                    }
                    None => {
                        Metrics::inc(&self.metrics.events_duplicate);
                        debug!(event = %event_id, channel = %channel, ts = %ts, "duplicate dropped")
                    }
                }
            }
            Decision::AssistantThread { channel, thread_ts } => {
                let key = format!("{channel}:{thread_ts}");
                self.router.note_conversation(&key, ASSISTANT).await?;
                self.open(key, channel, Some(thread_ts)).await?;
            }
            Decision::MessagesOpened { channel } => {
                self.open(channel.clone(), channel, None).await?;
            }
            Decision::Stop {
                conversations,
                streams,
            } => match conversations.iter().find(|c| self.router.stop(c, &streams)) {
                Some(c) => {
                    info!(event = %event_id, thread = %c, "the person pressed stop; the turn is stopped")
                }
                None => {
                    Metrics::inc(&self.metrics.events_ignored);
                    debug!(event = %event_id, ?conversations, "a stop for a conversation with no running turn (or another app's); ignored")
                }
            },
            Decision::Ignore(why) => {
                Metrics::inc(&self.metrics.events_ignored);
                debug!(event = %event_id, why, "event ignored");
            }
        }
        Ok(())
    }

    /// A person opened a conversation (`place`): greet them and offer the soul's prompts,
    /// once per place (remembered in the store, so neither Slack's retries nor a restart
    /// repeat it). The Slack calls run off the acknowledgement's path.
    async fn open(
        &self,
        place: String,
        channel: String,
        thread_ts: Option<String>,
    ) -> anyhow::Result<()> {
        let p = place.clone();
        if !self.store.first_time(GREETING, &p).await? {
            debug!(place = %place, "a conversation already greeted");
            return Ok(());
        }
        let (api, bot, words) = (self.api.clone(), self.bot.clone(), self.words.current());
        tokio::spawn(async move {
            // A DM's top level has no message to come after: every message counts.
            let after = thread_ts.clone().unwrap_or_else(|| "0.0".into());
            api.open_conversation(&bot, &words, &channel, thread_ts.as_deref(), &after)
                .await;
            info!(place = %place, "a person opened a conversation; greeted and offered prompts (each a courtesy)");
        });
        Ok(())
    }

    /// The first message of an assistant thread names it. A failure here never loses the
    /// message (it is recorded already): it is logged and the thread goes untitled.
    async fn title(&self, key: String, channel: String, thread_ts: String, text: &str) {
        let Some(title) = assistant::title_from(text) else {
            return;
        };
        let first = async {
            Ok::<_, crate::memory::StoreError>(
                self.store.conversation_note(&key).await?.as_deref() == Some(ASSISTANT)
                    && self.store.first_time(TITLE, &key).await?,
            )
        }
        .await;
        match first {
            Ok(true) => {
                let api = self.api.clone();
                tokio::spawn(async move {
                    let result = api.set_title(&channel, &thread_ts, &title).await;
                    api.courtesy(result, "thread title not set");
                });
            }
            Ok(false) => {}
            Err(e) => warn!(error = %e, thread = %key, "cannot tell whether to title the thread"),
        }
    }

    /// An interaction (a button click, a message shortcut): feedback on a reply of the
    /// soul's is stored, one value per (reply, person), and counted; the "why" shortcut is
    /// answered after the acknowledgement (`why`); anything else is logged at debug and
    /// dropped.
    pub async fn interaction(&self, ev: SlackInteractionEvent) -> anyhow::Result<()> {
        match why::read_ask(&ev, &self.bot) {
            why::Read::NotOurs => {}
            why::Read::Unusable(what) => {
                warn!(
                    what,
                    "a \"why\" shortcut that cannot be answered; acknowledged"
                );
                return Ok(());
            }
            why::Read::Ask(ask) => {
                self.why(ask);
                return Ok(());
            }
        }
        let (channel, message_ts, person, verdict) = match feedback::read_click(&ev, &self.bot) {
            feedback::Click::Ignore(why) => {
                debug!(why, "interaction ignored");
                return Ok(());
            }
            feedback::Click::Feedback {
                channel,
                message_ts,
                person,
                verdict,
            } => (channel, message_ts, person, verdict),
        };
        let ch = channel.clone();
        let here = Box::new(move |address: &str| {
            serde_json::from_str::<SlackAddress>(address).is_ok_and(|a| a.channel == ch)
        });
        let judged = self
            .store
            .record_feedback(&message_ts, here, &person, verdict)
            .await?;
        match judged {
            Judged::Stored { inbox, changed } => {
                Metrics::inc(&self.metrics.feedback.get_or_create(&FeedbackLabels {
                    value: verdict.as_str(),
                }));
                info!(
                    inbox,
                    value = verdict.as_str(),
                    changed,
                    "feedback on a reply"
                );
            }
            Judged::UnknownReply => {
                debug!(channel = %channel, ts = %message_ts, "feedback on a message anima never sent; ignored")
            }
        }
        Ok(())
    }

    /// Answers a use of the "why" shortcut off the acknowledgement's path: Slack is
    /// acknowledged at once, the ephemeral answer follows.
    fn why(&self, ask: why::Ask) {
        let allowed = self.inspect.may_ask_why(&ask.person, &self.admins);
        let (store, api, router) = (self.store.clone(), self.api.clone(), self.router.clone());
        tokio::spawn(async move {
            // The reply's trace may still wait in the trace writer's queue: written first, so
            // a reply just delivered is never answered "no trace kept".
            if allowed {
                router.flush_traces().await;
            }
            let text = why::answer(store.as_ref(), &ask, allowed).await;
            if let Err(e) = why::post(&api, &ask, &text).await {
                warn!(error = %e, user = %ask.person, "the \"why\" answer was not delivered");
            }
        });
    }

    /// An admin command by DM: run once (Slack's retries of it are recorded and skipped),
    /// answered in the DM; anyone not in `[admin] users` gets a polite refusal, logged at
    /// warn.
    async fn admin(&self, m: NewInbound) -> anyhow::Result<()> {
        let allowed = self.admins.iter().any(|a| a == &m.user_id);
        let origin = format!("{}:{}", m.channel, m.ts);
        let (o, u, t) = (origin.clone(), m.user_id.clone(), m.text.clone());
        let to_do = self.store.log_admin(&o, &u, &t, allowed).await?;
        if !to_do {
            debug!(origin = %origin, "admin command already handled");
            return Ok(());
        }
        let answer = if !allowed {
            warn!(user = %m.user_id, "an admin command from someone not in [admin] users; refused");
            admin::REFUSAL.to_string()
        } else {
            match admin::parse(&m.text) {
                admin::Parsed::Command(c) => {
                    info!(user = %m.user_id, command = ?c, "admin command");
                    admin::carry_out(&self.store, &c, &m.user_id, &m.thread_key).await?
                }
                admin::Parsed::Usage(u) => u.to_string(),
                admin::Parsed::NotACommand => return Ok(()),
            }
        };
        for part in markdown::render(&answer, false, markdown::MESSAGE_LIMIT) {
            let out = api::Outgoing {
                channel: &m.channel,
                thread_ts: m.reply_thread_ts.as_deref(),
                after_ts: &m.ts,
                text: &part,
                mark: None,
                feedback: false,
                held: &[],
            };
            if let Err(e) = self.api.post(&self.bot, &out, false).await {
                warn!(error = %e, "the admin answer was not delivered");
            }
        }
        self.store.admin_done(&origin).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::NewInbound;

    #[test]
    fn a_nul_in_a_message_is_kept_as_a_replacement_character() {
        let m = NewInbound {
            event_id: None,
            channel: "C1".into(),
            ts: "1.000100".into(),
            thread_key: "C1:1.000100".into(),
            reply_thread_ts: None,
            user_id: "U1".into(),
            text: "a\0b 🦀\0".into(),
            only_if_participating: None,
            files: Vec::new(),
        };
        assert_eq!(m.into_inbound().text, "a\u{FFFD}b 🦀\u{FFFD}");
    }
}
