//! The psychology substrate in a turn: the message's event applied to the soul's substrate
//! (one write transaction), then the context packet that the prompt's `<inner_life>` section
//! describes in words. The numbers stay in the store; the packet holds words only.
//!
//! A failure here is logged and the turn goes on without an inner life: the soul answers as
//! it did before the substrate existed, never worse.

use tracing::warn;

use super::perception::Message;
use super::Engine;
use crate::memory::now_ms;
use crate::memory::psyche::Place;
use crate::process::Loaded;
use crate::psyche::{Event, EventKind, Packet};

impl Engine {
    /// Applies an addressed message to the substrate and builds the turn's packet.
    pub(super) async fn psyche_turn(&self, m: &Message, lib: &Loaded) -> Option<Packet> {
        let soul = lib.soul.name().to_string();
        let psyche = lib.psyche.clone();
        let rules = self.config.autonomy.gate_rules();
        let event = Event {
            kind: EventKind::Addressed,
            person: Some(m.user_id.clone()),
            text: m.text.clone(),
            at: now_ms(),
        };
        let people = vec![(m.user_id.clone(), m.display_name.clone())];
        let result = self
            .store
            .call(move |s| {
                s.psyche_event(&soul, &psyche, &rules, &event, &Place::default())?;
                s.psyche_packet(&soul, &psyche, &people, &event.text, event.at)
            })
            .await;
        match result {
            Ok(packet) => Some(packet),
            Err(e) => {
                warn!(error = %e, "the psyche could not take this message in; the turn goes on without its inner life");
                None
            }
        }
    }
}
