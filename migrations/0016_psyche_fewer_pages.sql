-- Version 16: an event of the psyche writes fewer pages (issue 12). Released: never edit; add
-- 0017_… instead.

-- The soul's latest gate decisions, one line each (memory::psyche::gate_log), in the state's
-- row, which every event writes anyway; they move into psyche_gate_log a handful at a time.
ALTER TABLE psyche_substrate ADD COLUMN recent_decisions TEXT NOT NULL DEFAULT '';

-- What a person's relationship row keeps of the memories shared with them
-- (memory::psyche::memories::Shared), on the row that every event of theirs writes anyway: the
-- newest such memory with its salience as stored, so that a return reads neither; and the boost
-- of salience owed to one of them when they came back (memories::boost). A boost is written to
-- its memory at once only when it changes the soul's most salient memories (psyche_salient), so
-- that list stays the top by salience as retrieval sees it; readers add what waits here
-- (memories::salience!); a dream's upkeep writes every waiting boost to its memory.
ALTER TABLE psyche_relationships ADD COLUMN last_memory INTEGER;
ALTER TABLE psyche_relationships ADD COLUMN last_salience REAL NOT NULL DEFAULT 0;
ALTER TABLE psyche_relationships ADD COLUMN boost_memory INTEGER;
ALTER TABLE psyche_relationships ADD COLUMN boost REAL NOT NULL DEFAULT 0;

UPDATE psyche_relationships AS r
SET last_memory = (SELECT max(p.memory) FROM psyche_memory_people p
                   JOIN psyche_memories m ON m.id = p.memory
                   WHERE p.person = r.person AND m.soul = r.soul);
UPDATE psyche_relationships AS r
SET last_salience = (SELECT salience FROM psyche_memories WHERE id = r.last_memory)
WHERE last_memory IS NOT NULL;
