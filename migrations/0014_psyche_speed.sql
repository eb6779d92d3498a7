-- Version 14: an event of the psyche writes fewer pages (benches/psyche.rs). Released: never
-- edit; add a new file instead.

-- The gate log is read newest first and pruned oldest first, both by id, and a home has one
-- soul (a few at most): the table's own order serves, and an index less is a page less in
-- every event's transaction.
DROP INDEX psyche_gate_log_by_soul;

-- Retrieval's candidates by salience: each soul's 20 most salient memories (ties: the newer),
-- the number being memory::psyche::memories::CANDIDATES. The index on salience that gave them
-- moved a memory's entry whenever it grew more salient, two more pages in nearly every event;
-- this list is written only when its top 20 changes. The triggers below keep it, whatever
-- changes a memory.
CREATE TABLE psyche_salient (
    soul      TEXT    NOT NULL,
    salience  REAL    NOT NULL,
    memory    INTEGER NOT NULL,
    PRIMARY KEY (soul, salience, memory)
) WITHOUT ROWID;

INSERT INTO psyche_salient (soul, salience, memory)
SELECT soul, salience, id FROM (
    SELECT soul, salience, id,
           row_number() OVER (PARTITION BY soul ORDER BY salience DESC, id DESC) AS place
    FROM psyche_memories)
WHERE place <= 20;

DROP INDEX psyche_memories_salient;

-- The triggers keep the list in the same order; each asks first (WHEN) whether the list
-- changes at all, so that an event whose memory does not make the list writes nothing here.

-- A new memory makes the list when it is not full or the memory beats the least there, which
-- then leaves.
CREATE TRIGGER psyche_salient_insert AFTER INSERT ON psyche_memories
WHEN (SELECT count(*) FROM psyche_salient WHERE soul = new.soul) < 20
  OR (new.salience, new.id) > (SELECT salience, memory FROM psyche_salient
                               WHERE soul = new.soul ORDER BY salience, memory LIMIT 1)
BEGIN
    INSERT INTO psyche_salient (soul, salience, memory) VALUES (new.soul, new.salience, new.id);
    DELETE FROM psyche_salient
    WHERE soul = new.soul
      AND (SELECT count(*) FROM psyche_salient WHERE soul = new.soul) > 20
      AND (salience, memory) = (SELECT salience, memory FROM psyche_salient
                                WHERE soul = new.soul ORDER BY salience, memory LIMIT 1);
END;

-- A memory grown more salient: on the list, its entry follows; off it, it enters as a new one
-- would.
CREATE TRIGGER psyche_salient_rise AFTER UPDATE OF salience ON psyche_memories
WHEN new.salience > old.salience
 AND (EXISTS (SELECT 1 FROM psyche_salient WHERE soul = new.soul AND memory = new.id)
      OR (SELECT count(*) FROM psyche_salient WHERE soul = new.soul) < 20
      OR (new.salience, new.id) > (SELECT salience, memory FROM psyche_salient
                                   WHERE soul = new.soul ORDER BY salience, memory LIMIT 1))
BEGIN
    DELETE FROM psyche_salient WHERE soul = new.soul AND salience = old.salience AND memory = new.id;
    INSERT INTO psyche_salient (soul, salience, memory) VALUES (new.soul, new.salience, new.id);
    DELETE FROM psyche_salient
    WHERE soul = new.soul
      AND (SELECT count(*) FROM psyche_salient WHERE soul = new.soul) > 20
      AND (salience, memory) = (SELECT salience, memory FROM psyche_salient
                                WHERE soul = new.soul ORDER BY salience, memory LIMIT 1);
END;

-- A memory on the list grown less salient, or deleted, leaves it; the best of the others takes
-- the free place (a scan: the psyche never lowers a salience nor deletes a memory).
CREATE TRIGGER psyche_salient_fall AFTER UPDATE OF salience ON psyche_memories
WHEN new.salience < old.salience
 AND EXISTS (SELECT 1 FROM psyche_salient WHERE soul = old.soul AND memory = old.id)
BEGIN
    DELETE FROM psyche_salient WHERE soul = old.soul AND memory = old.id;
    INSERT INTO psyche_salient (soul, salience, memory)
    SELECT soul, salience, id FROM psyche_memories m
    WHERE soul = old.soul
      AND NOT EXISTS (SELECT 1 FROM psyche_salient s WHERE s.soul = m.soul AND s.memory = m.id)
    ORDER BY salience DESC, id DESC LIMIT 1;
END;

CREATE TRIGGER psyche_salient_delete AFTER DELETE ON psyche_memories
WHEN EXISTS (SELECT 1 FROM psyche_salient WHERE soul = old.soul AND memory = old.id)
BEGIN
    DELETE FROM psyche_salient WHERE soul = old.soul AND memory = old.id;
    INSERT INTO psyche_salient (soul, salience, memory)
    SELECT soul, salience, id FROM psyche_memories m
    WHERE soul = old.soul
      AND NOT EXISTS (SELECT 1 FROM psyche_salient s WHERE s.soul = m.soul AND s.memory = m.id)
    ORDER BY salience DESC, id DESC LIMIT 1;
END;
