//! What forgetting removed, counted.

/// What forgetting a person removed, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Forgotten {
    /// Whether the store knew the person at all (their row in `users`).
    pub known: bool,
    /// Versions of their user model.
    pub model_versions: u64,
    /// Conversations no one else spoke in, dropped whole.
    pub conversations: u64,
    /// Working-memory entries: every entry of those conversations, and elsewhere their
    /// messages and the notes about their model.
    pub entries: u64,
    /// Inbox rows of theirs already answered, their words and the reply blanked.
    pub inbox_rows: u64,
    /// Inbox rows of theirs not yet answered: kept (the daemon answers them).
    pub inbox_waiting: u64,
    /// The psyche's relationships with them (one per soul).
    pub relationships: u64,
    /// The psyche's memories they were in.
    pub memories: u64,
    /// Facts the psyche learnt about them.
    pub facts: u64,
    /// Intentions aimed at them.
    pub intentions: u64,
    /// Gate decisions on their events.
    pub gate_decisions: u64,
    /// Their feedback on replies.
    pub feedback: u64,
    /// Admin commands they sent, carried out: blanked.
    pub admin_commands: u64,
    /// Traces of their turns and of every conversation they spoke in (the prompts of those
    /// hold their words).
    pub traces: u64,
}

/// What a pass over quiet conversations dropped, counted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    pub conversations: u64,
    /// Traces of those conversations' older turns.
    pub traces: u64,
    pub entries: u64,
    pub inbox_rows: u64,
}
