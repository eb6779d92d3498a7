//! Slack: both doors events come in by (Socket Mode in `socket`, the Events API route with
//! its signature check in `events`), the rules of what is answered (`intake`), and replies out
//! (`out`, the router's surface: Markdown, posting once or streaming, the working sign).
//!
//! `Gate` is where every event enters: decide, hand the message to the router (which records
//! it durably before Slack is acknowledged). Knows nothing about prompts or models.

pub mod api;
pub mod budget;
pub mod events;
pub mod intake;
pub mod markdown;
pub mod out;
pub mod signature;
pub mod socket;
pub mod stream;

use std::sync::Arc;

use slack_morphism::prelude::SlackPushEventCallback;
use tracing::{debug, info, warn};

use crate::admin;
use crate::config::SlackConfig;
use crate::memory::{Inbound, Intake, Store};
use crate::metrics::Metrics;
use crate::router::Router;
use api::{BotIdentity, SlackApi};
use intake::Decision;
use out::{SlackAddress, ASSISTANT};

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
            }
            .encode(),
            conversation: self.thread_key,
            user_id: self.user_id,
            text: self.text,
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
    pub store: Arc<Store>,
    /// Slack user ids allowed to send admin commands.
    pub admins: Vec<String>,
}

impl Gate {
    pub async fn handle(&self, ev: SlackPushEventCallback) -> anyhow::Result<()> {
        Metrics::inc(&self.metrics.events_received);
        let event_id = ev.event_id.to_string();
        match intake::decide(&ev.event, &event_id, &self.bot, &self.config) {
            Decision::Accept(inbound) => {
                let (channel, ts) = (inbound.channel.clone(), inbound.ts.clone());
                match self.router.accept(inbound.into_inbound()).await? {
                    Intake::Accepted(id) => {
                        Metrics::inc(&self.metrics.events_accepted);
                        info!(inbox = id, event = %event_id, channel = %channel, ts = %ts, "message accepted");
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
            Decision::AssistantThread { channel, thread_ts } => {
                self.router
                    .note_conversation(&format!("{channel}:{thread_ts}"), ASSISTANT)
                    .await?;
            }
            Decision::Ignore(why) => {
                Metrics::inc(&self.metrics.events_ignored);
                debug!(event = %event_id, why, "event ignored");
            }
        }
        Ok(())
    }

    /// An admin command by DM: run once (Slack's retries of it are recorded and skipped),
    /// answered in the DM; anyone not in `[admin] users` gets a polite refusal, logged at
    /// warn.
    async fn admin(&self, m: NewInbound) -> anyhow::Result<()> {
        let allowed = self.admins.iter().any(|a| a == &m.user_id);
        let origin = format!("{}:{}", m.channel, m.ts);
        let (o, u, t) = (origin.clone(), m.user_id.clone(), m.text.clone());
        let to_do = self
            .store
            .call(move |s| s.log_admin(&o, &u, &t, allowed))
            .await?;
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
            };
            if let Err(e) = self.api.post(&self.bot, &out, false).await {
                warn!(error = %e, "the admin answer was not delivered");
            }
        }
        self.store.call(move |s| s.admin_done(&origin)).await?;
        Ok(())
    }
}
