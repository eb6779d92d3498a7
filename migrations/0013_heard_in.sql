-- Version 13: where an overheard message was heard (issue 12). Released: never edit; add
-- 0014_… instead.

-- The place (for Slack: the channel) a message that did not address the soul was heard in;
-- NULL for every other row. On a tick, the soul may come back to the last message heard in a
-- place where it may speak unasked (see router::Router::tick).
ALTER TABLE inbox ADD COLUMN heard_in TEXT;
CREATE INDEX inbox_heard ON inbox (id) WHERE heard_in IS NOT NULL;
