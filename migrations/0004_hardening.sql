-- Version 4: bounded retries of inbox rows, whisper claims, a health probe. Released: never
-- edit; add 0005_… instead.

-- How often a worker has picked the row up. A row that fails (or panics) this many times is
-- answered with the short apology and marked 'failed', so no row can wedge its conversation.
ALTER TABLE inbox ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
-- The error that made the row fail, for the operator.
ALTER TABLE inbox ADD COLUMN failure TEXT;

-- A whisper is claimed by exactly one turn when it starts (claimed_until: unix ms when the
-- claim lapses, so a claim held by a crashed process is freed), consumed when it commits, and
-- released when it fails.
ALTER TABLE whispers ADD COLUMN claimed_by TEXT;
ALTER TABLE whispers ADD COLUMN claimed_until INTEGER;

-- One row, rewritten by the health probe: proves the store takes writes right now.
CREATE TABLE store_probe (
    id  INTEGER PRIMARY KEY CHECK (id = 1),
    at  INTEGER NOT NULL
);
