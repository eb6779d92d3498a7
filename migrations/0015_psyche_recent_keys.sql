-- Version 15: the keys of the soul's latest events live in its state's row (issue 12). Released:
-- never edit; add 0016_… instead.

-- "at<TAB>key<LF>" for each of the newest applied events (memory::psyche::seen). The row is
-- written by every event anyway, so marking an event applied costs no page of its own; once
-- the list reaches RECENT_BYTES it moves into psyche_seen, where the older keys have always been.
ALTER TABLE psyche_substrate ADD COLUMN recent_keys TEXT NOT NULL DEFAULT '';
