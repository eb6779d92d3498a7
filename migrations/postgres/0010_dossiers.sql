-- Dossiers (as SQLite's 0021). Released: never edit; add 0011_… instead.

CREATE TABLE dossiers (
    slug             text PRIMARY KEY,
    name             text NOT NULL,
    aliases          text NOT NULL DEFAULT '',
    kind             text NOT NULL,
    about            text,
    version          bigint NOT NULL,
    exported_version bigint NOT NULL DEFAULT 0,
    updated_at       bigint NOT NULL
);

CREATE TABLE dossier_versions (
    slug    text NOT NULL,
    version bigint NOT NULL,
    text    text NOT NULL,
    note    text NOT NULL,
    at      bigint NOT NULL,
    PRIMARY KEY (slug, version)
);
