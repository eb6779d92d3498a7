-- A trace's pieces kept once (as SQLite's 0022), each marked when a trace last used it.
-- Released: never edit; add 0013_… instead.

CREATE TABLE trace_pieces (
    key     text PRIMARY KEY,
    text    text NOT NULL,
    used_at timestamptz NOT NULL DEFAULT now()
);
ALTER TABLE traces ADD COLUMN pieces text NOT NULL DEFAULT '';
