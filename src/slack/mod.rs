//! Slack: events in (Socket Mode, Events API), replies out (mrkdwn, split, posted once).
//!
//! `intake` decides what is answered, `Gate` records it durably before Slack is
//! acknowledged and hands it to the router; `api` talks to the Web API; `socket` and the
//! daemon's HTTP routes are the two doors events come through. Knows nothing about prompts
//! or models.

pub mod api;
pub mod intake;
pub mod mrkdwn;
pub mod signature;
pub mod socket;

use std::sync::Arc;

use slack_morphism::prelude::SlackPushEventCallback;
use tracing::{debug, info};

use crate::config::SlackConfig;
use crate::memory::{Intake, Store};
use crate::metrics::Metrics;
use crate::router::Router;
use api::BotIdentity;
use intake::Decision;

/// Where every Slack event enters: decide, record, hand off. Acknowledge only after this
/// returns `Ok`: the message is then durable.
pub struct Gate {
    pub store: Arc<Store>,
    pub bot: BotIdentity,
    pub config: SlackConfig,
    pub router: Arc<Router>,
    pub metrics: Arc<Metrics>,
}

impl Gate {
    pub async fn handle(&self, ev: SlackPushEventCallback) -> anyhow::Result<()> {
        Metrics::inc(&self.metrics.events_received);
        let event_id = ev.event_id.to_string();
        match intake::decide(&ev.event, &event_id, &self.bot, &self.config) {
            Decision::Accept(inbound) => {
                let store = self.store.clone();
                let key = inbound.thread_key.clone();
                let channel = inbound.channel.clone();
                let ts = inbound.ts.clone();
                match tokio::task::spawn_blocking(move || store.accept_inbound(&inbound)).await?? {
                    Intake::Accepted(id) => {
                        Metrics::inc(&self.metrics.events_accepted);
                        info!(inbox = id, event = %event_id, channel = %channel, ts = %ts, "message accepted");
                        self.router.notify(&key);
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
            Decision::AssistantThread { channel, thread_ts } => {
                let store = self.store.clone();
                tokio::task::spawn_blocking(move || {
                    store.mark_assistant_thread(&channel, &thread_ts)
                })
                .await??;
            }
            Decision::Ignore(why) => {
                Metrics::inc(&self.metrics.events_ignored);
                debug!(event = %event_id, why, "event ignored");
            }
        }
        Ok(())
    }
}
