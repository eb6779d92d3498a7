-- Version 18: every message of a reply is known to its row (issue 23). Released: never edit;
-- add 0019_… instead.

-- The surface's reference of each part delivered (a JSON array, in order), not only the
-- first (`reply_ref`). A message the inbox assigned to one row is never taken for another's
-- when a reply is looked for after a crash and the surface cannot say whose a message is
-- (Slack's answer without the message's metadata): memory::inbox::references_held.
ALTER TABLE inbox ADD COLUMN part_refs TEXT NOT NULL DEFAULT '[]';
