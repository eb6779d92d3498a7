-- The soul's window (as SQLite's 0020). Released: never edit; add 0009_… instead.

CREATE TABLE traces (
    trace   text PRIMARY KEY,
    kind    text NOT NULL,
    thread  text NOT NULL,
    person  text,
    inbox   bigint,
    process text NOT NULL,
    at      timestamptz NOT NULL,
    reply   text,
    body    text NOT NULL
);
CREATE INDEX traces_at ON traces (at, trace);
CREATE INDEX traces_thread ON traces (thread, at);
CREATE INDEX traces_inbox ON traces (inbox) WHERE inbox IS NOT NULL;
CREATE INDEX traces_person ON traces (person) WHERE person IS NOT NULL;

CREATE TABLE psyche_samples (
    id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at   timestamptz NOT NULL,
    body text NOT NULL
);
CREATE INDEX psyche_samples_at ON psyche_samples (at);
