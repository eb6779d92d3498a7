-- Version 16: an event of the psyche writes fewer pages (issue 12). Released: never edit; add
-- 0017_… instead.

-- The soul's latest gate decisions, one line each (memory::psyche::gate_log), in the state's
-- row, which every event writes anyway; they move into psyche_gate_log a handful at a time.
ALTER TABLE psyche_substrate ADD COLUMN recent_decisions TEXT NOT NULL DEFAULT '';

-- The boost owed to the memory last shared with this person (memory::psyche::memories::boost),
-- waiting on the row that every event of theirs writes anyway. It is written to the memory at
-- once only when it changes the soul's most salient memories (psyche_salient), so that list
-- stays the top by salience as retrieval sees it; readers add what waits here
-- (memories::salience!); a dream's upkeep writes every waiting boost to its memory.
ALTER TABLE psyche_relationships ADD COLUMN boost_memory INTEGER;
ALTER TABLE psyche_relationships ADD COLUMN boost REAL NOT NULL DEFAULT 0;
