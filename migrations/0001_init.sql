-- anima schema, version 1. Released: never edit; add 0002_… instead.

-- Working memory: everything said and thought in a conversation (a Slack thread).
CREATE TABLE working_memory (
    id          INTEGER PRIMARY KEY,
    thread      TEXT    NOT NULL,
    entry_type  TEXT    NOT NULL,  -- userMessage | internalMonologue | externalDialog | mentalQuery | soulStateUpdate | userModelUpdate
    content     TEXT    NOT NULL,
    verb        TEXT,
    user_id     TEXT,
    metadata    TEXT    NOT NULL DEFAULT '{}',  -- JSON
    created_at  INTEGER NOT NULL                 -- unix milliseconds
);
CREATE INDEX working_memory_by_thread ON working_memory (thread, id);

-- The soul's own state: one value per key, seeded with the defaults.
CREATE TABLE soul_memory (
    key         TEXT PRIMARY KEY,
    value       TEXT    NOT NULL,
    updated_at  INTEGER NOT NULL
);
INSERT INTO soul_memory (key, value, updated_at) VALUES
    ('currentProject', '', 0),
    ('currentTask', '', 0),
    ('currentTopic', '', 0),
    ('emotionalState', 'neutral', 0),
    ('conversationSummary', '', 0),
    ('currentProcess', 'main', 0);

-- Counters that must survive restarts (e.g. 'interactions': turns the soul has processed).
CREATE TABLE counters (
    name   TEXT PRIMARY KEY,
    value  INTEGER NOT NULL
);
INSERT INTO counters (name, value) VALUES ('interactions', 0);

-- People the soul has talked to, their turn counts and their current user model.
CREATE TABLE users (
    user_id           TEXT PRIMARY KEY,
    display_name      TEXT    NOT NULL,
    slug              TEXT    NOT NULL,
    turns             INTEGER NOT NULL DEFAULT 0,  -- turns of this user, all threads
    injected_at_turn  INTEGER,                     -- `turns` when the model was last in a prompt
    model             TEXT,                        -- markdown; NULL until the first update
    model_version     INTEGER NOT NULL DEFAULT 0,
    exported_version  INTEGER NOT NULL DEFAULT 0,  -- version last committed to the git repo
    updated_at        INTEGER NOT NULL
);

-- Every version of every user model, with the note that explains the change.
CREATE TABLE user_model_history (
    user_id      TEXT    NOT NULL,
    version      INTEGER NOT NULL,
    model        TEXT    NOT NULL,
    change_note  TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (user_id, version)
);

-- Conversations: completed turns and provider session state.
CREATE TABLE threads (
    thread          TEXT PRIMARY KEY,
    turns           INTEGER NOT NULL DEFAULT 0,
    claude_session  TEXT,
    updated_at      INTEGER NOT NULL
);

-- Whispered intuitions, each consumed by exactly one successful turn.
CREATE TABLE whispers (
    id           INTEGER PRIMARY KEY,
    whisper      TEXT    NOT NULL,
    source       TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    consumed_at  INTEGER,
    consumed_by  TEXT
);

-- One row per model call: what it cost and how long it took.
CREATE TABLE turn_usage (
    id                     INTEGER PRIMARY KEY,
    thread                 TEXT    NOT NULL,
    interaction            INTEGER NOT NULL,
    provider               TEXT    NOT NULL,
    model                  TEXT    NOT NULL,
    input_tokens           INTEGER NOT NULL DEFAULT 0,
    output_tokens          INTEGER NOT NULL DEFAULT 0,
    cache_creation_tokens  INTEGER NOT NULL DEFAULT 0,
    cache_read_tokens      INTEGER NOT NULL DEFAULT 0,
    latency_ms             INTEGER NOT NULL DEFAULT 0,
    stop_reason            TEXT,
    created_at             INTEGER NOT NULL
);
