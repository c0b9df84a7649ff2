-- The span table that ragmesh_common.telemetry's PostgreSQL exporter writes (every service) and the gateway's
-- traces API reads and prunes. Applied by `python -m ragmesh_retriever.migrate` after the retriever's schema,
-- which defines rag_roles(); idempotent. Placeholders: {app_role}, {traces_role}, {retention_role},
-- {traces_floor_seconds}, {traces_floor_rows}.
CREATE TABLE IF NOT EXISTS rag_traces (
    trace_id       text        NOT NULL,
    span_id        text        NOT NULL,
    parent_span_id text,
    name           text        NOT NULL,
    service        text        NOT NULL,
    kind           text        NOT NULL,
    start_time     timestamptz NOT NULL,
    end_time       timestamptz,
    duration_ms    double precision,
    status_code    text        NOT NULL DEFAULT 'unset',
    status_message text        NOT NULL DEFAULT '',
    attributes     jsonb       NOT NULL DEFAULT '{{}}',
    events         jsonb       NOT NULL DEFAULT '[]',
    PRIMARY KEY (trace_id, span_id)
);
CREATE INDEX IF NOT EXISTS rag_traces_start_idx ON rag_traces (start_time DESC);

-- Spans: every service's exporter inserts them as the insert-only traces role ({traces_role}, RAG_TRACES_DSN),
-- which may not read, change or delete a span; only a transaction whose verified identity (rag_set_identity,
-- schema.sql) holds the role `admin` reads them (the gateway's traces API, for an admin's request, as the
-- application role). COPY FROM does not run under row-level security, so the exporter inserts.
ALTER TABLE rag_traces ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag_traces FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS rag_traces_write ON rag_traces;
CREATE POLICY rag_traces_write ON rag_traces FOR INSERT TO {traces_role} WITH CHECK (true);
DROP POLICY IF EXISTS rag_traces_read ON rag_traces;
CREATE POLICY rag_traces_read ON rag_traces FOR SELECT USING ((SELECT rag_roles()) @> ARRAY['admin']);

-- Retention runs as its own role ({retention_role}: the gateway's GATEWAY_TRACES_RETENTION_DSN, or a job), the
-- only one that may execute this function; the application role may not. The function runs as the schema
-- owner and deletes at most `batch` rows per call (short transactions beside the exporters' inserts): spans
-- older than `keep_seconds`, then the oldest beyond `max_rows` (0 turns a limit off). A floor that only the
-- schema owner sets (`rag_traces_retention_floor`, by the migration) bounds both: whatever the caller asks,
-- spans younger than `min_keep_seconds` and the newest `min_rows` stay. Returns how many it deleted.
CREATE TABLE IF NOT EXISTS rag_traces_retention_floor (
    id               boolean PRIMARY KEY DEFAULT true CHECK (id),
    min_keep_seconds double precision NOT NULL CHECK (min_keep_seconds >= 0),
    min_rows         bigint NOT NULL CHECK (min_rows >= 0)
);
REVOKE ALL ON rag_traces_retention_floor FROM PUBLIC;
INSERT INTO rag_traces_retention_floor (id, min_keep_seconds, min_rows)
    VALUES (true, {traces_floor_seconds}, {traces_floor_rows})
    ON CONFLICT (id) DO UPDATE SET min_keep_seconds = excluded.min_keep_seconds, min_rows = excluded.min_rows;
DROP POLICY IF EXISTS rag_traces_retention ON rag_traces;
CREATE POLICY rag_traces_retention ON rag_traces FOR ALL TO CURRENT_USER USING (true) WITH CHECK (true);
CREATE OR REPLACE FUNCTION rag_traces_prune(keep_seconds double precision, max_rows bigint, batch integer)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    deleted bigint := 0;
    n bigint;
    cutoff timestamptz;
    floor_seconds double precision;
    floor_rows bigint;
BEGIN
    SELECT f.min_keep_seconds, f.min_rows INTO floor_seconds, floor_rows FROM rag_traces_retention_floor f;
    IF keep_seconds > 0 THEN
        keep_seconds := greatest(keep_seconds, coalesce(floor_seconds, 0));
        DELETE FROM rag_traces WHERE ctid = ANY(ARRAY(
            SELECT ctid FROM rag_traces WHERE start_time < now() - make_interval(secs => keep_seconds) LIMIT batch));
        GET DIAGNOSTICS deleted = ROW_COUNT;
    END IF;
    IF max_rows > 0 AND deleted < batch THEN
        max_rows := greatest(max_rows, coalesce(floor_rows, 0));
        SELECT start_time INTO cutoff FROM rag_traces ORDER BY start_time DESC OFFSET max_rows LIMIT 1;
        IF cutoff IS NOT NULL THEN
            DELETE FROM rag_traces WHERE ctid = ANY(ARRAY(
                SELECT ctid FROM rag_traces WHERE start_time <= cutoff
                AND start_time < now() - make_interval(secs => coalesce(floor_seconds, 0)) LIMIT batch - deleted));
            GET DIAGNOSTICS n = ROW_COUNT;
            deleted := deleted + n;
        END IF;
    END IF;
    RETURN deleted;
END $$;

-- Least privilege: the traces role inserts; the application role reads (under the policy above); the
-- retention role only calls the function.
REVOKE ALL ON rag_traces FROM {app_role}, {traces_role}, {retention_role};
GRANT SELECT ON rag_traces TO {app_role};
GRANT INSERT ON rag_traces TO {traces_role};
REVOKE ALL ON FUNCTION rag_traces_prune(double precision, bigint, integer) FROM PUBLIC, {app_role};
GRANT EXECUTE ON FUNCTION rag_traces_prune(double precision, bigint, integer) TO {retention_role};
