-- Version 3: mental processes per thread. Released: never edit; add 0004_… instead.

-- Each thread's place in the process machine.
CREATE TABLE thread_process (
    thread       TEXT PRIMARY KEY,
    current      TEXT    NOT NULL,
    previous     TEXT,
    invocations  INTEGER NOT NULL DEFAULT 0,   -- runs of `current` since it was entered
    params       TEXT    NOT NULL DEFAULT '{}', -- JSON, from the transition that entered it
    updated_at   INTEGER NOT NULL
);

-- Every transition taken, for `anima processes show THREAD`.
CREATE TABLE process_transitions (
    id            INTEGER PRIMARY KEY,
    thread        TEXT    NOT NULL,
    interaction   INTEGER NOT NULL,
    from_process  TEXT    NOT NULL,
    to_process    TEXT    NOT NULL,
    rule          INTEGER,                     -- the rule's index in the file; NULL: a fallback
    execute_now   INTEGER NOT NULL,
    params        TEXT    NOT NULL DEFAULT '{}',
    at            INTEGER NOT NULL
);
CREATE INDEX process_transitions_by_thread ON process_transitions (thread, id);
