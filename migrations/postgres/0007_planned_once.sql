-- No SQL function run where its expression will do, and a conversation's rows found without
-- reading the whole inbox. (anima asks each connection to keep one generic plan per
-- statement: postgres/mod.rs.)
--
-- anima_at, anima_us and anima_at_us were declared IMMUTABLE over arithmetic that is STABLE
-- (timestamptz and interval, extract from a timestamptz: both read the session's time zone),
-- so the planner would not inline them, and every call ran a SQL function of its own (a turn
-- makes a dozen). Declared STABLE, as anima_ms is since 0002, they are inlined.
--
-- anima_claim was a SQL function, which PostgreSQL plans again at every call when it cannot
-- inline it (an INSERT … ON CONFLICT cannot be); as plpgsql its plan is kept per connection.

CREATE OR REPLACE FUNCTION anima_at(ms bigint) RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN timestamptz 'epoch' + ms * interval '1 millisecond';

CREATE OR REPLACE FUNCTION anima_us(t timestamptz) RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN (extract(epoch FROM t) * 1000000)::bigint;

CREATE OR REPLACE FUNCTION anima_at_us(us bigint) RETURNS timestamptz
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN timestamptz 'epoch' + us * interval '1 microsecond';

-- As in 0004: the epoch, or NULL while another daemon's lease runs.
CREATE OR REPLACE FUNCTION anima_claim(p_conversation text, p_daemon text, p_lease_ms bigint)
    RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_epoch bigint;
BEGIN
    INSERT INTO conversation_claims AS c (conversation, daemon, epoch, lease_until)
    VALUES (p_conversation, p_daemon, 1,
            clock_timestamp() + p_lease_ms * interval '1 millisecond')
    ON CONFLICT (conversation) DO UPDATE
        SET daemon = excluded.daemon,
            epoch = CASE WHEN c.daemon = excluded.daemon AND c.lease_until > clock_timestamp()
                         THEN c.epoch ELSE c.epoch + 1 END,
            lease_until = excluded.lease_until
        WHERE c.daemon = excluded.daemon OR c.lease_until <= clock_timestamp()
    RETURNING c.epoch INTO v_epoch;
    RETURN v_epoch;
END $$;

-- Every row of a conversation, done ones included: the references its replies hold (read
-- before every reply's first post) and its latest address. inbox_open holds only open rows,
-- so these read the whole inbox.
CREATE INDEX inbox_by_conversation ON inbox (conversation, id);
