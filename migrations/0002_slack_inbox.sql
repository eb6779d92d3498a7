-- Version 2: the durable Slack inbox. Released: never edit; add 0003_… instead.

-- Every accepted Slack message, written before it is acknowledged. One row per message
-- (channel + ts), so Slack's retries and the app_mention/message twins of one mention are one row.
CREATE TABLE inbox (
    id                INTEGER PRIMARY KEY,
    event_id          TEXT,
    channel           TEXT    NOT NULL,
    ts                TEXT    NOT NULL,
    thread_key        TEXT    NOT NULL,   -- the conversation: channel:thread_ts, or channel for a DM's top level
    reply_thread_ts   TEXT,               -- where the reply goes; NULL: the channel's top level
    user_id           TEXT    NOT NULL,
    text              TEXT    NOT NULL,
    assistant_thread  INTEGER NOT NULL DEFAULT 0,
    status            TEXT    NOT NULL DEFAULT 'pending',  -- pending | replying | done
    reply             TEXT,               -- the reply, fixed when the turn commits
    parts_posted      INTEGER NOT NULL DEFAULT 0,
    reply_ts          TEXT,               -- Slack's ts of the first posted part
    received_us       INTEGER NOT NULL,   -- unix microseconds, for the reply-overhead metric
    done_at           INTEGER,
    UNIQUE (channel, ts)
);
CREATE INDEX inbox_open ON inbox (thread_key, status, ts);

-- Threads the soul has spoken in (later messages there need no mention), and assistant
-- threads (kind 'assistant': the working sign is the assistant status there).
CREATE TABLE slack_participation (
    channel    TEXT NOT NULL,
    thread_ts  TEXT NOT NULL,
    kind       TEXT NOT NULL DEFAULT 'reply',  -- reply | assistant
    PRIMARY KEY (channel, thread_ts)
);

-- A user message recorded from a source (an inbox row) is recorded once, however often its
-- turn is retried after a crash.
ALTER TABLE working_memory ADD COLUMN source TEXT;
CREATE UNIQUE INDEX working_memory_by_source ON working_memory (source) WHERE source IS NOT NULL;
