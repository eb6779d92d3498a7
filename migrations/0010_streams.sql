-- Version 10: replies streamed as they are written. Released: never edit; add 0011_… instead.

-- The surface's reference of a reply streamed into one message, stored as soon as the stream
-- began: after a crash, a retry or an expired stream, the row's reply goes into that same
-- message (rewritten in place), never a second one.
ALTER TABLE inbox ADD COLUMN stream_ref TEXT;
-- A row whose turn the person stopped: status 'stopped', its reply what was shown by then.
