-- Version 22: a trace's pieces kept once. Released: never edit; add 0023_… instead.

-- Texts traces share (a call's cached prompt prefix: soul.md, the skills, the steps), each
-- kept once under its content's key (memory::records::trace::piece_key); a trace lists the
-- keys of its pieces in order. The scans' pruning deletes a piece no trace lists.
CREATE TABLE trace_pieces (
    key  TEXT PRIMARY KEY,
    text TEXT NOT NULL
);
ALTER TABLE traces ADD COLUMN pieces TEXT NOT NULL DEFAULT '';
