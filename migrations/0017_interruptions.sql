-- Version 17: a message whose turn a dying process interrupted is not a poison message (issue
-- 23). Released: never edit; add 0018_… instead.

-- `attempts` keeps counting the pick-ups that began work on a row (a turn, or the delivery of
-- a fixed reply). Of those, `failures` ended in an error or a panic that the router caught
-- and recorded; `interruptions` were begun by a process that stopped before it ended them (a
-- SIGKILL, an OOM kill, a crash, a shutdown that could not wait). `in_flight` names the store
-- instance (one per process) whose attempt is under way, until it fails or the row is
-- claimed by another instance, which then counts the interruption. A row is given up after a
-- few failures, or after many more interruptions (memory::inbox::MAX_FAILURES,
-- MAX_INTERRUPTIONS). Rows open at the upgrade start with none of either.
ALTER TABLE inbox ADD COLUMN failures INTEGER NOT NULL DEFAULT 0;
ALTER TABLE inbox ADD COLUMN interruptions INTEGER NOT NULL DEFAULT 0;
ALTER TABLE inbox ADD COLUMN in_flight TEXT;
