-- Version 5: the inbox and the conversations it knows speak of origins, conversations and
-- addresses (text only the surface that wrote it reads), not of Slack. Released: never edit;
-- add 0006_… instead.

CREATE TABLE inbox_v5 (
    id            INTEGER PRIMARY KEY,
    origin        TEXT    NOT NULL UNIQUE,  -- the surface's unique name of the message: its retries and twins are one row
    conversation  TEXT    NOT NULL,         -- one ordered worker per conversation
    seq           REAL    NOT NULL,         -- order within the conversation
    address       TEXT    NOT NULL,         -- where the reply goes; only the surface reads it
    note          TEXT,                     -- the surface's note on the conversation when the message came
    user_id       TEXT    NOT NULL,
    text          TEXT    NOT NULL,
    status        TEXT    NOT NULL DEFAULT 'pending',  -- pending | replying | done | failed
    reply         TEXT,                     -- the reply, fixed when the turn commits
    parts_posted  INTEGER NOT NULL DEFAULT 0,
    reply_ref     TEXT,                     -- the surface's reference of the first part delivered
    received_us   INTEGER NOT NULL,         -- unix microseconds, for the reply-overhead metric
    attempts      INTEGER NOT NULL DEFAULT 0,
    failure       TEXT,
    done_at       INTEGER
);
INSERT INTO inbox_v5 (id, origin, conversation, seq, address, note, user_id, text, status, reply,
                      parts_posted, reply_ref, received_us, attempts, failure, done_at)
SELECT id, channel || ':' || ts, thread_key, CAST(ts AS REAL),
       json_object('channel', channel, 'ts', ts, 'thread_ts', reply_thread_ts),
       CASE WHEN assistant_thread THEN 'assistant' END,
       user_id, text, status, reply, parts_posted, reply_ts, received_us, attempts, failure, done_at
FROM inbox;

-- A message's working-memory entry names its inbox row.
-- (UPDATE … FROM joins once, through working_memory's index on source.)
UPDATE working_memory SET source = 'inbox:' || i.id
FROM inbox i
WHERE working_memory.source = 'slack:' || i.channel || ':' || i.ts;

DROP TABLE inbox;
ALTER TABLE inbox_v5 RENAME TO inbox;
CREATE INDEX inbox_open ON inbox (conversation, status, seq);

-- Conversations the soul has spoken in (later messages there need no mention) or was
-- invited into, with the surface's own note on them.
CREATE TABLE conversations (
    key     TEXT PRIMARY KEY,
    spoken  INTEGER NOT NULL DEFAULT 0,
    note    TEXT
);
INSERT INTO conversations (key, spoken, note)
SELECT channel || ':' || thread_ts, 1, CASE WHEN kind = 'assistant' THEN 'assistant' END
FROM slack_participation;
DROP TABLE slack_participation;
