-- Version 11: the psychology substrate (issue 12). Released: never edit; add a new file instead.
-- Numbers for the operator and the daemon only: they never reach a prompt as numbers.

-- The soul's own state: drives, mood, arcs, energy, cooldown and long-term patterns, as JSON
-- with every float as its IEEE-754 bits (exact round trips; see memory::psyche::Stored). One
-- small row, read and written whole with every event; `anima mind` shows it in numbers.
CREATE TABLE psyche_substrate (
    soul        TEXT    PRIMARY KEY,
    state       TEXT    NOT NULL,
    updated_at  INTEGER NOT NULL
);

-- The soul's relationship with each person: warmth, trust in [-1, 1]; the rest in [0, 1].
CREATE TABLE psyche_relationships (
    soul        TEXT    NOT NULL,
    person      TEXT    NOT NULL,
    warmth      REAL    NOT NULL,
    trust       REAL    NOT NULL,
    tension     REAL    NOT NULL,
    comfort     REAL    NOT NULL,
    volatility  REAL    NOT NULL,
    exchanges   INTEGER NOT NULL,
    last_seen   INTEGER,
    PRIMARY KEY (soul, person)
) WITHOUT ROWID;

-- Episodic memories: what happened, in the person's words, with importance and salience.
CREATE TABLE psyche_memories (
    id          INTEGER PRIMARY KEY,
    soul        TEXT    NOT NULL,
    text        TEXT    NOT NULL,
    importance  REAL    NOT NULL,
    salience    REAL    NOT NULL,
    at          INTEGER NOT NULL
);
CREATE INDEX psyche_memories_recent ON psyche_memories (soul, at);
CREATE INDEX psyche_memories_salient ON psyche_memories (soul, salience);

CREATE TABLE psyche_memory_people (
    person  TEXT    NOT NULL,
    memory  INTEGER NOT NULL REFERENCES psyche_memories (id) ON DELETE CASCADE,
    PRIMARY KEY (person, memory)
) WITHOUT ROWID;
CREATE INDEX psyche_memory_people_by_memory ON psyche_memory_people (memory);

-- Full-text candidates for retrieval (the scoring is psyche::retrieve's).
CREATE VIRTUAL TABLE psyche_memories_fts USING fts5 (
    text,
    content = 'psyche_memories',
    content_rowid = 'id',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER psyche_memories_fts_insert AFTER INSERT ON psyche_memories BEGIN
    INSERT INTO psyche_memories_fts (rowid, text) VALUES (new.id, new.text);
END;
CREATE TRIGGER psyche_memories_fts_delete AFTER DELETE ON psyche_memories BEGIN
    INSERT INTO psyche_memories_fts (psyche_memories_fts, rowid, text) VALUES ('delete', old.id, old.text);
END;

-- Biographical facts a person stated about themselves; the latest of each kind wins.
CREATE TABLE psyche_facts (
    soul    TEXT    NOT NULL,
    person  TEXT    NOT NULL,
    kind    TEXT    NOT NULL,
    value   TEXT    NOT NULL,
    at      INTEGER NOT NULL,
    PRIMARY KEY (soul, person, kind)
) WITHOUT ROWID;

-- The soul's intentions: a controlled type, a target, a horizon, a priority in [0, 1].
CREATE TABLE psyche_intentions (
    id          INTEGER PRIMARY KEY,
    soul        TEXT    NOT NULL,
    kind        TEXT    NOT NULL,
    target      TEXT,
    horizon     TEXT    NOT NULL,
    priority    REAL    NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
CREATE INDEX psyche_intentions_by_soul ON psyche_intentions (soul);

-- Events already applied, by a key of the caller's (a message's inbox row): a retried turn
-- does not move the substrate twice.
CREATE TABLE psyche_seen (
    soul    TEXT    NOT NULL,
    key     TEXT    NOT NULL,
    at      INTEGER NOT NULL,
    PRIMARY KEY (soul, key)
) WITHOUT ROWID;

-- Every gate decision with its inputs (the newest are kept; see memory::psyche).
CREATE TABLE psyche_gate_log (
    id                  INTEGER PRIMARY KEY,
    soul                TEXT    NOT NULL,
    at                  INTEGER NOT NULL,
    event_kind          TEXT    NOT NULL,
    person              TEXT,
    channel             TEXT,
    verdict             TEXT    NOT NULL,
    meaning             REAL    NOT NULL,
    threshold           REAL    NOT NULL,
    salience_max        REAL    NOT NULL,
    drive_pressure_max  REAL    NOT NULL,
    arc_hot             REAL    NOT NULL,
    rel_stakes          REAL    NOT NULL,
    energy              REAL    NOT NULL,
    trivial             INTEGER NOT NULL,
    choice              INTEGER NOT NULL,
    listened            INTEGER NOT NULL
);
CREATE INDEX psyche_gate_log_by_soul ON psyche_gate_log (soul, id);
