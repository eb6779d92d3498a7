-- Version 8: cognitive states. Released: never edit; add 0009_… instead.

-- The soul's cognitive state now: one row.
CREATE TABLE cognitive_state (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    state     TEXT    NOT NULL,            -- WAKEUP | WORK | PLAY | DREAM | SOLITUDE | SHUTDOWN
    since     INTEGER NOT NULL,            -- unix ms
    cause     TEXT    NOT NULL,            -- why it moved there, in words
    degraded  INTEGER NOT NULL DEFAULT 0   -- 1: in WORK after a wakeup that failed
);
INSERT INTO cognitive_state (id, state, since, cause) VALUES (1, 'SHUTDOWN', 0, 'never started');

-- Every move, with its cause and what decided it (JSON: a shutdown's decision, the condition
-- that fired and the soul's answer; a wakeup's attempts; who requested PLAY …).
CREATE TABLE state_moves (
    id          INTEGER PRIMARY KEY,
    from_state  TEXT    NOT NULL,
    to_state    TEXT    NOT NULL,
    cause       TEXT    NOT NULL,
    detail      TEXT    NOT NULL DEFAULT '{}',
    at          INTEGER NOT NULL
);

-- SOLITUDE's journal: one entry per spell of solitude.
CREATE TABLE journal (
    id     INTEGER PRIMARY KEY,
    entry  TEXT    NOT NULL,
    at     INTEGER NOT NULL
);
