-- A turn's store work as one statement each way: begun, read, committed.
--
-- On PostgreSQL every statement a client sends costs a round trip and the server's work per
-- protocol message, pipelined or not (measured with pgbench on a 2-core machine: about 80 µs a
-- statement, against about 10 µs for the same statement inside a function), and a turn's begin
-- and commit are two dozen statements. As functions, a turn is two round trips whatever its size.
-- src/memory/postgres/turns.rs calls them and maps their json to and from its own types;
-- what each promises is memory::turn's. Each call is one statement, so one transaction.

-- They return json, not jsonb: built once and read once by anima, never stored or queried,
-- and json is built several times faster; a turn's recent entries go as arrays, not objects.

-- Milliseconds by the double-precision epoch, exact for any millisecond timestamp, and STABLE
-- as date_part is: so the planner inlines it instead of calling a function for every row read
-- (a turn's context read three times faster).
CREATE OR REPLACE FUNCTION anima_ms(t timestamptz) RETURNS bigint
    LANGUAGE sql STABLE PARALLEL SAFE
    RETURN (date_part('epoch', t) * 1000)::bigint;

-- What was said in a thread (its messages and replies): a turn's window counts these, and finds
-- where it starts, without reading the thread's every thought.
CREATE INDEX working_memory_said ON working_memory (thread, id)
    WHERE entry_type IN ('userMessage', 'externalDialog');

-- A user's row as the store's readers see it; NULL for someone never seen.
CREATE FUNCTION anima_user(p_user text) RETURNS json
    LANGUAGE sql STABLE
    RETURN (SELECT json_build_object(
                'user_id', user_id, 'display_name', display_name, 'slug', slug, 'turns', turns,
                'injected_at_turn', injected_at_turn, 'model', model,
                'model_version', model_version, 'exported_version', exported_version)
            FROM users WHERE user_id = p_user);

-- A new version of a user's model with its change note (`model_version` bumped, a history
-- row); with `p_expected`, only while the model is still at that version. Whether it was saved.
CREATE FUNCTION anima_save_model(p_user text, p_model text, p_note text, p_now bigint,
                                 p_expected bigint DEFAULT NULL) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_version bigint;
BEGIN
    UPDATE users SET model = p_model, model_version = model_version + 1,
                     updated_at = anima_at(p_now)
     WHERE user_id = p_user AND (p_expected IS NULL OR model_version = p_expected)
    RETURNING model_version INTO v_version;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    INSERT INTO user_model_history (user_id, version, model, change_note, created_at)
    VALUES (p_user, v_version, p_model, p_note, anima_at(p_now));
    RETURN true;
END $$;

-- A person's message, recorded once however often it is retried (`p_source`), its author
-- upserted; the entry's id. The slug is fixed when the user is first seen (so a renamed person
-- keeps their file); `p_other_slug` is theirs if someone else holds `p_slug`.
CREATE FUNCTION anima_record_message(p_thread text, p_user text, p_name text, p_slug text,
                                     p_other_slug text, p_content text, p_source text,
                                     p_now bigint) RETURNS bigint
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
    END IF;
    RETURN v_id;
END $$;

-- What a turn reads, as one snapshot (memory::TurnContext): the thread's counts and session,
-- its recent window (the window counts what was said, as memory::working), the soul, the
-- person, the thread's process. `interaction` is the number the next message would take.
CREATE FUNCTION anima_turn_context(p_thread text, p_user text, p_window integer) RETURNS json
LANGUAGE plpgsql STABLE AS $$
DECLARE
    v_turns bigint;
    v_session text;
    v_since bigint;
    v_step bigint;
    v_start bigint;
    v_recent json := '[]';
BEGIN
    SELECT turns, claude_session, since_id INTO v_turns, v_session, v_since
      FROM threads WHERE thread = p_thread;
    v_turns := coalesce(v_turns, 0);
    v_since := coalesce(v_since, 0);
    IF p_window > 0 THEN
        -- The window starts at the first thing said that it keeps, and moves `v_step` messages
        -- at a time so that the prompt's beginning stays the same between moves: one pass over
        -- what was said finds it.
        v_step := greatest(p_window / 2, 1);
        SELECT coalesce(min(id) FILTER (WHERE n > (greatest(said - p_window, 0) / v_step) * v_step),
                        0)
          INTO v_start
          FROM (SELECT id, row_number() OVER (ORDER BY id) AS n, count(*) OVER () AS said
                  FROM working_memory
                 WHERE thread = p_thread AND id > v_since
                   AND entry_type IN ('userMessage', 'externalDialog')) s;
        SELECT coalesce(json_agg(json_build_array(
                   id, thread, entry_type, content, verb, user_id, metadata, anima_ms(created_at))
                   ORDER BY id), '[]')
          INTO v_recent
          FROM working_memory
         WHERE thread = p_thread AND id > v_since AND id >= v_start;
    END IF;
    RETURN json_build_object(
        'interaction', (SELECT value + 1 FROM counters WHERE name = 'interactions'),
        'thread_turns', v_turns,
        'claude_session', v_session,
        'since_id', v_since,
        'cognitive_state', (SELECT state FROM cognitive_state WHERE id = 1),
        'summary', (SELECT summary FROM thread_summaries
                     WHERE thread = p_thread AND since_id = v_since),
        'recent', v_recent,
        'soul', (SELECT coalesce(json_object_agg(key, value), '{}') FROM soul_memory),
        'user', anima_user(p_user),
        'process', (SELECT json_build_object('current', current, 'previous', previous,
                                             'invocations', invocations, 'params', params)
                      FROM thread_process WHERE thread = p_thread));
END $$;

-- A message turn begins: the message recorded, the inbox row's attempt counted, a whisper
-- claimed (SKIP LOCKED: turns at once claim distinct ones), the context read, and the
-- interaction counted (under the counter's row lock, so turns at once get distinct numbers).
CREATE FUNCTION anima_begin_turn(p_thread text, p_user text, p_name text, p_slug text,
                                 p_other_slug text, p_content text, p_source text,
                                 p_inbox bigint, p_instance text, p_claimant text,
                                 p_claim_until bigint, p_window integer, p_now bigint)
    RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
    v_id bigint;
    v_interaction bigint;
    v_whisper json;
    v_context json;
BEGIN
    v_id := anima_record_message(p_thread, p_user, p_name, p_slug, p_other_slug, p_content,
                                 p_source, p_now);
    IF p_inbox IS NOT NULL THEN
        UPDATE inbox SET attempts = attempts + 1, in_flight = p_instance WHERE id = p_inbox;
    END IF;
    UPDATE whispers SET claimed_by = p_claimant, claimed_until = anima_at(p_claim_until)
     WHERE id = (SELECT id FROM whispers
                  WHERE consumed_at IS NULL
                    AND (claimed_until IS NULL OR claimed_until < anima_at(p_now))
                  ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED)
    RETURNING json_build_object('id', id, 'text', whisper, 'source', source) INTO v_whisper;
    v_context := anima_turn_context(p_thread, p_user, p_window);
    -- Last: every turn waits on this row, so it is held only until this statement commits.
    UPDATE counters SET value = value + 1 WHERE name = 'interactions'
    RETURNING value INTO v_interaction;
    RETURN json_build_object('id', v_id, 'interaction', v_interaction, 'whisper', v_whisper,
                             'context', v_context);
END $$;

-- Everything a turn leaves (memory::TurnRecord as jsonb, written by turns.rs), in order: its
-- entries; the thread's row locked (an operator's reset waits for the turn; a reset that came
-- first leaves the turn's exchange in the closed conversation); soul keys; the thread's count;
-- the process and its transitions; the whisper consumed; usage; the reply fixed on its inbox
-- row; the person's count and model. The person's row if their model changed, else NULL.
CREATE FUNCTION anima_commit_turn(r jsonb, p_now bigint) RETURNS json
LANGUAGE plpgsql AS $$
DECLARE
    v_thread text := r->>'thread';
    v_user text := r->>'user_id';
    v_interaction bigint := (r->>'interaction')::bigint;
    v_proactive boolean := (r->>'proactive')::boolean;
    v_began bigint := (r->>'since_id')::bigint;
    v_current bigint;
    v_reset boolean;
    v_process jsonb := r->'process';
    x jsonb;
BEGIN
    FOR x IN SELECT e FROM jsonb_array_elements(r->'entries') WITH ORDINALITY AS a(e, n)
             ORDER BY n LOOP
        INSERT INTO working_memory (thread, entry_type, content, verb, user_id, metadata,
                                    created_at)
        VALUES (v_thread, x->>'entry_type', x->>'content', x->>'verb', x->>'user_id',
                x->'metadata', anima_at(p_now));
    END LOOP;
    SELECT since_id INTO v_current FROM threads WHERE thread = v_thread FOR UPDATE;
    v_reset := coalesce(v_began <> v_current, false);
    IF v_reset THEN
        UPDATE threads SET since_id = (SELECT coalesce(max(id), 0) FROM working_memory
                                        WHERE thread = v_thread),
                           updated_at = anima_at(p_now)
         WHERE thread = v_thread;
    END IF;
    FOR x IN SELECT u FROM jsonb_array_elements(r->'soul_updates') WITH ORDINALITY AS a(u, n)
             ORDER BY n LOOP
        INSERT INTO soul_memory (key, value, updated_at) VALUES (x->>0, x->>1, anima_at(p_now))
        ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at;
    END LOOP;
    INSERT INTO threads (thread, turns, claude_session, updated_at)
    VALUES (v_thread, CASE WHEN v_proactive OR v_reset THEN 0 ELSE 1 END,
            CASE WHEN v_reset THEN NULL ELSE r->>'claude_session' END, anima_at(p_now))
    ON CONFLICT (thread) DO UPDATE SET turns = threads.turns + excluded.turns,
        claude_session = coalesce(excluded.claude_session, threads.claude_session),
        updated_at = excluded.updated_at;
    IF jsonb_typeof(v_process) = 'object' AND NOT v_reset THEN
        INSERT INTO thread_process (thread, current, previous, invocations, params, updated_at)
        VALUES (v_thread, v_process->>'current', v_process->>'previous',
                (v_process->>'invocations')::bigint, v_process->'params', anima_at(p_now))
        ON CONFLICT (thread) DO UPDATE SET current = excluded.current,
            previous = excluded.previous, invocations = excluded.invocations,
            params = excluded.params, updated_at = excluded.updated_at;
        FOR x IN SELECT t FROM jsonb_array_elements(r->'transitions') WITH ORDINALITY AS a(t, n)
                 ORDER BY n LOOP
            INSERT INTO process_transitions (thread, interaction, from_process, to_process, rule,
                                             execute_now, params, at, action)
            VALUES (v_thread, v_interaction, x->>'from', x->>'to', (x->>'rule')::integer,
                    (x->>'execute_now')::boolean, x->'params', anima_at(p_now), x->>'action');
        END LOOP;
    END IF;
    IF r->>'whisper_id' IS NOT NULL THEN
        UPDATE whispers SET consumed_at = anima_at(p_now), consumed_by = v_thread,
                            claimed_until = NULL
         WHERE id = (r->>'whisper_id')::bigint AND consumed_at IS NULL
           AND (r->>'whisper_claimant' IS NULL OR claimed_by = r->>'whisper_claimant');
    END IF;
    FOR x IN SELECT u FROM jsonb_array_elements(r->'usage') WITH ORDINALITY AS a(u, n)
             ORDER BY n LOOP
        INSERT INTO turn_usage (thread, interaction, provider, model, input_tokens,
                                output_tokens, cache_creation_tokens, cache_read_tokens,
                                latency_ms, stop_reason, created_at)
        VALUES (v_thread, v_interaction, x->>'provider', x->>'model',
                (x->>'input_tokens')::bigint, (x->>'output_tokens')::bigint,
                (x->>'cache_creation_tokens')::bigint, (x->>'cache_read_tokens')::bigint,
                (x->>'latency_ms')::bigint, x->>'stop_reason', anima_at(p_now));
    END LOOP;
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
