-- Version 16: a person's return makes their last memory more salient without a page of its own
-- (issue 12). Released: never edit; add 0017_… instead.

-- The boost owed to the memory last shared with this person (memory::psyche::memories::boost),
-- waiting on the row that every event of theirs writes anyway. It is written to the memory at
-- once only when it changes the soul's most salient memories (psyche_salient), so that list
-- stays the top by salience as retrieval sees it; readers add what waits here
-- (memories::SALIENCE); a dream's upkeep writes every waiting boost to its memory.
ALTER TABLE psyche_relationships ADD COLUMN boost_memory INTEGER;
ALTER TABLE psyche_relationships ADD COLUMN boost REAL NOT NULL DEFAULT 0;
