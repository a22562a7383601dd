"""Migration 4: ``agent_runs`` and ``agent_steps`` partitioned by the run's day, moved in place.

Every row carries ``run_day``, the UTC day the run started: the date a default run
id carries (``run_YYYYMMDD_HHMMSS_...``), else the day of the run row first
written. All steps of a run share its run's day, so a run spanning midnight sits
whole in one partition: it loads from one partition's index on
``(run_id, step_number, run_day)`` and retention drops it whole or not at all.

Unique keys of a partitioned table must hold the partition key, so the keys are
``(run_id, run_day)`` and ``(run_id, step_number, run_day)``; since a run's day
is a function of the run, they are as strong as ``run_id`` and
``(run_id, step_number)`` were, and ``ON CONFLICT`` retries stay harmless. There
is no foreign key from steps to runs any more: it would cost a row lock on the
run per step and make detaching a runs partition scan ``agent_steps``; runs and
steps of a day are dropped together, and every delete names both tables.

A row whose day has no partition goes to the ``*_default`` partition, never
lost; ``spanreplay_make_partitions`` moves such rows into the day's partition
when it makes it.
"""

from __future__ import annotations

from typing import Final

# The most partitions the migration makes for the days existing runs started on (the
# days of the most runs first: a run id from a trace file can carry any date, and a
# day of one such run is not worth a table); other runs stay in the default partition.
MIGRATION_DAYS: Final = 1000

# ``{name}`` is spanreplay_id_day in the migration, a temporary copy in the dry run.
ID_DAY_SQL: Final = """
-- The day a default run id carries (run_YYYYMMDD_HHMMSS_..., UTC); NULL for any other id
-- or a date that does not exist. Never raises, whatever the id.
CREATE FUNCTION {name}(run_id text) RETURNS date
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
DECLARE
    y integer; m integer; d integer; day date;
BEGIN
    IF run_id IS NULL OR run_id !~ '^run_[0-9]{{8}}_[0-9]{{6}}_' THEN
        RETURN NULL;
    END IF;
    y := substr(run_id, 5, 4)::integer;
    m := substr(run_id, 9, 2)::integer;
    d := substr(run_id, 11, 2)::integer;
    IF y < 1 OR m NOT BETWEEN 1 AND 12 OR d NOT BETWEEN 1 AND 31
       OR substr(run_id, 14, 2)::integer > 23 OR substr(run_id, 16, 2)::integer > 59
       OR substr(run_id, 18, 2)::integer > 61 THEN
        RETURN NULL;
    END IF;
    day := make_date(y, m, 1) + (d - 1);
    RETURN CASE WHEN extract(month FROM day) = m THEN day END;
END
$$;

"""

V4_SQL: Final = f"""
-- Moving the rows takes as long as it takes: the session's statement timeout is for writers.
SET LOCAL statement_timeout = 0;

{ID_DAY_SQL.format(name="spanreplay_id_day")}
-- Make the day partitions of agent_runs and agent_steps from first_day to last_day that
-- are missing, in the schema the tables are in, moving the rows of those days that
-- waited in the default partitions. Names are formatted from the dates here, never taken
-- from a row. Returns how many tables it made.
CREATE FUNCTION spanreplay_make_partitions(first_day date, last_day date) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    day date := first_day;
    made integer := 0;
    parent text;
    part text;
    home text := (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                  WHERE c.oid = 'agent_steps'::regclass);
BEGIN
    WHILE day <= last_day LOOP
        FOREACH parent IN ARRAY ARRAY['agent_runs', 'agent_steps'] LOOP
            part := parent || '_p' || to_char(day, 'YYYYMMDD');
            IF to_regclass(format('%I.%I', home, part)) IS NULL THEN
                EXECUTE format('CREATE TABLE %I.%I (LIKE %I.%I INCLUDING DEFAULTS INCLUDING CONSTRAINTS)',
                               home, part, home, parent);
                EXECUTE format('WITH moved AS (DELETE FROM %I.%I WHERE run_day = $1 RETURNING *) '
                               'INSERT INTO %I.%I SELECT * FROM moved', home, parent || '_default', home, part)
                    USING day;
                EXECUTE format('ALTER TABLE %I.%I ATTACH PARTITION %I.%I FOR VALUES FROM (%L) TO (%L)',
                               home, parent, home, part, to_char(day, 'YYYY-MM-DD'),
                               to_char(day + 1, 'YYYY-MM-DD'));
                made := made + 1;
            END IF;
        END LOOP;
        day := day + 1;
    END LOOP;
    RETURN made;
END
$$;

ALTER TABLE agent_runs RENAME TO agent_runs_v3;
ALTER TABLE agent_steps RENAME TO agent_steps_v3;
ALTER INDEX agent_runs_pkey RENAME TO agent_runs_v3_pkey;
ALTER INDEX agent_runs_started_at RENAME TO agent_runs_v3_started_at;
ALTER INDEX agent_runs_status RENAME TO agent_runs_v3_status;
ALTER INDEX agent_steps_pkey RENAME TO agent_steps_v3_pkey;
ALTER INDEX agent_steps_created_at RENAME TO agent_steps_v3_created_at;
ALTER TABLE agent_steps_v3 RENAME CONSTRAINT agent_steps_run_step TO agent_steps_v3_run_step;

CREATE TABLE agent_runs (
    run_id          TEXT NOT NULL,
    -- The UTC day the run started: the partition it and all its steps are in.
    run_day         DATE NOT NULL,
    agent           TEXT NOT NULL DEFAULT '',
    status          TEXT NOT NULL,
    error           JSONB,
    error_text      TEXT,
    trace_id        TEXT,
    span_id         TEXT,
    service_name    TEXT NOT NULL DEFAULT '',
    forked_from     TEXT,
    started_at      TIMESTAMPTZ,
    ended_at        TIMESTAMPTZ,
    start_ns        BIGINT,
    end_ns          BIGINT,
    steps_started   INTEGER,
    steps_recorded  INTEGER NOT NULL DEFAULT 0,
    steps_failed    INTEGER NOT NULL DEFAULT 0,
    tokens_in       BIGINT NOT NULL DEFAULT 0,
    tokens_out      BIGINT NOT NULL DEFAULT 0,
    cost            DOUBLE PRECISION NOT NULL DEFAULT 0,
    schema_version  SMALLINT NOT NULL,
    masking         TEXT,
    -- A sub-agent's run: the run that opened it (spanreplay.run.parent).
    parent          TEXT,
    CONSTRAINT agent_runs_pkey PRIMARY KEY (run_id, run_day)
) PARTITION BY RANGE (run_day);
CREATE INDEX agent_runs_started_at ON agent_runs (started_at);
CREATE INDEX agent_runs_status ON agent_runs (status, started_at);
CREATE TABLE agent_runs_default PARTITION OF agent_runs DEFAULT;

CREATE TABLE agent_steps (
    -- From the sequence the table had; unique by the sequence, no longer a key.
    id              BIGINT NOT NULL DEFAULT nextval('agent_steps_id_seq'),
    run_id          TEXT NOT NULL,
    run_day         DATE NOT NULL,
    step_number     INTEGER NOT NULL,
    step_type       TEXT NOT NULL,
    key             TEXT NOT NULL,
    call_id         TEXT NOT NULL,
    input           JSONB,
    output          JSONB,
    error           JSONB,
    input_text      TEXT NOT NULL,
    output_text     TEXT,
    error_text      TEXT,
    tokens_in       BIGINT,
    tokens_out      BIGINT,
    cost            DOUBLE PRECISION,
    trace_id        TEXT NOT NULL,
    span_id         TEXT NOT NULL,
    start_ns        BIGINT NOT NULL,
    end_ns          BIGINT NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    attributes      JSON NOT NULL DEFAULT '{{}}',
    schema_version  SMALLINT NOT NULL,
    -- Reads one run in order within its day's partition, and makes a retried insert
    -- of a step do nothing (ON CONFLICT): a run's day is a function of the run.
    CONSTRAINT agent_steps_run_step UNIQUE (run_id, step_number, run_day)
) PARTITION BY RANGE (run_day);
CREATE INDEX agent_steps_created_at ON agent_steps (created_at);
CREATE TABLE agent_steps_default PARTITION OF agent_steps DEFAULT;
ALTER SEQUENCE agent_steps_id_seq OWNED BY agent_steps.id;

-- A partition for each day the existing runs started on, the {MIGRATION_DAYS} days of the most
-- runs if there are more; the runs of any other day wait in the default partition.
SELECT spanreplay_make_partitions(day, day)
FROM (
    SELECT coalesce(spanreplay_id_day(run_id), (started_at AT TIME ZONE 'UTC')::date) AS day, count(*) AS runs
    FROM agent_runs_v3
    GROUP BY 1
) AS days
WHERE day IS NOT NULL
ORDER BY runs DESC, day DESC
LIMIT {MIGRATION_DAYS};

INSERT INTO agent_runs (
    run_id, run_day, agent, status, error, error_text, trace_id, span_id, service_name, forked_from,
    started_at, ended_at, start_ns, end_ns, steps_started, steps_recorded, steps_failed,
    tokens_in, tokens_out, cost, schema_version, masking
)
SELECT r.run_id,
       coalesce(spanreplay_id_day(r.run_id), (r.started_at AT TIME ZONE 'UTC')::date,
                (SELECT (min(s.created_at) AT TIME ZONE 'UTC')::date FROM agent_steps_v3 AS s
                 WHERE s.run_id = r.run_id),
                (now() AT TIME ZONE 'UTC')::date),
       r.agent, r.status, r.error, r.error_text, r.trace_id, r.span_id, r.service_name, r.forked_from,
       r.started_at, r.ended_at, r.start_ns, r.end_ns, r.steps_started, r.steps_recorded, r.steps_failed,
       r.tokens_in, r.tokens_out, r.cost, r.schema_version, r.masking
FROM agent_runs_v3 AS r;

INSERT INTO agent_steps (
    id, run_id, run_day, step_number, step_type, key, call_id, input, output, error,
    input_text, output_text, error_text, tokens_in, tokens_out, cost, trace_id, span_id,
    start_ns, end_ns, created_at, attributes, schema_version
)
SELECT s.id, s.run_id, r.run_day, s.step_number, s.step_type, s.key, s.call_id, s.input, s.output, s.error,
       s.input_text, s.output_text, s.error_text, s.tokens_in, s.tokens_out, s.cost, s.trace_id, s.span_id,
       s.start_ns, s.end_ns, s.created_at, s.attributes, s.schema_version
FROM agent_steps_v3 AS s JOIN agent_runs AS r ON r.run_id = s.run_id
ORDER BY r.run_day, s.run_id, s.step_number;

-- Nothing is dropped unless every row arrived (the whole migration rolls back otherwise).
DO $$
BEGIN
    IF (SELECT count(*) FROM agent_runs) <> (SELECT count(*) FROM agent_runs_v3)
       OR (SELECT count(*) FROM agent_steps) <> (SELECT count(*) FROM agent_steps_v3) THEN
        RAISE EXCEPTION 'spanreplay migration 4 did not move every row; nothing was changed';
    END IF;
END
$$;
DROP TABLE agent_steps_v3;
DROP TABLE agent_runs_v3;

-- The totals, as before, now matching each run in its day's partition. The rows were
-- moved before these triggers existed: the moved totals are not counted again. One
-- UPDATE per run, naming its day: each is planned against that day's partition alone
-- (one UPDATE joined to the transition table would open every partition, each time).
CREATE OR REPLACE FUNCTION spanreplay_add_step_totals() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    n record;
BEGIN
    FOR n IN
        SELECT run_id, run_day,
               count(*) AS steps,
               count(*) FILTER (WHERE error_text IS NOT NULL) AS failed,
               coalesce(sum(tokens_in), 0) AS tokens_in,
               coalesce(sum(tokens_out), 0) AS tokens_out,
               coalesce(sum(cost), 0) AS cost
        FROM new_steps
        GROUP BY run_id, run_day
        ORDER BY run_id, run_day  -- one lock order for every writer: no deadlock between batches
    LOOP
        UPDATE agent_runs AS r
        SET steps_recorded = r.steps_recorded + n.steps,
            steps_failed = r.steps_failed + n.failed,
            tokens_in = r.tokens_in + n.tokens_in,
            tokens_out = r.tokens_out + n.tokens_out,
            cost = r.cost + n.cost
        WHERE r.run_id = n.run_id AND r.run_day = n.run_day;
    END LOOP;
    RETURN NULL;
END
$$;
CREATE OR REPLACE FUNCTION spanreplay_add_outcome_totals() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    n record;
BEGIN
    FOR n IN
        SELECT s.run_id, s.run_day,
               count(*) FILTER (WHERE s.error_text IS NOT NULL AND o.error_text IS NULL) AS failed,
               coalesce(sum(s.tokens_in), 0) - coalesce(sum(o.tokens_in), 0) AS tokens_in,
               coalesce(sum(s.tokens_out), 0) - coalesce(sum(o.tokens_out), 0) AS tokens_out,
               coalesce(sum(s.cost), 0) - coalesce(sum(o.cost), 0) AS cost
        FROM new_steps AS s JOIN old_steps AS o
          ON o.run_id = s.run_id AND o.step_number = s.step_number AND o.run_day = s.run_day
        WHERE o.end_ns = 0 AND s.end_ns <> 0
        GROUP BY s.run_id, s.run_day
        ORDER BY s.run_id, s.run_day
    LOOP
        UPDATE agent_runs AS r
        SET steps_failed = r.steps_failed + n.failed,
            tokens_in = r.tokens_in + n.tokens_in,
            tokens_out = r.tokens_out + n.tokens_out,
            cost = r.cost + n.cost
        WHERE r.run_id = n.run_id AND r.run_day = n.run_day;
    END LOOP;
    RETURN NULL;
END
$$;
-- Statement-level triggers with transition tables on the partitioned table itself:
-- Postgres 15 collects the rows of every partition in them (row-level ones with
-- transition tables are not allowed on partitioned tables).
CREATE TRIGGER agent_steps_totals
    AFTER INSERT ON agent_steps
    REFERENCING NEW TABLE AS new_steps
    FOR EACH STATEMENT EXECUTE FUNCTION spanreplay_add_step_totals();
CREATE TRIGGER agent_steps_outcome_totals
    AFTER UPDATE ON agent_steps
    REFERENCING OLD TABLE AS old_steps NEW TABLE AS new_steps
    FOR EACH STATEMENT EXECUTE FUNCTION spanreplay_add_outcome_totals();
"""
