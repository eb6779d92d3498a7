-- anima's store on PostgreSQL: the whole schema of a new database.
--
-- Times are timestamptz; anima reads and writes them as unix milliseconds through anima_ms()
-- and anima_at(). Flags are booleans, structured values jsonb. Surface-owned strings (an
-- address, an origin, a reference) are opaque text: the store never reads inside them.

CREATE FUNCTION anima_ms(t timestamptz) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN (extract(epoch FROM t) * 1000)::bigint;

CREATE FUNCTION anima_at(ms bigint) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN timestamptz 'epoch' + ms * interval '1 millisecond';

-- The same in microseconds (when a message was received, for the reply-overhead metric).
CREATE FUNCTION anima_us(t timestamptz) RETURNS bigint
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN (extract(epoch FROM t) * 1000000)::bigint;

CREATE FUNCTION anima_at_us(us bigint) RETURNS timestamptz
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    RETURN timestamptz 'epoch' + us * interval '1 microsecond';

-- Which process took the store's write probe last (the health check's proof of a write).
CREATE TABLE store_probe (
    id  smallint PRIMARY KEY CHECK (id = 1),
    at  timestamptz NOT NULL
);

----------------------------------------------------------------------------- the inbox
CREATE TABLE inbox (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    origin         text        NOT NULL UNIQUE,   -- retries and twins of one message are one row
    conversation   text        NOT NULL,
    seq            double precision NOT NULL,     -- order within the conversation
    address        text        NOT NULL,
    note           text,
    user_id        text        NOT NULL,
    text           text        NOT NULL,
    status         text        NOT NULL DEFAULT 'pending'
                   CHECK (status IN ('pending', 'replying', 'done', 'failed', 'stopped', 'overheard')),
    reply          text,
    parts_posted   bigint      NOT NULL DEFAULT 0,
    part_refs      jsonb       NOT NULL DEFAULT '[]',
    reply_ref      text,
    stream_ref     text,
    received_at    timestamptz NOT NULL,          -- microseconds kept: the reply-overhead metric
    attempts       bigint      NOT NULL DEFAULT 0,
    failures       bigint      NOT NULL DEFAULT 0,
    interruptions  bigint      NOT NULL DEFAULT 0,
    in_flight      text,                          -- which opening of the store began the attempt
    failure        text,
    heard_in       text,                          -- overheard: the place; NULL: addressed
    done_at        timestamptz
);
CREATE INDEX inbox_open ON inbox (conversation, seq) WHERE status IN ('pending', 'replying');
CREATE INDEX inbox_by_reply_ref ON inbox (reply_ref) WHERE reply_ref IS NOT NULL;
CREATE INDEX inbox_by_stream_ref ON inbox (stream_ref) WHERE stream_ref IS NOT NULL;
CREATE INDEX inbox_heard ON inbox (id) WHERE heard_in IS NOT NULL;

CREATE TABLE conversations (
    key     text PRIMARY KEY,
    spoken  boolean NOT NULL DEFAULT false,
    note    text
);

CREATE TABLE openings (
    kind   text        NOT NULL,
    place  text        NOT NULL,
    at     timestamptz NOT NULL,
    PRIMARY KEY (kind, place)
);

CREATE TABLE feedback (
    inbox_id  bigint      NOT NULL REFERENCES inbox (id),
    person    text        NOT NULL,
    value     text        NOT NULL CHECK (value IN ('good', 'bad')),
    at        timestamptz NOT NULL,
    PRIMARY KEY (inbox_id, person)
);

CREATE TABLE admin_log (
    origin   text PRIMARY KEY,
    user_id  text        NOT NULL,
    command  text        NOT NULL,
    allowed  boolean     NOT NULL,
    done     boolean     NOT NULL DEFAULT false,
    at       timestamptz NOT NULL
);

---------------------------------------------------------- turns and working memory
CREATE TABLE working_memory (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    thread      text        NOT NULL,
    entry_type  text        NOT NULL,
    content     text        NOT NULL,
    verb        text,
    user_id     text,
    metadata    jsonb       NOT NULL DEFAULT '{}',
    source      text UNIQUE,                       -- a message recorded once however often retried
    created_at  timestamptz NOT NULL
);
CREATE INDEX working_memory_by_thread ON working_memory (thread, id);

CREATE TABLE threads (
    thread          text PRIMARY KEY,
    turns           bigint      NOT NULL DEFAULT 0,
    claude_session  text,
    since_id        bigint      NOT NULL DEFAULT 0,  -- the conversation began after this entry
    updated_at      timestamptz NOT NULL
);

CREATE TABLE turn_usage (
    id                     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    thread                 text        NOT NULL,
    interaction            bigint      NOT NULL,
    provider               text        NOT NULL,
    model                  text        NOT NULL,
    input_tokens           bigint      NOT NULL DEFAULT 0,
    output_tokens          bigint      NOT NULL DEFAULT 0,
    cache_creation_tokens  bigint      NOT NULL DEFAULT 0,
    cache_read_tokens      bigint      NOT NULL DEFAULT 0,
    latency_ms             bigint      NOT NULL DEFAULT 0,
    stop_reason            text,
    created_at             timestamptz NOT NULL
);
CREATE INDEX turn_usage_by_thread ON turn_usage (thread, id);

-------------------------------------------------------- the soul's state and counters
CREATE TABLE soul_memory (
    key         text PRIMARY KEY,
    value       text        NOT NULL,
    updated_at  timestamptz NOT NULL
);
INSERT INTO soul_memory (key, value, updated_at) VALUES
    ('currentProject', '', 'epoch'),
    ('currentTask', '', 'epoch'),
    ('currentTopic', '', 'epoch'),
    ('emotionalState', 'neutral', 'epoch'),
    ('conversationSummary', '', 'epoch'),
    ('currentProcess', 'main', 'epoch');

CREATE TABLE counters (
    name   text PRIMARY KEY,
    value  bigint NOT NULL
);
INSERT INTO counters (name, value) VALUES ('interactions', 0);

CREATE TABLE whispers (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    whisper        text        NOT NULL,
    source         text        NOT NULL,
    created_at     timestamptz NOT NULL,
    claimed_by     text,
    claimed_until  timestamptz,
    consumed_at    timestamptz,
    consumed_by    text
);
CREATE INDEX whispers_waiting ON whispers (id) WHERE consumed_at IS NULL;

------------------------------------------------------------ users and their models
CREATE TABLE users (
    user_id           text PRIMARY KEY,
    display_name      text        NOT NULL,
    slug              text        NOT NULL,
    turns             bigint      NOT NULL DEFAULT 0,
    injected_at_turn  bigint,
    model             text,
    model_version     bigint      NOT NULL DEFAULT 0,
    exported_version  bigint      NOT NULL DEFAULT 0,
    updated_at        timestamptz NOT NULL
);

CREATE TABLE user_model_history (
    user_id      text        NOT NULL REFERENCES users (user_id),
    version      bigint      NOT NULL,
    model        text        NOT NULL,
    change_note  text        NOT NULL,
    created_at   timestamptz NOT NULL,
    PRIMARY KEY (user_id, version)
);

------------------------------------------------------------------------- processes
CREATE TABLE thread_process (
    thread       text PRIMARY KEY,
    current      text        NOT NULL,
    previous     text,
    invocations  bigint      NOT NULL DEFAULT 0,
    params       jsonb       NOT NULL DEFAULT '{}',
    updated_at   timestamptz NOT NULL
);

CREATE TABLE process_transitions (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    thread        text        NOT NULL,
    interaction   bigint      NOT NULL,
    from_process  text        NOT NULL,
    to_process    text        NOT NULL,
    rule          integer,
    action        text,
    execute_now   boolean     NOT NULL,
    params        jsonb       NOT NULL DEFAULT '{}',
    at            timestamptz NOT NULL
);
CREATE INDEX process_transitions_by_thread ON process_transitions (thread, id);

------------------------------------------------ cognitive states, journal and dreams
CREATE TABLE cognitive_state (
    id        smallint PRIMARY KEY CHECK (id = 1),
    state     text        NOT NULL,
    since     timestamptz NOT NULL,
    cause     text        NOT NULL,
    degraded  boolean     NOT NULL DEFAULT false
);
INSERT INTO cognitive_state (id, state, since, cause) VALUES (1, 'SHUTDOWN', 'epoch', 'never started');

CREATE TABLE state_moves (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    from_state  text        NOT NULL,
    to_state    text        NOT NULL,
    cause       text        NOT NULL,
    detail      jsonb       NOT NULL DEFAULT '{}',
    at          timestamptz NOT NULL
);

CREATE TABLE journal (
    id     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    entry  text        NOT NULL,
    at     timestamptz NOT NULL
);

CREATE TABLE thread_summaries (
    thread          text        NOT NULL,
    since_id        bigint      NOT NULL,
    summary         text        NOT NULL,
    covers_through  bigint      NOT NULL,
    entries         bigint      NOT NULL,
    updated_at      timestamptz NOT NULL,
    PRIMARY KEY (thread, since_id)
);

CREATE TABLE episodic_memories (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    thread      text        NOT NULL,
    memory      text        NOT NULL,
    importance  smallint    NOT NULL CHECK (importance BETWEEN 1 AND 10),
    created_at  timestamptz NOT NULL
);
CREATE INDEX episodic_memories_by_thread ON episodic_memories (thread, importance DESC, id);

CREATE TABLE dreams (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    started_at   timestamptz NOT NULL,
    finished_at  timestamptz,
    complete     boolean     NOT NULL DEFAULT false,
    cause        text        NOT NULL,
    report       jsonb       NOT NULL DEFAULT '{}'
);

------------------------------------------------------------------------ the psyche
-- PostgreSQL's own layout: one row per thing (no lines packed into the soul's row, no list
-- kept by triggers). An event locks its soul's substrate row (SELECT ... FOR UPDATE) for its
-- whole transaction, so two events never interleave, from one process or many.
--
-- The substrate is one JSON document per soul, the same document SQLite stores (every float
-- as its IEEE-754 bits, so it reads back exactly); '{}' until the soul's first event writes it
-- (the row exists to be locked).
CREATE TABLE psyche_substrate (
    soul        text PRIMARY KEY,
    state       jsonb       NOT NULL,
    updated_at  timestamptz NOT NULL
);

CREATE TABLE psyche_relationships (
    soul           text             NOT NULL,
    person         text             NOT NULL,
    warmth         double precision NOT NULL,
    trust          double precision NOT NULL,
    tension        double precision NOT NULL,
    comfort        double precision NOT NULL,
    volatility     double precision NOT NULL,
    exchanges      bigint           NOT NULL,
    last_seen      timestamptz,
    PRIMARY KEY (soul, person)
);
CREATE INDEX psyche_relationships_by_last_seen ON psyche_relationships (soul, last_seen DESC NULLS LAST);

-- Retrieval's candidates come from full-text search on `search`, re-ranked by BM25 in Rust.
-- anima writes `search` itself, as the words `psyche::text::words` finds (the words BM25
-- scores: Unicode case folding, one token per character of scripts written without spaces),
-- so that what the index matches never depends on the server's locale or parser.
CREATE TABLE psyche_memories (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    soul        text             NOT NULL,
    text        text             NOT NULL,
    search      tsvector         NOT NULL,
    importance  double precision NOT NULL,
    salience    double precision NOT NULL,
    at          timestamptz      NOT NULL
);
CREATE INDEX psyche_memories_recent ON psyche_memories (soul, at, id);
CREATE INDEX psyche_memories_salient ON psyche_memories (soul, salience DESC, id DESC);
CREATE INDEX psyche_memories_search ON psyche_memories USING gin (search);

-- The people in a memory; a person's newest is the one their return makes more salient.
CREATE TABLE psyche_memory_people (
    soul    text   NOT NULL,
    person  text   NOT NULL,
    memory  bigint NOT NULL REFERENCES psyche_memories (id) ON DELETE CASCADE,
    PRIMARY KEY (soul, person, memory)
);
CREATE INDEX psyche_memory_people_by_memory ON psyche_memory_people (memory);

CREATE TABLE psyche_facts (
    soul    text        NOT NULL,
    person  text        NOT NULL,
    kind    text        NOT NULL,
    value   text        NOT NULL,
    at      timestamptz NOT NULL,
    PRIMARY KEY (soul, person, kind)
);

CREATE TABLE psyche_intentions (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    soul        text             NOT NULL,
    kind        text             NOT NULL,
    target      text,
    horizon     text             NOT NULL,
    priority    double precision NOT NULL,
    created_at  timestamptz      NOT NULL,
    expires_at  timestamptz      NOT NULL
);
CREATE INDEX psyche_intentions_by_soul ON psyche_intentions (soul);

-- The keys of events applied (a message's inbox row, a tick's period): a key once per soul,
-- ever (until a dream's upkeep forgets it, after `SEEN_KEEP_MS`).
CREATE TABLE psyche_seen (
    soul  text        NOT NULL,
    key   text        NOT NULL,
    at    timestamptz NOT NULL,
    PRIMARY KEY (soul, key)
);
CREATE INDEX psyche_seen_by_time ON psyche_seen (at);

CREATE TABLE psyche_gate_log (
    id                  bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    soul                text             NOT NULL,
    at                  timestamptz      NOT NULL,
    event_kind          text             NOT NULL,
    person              text,
    channel             text,
    verdict             text             NOT NULL,
    meaning             double precision NOT NULL,
    threshold           double precision NOT NULL,
    salience_max        double precision NOT NULL,
    drive_pressure_max  double precision NOT NULL,
    arc_hot             double precision NOT NULL,
    rel_stakes          double precision NOT NULL,
    energy              double precision NOT NULL,
    trivial             boolean          NOT NULL,
    choice              boolean          NOT NULL,
    listened            boolean          NOT NULL
);
CREATE INDEX psyche_gate_log_by_soul ON psyche_gate_log (soul, id DESC);
CREATE INDEX psyche_gate_log_by_person ON psyche_gate_log (soul, person, id DESC);
