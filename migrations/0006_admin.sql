-- Version 6: operator actions. Released: never edit; add 0007_… instead.

-- A thread reset by an operator starts a new conversation: its working memory before
-- `since_id` stays in the table but is no longer read, and its turns count from 0 again.
ALTER TABLE threads ADD COLUMN since_id INTEGER NOT NULL DEFAULT 0;

-- Every admin command received by DM, once (Slack's retries of one are one row), with who
-- sent it and what became of it: the audit trail, and the guard against running one twice.
CREATE TABLE admin_log (
    origin   TEXT PRIMARY KEY,
    user_id  TEXT    NOT NULL,
    command  TEXT    NOT NULL,
    allowed  INTEGER NOT NULL,
    done     INTEGER NOT NULL DEFAULT 0,  -- carried out and answered (a crash before: run again)
    at       INTEGER NOT NULL
);
