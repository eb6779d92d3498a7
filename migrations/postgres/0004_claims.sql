-- Several daemons on one soul: which daemon works which conversation, and which daemons live.
--
-- A conversation is worked by the daemon holding its claim. A claim is a lease on the
-- server's clock (so a daemon whose own clock is off claims and renews like any other), and
-- an epoch that moves every time the conversation changes hands: a daemon writes and posts for
-- a conversation only while it holds the claim at the epoch it took (the turn's commit checks
-- it in its own transaction). Rows stay when a claim is let go, so epochs only grow.
CREATE TABLE conversation_claims (
    conversation  text PRIMARY KEY,
    daemon        text        NOT NULL,
    epoch         bigint      NOT NULL,
    lease_until   timestamptz NOT NULL
);
CREATE INDEX conversation_claims_by_daemon ON conversation_claims (daemon);

-- Every daemon that runs, with its heartbeat: what `anima state` shows, and how a daemon knows
-- whether it is the soul's first (it wakes the soul) or last (it puts it to sleep).
CREATE TABLE daemons (
    daemon        text PRIMARY KEY,
    host          text        NOT NULL,
    pid           bigint      NOT NULL,
    started_at    timestamptz NOT NULL,
    heartbeat_at  timestamptz NOT NULL,
    lease_until   timestamptz NOT NULL
);

-- Takes `p_conversation` for `p_daemon`, or renews its own claim, for `p_lease_ms`: the
-- epoch, or NULL while another daemon's lease runs. A claim taken again after it lapsed or was
-- let go (even by the same daemon) is a new epoch.
CREATE FUNCTION anima_claim(p_conversation text, p_daemon text, p_lease_ms bigint)
    RETURNS bigint
LANGUAGE sql AS $$
    INSERT INTO conversation_claims AS c (conversation, daemon, epoch, lease_until)
    VALUES (p_conversation, p_daemon, 1,
            clock_timestamp() + p_lease_ms * interval '1 millisecond')
    ON CONFLICT (conversation) DO UPDATE
        SET daemon = excluded.daemon,
            epoch = CASE WHEN c.daemon = excluded.daemon AND c.lease_until > clock_timestamp()
                         THEN c.epoch ELSE c.epoch + 1 END,
            lease_until = excluded.lease_until
        WHERE c.daemon = excluded.daemon OR c.lease_until <= clock_timestamp()
    RETURNING epoch;
$$;

-- Fails (SQLSTATE AN409) unless `p_daemon` holds `p_conversation` at `p_epoch` with its lease
-- running; the claim's row is then held (FOR SHARE) until the caller's transaction ends, so no
-- one takes the conversation while what the check guards is being written.
CREATE FUNCTION anima_fence(p_conversation text, p_daemon text, p_epoch bigint) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM conversation_claims
     WHERE conversation = p_conversation AND daemon = p_daemon AND epoch = p_epoch
       AND lease_until > clock_timestamp()
       FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'conversation % is no longer this daemon''s (epoch %)',
                        p_conversation, p_epoch
              USING ERRCODE = 'AN409';
    END IF;
END $$;

-- The commit of 0003, fenced: a turn that carries a claim (`r->'claim'`, its epoch) commits
-- only while its daemon (`r->>'daemon'`) still holds the conversation at that epoch.
CREATE FUNCTION anima_commit_claimed(r jsonb, p_now bigint) RETURNS json
LANGUAGE plpgsql AS $$
BEGIN
    IF jsonb_typeof(r->'claim') = 'number' THEN
        PERFORM anima_fence(r->>'thread', r->>'daemon', (r->>'claim')::bigint);
    END IF;
    RETURN anima_commit_turn(r, p_now);
END $$;
