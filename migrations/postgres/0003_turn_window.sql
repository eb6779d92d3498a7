-- A turn's reads in the size of its window, whatever the conversation's length, and its recent
-- entries as rows.
--
-- Measured per turn on a 2-core machine (track_functions, 2,000 turns over 50 threads): finding
-- the window's start by numbering everything said since the conversation began was the largest
-- part of the context read, and grows with the conversation; building its entries as JSON, and
-- parsing that JSON again in anima, cost more than sending them as rows; and a SQL function
-- that cannot be inlined is planned again on every call (anima_user: 51 µs as SQL, 9 as
-- plpgsql, whose plans are kept per session).

CREATE OR REPLACE FUNCTION anima_user(p_user text) RETURNS json
LANGUAGE plpgsql STABLE AS $$
BEGIN
    RETURN (SELECT json_build_object(
                'user_id', user_id, 'display_name', display_name, 'slug', slug, 'turns', turns,
                'injected_at_turn', injected_at_turn, 'model', model,
                'model_version', model_version, 'exported_version', exported_version)
            FROM users WHERE user_id = p_user);
END $$;

-- How many things were said (messages and replies) in the conversation since `since_id`:
-- what the window counts. Kept by every writer of what was said, under the thread's row lock:
-- a message (anima_record_message), a turn's commit, a reset (0) and a dream's pruning. So a
-- thread's row exists from its first message.
ALTER TABLE threads ADD COLUMN said bigint NOT NULL DEFAULT 0;

-- Counts `said` for every thread from what is stored: once here, and after `anima store copy`.
CREATE FUNCTION anima_count_said() RETURNS void
LANGUAGE sql AS $$
    INSERT INTO threads (thread, updated_at)
    SELECT thread, max(created_at) FROM working_memory GROUP BY thread
    ON CONFLICT (thread) DO NOTHING;
    UPDATE threads t
       SET said = (SELECT count(*) FROM working_memory w
                    WHERE w.thread = t.thread AND w.id > t.since_id
                      AND w.entry_type IN ('userMessage', 'externalDialog'));
$$;
SELECT anima_count_said();

DROP FUNCTION anima_begin_turn(text, text, text, text, text, text, text, bigint, text, text,
                               bigint, integer, bigint);
DROP FUNCTION anima_turn_context(text, text, integer);

-- A person's message, recorded once however often it is retried (`p_source`), its author
-- upserted and its thread's `said` counted; the entry's id. The slug is fixed when the user is
-- first seen (so a renamed person keeps their file); `p_other_slug` is theirs if someone else
-- holds `p_slug`.
CREATE OR REPLACE FUNCTION anima_record_message(p_thread text, p_user text, p_name text,
                                                p_slug text, p_other_slug text, p_content text,
                                                p_source text, p_now bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
BEGIN
    -- The person's row is every one of their turns': written (and so locked until the turn's
    -- commit) only when they are new or renamed.
    PERFORM 1 FROM users WHERE user_id = p_user AND display_name = p_name;
    IF NOT FOUND THEN
        INSERT INTO users (user_id, display_name, slug, updated_at)
        VALUES (p_user, p_name,
                CASE WHEN EXISTS (SELECT 1 FROM users WHERE slug = p_slug AND user_id <> p_user)
                     THEN p_other_slug ELSE p_slug END,
                anima_at(p_now))
        ON CONFLICT (user_id) DO UPDATE SET display_name = excluded.display_name;
    END IF;
    IF p_source IS NOT NULL THEN
        SELECT id INTO v_id FROM working_memory WHERE source = p_source;
        IF FOUND THEN
            RETURN v_id;
        END IF;
    END IF;
    INSERT INTO working_memory (thread, entry_type, content, user_id, metadata, source, created_at)
    VALUES (p_thread, 'userMessage', p_content, p_user, jsonb_build_object('name', p_name),
            p_source, anima_at(p_now))
    ON CONFLICT (source) DO NOTHING
    RETURNING id INTO v_id;
    IF v_id IS NULL THEN
        -- A twin of the message committed it while this one waited on its key.
        SELECT id INTO v_id FROM working_memory WHERE source = p_source;
        RETURN v_id;
    END IF;
    -- Counted only if it is in the conversation: a reset that committed while this insert was
    -- in flight may have closed the conversation after it. Updating first: an upsert's
    -- attempted insert costs more than the update it usually becomes.
    UPDATE threads SET said = said + 1 WHERE thread = p_thread AND since_id < v_id;
    IF NOT FOUND THEN
        -- The thread's first message, or one after a reset: a first message at the same time
        -- counts itself in the row the other made.
        INSERT INTO threads (thread, said, updated_at) VALUES (p_thread, 1, anima_at(p_now))
        ON CONFLICT (thread) DO UPDATE SET said = threads.said + 1
            WHERE threads.since_id < v_id;
    END IF;
    RETURN v_id;
END $$;

-- What a turn reads, as one snapshot (memory::TurnContext): a first row whose `head` holds the
-- thread's counts and session, the soul, the person and the thread's process, then the
-- recent window's entries oldest first, one a row. The window counts what was said, as
-- memory::working: its start moves `p_window / 2` things said at a time so that the prompt's
-- beginning stays the same between moves. `interaction` is the number the next message would
-- take.
CREATE FUNCTION anima_turn_context(p_thread text, p_user text, p_window integer)
    RETURNS TABLE (part text, head json, id bigint, entry_type text, content text, verb text,
                   user_id text, metadata jsonb, at bigint)
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_turns bigint;
    v_session text;
    v_since bigint;
    v_said bigint;
    v_step bigint;
    v_keep bigint;
    v_start bigint;
BEGIN
    SELECT t.turns, t.claude_session, t.since_id, t.said INTO v_turns, v_session, v_since, v_said
      FROM threads t WHERE t.thread = p_thread;
    v_turns := coalesce(v_turns, 0);
    v_since := coalesce(v_since, 0);
    v_said := coalesce(v_said, 0);
    RETURN QUERY SELECT 'context', json_build_object(
        'interaction', (SELECT c.value + 1 FROM counters c WHERE c.name = 'interactions'),
        'thread_turns', v_turns,
        'claude_session', v_session,
        'since_id', v_since,
        'cognitive_state', (SELECT s.state FROM cognitive_state s WHERE s.id = 1),
        'summary', (SELECT s.summary FROM thread_summaries s
                     WHERE s.thread = p_thread AND s.since_id = v_since),
        'soul', (SELECT coalesce(json_object_agg(m.key, m.value), '{}') FROM soul_memory m),
        'user', anima_user(p_user),
        'process', (SELECT json_build_object('current', p.current, 'previous', p.previous,
                                             'invocations', p.invocations, 'params', p.params)
                      FROM thread_process p WHERE p.thread = p_thread)),
        NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::text, NULL::jsonb, NULL::bigint;
    IF p_window > 0 THEN
        -- How many things said the window keeps, read back from the newest: its size.
        v_step := greatest(p_window / 2, 1);
        v_keep := v_said - (greatest(v_said - p_window, 0) / v_step) * v_step;
        SELECT coalesce(min(s.id), 0) INTO v_start
          FROM (SELECT w.id FROM working_memory w
                 WHERE w.thread = p_thread AND w.id > v_since
                   AND w.entry_type IN ('userMessage', 'externalDialog')
                 ORDER BY w.id DESC LIMIT v_keep) s;
        RETURN QUERY SELECT 'entry', NULL::json, w.id, w.entry_type, w.content, w.verb,
                            w.user_id, w.metadata, anima_ms(w.created_at)
          FROM working_memory w
         WHERE w.thread = p_thread AND w.id > v_since AND w.id >= v_start
         ORDER BY w.id;
    END IF;
END $$;

-- A message turn begins: the message recorded, the inbox row's attempt counted, a whisper
-- claimed (SKIP LOCKED: turns at once claim distinct ones), the context read (its rows, as
-- anima_turn_context's), and the interaction counted (under the counter's row lock, so turns
-- at once get distinct numbers): a last row, `begun`, with the entry's id, the number and the
-- whisper.
CREATE FUNCTION anima_begin_turn(p_thread text, p_user text, p_name text, p_slug text,
                                 p_other_slug text, p_content text, p_source text,
                                 p_inbox bigint, p_instance text, p_claimant text,
                                 p_claim_until bigint, p_window integer, p_now bigint)
    RETURNS TABLE (part text, head json, id bigint, entry_type text, content text, verb text,
                   user_id text, metadata jsonb, at bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
    v_interaction bigint;
    v_whisper json;
BEGIN
    v_id := anima_record_message(p_thread, p_user, p_name, p_slug, p_other_slug, p_content,
                                 p_source, p_now);
    IF p_inbox IS NOT NULL THEN
        UPDATE inbox SET attempts = attempts + 1, in_flight = p_instance WHERE inbox.id = p_inbox;
    END IF;
    UPDATE whispers w SET claimed_by = p_claimant, claimed_until = anima_at(p_claim_until)
     WHERE w.id = (SELECT o.id FROM whispers o
                    WHERE o.consumed_at IS NULL
                      AND (o.claimed_until IS NULL OR o.claimed_until < anima_at(p_now))
                    ORDER BY o.id LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING json_build_object('id', w.id, 'text', w.whisper, 'source', w.source)
         INTO v_whisper;
    RETURN QUERY SELECT * FROM anima_turn_context(p_thread, p_user, p_window);
    -- Last: every turn waits on this row, so it is held only until this statement commits.
    UPDATE counters SET value = value + 1 WHERE name = 'interactions'
    RETURNING value INTO v_interaction;
    RETURN QUERY SELECT 'begun', json_build_object('id', v_id, 'interaction', v_interaction,
                                                   'whisper', v_whisper),
        NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::text, NULL::jsonb, NULL::bigint;
END $$;

-- Everything a turn leaves (memory::TurnRecord as jsonb, written by turns.rs), in order: its
-- entries; the thread's counts, under its row lock (an operator's reset waits for the turn; a
-- reset that came first leaves the turn's exchange in the closed conversation); soul keys;
-- the process and its transitions; the whisper consumed; usage; the reply fixed on its inbox
-- row; the person's count and model. The person's row if their model changed, else NULL.
CREATE OR REPLACE FUNCTION anima_commit_turn(r jsonb, p_now bigint) RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
    v_thread text := r->>'thread';
    v_user text := r->>'user_id';
    v_interaction bigint := (r->>'interaction')::bigint;
    v_proactive boolean := (r->>'proactive')::boolean;
    v_began bigint := (r->>'since_id')::bigint;
    v_current bigint;
    v_reset boolean := false;
    v_said bigint := 0;
    v_process jsonb := r->'process';
    x jsonb;
BEGIN
    -- One insert a row: cheaper, for a turn's few entries, than a set-returning insert's
    -- sort and scan.
    FOR x IN SELECT e FROM jsonb_array_elements(r->'entries') WITH ORDINALITY AS a(e, n)
             ORDER BY n LOOP
        INSERT INTO working_memory (thread, entry_type, content, verb, user_id, metadata,
                                    created_at)
        VALUES (v_thread, x->>'entry_type', x->>'content', x->>'verb', x->>'user_id',
                x->'metadata', anima_at(p_now));
        IF x->>'entry_type' IN ('userMessage', 'externalDialog') THEN
            v_said := v_said + 1;
        END IF;
    END LOOP;
    -- The thread's row, counted, if the conversation is still the one the turn began in (the
    -- condition is checked again on the row once it is locked, as for every UPDATE).
    UPDATE threads SET turns = turns + CASE WHEN v_proactive THEN 0 ELSE 1 END,
                       claude_session = coalesce(r->>'claude_session', claude_session),
                       said = said + v_said, updated_at = anima_at(p_now)
     WHERE thread = v_thread AND (v_began IS NULL OR since_id = v_began);
    IF NOT FOUND THEN
        SELECT since_id INTO v_current FROM threads WHERE thread = v_thread FOR UPDATE;
        v_reset := FOUND;
        IF v_reset THEN
            -- An operator closed the conversation during the turn: its exchange goes with it.
            -- A fresh snapshot, after the lock: every entry of the thread committed by now.
            UPDATE threads SET since_id = (SELECT coalesce(max(w.id), 0) FROM working_memory w
                                            WHERE w.thread = v_thread),
                               said = 0, updated_at = anima_at(p_now)
             WHERE thread = v_thread;
        ELSE
            -- A thread's first turn with no message before it (a proactive one).
            INSERT INTO threads (thread, turns, claude_session, said, updated_at)
            VALUES (v_thread, CASE WHEN v_proactive THEN 0 ELSE 1 END, r->>'claude_session',
                    v_said, anima_at(p_now))
            ON CONFLICT (thread) DO UPDATE SET turns = threads.turns + excluded.turns,
                claude_session = coalesce(excluded.claude_session, threads.claude_session),
                said = threads.said + excluded.said, updated_at = excluded.updated_at;
        END IF;
    END IF;
    IF jsonb_array_length(r->'soul_updates') > 0 THEN
        INSERT INTO soul_memory (key, value, updated_at)
        SELECT u->>0, u->>1, anima_at(p_now)
          FROM jsonb_array_elements(r->'soul_updates') WITH ORDINALITY AS a(u, n)
         ORDER BY n
        ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at;
    END IF;
    IF jsonb_typeof(v_process) = 'object' AND NOT v_reset THEN
        INSERT INTO thread_process (thread, current, previous, invocations, params, updated_at)
        VALUES (v_thread, v_process->>'current', v_process->>'previous',
                (v_process->>'invocations')::bigint, v_process->'params', anima_at(p_now))
        ON CONFLICT (thread) DO UPDATE SET current = excluded.current,
            previous = excluded.previous, invocations = excluded.invocations,
            params = excluded.params, updated_at = excluded.updated_at;
        IF jsonb_array_length(r->'transitions') > 0 THEN
            INSERT INTO process_transitions (thread, interaction, from_process, to_process,
                                             rule, execute_now, params, at, action)
            SELECT v_thread, v_interaction, t->>'from', t->>'to', (t->>'rule')::integer,
                   (t->>'execute_now')::boolean, t->'params', anima_at(p_now), t->>'action'
              FROM jsonb_array_elements(r->'transitions') WITH ORDINALITY AS a(t, n)
             ORDER BY n;
        END IF;
    END IF;
    IF r->>'whisper_id' IS NOT NULL THEN
        UPDATE whispers SET consumed_at = anima_at(p_now), consumed_by = v_thread,
                            claimed_until = NULL
         WHERE id = (r->>'whisper_id')::bigint AND consumed_at IS NULL
           AND (r->>'whisper_claimant' IS NULL OR claimed_by = r->>'whisper_claimant');
    END IF;
    IF jsonb_array_length(r->'usage') > 0 THEN
        INSERT INTO turn_usage (thread, interaction, provider, model, input_tokens,
                                output_tokens, cache_creation_tokens, cache_read_tokens,
                                latency_ms, stop_reason, created_at)
        SELECT v_thread, v_interaction, u->>'provider', u->>'model',
               (u->>'input_tokens')::bigint, (u->>'output_tokens')::bigint,
               (u->>'cache_creation_tokens')::bigint, (u->>'cache_read_tokens')::bigint,
               (u->>'latency_ms')::bigint, u->>'stop_reason', anima_at(p_now)
          FROM jsonb_array_elements(r->'usage') WITH ORDINALITY AS a(u, n)
         ORDER BY n;
    END IF;
    IF jsonb_typeof(r->'inbox') = 'object' THEN
        UPDATE inbox SET status = 'replying', reply = r->'inbox'->>'reply'
         WHERE id = (r->'inbox'->>'id')::bigint AND status = 'pending';
    END IF;
    -- The person's row last: all their conversations' turns write it, so its lock is held
    -- only until this statement commits.
    IF NOT v_proactive THEN
        UPDATE users SET turns = turns + 1,
               injected_at_turn = CASE WHEN (r->>'injected_user_model')::boolean
                                       THEN turns + 1 ELSE injected_at_turn END,
               updated_at = anima_at(p_now)
         WHERE user_id = v_user;
    END IF;
    IF jsonb_typeof(r->'user_model') = 'object' THEN
        PERFORM anima_save_model(v_user, r->'user_model'->>'model', r->'user_model'->>'note',
                                 p_now);
        RETURN anima_user(v_user);
    END IF;
    RETURN NULL;
END $$;
