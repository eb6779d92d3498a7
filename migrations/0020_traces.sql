-- Version 20: the soul's window. Released: never edit; add 0021_… instead.

-- A model-facing turn's trace (memory::records::trace): the columns it is found by and the
-- window's JSON body, which the store keeps as text. The newest [inspect] keep_turns are kept.
CREATE TABLE traces (
    trace   TEXT PRIMARY KEY,
    kind    TEXT NOT NULL,
    thread  TEXT NOT NULL,
    person  TEXT,
    inbox   INTEGER,
    process TEXT NOT NULL,
    at      INTEGER NOT NULL,
    reply   TEXT,
    body    TEXT NOT NULL
);
CREATE INDEX traces_at ON traces (at, trace);
CREATE INDEX traces_thread ON traces (thread, at);
CREATE INDEX traces_inbox ON traces (inbox) WHERE inbox IS NOT NULL;
CREATE INDEX traces_person ON traces (person) WHERE person IS NOT NULL;

-- The inner life sampled now and then for the window's charts (the newest few thousand).
CREATE TABLE psyche_samples (
    id   INTEGER PRIMARY KEY,
    at   INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX psyche_samples_at ON psyche_samples (at);
