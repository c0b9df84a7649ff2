-- The span table that ragmesh_common.telemetry's PostgreSQL exporter writes (every service) and the gateway's
-- traces API reads and prunes. Applied by `python -m ragmesh_retriever.migrate` after the retriever's schema,
-- which defines rag_roles(); idempotent. Placeholder: {app_role}.
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

-- Spans: every service's exporter inserts them; only a transaction whose `rag.roles` holds `admin` (the
-- gateway's traces API, for an admin's request) reads them. COPY FROM does not run under row-level
-- security, so the exporter inserts.
ALTER TABLE rag_traces ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag_traces FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS rag_traces_write ON rag_traces;
CREATE POLICY rag_traces_write ON rag_traces FOR INSERT WITH CHECK (true);
DROP POLICY IF EXISTS rag_traces_read ON rag_traces;
CREATE POLICY rag_traces_read ON rag_traces FOR SELECT USING ('admin' = ANY (rag_roles()));

-- Trace retention (the gateway, RAG_TRACES_*): the application role has no DELETE grant on spans; it calls
-- this function, which runs as the schema owner and deletes only what retention allows, at most `batch`
-- rows per call (short transactions beside the exporters' inserts): spans older than `keep_seconds`, then
-- the oldest beyond `max_rows` (0 turns a limit off). Returns how many it deleted.
DROP POLICY IF EXISTS rag_traces_retention ON rag_traces;
CREATE POLICY rag_traces_retention ON rag_traces FOR ALL TO CURRENT_USER USING (true) WITH CHECK (true);
CREATE OR REPLACE FUNCTION rag_traces_prune(keep_seconds double precision, max_rows bigint, batch integer)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    deleted bigint := 0;
    n bigint;
    cutoff timestamptz;
BEGIN
    IF keep_seconds > 0 THEN
        DELETE FROM rag_traces WHERE ctid = ANY(ARRAY(
            SELECT ctid FROM rag_traces WHERE start_time < now() - make_interval(secs => keep_seconds) LIMIT batch));
        GET DIAGNOSTICS deleted = ROW_COUNT;
    END IF;
    IF max_rows > 0 AND deleted < batch THEN
        SELECT start_time INTO cutoff FROM rag_traces ORDER BY start_time DESC OFFSET max_rows LIMIT 1;
        IF cutoff IS NOT NULL THEN
            DELETE FROM rag_traces WHERE ctid = ANY(ARRAY(
                SELECT ctid FROM rag_traces WHERE start_time <= cutoff LIMIT batch - deleted));
            GET DIAGNOSTICS n = ROW_COUNT;
            deleted := deleted + n;
        END IF;
    END IF;
    RETURN deleted;
END $$;

-- The application role inserts spans and reads them under the policies above; it deletes only through the function.
REVOKE ALL ON rag_traces FROM {app_role};
GRANT SELECT, INSERT ON rag_traces TO {app_role};
REVOKE ALL ON FUNCTION rag_traces_prune(double precision, bigint, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rag_traces_prune(double precision, bigint, integer) TO {app_role};
