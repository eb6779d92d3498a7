//! A reply shown while it is written: the engine's speech goes into a channel, and one task
//! per reply hands it to the surface: the first words at once (the stream begins and its
//! reference is stored before anything else, so a crash can never leave a second message),
//! then more at most every [`APPEND_EVERY`], holding what the surface cannot take yet. The
//! text that was not shown by the end goes with the final text when the reply is delivered.
//!
//! Knows nothing of Slack: the surface decides what a stream is and what it may cost.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::time::Instant;
use tracing::{error, info};

use super::claims::Fence;
use super::surface::{Address, Appended, Begun, Surface};
use crate::engine::Speech;
use crate::memory::faces::Inbox;

/// The least time between two additions to one streamed message: Slack takes about 100
/// appends a minute per workspace, shared by every reply being written.
pub const APPEND_EVERY: Duration = Duration::from_millis(1000);

enum Say {
    Text(String),
    End,
}

/// What a reply's stream came to.
#[derive(Debug, Default)]
pub struct Streamed {
    /// The message the reply streamed into, if it began.
    pub reference: Option<String>,
    /// All the text the surface took, when every piece is known to have arrived.
    pub shown: Option<String>,
    /// Text said but not shown yet (or not known to be shown).
    pub pending: String,
    /// Everything said, shown or not.
    pub all: String,
}

impl Streamed {
    /// What the soul said of its reply before the turn ended, shown or not.
    pub fn said(&self) -> String {
        self.all.clone()
    }
}

/// The message a running turn's reply streams into, once begun (shared with the router's
/// stop button).
#[derive(Debug, Clone, Default)]
pub struct StreamRef(Arc<std::sync::Mutex<Option<String>>>);

impl StreamRef {
    pub fn set(&self, reference: &str) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = Some(reference.to_string());
    }

    /// Whether the reply streams into one of `references`.
    pub fn is_among(&self, references: &[String]) -> bool {
        let r = self.0.lock().unwrap_or_else(|e| e.into_inner());
        r.as_ref().is_some_and(|r| references.contains(r))
    }
}

/// One reply's stream, running beside its turn.
pub struct Streamer {
    tx: mpsc::UnboundedSender<Say>,
    task: tokio::task::JoinHandle<Streamed>,
}

impl Streamer {
    /// Starts the task for the reply to inbox row `row` at `to`, for `recipient`; the message
    /// it begins is told to `reference`. Nothing is shown once `fence` no longer holds.
    pub fn start(
        surface: Arc<dyn Surface>,
        store: Arc<dyn Inbox>,
        row: i64,
        to: (Address, Fence),
        recipient: String,
        reference: StreamRef,
    ) -> Streamer {
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(run(surface, store, row, to, recipient, rx, reference));
        Streamer { tx, task }
    }

    /// The engine's speech: each piece of dialogue as it is written.
    pub fn speech(&self) -> Speech {
        let tx = self.tx.clone();
        Speech::new(move |text| {
            let _ = tx.send(Say::Text(text.to_string()));
        })
    }

    /// The turn is over: what the stream came to. Nothing more is shown.
    pub async fn end(self) -> Streamed {
        let _ = self.tx.send(Say::End);
        match self.task.await {
            Ok(s) => s,
            Err(e) => {
                error!(error = %e, "a reply's stream task failed");
                Streamed::default()
            }
        }
    }
}

async fn run(
    surface: Arc<dyn Surface>,
    store: Arc<dyn Inbox>,
    row: i64,
    (to, fence): (Address, Fence),
    recipient: String,
    mut rx: mpsc::UnboundedReceiver<Say>,
    told: StreamRef,
) -> Streamed {
    let mut s = Streamed {
        shown: Some(String::new()),
        ..Streamed::default()
    };
    // No stream (the surface said whole) or a broken one: text is only collected.
    let mut closed = false;
    let mut next_append = Instant::now();
    loop {
        let due = s.reference.is_some() && !closed && !s.pending.is_empty();
        let say = if due {
            tokio::select! {
                say = rx.recv() => say,
                _ = tokio::time::sleep_until(next_append) => Some(Say::Text(String::new())),
            }
        } else {
            rx.recv().await
        };
        match say {
            Some(Say::Text(t)) => s.say(&t),
            Some(Say::End) | None => break,
        }
        if closed || s.pending.is_empty() {
            continue;
        }
        let posts = match &s.reference {
            None => true,
            Some(_) => Instant::now() >= next_append,
        };
        if posts && !fence.holds().await {
            // Another daemon holds the conversation now: what is said stays unshown here.
            info!("the conversation is another daemon's now; the stream stops");
            closed = true;
            continue;
        }
        match s.reference.clone() {
            None => {
                // A turn that ended already is not begun now: its reply is fixed, and a
                // message begun after that would outlive a crash unrecorded.
                let mut ended = false;
                while let Ok(say) = rx.try_recv() {
                    match say {
                        Say::Text(t) => s.say(&t),
                        Say::End => ended = true,
                    }
                }
                if ended {
                    break;
                }
                let begun = surface.begin_stream(&to, &recipient, &s.pending).await;
                let begun = settle_begun(&*surface, &*store, row, &to, begun).await;
                match begun {
                    Begun::Started { reference, took } => {
                        take(&mut s, took);
                        // Stored before anything else happens: whatever follows (a crash, a
                        // retry), the reply goes into this message.
                        let r = reference.clone();
                        if let Err(e) = store.set_stream_ref(row, &r).await {
                            error!(error = %e, "the stream's message was not recorded");
                        }
                        told.set(&reference);
                        info!(reference = %reference, "reply streaming");
                        s.reference = Some(reference);
                        next_append = Instant::now() + APPEND_EVERY;
                    }
                    Begun::Wait => {}
                    Begun::Whole | Begun::Unknown { .. } => closed = true,
                }
            }
            Some(reference) if Instant::now() >= next_append => {
                match surface.append_stream(&to, &reference, &s.pending).await {
                    Appended::Took(n) => {
                        take(&mut s, n);
                        next_append = Instant::now() + APPEND_EVERY;
                    }
                    Appended::Later => next_append = Instant::now() + APPEND_EVERY / 2,
                    Appended::Broken => {
                        s.shown = None;
                        closed = true;
                    }
                }
            }
            Some(_) => {}
        }
    }
    s
}

/// A stream that may have begun (`Begun::Unknown`) is the unrecorded stream at `to`, if one
/// is found there (never a message the inbox gave to another row); else the reply is whole.
async fn settle_begun(
    surface: &dyn Surface,
    store: &dyn Inbox,
    row: i64,
    to: &Address,
    begun: Begun,
) -> Begun {
    let Begun::Unknown { took } = begun else {
        return begun;
    };
    let found = match store.references_held(row).await {
        Ok(held) => surface.find_unrecorded_stream(to, &held).await,
        Err(e) => {
            error!(error = %e, "cannot tell which messages are other replies'");
            None
        }
    };
    match found {
        Some(reference) => {
            info!(reference = %reference, "the stream had begun after all; the reply goes into it");
            Begun::Started { reference, took }
        }
        None => Begun::Whole,
    }
}

impl Streamed {
    fn say(&mut self, text: &str) {
        self.pending.push_str(text);
        self.all.push_str(text);
    }
}

/// Moves the first `n` bytes of what was said to what was shown.
fn take(s: &mut Streamed, n: usize) {
    let n = n.min(s.pending.len());
    if let Some(shown) = s.shown.as_mut() {
        shown.push_str(&s.pending[..n]);
    }
    s.pending.drain(..n);
}
