-- Version 21: dossiers, what the soul learned of the people and subjects it hears about.
-- Released: never edit; add 0022_… instead.

-- One learned dossier (memory::faces::Dossiers): its current head, its version and how far
-- git has it. Hand-written dossiers are the soul's files, never rows.
CREATE TABLE dossiers (
    slug             TEXT PRIMARY KEY,
    name             TEXT NOT NULL,
    aliases          TEXT NOT NULL DEFAULT '',   -- one a line
    kind             TEXT NOT NULL,
    about            TEXT,                       -- the Slack id of the person, when known
    version          INTEGER NOT NULL,
    exported_version INTEGER NOT NULL DEFAULT 0,
    updated_at       INTEGER NOT NULL
);

-- Every version: the file text and its change note.
CREATE TABLE dossier_versions (
    slug    TEXT NOT NULL,
    version INTEGER NOT NULL,
    text    TEXT NOT NULL,
    note    TEXT NOT NULL,
    at      INTEGER NOT NULL,
    PRIMARY KEY (slug, version)
);
