-- Connectors (ragmesh_common.connectors): sources the ingestion worker syncs into documents on a schedule, the
-- state of each item it has seen, and one report per run. Applied by `python -m ragmesh_retriever.migrate` after
-- the retriever's schema; idempotent. Placeholders: {connectors_role}.
--
-- These tables hold configuration and bookkeeping (paths, URLs, hashes, document ids), never document content.
-- Only the connectors role ({connectors_role}: the gateway's admin API and the worker, CONNECTORS_DSN) may use
-- them, and it may use nothing else: it cannot read a document, a chunk or a span. The admin API checks the
-- caller's role `admin`; the documents a connector makes are owned by its identity (`connector:<name>`) and
-- read under the documents' row-level security like any other.
CREATE TABLE IF NOT EXISTS connectors (
    id               uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    name             text        NOT NULL UNIQUE CHECK (name ~ '^[a-z0-9][a-z0-9_.-]{{0,62}}$'),
    kind             text        NOT NULL CHECK (kind IN ('folder', 'web')),
    config           jsonb       NOT NULL,
    acl              jsonb       NOT NULL DEFAULT '{{}}',
    schedule_seconds integer     NOT NULL DEFAULT 0 CHECK (schedule_seconds >= 0),
    state            text        NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'deleting')),
    created_by       text        NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    next_run_at      timestamptz
);

CREATE TABLE IF NOT EXISTS connector_runs (
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    connector_id uuid        NOT NULL REFERENCES connectors (id) ON DELETE CASCADE,
    trigger      text        NOT NULL CHECK (trigger IN ('schedule', 'manual', 'delete')),
    status       text        NOT NULL DEFAULT 'queued'
                 CHECK (status IN ('queued', 'running', 'succeeded', 'partial', 'failed', 'interrupted', 'skipped')),
    queued_at    timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,
    finished_at  timestamptz,
    counts       jsonb       NOT NULL DEFAULT '{{}}',
    problems     jsonb       NOT NULL DEFAULT '[]',
    message      text        NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS connector_runs_connector_idx ON connector_runs (connector_id, queued_at DESC);

-- One row per source item (a file's path below the root, a page's URL): what was ingested last, so a run
-- re-ingests only what changed and deletes what is gone. Written once per item, as soon as that item is done,
-- so a run killed midway resumes where it stopped.
CREATE TABLE IF NOT EXISTS connector_items (
    connector_id   uuid        NOT NULL REFERENCES connectors (id) ON DELETE CASCADE,
    source_key     text        NOT NULL,
    content_sha256 text        NOT NULL DEFAULT '',
    etag           text        NOT NULL DEFAULT '',
    last_modified  text        NOT NULL DEFAULT '',
    acl            jsonb       NOT NULL DEFAULT '{{}}',
    document_id    uuid,
    last_run_id    uuid,
    last_seen_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (connector_id, source_key)
);

REVOKE ALL ON connectors, connector_runs, connector_items FROM PUBLIC;
GRANT USAGE ON SCHEMA public TO {connectors_role};
GRANT SELECT, INSERT, UPDATE, DELETE ON connectors, connector_runs, connector_items TO {connectors_role};
