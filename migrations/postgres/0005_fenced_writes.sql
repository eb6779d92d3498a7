-- Every write a daemon makes for a conversation is fenced, as the commit is (0004): a daemon
-- that lost the conversation (paused past its lease, say) begins no turn there and changes
-- none of its inbox rows while another daemon holds it. Each write is one call, so fencing it
-- costs no round trip.

-- Fails (SQLSTATE AN409, the conversation as its detail) while a daemon other than `p_daemon`
-- holds the conversation of inbox row `p_id` with its lease running. The claim's row, if
-- there is one, is held (FOR SHARE) until the caller's transaction ends, lapsed or not: no
-- one takes the conversation while the write it guards is being made, so whoever takes it
-- next reads the row as written.
CREATE FUNCTION anima_fence_row(p_id bigint, p_daemon text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_conversation text;
    v_holder text;
    v_running boolean;
BEGIN
    SELECT conversation INTO v_conversation FROM inbox WHERE id = p_id;
    SELECT daemon, lease_until > clock_timestamp() INTO v_holder, v_running
      FROM conversation_claims WHERE conversation = v_conversation FOR SHARE;
    IF v_running AND v_holder <> p_daemon THEN
        RAISE EXCEPTION 'conversation % is another daemon''s', v_conversation
              USING ERRCODE = 'AN409', DETAIL = v_conversation;
    END IF;
END $$;

-- anima_begin_turn (0003), fenced when the turn carries its conversation's claim (`p_epoch`):
-- a daemon that lost the conversation records no message and takes no interaction number or
-- whisper there.
CREATE FUNCTION anima_begin_claimed(p_thread text, p_user text, p_name text, p_slug text,
                                    p_other_slug text, p_content text, p_source text,
                                    p_inbox bigint, p_instance text, p_claimant text,
                                    p_claim_until bigint, p_window integer, p_now bigint,
                                    p_epoch bigint)
    RETURNS TABLE (part text, head json, id bigint, entry_type text, content text, verb text,
                   user_id text, metadata jsonb, at bigint)
LANGUAGE plpgsql AS $$
BEGIN
    IF p_epoch IS NOT NULL THEN
        PERFORM anima_fence(p_thread, p_instance, p_epoch);
    END IF;
    RETURN QUERY SELECT * FROM anima_begin_turn(p_thread, p_user, p_name, p_slug, p_other_slug,
                                                p_content, p_source, p_inbox, p_instance,
                                                p_claimant, p_claim_until, p_window, p_now);
END $$;

-- A reply fixed outside a turn's commit (the provider-down apology): only on a row still
-- pending.
CREATE FUNCTION anima_set_reply(p_id bigint, p_reply text, p_daemon text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM anima_fence_row(p_id, p_daemon);
    UPDATE inbox SET status = 'replying', reply = p_reply WHERE id = p_id AND status = 'pending';
END $$;

-- Part `p_parts` of the row's reply is in Slack as `p_ref` (the last part: the row is done).
-- Monotonic: a part marked late (by a daemon that posted it just before it was paused) never
-- takes the count back, and a reference is kept once.
CREATE FUNCTION anima_part_posted(p_id bigint, p_parts bigint, p_ref text, p_last boolean,
                                  p_now bigint, p_daemon text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM anima_fence_row(p_id, p_daemon);
    UPDATE inbox SET parts_posted = greatest(parts_posted, p_parts),
                     reply_ref = coalesce(reply_ref, p_ref),
                     part_refs = CASE WHEN part_refs ? p_ref THEN part_refs
                                      ELSE part_refs || to_jsonb(p_ref) END,
                     status = CASE WHEN p_last THEN 'done' ELSE status END,
                     done_at = CASE WHEN p_last THEN coalesce(done_at, anima_at(p_now))
                                    ELSE done_at END
     WHERE id = p_id;
    INSERT INTO conversations (key, spoken)
        SELECT conversation, true FROM inbox WHERE id = p_id
        ON CONFLICT (key) DO UPDATE SET spoken = true;
END $$;

-- The message the row's reply streams into.
CREATE FUNCTION anima_stream_ref(p_id bigint, p_ref text, p_daemon text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM anima_fence_row(p_id, p_daemon);
    UPDATE inbox SET stream_ref = p_ref WHERE id = p_id;
    INSERT INTO conversations (key, spoken)
        SELECT conversation, true FROM inbox WHERE id = p_id
        ON CONFLICT (key) DO UPDATE SET spoken = true;
END $$;

CREATE FUNCTION anima_mark_done(p_id bigint, p_now bigint, p_daemon text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM anima_fence_row(p_id, p_daemon);
    UPDATE inbox SET status = 'done', done_at = anima_at(p_now) WHERE id = p_id;
END $$;

-- A row out of attempts, answered with the apology (`p_apology`, its message, if posted):
-- only while it is open (a row answered meanwhile stays answered).
CREATE FUNCTION anima_mark_failed(p_id bigint, p_failure text, p_now bigint, p_apology text,
                                  p_daemon text) RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM anima_fence_row(p_id, p_daemon);
    UPDATE inbox SET status = 'failed', failure = p_failure, done_at = anima_at(p_now),
                     part_refs = CASE WHEN p_apology IS NULL THEN part_refs
                                      ELSE part_refs || to_jsonb(p_apology) END
     WHERE id = p_id AND status IN ('pending', 'replying');
END $$;
