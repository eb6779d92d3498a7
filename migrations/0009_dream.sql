-- Version 9: DREAM, memory consolidation. Released: never edit; add 0010_… instead.

-- What a dream consolidated of one conversation: one row per thread and conversation (a
-- thread an operator reset starts a new conversation, and a new summary).
CREATE TABLE thread_summaries (
    thread          TEXT    NOT NULL,
    since_id        INTEGER NOT NULL,   -- the conversation: threads.since_id when it was written
    summary         TEXT    NOT NULL,
    covers_through  INTEGER NOT NULL,   -- the newest working_memory id the summary covers
    entries         INTEGER NOT NULL,   -- working-memory entries it covers, in all
    updated_at      INTEGER NOT NULL,
    PRIMARY KEY (thread, since_id)
);

-- Moments a dream kept, each with how much it matters (1: a detail … 10: never forget).
CREATE TABLE episodic_memories (
    id          INTEGER PRIMARY KEY,
    thread      TEXT    NOT NULL,
    memory      TEXT    NOT NULL,
    importance  INTEGER NOT NULL CHECK (importance BETWEEN 1 AND 10),
    created_at  INTEGER NOT NULL
);
CREATE INDEX episodic_memories_by_thread ON episodic_memories (thread, importance);

-- Every dream and its report (JSON). finished_at NULL: running, or killed before it ended.
CREATE TABLE dreams (
    id           INTEGER PRIMARY KEY,
    started_at   INTEGER NOT NULL,
    finished_at  INTEGER,
    complete     INTEGER NOT NULL DEFAULT 0,   -- 1: no backlog was left (not yielded, no failure)
    cause        TEXT    NOT NULL,
    report       TEXT    NOT NULL DEFAULT '{}'
);
