-- What an outside service allows a minute (a token bucket per name: the workspace's calls of
-- one Slack method, say) and where it refused lately, kept here for every daemon of the soul:
-- several daemons together stay within what one may make. On the server's clock, so a
-- daemon whose own clock is off spends and refills like any other.
CREATE TABLE budgets (
    name    text PRIMARY KEY,
    tokens  double precision NOT NULL,
    at      timestamptz      NOT NULL
);

CREATE TABLE refusals (
    kind    text PRIMARY KEY,
    code    text        NOT NULL,
    at      timestamptz NOT NULL
);

-- Takes one call from each bucket `p_names[i]` of `p_limits[i]` calls a minute, all or none:
-- whether they were taken. A bucket holds a fourth of its limit at once (at least one) and
-- refills the rest over the minute, so no 60 seconds ever hold more calls than the limit. A
-- bucket is made full at its first use; the rows are locked in name order (two takers never
-- deadlock) until the caller's transaction ends.
CREATE FUNCTION anima_take_budget(p_names text[], p_limits integer[]) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_now timestamptz := clock_timestamp();
    v_ok boolean := true;
    v_burst double precision;
    v_tokens double precision;
BEGIN
    INSERT INTO budgets (name, tokens, at)
        SELECT n, greatest(l / 4, 1), v_now FROM unnest(p_names, p_limits) AS u(n, l)
        ON CONFLICT (name) DO NOTHING;
    PERFORM 1 FROM budgets WHERE name = ANY (p_names) ORDER BY name FOR UPDATE;
    FOR i IN 1 .. coalesce(array_length(p_names, 1), 0) LOOP
        v_burst := greatest(p_limits[i] / 4, 1);
        UPDATE budgets
           SET tokens = least(v_burst, tokens + greatest(extract(epoch FROM v_now - at), 0)
                                                * (p_limits[i] - v_burst) / 60.0),
               at = greatest(at, v_now)
         WHERE name = p_names[i]
        RETURNING tokens INTO v_tokens;
        v_ok := v_ok AND v_tokens >= 1;
    END LOOP;
    IF v_ok THEN
        UPDATE budgets SET tokens = tokens - 1 WHERE name = ANY (p_names);
    END IF;
    RETURN v_ok;
END $$;
