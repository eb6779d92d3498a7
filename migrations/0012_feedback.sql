-- Version 12: what people say of the soul's replies, and the openings done once per place.
-- Released: never edit; add 0013_… instead.

-- One row per (reply, person): the latest value they gave it.
CREATE TABLE feedback (
    inbox_id  INTEGER NOT NULL REFERENCES inbox (id),
    person    TEXT    NOT NULL,
    value     TEXT    NOT NULL CHECK (value IN ('good', 'bad')),
    at_ms     INTEGER NOT NULL,     -- unix ms of the latest click
    PRIMARY KEY (inbox_id, person)
);

-- Feedback names a reply by the surface's reference of the message it went into.
CREATE INDEX inbox_by_reply_ref ON inbox (reply_ref) WHERE reply_ref IS NOT NULL;
CREATE INDEX inbox_by_stream_ref ON inbox (stream_ref) WHERE stream_ref IS NOT NULL;

-- Things the surface does once per place, across restarts: a greeting when a person opens a
-- conversation, a title from a conversation's first message.
CREATE TABLE openings (
    kind   TEXT    NOT NULL,        -- greeting | title
    place  TEXT    NOT NULL,        -- the surface's name of the place
    at_ms  INTEGER NOT NULL,
    PRIMARY KEY (kind, place)
);
