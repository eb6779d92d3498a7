//! Before a message's prompt: the daimons' whisper (asked while the psyche takes the message
//! in, so it costs the turn little) and onboarding (whether someone new is asked who they
//! are). And anima's own counsel to another soul (`/api/counsel`).
//!
//! One whisper per turn: a whisper pushed to `/api/whisper` and claimed by the turn wins, and
//! the daimons are then not asked at all (nothing spent, no wait); else the first daimon to
//! whisper. A daimon's whisper enters the prompt as a pushed one does (`<intuition>`,
//! escaped, fenced and quoted) and is not stored: it shapes this turn only.

use std::sync::Arc;
use std::time::Duration;

use super::begin::Begun;
use super::perception::Perception;
use super::tracer::Tracer;
use super::Engine;
use crate::daimon::{voice, Asked, Context, Heard, SoulStateView};
use crate::memory::{EntryType, TurnContext};
use crate::process::Loaded;
use crate::prompt::Intuition;
use crate::states::onboarding::{Newcomer, Onboard};

/// Tells whether a conversation is one person's with the soul alone (a direct message), as
/// the door that delivered it knows; the engine never reads a conversation's name itself.
pub type OneToOne = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Why anima gave no counsel.
#[derive(Debug, thiserror::Error)]
pub enum CounselError {
    /// The model failed or said nothing usable: the words, for the log and the answer.
    #[error("no counsel: {0}")]
    Model(String),
}

impl Engine {
    /// Whether the daimons are asked for this turn, and what they are told: a message turn
    /// with no whisper of its own, when daimons are configured.
    pub(super) fn daimon_context(&self, p: &Perception, begun: &Begun) -> Option<Context> {
        let asks = !self.daimons.is_empty() && p.policy().whisper && begun.ctx.whisper.is_none();
        asks.then(|| context_of(&begun.ctx))
    }

    /// Asks the daimons (see [`crate::daimon::Daimons::ask`]) and tells the turn's trace.
    pub(super) async fn hear_daimons(
        &self,
        context: Option<Context>,
        soul_name: &str,
        tracer: &Tracer<'_>,
    ) -> Option<Heard> {
        let context = context?;
        let heard = self
            .daimons
            .ask(soul_name, &context, self.provider.as_ref())
            .await;
        tracer.decision("daimon", || match &heard {
            Some(h) => format!("{} whispered ({} ms)", h.name, h.after.as_millis()),
            None => "no daimon whispered".into(),
        });
        heard
    }

    /// What onboarding asks of this turn: only a message from someone the soul has no model
    /// of, in a conversation the door says is one-to-one (or in a channel, if the template
    /// says so).
    pub(super) fn onboard(&self, p: &Perception, ctx: &TurnContext, lib: &Loaded) -> Onboard {
        let Perception::Message(m) = p else {
            return Onboard::default();
        };
        lib.template.behaviors.onboarding.turn(Newcomer {
            direct: self.one_to_one.as_ref().map(|f| f(&m.thread)),
            turns: ctx.user.turns,
            has_model: ctx.user.model.is_some(),
        })
    }

    /// anima as a daimon: a whisper in its own soul's voice for the soul that asked, from
    /// one model call bounded by `[llm] timeout_secs`.
    pub async fn counsel(&self, asked: &Asked) -> Result<String, CounselError> {
        let lib = self.library.current();
        let call = voice::counsel(&lib.soul.soul_md, lib.soul.name(), asked);
        let timeout = Duration::from_secs(self.config.llm.timeout_secs.max(1));
        match voice::speak(self.provider.as_ref(), &call, None, timeout).await {
            Ok(Some(whisper)) => Ok(whisper),
            Ok(None) => Err(CounselError::Model("the model said nothing usable".into())),
            Err(e) => Err(CounselError::Model(e)),
        }
    }
}

/// What a daimon is told of a turn: the soul's state (three keys), the thread's last
/// monologue (cut to 200 characters) and the interaction count. Nothing a person wrote.
fn context_of(ctx: &TurnContext) -> Context {
    let monologue = ctx
        .recent
        .iter()
        .rev()
        .find(|e| e.entry_type == EntryType::InternalMonologue)
        .map_or("", |e| e.content.as_str());
    Context::new(
        SoulStateView {
            emotional_state: ctx.soul.get("emotionalState").to_string(),
            current_topic: ctx.soul.get("currentTopic").to_string(),
            current_project: ctx.soul.get("currentProject").to_string(),
        },
        monologue,
        ctx.interaction,
    )
}

impl Begun {
    /// The turn's one intuition: its claimed whisper, else a daimon's.
    pub(super) fn intuition(&self) -> Option<Intuition<'_>> {
        match (&self.ctx.whisper, &self.heard) {
            (Some(w), _) => Some(Intuition {
                text: &w.text,
                source: &w.source,
            }),
            (None, Some(h)) => Some(Intuition {
                text: &h.whisper,
                source: &h.name,
            }),
            (None, None) => None,
        }
    }
}
