-- ragmesh database schema. Applied by the owner (never by the services) with
-- `python -m ragmesh_common.migrate`; idempotent. Placeholders: {app_role}, {dim}.
CREATE EXTENSION IF NOT EXISTS vector;

-- Identity the database verifies (README "Security"). Row-level security reads only `rag_identity()`: the
-- user, department and roles that `rag_set_identity` recorded in this transaction after checking a signed
-- assertion. The assertion is an RFC 2104 HMAC-SHA256 (on core sha256(); pgcrypto is not needed) over the
-- identity, an expiry and the backend's pid, with a key the retriever holds (RETRIEVER_RLS_KEY) and this
-- database keeps in `rag_identity_key`, which only the schema owner reads. The verified identity is kept in
-- the transaction-local setting `rag.identity` together with a second HMAC (the same key) over it and the
-- transaction's start time; a session may set that setting itself, but without the key it cannot make a tag
-- that `rag_identity()` accepts, and a tag copied from another transaction fails on the start time. So the
-- application role's only way to an identity is a valid, unexpired assertion for its own connection.
-- `rag.user_id`, `rag.department` and `rag.roles` mean nothing any more.
CREATE TABLE IF NOT EXISTS rag_identity_key (
    id        boolean PRIMARY KEY DEFAULT true CHECK (id),
    inner_pad bytea NOT NULL,  -- the key zero-padded to SHA-256's 64-byte block, XOR 0x36 (RFC 2104 ipad)
    outer_pad bytea NOT NULL   -- the same, XOR 0x5c (opad)
);
REVOKE ALL ON rag_identity_key FROM PUBLIC;

-- RFC 2104: a key longer than the block is hashed first, then zero-padded to 64 bytes and XORed with `pad`.
CREATE OR REPLACE FUNCTION rag_hmac_pad(key bytea, pad integer) RETURNS bytea LANGUAGE plpgsql IMMUTABLE STRICT
PARALLEL SAFE SET search_path FROM CURRENT AS $$
DECLARE
    k bytea := CASE WHEN length(key) > 64 THEN sha256(key) ELSE key END;
    padded bytea;
BEGIN
    k := k || decode(repeat('00', 64 - length(k)), 'hex');
    padded := k;
    FOR i IN 0..63 LOOP
        padded := set_byte(padded, i, get_byte(k, i) # pad);
    END LOOP;
    RETURN padded;
END $$;
-- HMAC-SHA256 with any key: what rag_identity_mac computes with the stored pads (checked against RFC 4231).
CREATE OR REPLACE FUNCTION rag_hmac_sha256(key bytea, message bytea) RETURNS bytea LANGUAGE sql IMMUTABLE STRICT
PARALLEL SAFE AS $$ SELECT sha256(rag_hmac_pad(key, 92) || sha256(rag_hmac_pad(key, 54) || message)) $$;

-- The HMAC of `message` with the stored key, in hex: the owner's alone (for anyone else it would be an oracle).
CREATE OR REPLACE FUNCTION rag_identity_mac(message text) RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT encode(sha256(k.outer_pad || sha256(k.inner_pad || convert_to(message, 'UTF8'))), 'hex')
   FROM rag_identity_key k $$;
REVOKE ALL ON FUNCTION rag_identity_mac(text) FROM PUBLIC;

CREATE OR REPLACE FUNCTION rag_set_identity(user_id text, department text, roles text[], expires_at bigint, mac text)
RETURNS void LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path FROM CURRENT AS $$
DECLARE
    payload text;
    expected text;
BEGIN
    IF user_id IS NULL OR user_id = '' OR department IS NULL OR roles IS NULL OR expires_at IS NULL OR mac IS NULL
       OR array_position(roles, NULL) IS NOT NULL THEN
        RAISE EXCEPTION 'identity assertion refused: user, department, roles, expiry and mac are required'
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    -- the fields are joined with control characters below, so none may contain one
    IF concat(user_id, department, array_to_string(roles, '')) ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'identity assertion refused: control character in a name' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    payload := concat_ws(E'\x1f', user_id, department, array_to_string(roles, E'\x1e'));
    expected := rag_identity_mac(concat_ws(E'\x1f', 'ragmesh-rls-assertion', payload, expires_at::text,
                                           pg_backend_pid()::text));
    IF expected IS NULL THEN
        RAISE EXCEPTION 'identity assertion refused: no key (run the migration with the RLS key)'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF mac IS DISTINCT FROM expected THEN
        RAISE EXCEPTION 'identity assertion refused: bad signature' USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF expires_at < extract(epoch FROM clock_timestamp()) THEN
        RAISE EXCEPTION 'identity assertion refused: expired' USING ERRCODE = 'insufficient_privilege';
    END IF;
    IF expires_at > extract(epoch FROM clock_timestamp()) + 600 THEN
        RAISE EXCEPTION 'identity assertion refused: it may be valid for at most 600 s'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    PERFORM set_config('rag.identity', concat_ws(E'\x1f', payload, rag_identity_mac(
        concat_ws(E'\x1f', 'ragmesh-rls-session', extract(epoch FROM transaction_timestamp())::text, payload))), true);
END $$;
REVOKE ALL ON FUNCTION rag_set_identity(text, text, text[], bigint, text) FROM PUBLIC;

-- The verified identity of this transaction: user, department and roles (joined by \x1e), all '' when none was set;
-- a `rag.identity` that rag_set_identity did not write in this transaction is an error.
CREATE OR REPLACE FUNCTION rag_identity() RETURNS text[] LANGUAGE plpgsql STABLE PARALLEL SAFE SECURITY DEFINER
SET search_path FROM CURRENT AS $$
DECLARE
    value text := current_setting('rag.identity', true);
    parts text[];
BEGIN
    IF value IS NULL OR value = '' THEN
        RETURN ARRAY['', '', ''];
    END IF;
    parts := string_to_array(value, E'\x1f');
    IF array_length(parts, 1) IS DISTINCT FROM 4 OR parts[4] IS DISTINCT FROM rag_identity_mac(concat_ws(E'\x1f',
            'ragmesh-rls-session', extract(epoch FROM transaction_timestamp())::text, parts[1], parts[2], parts[3])) THEN
        RAISE EXCEPTION 'rag.identity was not set by rag_set_identity in this transaction'
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN parts[1:3];
END $$;

CREATE OR REPLACE FUNCTION rag_user() RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT (rag_identity())[1] $$;
CREATE OR REPLACE FUNCTION rag_department() RETURNS text LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT (rag_identity())[2] $$;
CREATE OR REPLACE FUNCTION rag_roles() RETURNS text[] LANGUAGE sql STABLE PARALLEL SAFE AS
$$ SELECT coalesce(string_to_array(nullif((rag_identity())[3], ''), E'\x1e'), '{{}}'::text[]) $$;

CREATE TABLE IF NOT EXISTS documents (
    id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
    title            text        NOT NULL,
    filename         text        NOT NULL,
    mime_type        text        NOT NULL DEFAULT '',
    owner_user       text        NOT NULL,
    owner_department text        NOT NULL DEFAULT '',
    acl_public       boolean     NOT NULL DEFAULT false,
    acl_departments  text[]      NOT NULL DEFAULT '{{}}',
    acl_roles        text[]      NOT NULL DEFAULT '{{}}',
    acl_users        text[]      NOT NULL DEFAULT '{{}}',
    status           text        NOT NULL DEFAULT 'queued',
    error            text        NOT NULL DEFAULT '',
    chunk_count      integer     NOT NULL DEFAULT 0,
    page_count       integer     NOT NULL DEFAULT 0,
    size_bytes       bigint      NOT NULL DEFAULT 0,
    summary          text        NOT NULL DEFAULT '',
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS documents_owner_idx ON documents (owner_user);
CREATE INDEX IF NOT EXISTS documents_depts_idx ON documents USING gin (acl_departments);
-- Document lifecycle: the visible version's content hash (per-owner dedup), its version, warnings of a
-- partly readable file, and a pending version (new bytes or a re-ingest) whose ingestion runs while the
-- visible version stays searchable; `pending_meta` holds the metadata sent for it until its chunks replace
-- the visible ones (title, summary, page_count, warnings).
ALTER TABLE documents ADD COLUMN IF NOT EXISTS content_sha256 text NOT NULL DEFAULT '';
ALTER TABLE documents ADD COLUMN IF NOT EXISTS version integer NOT NULL DEFAULT 1;
ALTER TABLE documents ADD COLUMN IF NOT EXISTS warnings text[] NOT NULL DEFAULT '{{}}';
ALTER TABLE documents ADD COLUMN IF NOT EXISTS pending_version integer NOT NULL DEFAULT 0;
ALTER TABLE documents ADD COLUMN IF NOT EXISTS pending_status text NOT NULL DEFAULT '';
ALTER TABLE documents ADD COLUMN IF NOT EXISTS pending_error text NOT NULL DEFAULT '';
ALTER TABLE documents ADD COLUMN IF NOT EXISTS pending_filename text NOT NULL DEFAULT '';
ALTER TABLE documents ADD COLUMN IF NOT EXISTS pending_mime_type text NOT NULL DEFAULT '';
ALTER TABLE documents ADD COLUMN IF NOT EXISTS pending_size_bytes bigint NOT NULL DEFAULT 0;
ALTER TABLE documents ADD COLUMN IF NOT EXISTS pending_sha256 text NOT NULL DEFAULT '';
ALTER TABLE documents ADD COLUMN IF NOT EXISTS pending_meta jsonb NOT NULL DEFAULT '{{}}';
-- A title a person chose (at upload, from a connector's source, by an update) is kept by ingestion, which
-- otherwise replaces the file-name stem with the title the parser finds.
ALTER TABLE documents ADD COLUMN IF NOT EXISTS title_given boolean NOT NULL DEFAULT false;
-- The parser's reading the visible version was parsed with (ParseResponse.parser_version; 0: before readings were
-- recorded): a lower one than the parser's current reading marks a document worth re-ingesting.
ALTER TABLE documents ADD COLUMN IF NOT EXISTS parser_version integer NOT NULL DEFAULT 0;
-- Who may read a document, as one array of grants: 'u:<user>' (the owner and each ACL user), 'public',
-- 'd:<department>' and 'r:<role>'. The read policy compares it with the verified identity's grants in one
-- array overlap, so a statement verifies the identity once per scan of `documents`, not once per ACL clause.
CREATE OR REPLACE FUNCTION rag_acl_grants(owner_user text, acl_public boolean, acl_users text[],
                                          acl_departments text[], acl_roles text[])
RETURNS text[] LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
SELECT ARRAY['u:' || owner_user]
    || CASE WHEN acl_public THEN ARRAY['public'] ELSE '{{}}'::text[] END
    || ARRAY(SELECT 'u:' || x FROM unnest(acl_users) x)
    || ARRAY(SELECT 'd:' || x FROM unnest(acl_departments) x WHERE x <> '')
    || ARRAY(SELECT 'r:' || x FROM unnest(acl_roles) x) $$;
ALTER TABLE documents ADD COLUMN IF NOT EXISTS acl_grants text[]
    GENERATED ALWAYS AS (rag_acl_grants(owner_user, acl_public, acl_users, acl_departments, acl_roles)) STORED;
CREATE INDEX IF NOT EXISTS documents_owner_sha_idx ON documents (owner_user, content_sha256) WHERE content_sha256 <> '';
CREATE INDEX IF NOT EXISTS documents_updated_idx ON documents (updated_at DESC, id DESC);
-- FetchSection (the agent's fetch-section tool) finds documents by title_key: the title in lower case, a trailing
-- "(...)" or ", ..." qualifier aside, punctuation as spaces (ragmesh_retriever.sections.TITLE_KEY is the same
-- expression). A stored column, not an expression index: under RLS a qual that calls a function that is not
-- leakproof (lower, regexp_replace) cannot use an index, a plain `title_key = $1` can.
ALTER TABLE documents ADD COLUMN IF NOT EXISTS title_key text GENERATED ALWAYS AS (
    btrim(regexp_replace(lower(regexp_replace(regexp_replace(title, '\s*\([^)]*\)\s*$', ''), ',.*$', '')),
                         '[^[:alnum:]]+', ' ', 'g'))
) STORED;
CREATE INDEX IF NOT EXISTS documents_by_title_key_idx ON documents (title_key);

CREATE TABLE IF NOT EXISTS chunks (
    id           text     PRIMARY KEY,
    document_id  uuid     NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    level        smallint NOT NULL,
    parent_id    text,
    ordinal      integer  NOT NULL,
    section_path text[]   NOT NULL DEFAULT '{{}}',
    page         integer  NOT NULL DEFAULT 0,
    kind         text     NOT NULL DEFAULT 'paragraph',
    title        text     NOT NULL DEFAULT '',
    text         text     NOT NULL,
    ts_config    regconfig NOT NULL DEFAULT 'english',
    tsv          tsvector NOT NULL,
    doc_len      integer  NOT NULL,
    embedding    vector({dim})
);
-- the parser's OCR confidence of the chunk's text (0..1); NULL when no part of it was read by OCR
ALTER TABLE chunks ADD COLUMN IF NOT EXISTS ocr_confidence real;
CREATE INDEX IF NOT EXISTS chunks_document_idx ON chunks (document_id, level);
CREATE INDEX IF NOT EXISTS chunks_tsv_idx ON chunks USING gin (tsv);
CREATE INDEX IF NOT EXISTS chunks_embedding_idx ON chunks USING hnsw (embedding vector_cosine_ops)
    WITH (m = 16, ef_construction = 64);

-- BM25 index: one posting per (term, chunk) with its term frequency, and the chunk count and total length
-- of each document per chunk level; all kept by statement triggers on chunks. A query computes its BM25
-- statistics (document frequency, N, average length) from these rows for the documents it searches, which
-- the user may read: corpus-wide statistics would tell a user whether, and how often, a word occurs in
-- documents they cannot read. Both tables are under row-level security like the chunks they come from.
-- `impact` is the posting's BM25 term-frequency saturation when it was written (k1 0.9, b 0.4, the
-- level's average length then): it only orders a term's postings, so a query can read a term's
-- strongest postings first and stop after a bounded number (impact-ordered early termination);
-- the score itself is always recomputed exactly with the configured k1 and b.
CREATE TABLE IF NOT EXISTS postings (
    term        text     NOT NULL,
    level       smallint NOT NULL,
    chunk_id    text     NOT NULL,
    document_id uuid     NOT NULL,
    tf          real     NOT NULL,
    doc_len     real     NOT NULL
);
ALTER TABLE postings ADD COLUMN IF NOT EXISTS impact real NOT NULL DEFAULT 0;
-- `tf_head`: how many of the `tf` occurrences are in the chunk's title or section path (the tsvector's
-- weight-A positions); a query weights them (RETRIEVER_BM25_HEADING_WEIGHT) without re-indexing.
-- Postings written before this column existed count no heading occurrences until re-indexed.
ALTER TABLE postings ADD COLUMN IF NOT EXISTS tf_head real NOT NULL DEFAULT 0;
DROP INDEX IF EXISTS postings_term_idx;
DROP INDEX IF EXISTS postings_impact_idx;
-- a few readable documents: their postings directly, whatever the terms' document frequencies
DROP INDEX IF EXISTS postings_chunk_idx;
DROP INDEX IF EXISTS postings_document_idx;
CREATE INDEX IF NOT EXISTS postings_document_term_idx ON postings (document_id, term, level)
    INCLUDE (chunk_id, tf, tf_head, doc_len);
CREATE TABLE IF NOT EXISTS lex_doc_stats (
    document_id uuid     NOT NULL,
    level       smallint NOT NULL,
    n_chunks    integer  NOT NULL,
    total_len   double precision NOT NULL,
    PRIMARY KEY (document_id, level)
);
-- Corpus-wide chunk count and length per level: only for the impacts written with new postings (an
-- ordering hint, never a score). The owner's alone: the application role has no grant on it.
CREATE TABLE IF NOT EXISTS lex_stats (
    level     smallint PRIMARY KEY,
    n_docs    bigint NOT NULL,
    total_len double precision NOT NULL
);
-- Search scopes: the documents that share one set of grants (rag_acl_grants, sorted) form a scope, and the
-- BM25 statistics are kept per scope as well as per document: chunk count and length per level, and each
-- term's document frequency. Scopes partition the searchable (ready) documents, so the statistics of exactly
-- the documents a user may read are the sums over the scopes whose grants meet the user's, whatever their
-- number of documents; a search reads those sums and the postings of readable scopes, never a list of ids.
-- `documents.scope_id` is the document's scope (set by a trigger from its ACL, whatever the caller wrote);
-- `postings.scope_id` and `lex_doc_stats.scope_id` are that scope while the document is ready and NULL
-- otherwise (a document being ingested or failed is searched by nobody), kept by the triggers below.
CREATE TABLE IF NOT EXISTS rag_scopes (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    grants    text[] NOT NULL,
    grants_sha bytea NOT NULL UNIQUE  -- sha256 of the grants' text form: a long ACL exceeds a B-tree entry
);
CREATE INDEX IF NOT EXISTS rag_scopes_grants_idx ON rag_scopes USING gin (grants);
ALTER TABLE documents ADD COLUMN IF NOT EXISTS scope_id bigint;
CREATE INDEX IF NOT EXISTS documents_ready_scope_idx ON documents (scope_id) WHERE status = 'ready';
ALTER TABLE postings ADD COLUMN IF NOT EXISTS scope_id bigint;
-- a term's postings strongest first, with their scope: the term-first walk filters by scope from the index
DROP INDEX IF EXISTS postings_term_impact_idx;
CREATE INDEX IF NOT EXISTS postings_term_scope_idx ON postings (term, level, impact DESC)
    INCLUDE (chunk_id, document_id, tf, tf_head, doc_len, scope_id);
ALTER TABLE lex_doc_stats ADD COLUMN IF NOT EXISTS scope_id bigint;
CREATE TABLE IF NOT EXISTS lex_scope_stats (
    scope_id  bigint   NOT NULL,
    level     smallint NOT NULL,
    n_chunks  bigint   NOT NULL,
    total_len double precision NOT NULL,
    PRIMARY KEY (scope_id, level)
);
CREATE TABLE IF NOT EXISTS lex_scope_terms (
    term     text     NOT NULL,
    level    smallint NOT NULL,
    scope_id bigint   NOT NULL,
    df       bigint   NOT NULL,  -- chunks of the scope's ready documents at this level that contain the term
    PRIMARY KEY (term, level, scope_id)
);
-- documents per scope and status (every status): the counts a search reports without counting documents
CREATE TABLE IF NOT EXISTS rag_scope_documents (
    scope_id bigint NOT NULL,
    status   text   NOT NULL,
    n        bigint NOT NULL,
    PRIMARY KEY (scope_id, status)
);

-- corpus-wide document frequencies and the corpus's languages: no longer read (statistics are per
-- search; a query is analysed in its own language)
DROP TABLE IF EXISTS lex_terms;
DROP TABLE IF EXISTS lex_configs;

-- The scope a document's chunks are searched in: its scope while it is ready, else none. For the triggers
-- (the owner's; the application role has no grant on it).
CREATE OR REPLACE VIEW rag_search_scopes AS
    SELECT d.id AS document_id, CASE WHEN d.status = 'ready' THEN d.scope_id END AS scope_id FROM documents d;
REVOKE ALL ON rag_search_scopes FROM PUBLIC;

-- The triggers run as the schema owner (SECURITY DEFINER): the application role writes chunks, under their
-- policies, and has no write grant on the tables derived from them.
CREATE OR REPLACE FUNCTION chunks_lex_insert() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO lex_stats AS s (level, n_docs, total_len)
        SELECT level, count(*), sum(doc_len) FROM new_rows GROUP BY level ORDER BY level
    ON CONFLICT (level) DO UPDATE SET n_docs = s.n_docs + excluded.n_docs,
                                      total_len = s.total_len + excluded.total_len;
    -- ns: the search scope of each chunk's document (its scope while ready, else none)
    INSERT INTO lex_doc_stats AS d (document_id, level, n_chunks, total_len, scope_id)
        SELECT n.document_id, n.level, count(*), sum(n.doc_len), min(ns.scope_id) FROM new_rows n
        LEFT JOIN rag_search_scopes ns ON ns.document_id = n.document_id
        GROUP BY n.document_id, n.level ORDER BY n.document_id, n.level
    ON CONFLICT (document_id, level) DO UPDATE SET n_chunks = d.n_chunks + excluded.n_chunks,
                                                   total_len = d.total_len + excluded.total_len,
                                                   scope_id = excluded.scope_id;
    INSERT INTO postings (term, level, chunk_id, document_id, tf, tf_head, doc_len, impact, scope_id)
        SELECT u.lexeme, n.level, n.id, n.document_id, x.tf, x.tf_head, n.doc_len,
               x.tf * 1.9 / (x.tf + 0.9 * (0.6 + 0.4 * n.doc_len / greatest(s.total_len / greatest(s.n_docs, 1), 1))),
               ns.scope_id
        FROM new_rows n JOIN lex_stats s ON s.level = n.level
             LEFT JOIN rag_search_scopes ns ON ns.document_id = n.document_id, unnest(n.tsv) u,
             LATERAL (SELECT coalesce(array_length(u.positions, 1), 1)::real AS tf,
                             (SELECT count(*) FROM unnest(u.weights) wt WHERE wt = 'A')::real AS tf_head) x;
    INSERT INTO lex_scope_stats AS t (scope_id, level, n_chunks, total_len)
        SELECT ns.scope_id, n.level, count(*), sum(n.doc_len) FROM new_rows n
        JOIN rag_search_scopes ns ON ns.document_id = n.document_id WHERE ns.scope_id IS NOT NULL
        GROUP BY ns.scope_id, n.level ORDER BY ns.scope_id, n.level
    ON CONFLICT (scope_id, level) DO UPDATE SET n_chunks = t.n_chunks + excluded.n_chunks,
                                                total_len = t.total_len + excluded.total_len;
    INSERT INTO lex_scope_terms AS t (term, level, scope_id, df)
        SELECT u.lexeme, n.level, ns.scope_id, count(*) FROM new_rows n
        JOIN rag_search_scopes ns ON ns.document_id = n.document_id, unnest(n.tsv) u
        WHERE ns.scope_id IS NOT NULL
        GROUP BY u.lexeme, n.level, ns.scope_id ORDER BY u.lexeme, n.level, ns.scope_id
    ON CONFLICT (term, level, scope_id) DO UPDATE SET df = t.df + excluded.df;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION chunks_lex_delete() RETURNS trigger LANGUAGE plpgsql
SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    -- the per-scope rows are changed by upserts of negative counts in key order, scope statistics before
    -- terms, as everywhere: concurrent writers of one scope queue on its statistics row and never deadlock
    INSERT INTO lex_scope_stats AS t (scope_id, level, n_chunks, total_len)
        SELECT s.scope_id, o.level, -count(*), -sum(o.doc_len) FROM old_rows o
        JOIN lex_doc_stats s ON s.document_id = o.document_id AND s.level = o.level
        WHERE s.scope_id IS NOT NULL GROUP BY s.scope_id, o.level ORDER BY s.scope_id, o.level
    ON CONFLICT (scope_id, level) DO UPDATE SET n_chunks = t.n_chunks + excluded.n_chunks,
                                                total_len = t.total_len + excluded.total_len;
    WITH gone AS (
        DELETE FROM postings p USING old_rows o WHERE p.document_id = o.document_id AND p.chunk_id = o.id
        RETURNING p.term, p.level, p.scope_id
    )
    INSERT INTO lex_scope_terms AS t (term, level, scope_id, df)
        SELECT term, level, scope_id, -count(*) FROM gone WHERE scope_id IS NOT NULL
        GROUP BY term, level, scope_id ORDER BY term, level, scope_id
    ON CONFLICT (term, level, scope_id) DO UPDATE SET df = t.df + excluded.df;
    UPDATE lex_stats s SET n_docs = s.n_docs - d.n, total_len = s.total_len - d.len
        FROM (SELECT level, count(*) AS n, sum(doc_len) AS len FROM old_rows GROUP BY level) d
        WHERE s.level = d.level;
    UPDATE lex_doc_stats s SET n_chunks = s.n_chunks - d.n, total_len = s.total_len - d.len
        FROM (SELECT document_id, level, count(*) AS n, sum(doc_len) AS len FROM old_rows
              GROUP BY document_id, level) d
        WHERE s.document_id = d.document_id AND s.level = d.level;
    DELETE FROM lex_doc_stats s USING (SELECT DISTINCT document_id FROM old_rows) d
        WHERE s.document_id = d.document_id AND s.n_chunks <= 0;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION chunks_lex_insert(), chunks_lex_delete() FROM PUBLIC;

-- upgrades: postings written before impacts existed
UPDATE postings p SET impact = p.tf * 1.9 / (p.tf + 0.9 * (0.6 + 0.4 * p.doc_len / greatest(s.total_len / greatest(s.n_docs, 1), 1)))
    FROM lex_stats s WHERE s.level = p.level AND p.impact = 0;
-- upgrades: per-document statistics of chunks indexed before they existed
INSERT INTO lex_doc_stats (document_id, level, n_chunks, total_len)
    SELECT document_id, level, count(*), sum(doc_len) FROM chunks
    WHERE NOT EXISTS (SELECT 1 FROM lex_doc_stats) GROUP BY document_id, level;

DROP TRIGGER IF EXISTS chunks_lex_insert ON chunks;
CREATE TRIGGER chunks_lex_insert AFTER INSERT ON chunks REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chunks_lex_insert();
DROP TRIGGER IF EXISTS chunks_lex_delete ON chunks;
CREATE TRIGGER chunks_lex_delete AFTER DELETE ON chunks REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION chunks_lex_delete();

-- Row-level security: documents by ACL, chunks through their document.
ALTER TABLE documents ENABLE ROW LEVEL SECURITY;
ALTER TABLE documents FORCE ROW LEVEL SECURITY;
ALTER TABLE chunks ENABLE ROW LEVEL SECURITY;
ALTER TABLE chunks FORCE ROW LEVEL SECURITY;

DROP POLICY IF EXISTS documents_read ON documents;
-- The verified identity's grants (see rag_acl_grants): none without an identity; else 'public', its user, its
-- department (if any) and its roles. Read once per statement (the `(SELECT ...)` is an init plan), not once
-- per row: the postings and statistics policies hash every readable document id, once per statement.
CREATE OR REPLACE FUNCTION rag_identity_grants() RETURNS text[] LANGUAGE sql STABLE PARALLEL SAFE AS $$
SELECT CASE WHEN i[1] = '' THEN '{{}}'::text[] ELSE
    ARRAY['public', 'u:' || i[1]] || CASE WHEN i[2] <> '' THEN ARRAY['d:' || i[2]] ELSE '{{}}'::text[] END
    || ARRAY(SELECT 'r:' || x FROM unnest(string_to_array(nullif(i[3], ''), E'\x1e')) x) END
FROM (SELECT rag_identity() AS i) s $$;
CREATE POLICY documents_read ON documents FOR SELECT USING (acl_grants && (SELECT rag_identity_grants()));
DROP POLICY IF EXISTS documents_insert ON documents;
CREATE POLICY documents_insert ON documents FOR INSERT WITH CHECK (owner_user = (SELECT rag_user()) AND (SELECT rag_user()) <> '');
DROP POLICY IF EXISTS documents_update ON documents;
CREATE POLICY documents_update ON documents FOR UPDATE USING (owner_user = (SELECT rag_user())) WITH CHECK (owner_user = (SELECT rag_user()));
DROP POLICY IF EXISTS documents_delete ON documents;
CREATE POLICY documents_delete ON documents FOR DELETE USING (owner_user = (SELECT rag_user()));

DROP POLICY IF EXISTS chunks_read ON chunks;
CREATE POLICY chunks_read ON chunks FOR SELECT USING (
    EXISTS (SELECT 1 FROM documents d WHERE d.id = chunks.document_id)
);
DROP POLICY IF EXISTS chunks_write ON chunks;
CREATE POLICY chunks_write ON chunks FOR INSERT WITH CHECK (
    EXISTS (SELECT 1 FROM documents d WHERE d.id = chunks.document_id AND d.owner_user = (SELECT rag_user()))
);
DROP POLICY IF EXISTS chunks_delete ON chunks;
CREATE POLICY chunks_delete ON chunks FOR DELETE USING (
    EXISTS (SELECT 1 FROM documents d WHERE d.id = chunks.document_id AND d.owner_user = (SELECT rag_user()))
);

-- Postings and per-document statistics: readable with their document, written (by the triggers) only
-- for documents the user owns. `IN (SELECT ...)` rather than a correlated EXISTS: the readable documents
-- are looked up once per statement and hashed, not once per posting.
ALTER TABLE postings ENABLE ROW LEVEL SECURITY;
ALTER TABLE postings FORCE ROW LEVEL SECURITY;
ALTER TABLE lex_doc_stats ENABLE ROW LEVEL SECURITY;
ALTER TABLE lex_doc_stats FORCE ROW LEVEL SECURITY;
-- Read through their search scope: the scopes the user may read are hashed once per statement (a scan of
-- the scopes, not of the catalogue), and a posting of a document that is not ready is read by nobody.
ALTER TABLE rag_scopes ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag_scopes FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS rag_scopes_read ON rag_scopes;
CREATE POLICY rag_scopes_read ON rag_scopes FOR SELECT USING (grants && (SELECT rag_identity_grants()));
DROP POLICY IF EXISTS postings_read ON postings;
CREATE POLICY postings_read ON postings FOR SELECT USING (scope_id IN (SELECT s.id FROM rag_scopes s));
DROP POLICY IF EXISTS lex_doc_stats_read ON lex_doc_stats;
CREATE POLICY lex_doc_stats_read ON lex_doc_stats FOR SELECT USING (scope_id IN (SELECT s.id FROM rag_scopes s));
ALTER TABLE lex_scope_stats ENABLE ROW LEVEL SECURITY;
ALTER TABLE lex_scope_stats FORCE ROW LEVEL SECURITY;
ALTER TABLE lex_scope_terms ENABLE ROW LEVEL SECURITY;
ALTER TABLE lex_scope_terms FORCE ROW LEVEL SECURITY;
ALTER TABLE rag_scope_documents ENABLE ROW LEVEL SECURITY;
ALTER TABLE rag_scope_documents FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS lex_scope_stats_read ON lex_scope_stats;
CREATE POLICY lex_scope_stats_read ON lex_scope_stats FOR SELECT USING (scope_id IN (SELECT s.id FROM rag_scopes s));
DROP POLICY IF EXISTS lex_scope_terms_read ON lex_scope_terms;
CREATE POLICY lex_scope_terms_read ON lex_scope_terms FOR SELECT USING (scope_id IN (SELECT s.id FROM rag_scopes s));
DROP POLICY IF EXISTS rag_scope_documents_read ON rag_scope_documents;
CREATE POLICY rag_scope_documents_read ON rag_scope_documents FOR SELECT
    USING (scope_id IN (SELECT s.id FROM rag_scopes s));
-- the triggers (the schema owner's, SECURITY DEFINER) keep the scopes and their statistics whoever changed
-- the document; no other role has a write grant on them
DROP POLICY IF EXISTS rag_scopes_definer ON rag_scopes;
CREATE POLICY rag_scopes_definer ON rag_scopes FOR ALL TO CURRENT_USER USING (true) WITH CHECK (true);
DROP POLICY IF EXISTS postings_definer ON postings;
CREATE POLICY postings_definer ON postings FOR ALL TO CURRENT_USER USING (true) WITH CHECK (true);
DROP POLICY IF EXISTS lex_doc_stats_definer ON lex_doc_stats;
CREATE POLICY lex_doc_stats_definer ON lex_doc_stats FOR ALL TO CURRENT_USER USING (true) WITH CHECK (true);
DROP POLICY IF EXISTS lex_scope_stats_definer ON lex_scope_stats;
CREATE POLICY lex_scope_stats_definer ON lex_scope_stats FOR ALL TO CURRENT_USER USING (true) WITH CHECK (true);
DROP POLICY IF EXISTS lex_scope_terms_definer ON lex_scope_terms;
CREATE POLICY lex_scope_terms_definer ON lex_scope_terms FOR ALL TO CURRENT_USER USING (true) WITH CHECK (true);
DROP POLICY IF EXISTS rag_scope_documents_definer ON rag_scope_documents;
CREATE POLICY rag_scope_documents_definer ON rag_scope_documents FOR ALL TO CURRENT_USER USING (true) WITH CHECK (true);

-- A document's scope: the one of its grants, made on first use.
CREATE OR REPLACE FUNCTION rag_scope_of(grants text[]) RETURNS bigint LANGUAGE plpgsql VOLATILE SECURITY DEFINER
SET search_path FROM CURRENT AS $$
DECLARE
    key text[] := ARRAY(SELECT DISTINCT g COLLATE "C" FROM unnest(grants) g ORDER BY 1);
    digest bytea := sha256(convert_to(key::text, 'UTF8'));
    found bigint;
BEGIN
    SELECT s.id INTO found FROM rag_scopes s WHERE s.grants_sha = digest;
    IF found IS NULL THEN
        INSERT INTO rag_scopes (grants, grants_sha) VALUES (key, digest) ON CONFLICT (grants_sha) DO NOTHING
            RETURNING id INTO found;
        IF found IS NULL THEN  -- made by a concurrent transaction meanwhile
            SELECT s.id INTO found FROM rag_scopes s WHERE s.grants_sha = digest;
        END IF;
    END IF;
    RETURN found;
END $$;
REVOKE ALL ON FUNCTION rag_scope_of(text[]) FROM PUBLIC;
-- Before a document row is written: its scope from its ACL (a scope_id the caller wrote is overwritten).
CREATE OR REPLACE FUNCTION documents_scope() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path FROM CURRENT AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.scope_id IS NOT NULL AND NEW.owner_user = OLD.owner_user
       AND NEW.acl_public = OLD.acl_public AND NEW.acl_users = OLD.acl_users
       AND NEW.acl_departments = OLD.acl_departments AND NEW.acl_roles = OLD.acl_roles THEN
        NEW.scope_id := OLD.scope_id;
    ELSE
        NEW.scope_id := rag_scope_of(rag_acl_grants(NEW.owner_user, NEW.acl_public, NEW.acl_users,
                                                    NEW.acl_departments, NEW.acl_roles));
    END IF;
    RETURN NEW;
END $$;
-- After: the document counts per scope and status, and when the document's search scope changed (it became
-- ready or stopped being ready, or its ACL changed while ready), its postings and statistics move with it.
CREATE OR REPLACE FUNCTION documents_scope_moved() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER
SET search_path FROM CURRENT AS $$
DECLARE
    old_scope bigint;
    new_scope bigint;
    doc uuid;
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.scope_id IS NOT DISTINCT FROM NEW.scope_id AND OLD.status = NEW.status THEN
        RETURN NULL;
    END IF;
    -- one statement, rows in key order: concurrent transactions lock the counters in the same order
    INSERT INTO rag_scope_documents AS c (scope_id, status, n)
        SELECT x.scope_id, x.status, sum(x.n) FROM (
            SELECT OLD.scope_id AS scope_id, OLD.status AS status, -1 AS n WHERE TG_OP <> 'INSERT'
            UNION ALL SELECT NEW.scope_id, NEW.status, 1 WHERE TG_OP <> 'DELETE') x
        WHERE x.scope_id IS NOT NULL GROUP BY x.scope_id, x.status ORDER BY x.scope_id, x.status
    ON CONFLICT (scope_id, status) DO UPDATE SET n = c.n + excluded.n;
    IF TG_OP <> 'UPDATE' THEN
        RETURN NULL;  -- a new document has no chunks yet; a deleted one's chunks take their statistics along
    END IF;
    old_scope := CASE WHEN OLD.status = 'ready' THEN OLD.scope_id END;
    new_scope := CASE WHEN NEW.status = 'ready' THEN NEW.scope_id END;
    IF old_scope IS NOT DISTINCT FROM new_scope THEN
        RETURN NULL;
    END IF;
    doc := NEW.id;
    -- out of the old scope (if any) and into the new one (if any): one upsert per table, in key order
    INSERT INTO lex_scope_stats AS t (scope_id, level, n_chunks, total_len)
        SELECT m.scope_id, l.level, m.sign * l.n_chunks, m.sign * l.total_len
        FROM lex_doc_stats l, (VALUES (old_scope, -1), (new_scope, 1)) m(scope_id, sign)
        WHERE l.document_id = doc AND m.scope_id IS NOT NULL ORDER BY m.scope_id, l.level
    ON CONFLICT (scope_id, level) DO UPDATE SET n_chunks = t.n_chunks + excluded.n_chunks,
                                                total_len = t.total_len + excluded.total_len;
    INSERT INTO lex_scope_terms AS t (term, level, scope_id, df)
        SELECT p.term, p.level, m.scope_id, m.sign * p.n
        FROM (SELECT term, level, count(*) AS n FROM postings WHERE document_id = doc GROUP BY term, level) p,
             (VALUES (old_scope, -1), (new_scope, 1)) m(scope_id, sign)
        WHERE m.scope_id IS NOT NULL ORDER BY p.term, p.level, m.scope_id
    ON CONFLICT (term, level, scope_id) DO UPDATE SET df = t.df + excluded.df;
    UPDATE postings SET scope_id = new_scope WHERE document_id = doc;
    UPDATE lex_doc_stats SET scope_id = new_scope WHERE document_id = doc;
    RETURN NULL;
END $$;
REVOKE ALL ON FUNCTION documents_scope(), documents_scope_moved() FROM PUBLIC;
DROP TRIGGER IF EXISTS documents_scope ON documents;
CREATE TRIGGER documents_scope BEFORE INSERT OR UPDATE ON documents FOR EACH ROW EXECUTE FUNCTION documents_scope();
DROP TRIGGER IF EXISTS documents_scope_moved ON documents;
CREATE TRIGGER documents_scope_moved AFTER INSERT OR UPDATE OR DELETE ON documents
    FOR EACH ROW EXECUTE FUNCTION documents_scope_moved();
-- upgrades: documents written before scopes existed get theirs (the triggers above move their statistics)
UPDATE documents SET scope_id = NULL WHERE scope_id IS NULL;
-- per command, not FOR ALL: a FOR ALL policy would add a second documents lookup to every read
DROP POLICY IF EXISTS postings_owner ON postings;
DROP POLICY IF EXISTS lex_doc_stats_owner ON lex_doc_stats;
DROP POLICY IF EXISTS postings_insert ON postings;
CREATE POLICY postings_insert ON postings FOR INSERT WITH CHECK (
    document_id IN (SELECT d.id FROM documents d WHERE d.owner_user = (SELECT rag_user())));
DROP POLICY IF EXISTS postings_update ON postings;
CREATE POLICY postings_update ON postings FOR UPDATE USING (
    document_id IN (SELECT d.id FROM documents d WHERE d.owner_user = (SELECT rag_user())));
DROP POLICY IF EXISTS postings_delete ON postings;
CREATE POLICY postings_delete ON postings FOR DELETE USING (
    document_id IN (SELECT d.id FROM documents d WHERE d.owner_user = (SELECT rag_user())));
DROP POLICY IF EXISTS lex_doc_stats_insert ON lex_doc_stats;
CREATE POLICY lex_doc_stats_insert ON lex_doc_stats FOR INSERT WITH CHECK (
    document_id IN (SELECT d.id FROM documents d WHERE d.owner_user = (SELECT rag_user())));
DROP POLICY IF EXISTS lex_doc_stats_update ON lex_doc_stats;
CREATE POLICY lex_doc_stats_update ON lex_doc_stats FOR UPDATE USING (
    document_id IN (SELECT d.id FROM documents d WHERE d.owner_user = (SELECT rag_user())));
DROP POLICY IF EXISTS lex_doc_stats_delete ON lex_doc_stats;
CREATE POLICY lex_doc_stats_delete ON lex_doc_stats FOR DELETE USING (
    document_id IN (SELECT d.id FROM documents d WHERE d.owner_user = (SELECT rag_user())));

-- The application role: no superuser, no BYPASSRLS; every table it may touch is under forced row-level
-- security, and it has no grant on the rest.
GRANT USAGE ON SCHEMA public TO {app_role};
REVOKE ALL ON documents, chunks, postings, lex_doc_stats, lex_stats FROM {app_role};
GRANT SELECT, INSERT, UPDATE, DELETE ON documents TO {app_role};
GRANT SELECT, INSERT, DELETE ON chunks TO {app_role};
GRANT SELECT ON postings, lex_doc_stats TO {app_role};
REVOKE ALL ON rag_scopes, lex_scope_stats, lex_scope_terms, rag_scope_documents FROM {app_role};
GRANT SELECT ON rag_scopes, lex_scope_stats, lex_scope_terms, rag_scope_documents TO {app_role};

-- Audit trail of document changes (who changed what): append-only for the application role, readable by
-- the document's owner and by admins. `owner_user` is copied from the document so the trail outlives it.
CREATE TABLE IF NOT EXISTS document_audit (
    id          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    document_id uuid        NOT NULL,
    owner_user  text        NOT NULL,
    actor       text        NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    action      text        NOT NULL,
    before      jsonb       NOT NULL DEFAULT '{{}}',
    after       jsonb       NOT NULL DEFAULT '{{}}'
);
CREATE INDEX IF NOT EXISTS document_audit_document_idx ON document_audit (document_id, at, id);
ALTER TABLE document_audit ENABLE ROW LEVEL SECURITY;
ALTER TABLE document_audit FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS document_audit_read ON document_audit;
CREATE POLICY document_audit_read ON document_audit FOR SELECT USING (
    (SELECT rag_user()) <> '' AND (owner_user = (SELECT rag_user()) OR (SELECT rag_roles()) @> ARRAY['admin']));
DROP POLICY IF EXISTS document_audit_insert ON document_audit;
CREATE POLICY document_audit_insert ON document_audit FOR INSERT WITH CHECK (
    actor = (SELECT rag_user()) AND (SELECT rag_user()) <> ''
    AND owner_user = (SELECT rag_user()));  -- only the owner changes a document

-- The admin view of failed and stuck documents of every owner. The function runs as the schema owner (an
-- admin may not read every document, and must not search them: no policy on `documents` widens for admins),
-- refuses a caller without the admin role, and returns only documents with a problem: failed, a failed
-- pending version, or a (pending) ingestion without progress for `stuck_after` seconds.
DROP POLICY IF EXISTS documents_definer_read ON documents;
CREATE POLICY documents_definer_read ON documents FOR SELECT TO CURRENT_USER USING (true);
CREATE OR REPLACE FUNCTION rag_problem_documents(stuck_after double precision, max_rows integer)
RETURNS SETOF documents LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    IF NOT ('admin' = ANY (rag_roles())) THEN
        RAISE EXCEPTION 'only an admin may list problem documents' USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN QUERY SELECT * FROM documents d
        WHERE d.status = 'failed' OR d.pending_status = 'failed'
           OR ((d.status IN ('queued', 'parsing', 'embedding', 'indexing')
                OR d.pending_status IN ('queued', 'parsing', 'embedding', 'indexing'))
               AND d.updated_at < now() - make_interval(secs => stuck_after))
        ORDER BY d.updated_at, d.id LIMIT max_rows;
END $$;
REVOKE ALL ON FUNCTION rag_problem_documents(double precision, integer) FROM PUBLIC;
REVOKE ALL ON document_audit FROM {app_role};
GRANT SELECT, INSERT ON document_audit TO {app_role};
-- Append-only for everyone but the schema owner: no role has an UPDATE, DELETE or TRUNCATE grant, and a
-- superuser (or a role given a grant later) is stopped by these triggers too; only the owner may change rows.
CREATE OR REPLACE FUNCTION document_audit_append_only() RETURNS trigger LANGUAGE plpgsql
SET search_path FROM CURRENT AS $$
BEGIN
    IF (SELECT c.relowner FROM pg_class c WHERE c.oid = TG_RELID)
       IS DISTINCT FROM (SELECT r.oid FROM pg_roles r WHERE r.rolname = current_user) THEN
        RAISE EXCEPTION 'document_audit is append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS document_audit_append_only ON document_audit;
CREATE TRIGGER document_audit_append_only BEFORE UPDATE OR DELETE ON document_audit
    FOR EACH STATEMENT EXECUTE FUNCTION document_audit_append_only();
DROP TRIGGER IF EXISTS document_audit_no_truncate ON document_audit;
CREATE TRIGGER document_audit_no_truncate BEFORE TRUNCATE ON document_audit
    FOR EACH STATEMENT EXECUTE FUNCTION document_audit_append_only();

-- The only way to an identity (above); the key and the MAC function stay the owner's.
REVOKE ALL ON rag_identity_key FROM {app_role};
GRANT EXECUTE ON FUNCTION rag_set_identity(text, text, text[], bigint, text) TO {app_role};
GRANT EXECUTE ON FUNCTION rag_problem_documents(double precision, integer) TO {app_role};

-- Conversations kept on the server (README "Conversations"): only the owner reads or changes one, an admin
-- included (an admin sees traces and feedback ratings, not other users' conversations). A message keeps the
-- ids of every document whose text went into its answer (`source_document_ids`: its sources, and those of the
-- earlier answers used as its history); reading it joins them against the documents the reader may read now,
-- under RLS, and an answer with one missing is withdrawn (conversations.py).
CREATE TABLE IF NOT EXISTS conversations (
    id          uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    owner_user  text        NOT NULL,
    title       text        NOT NULL DEFAULT '',
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS conversations_owner_idx ON conversations (owner_user, updated_at DESC, id DESC);
CREATE TABLE IF NOT EXISTS conversation_messages (
    id                  uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    conversation_id     uuid        NOT NULL REFERENCES conversations (id) ON DELETE CASCADE,
    owner_user          text        NOT NULL,
    position            bigint      GENERATED ALWAYS AS IDENTITY,
    question            text        NOT NULL,
    rewritten_question  text        NOT NULL DEFAULT '',
    answer              text        NOT NULL DEFAULT '',
    short_answer        text        NOT NULL DEFAULT '',
    outcome             text        NOT NULL,
    trace_id            text        NOT NULL DEFAULT '',
    details             jsonb       NOT NULL DEFAULT '{{}}',  -- sources, evidence, verification (the gateway's)
    source_document_ids uuid[]      NOT NULL DEFAULT '{{}}',
    created_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS conversation_messages_conversation_idx ON conversation_messages (conversation_id, position);
CREATE TABLE IF NOT EXISTS message_feedback (
    message_id      uuid        PRIMARY KEY REFERENCES conversation_messages (id) ON DELETE CASCADE,
    owner_user      text        NOT NULL,
    rating          text        NOT NULL CHECK (rating IN ('up', 'down')),
    comment         text        NOT NULL DEFAULT '',
    trace_id        text        NOT NULL DEFAULT '',
    created_at      timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS message_feedback_updated_idx ON message_feedback (updated_at DESC, message_id);
ALTER TABLE conversations ENABLE ROW LEVEL SECURITY;
ALTER TABLE conversations FORCE ROW LEVEL SECURITY;
ALTER TABLE conversation_messages ENABLE ROW LEVEL SECURITY;
ALTER TABLE conversation_messages FORCE ROW LEVEL SECURITY;
ALTER TABLE message_feedback ENABLE ROW LEVEL SECURITY;
ALTER TABLE message_feedback FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS conversations_owner ON conversations;
CREATE POLICY conversations_owner ON conversations FOR ALL
    USING ((SELECT rag_user()) <> '' AND owner_user = (SELECT rag_user()))
    WITH CHECK ((SELECT rag_user()) <> '' AND owner_user = (SELECT rag_user()));
DROP POLICY IF EXISTS conversation_messages_owner ON conversation_messages;
CREATE POLICY conversation_messages_owner ON conversation_messages FOR ALL
    USING ((SELECT rag_user()) <> '' AND owner_user = (SELECT rag_user()))
    WITH CHECK ((SELECT rag_user()) <> '' AND owner_user = (SELECT rag_user())
                AND conversation_id IN (SELECT c.id FROM conversations c));
DROP POLICY IF EXISTS message_feedback_owner ON message_feedback;
CREATE POLICY message_feedback_owner ON message_feedback FOR ALL
    USING ((SELECT rag_user()) <> '' AND owner_user = (SELECT rag_user()))
    WITH CHECK ((SELECT rag_user()) <> '' AND owner_user = (SELECT rag_user())
                AND message_id IN (SELECT m.id FROM conversation_messages m));
REVOKE ALL ON conversations, conversation_messages, message_feedback FROM {app_role};
GRANT SELECT, INSERT, UPDATE, DELETE ON conversations, message_feedback TO {app_role};
GRANT SELECT, INSERT, DELETE ON conversation_messages TO {app_role};

-- The admin's view of feedback: rating, comment, trace id, user and time of every user's rated messages,
-- never the question or the answer (those stay the owner's). Runs as the schema owner and refuses a caller
-- without the admin role.
DROP POLICY IF EXISTS message_feedback_definer_read ON message_feedback;
CREATE POLICY message_feedback_definer_read ON message_feedback FOR SELECT TO CURRENT_USER USING (true);
CREATE OR REPLACE FUNCTION rag_feedback(only_rating text, max_rows integer)
RETURNS TABLE (message_id uuid, owner_user text, rating text, comment text, trace_id text, updated_at timestamptz)
LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path FROM CURRENT AS $$
BEGIN
    IF NOT ('admin' = ANY (rag_roles())) THEN
        RAISE EXCEPTION 'only an admin may list feedback' USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN QUERY SELECT f.message_id, f.owner_user, f.rating, f.comment, f.trace_id, f.updated_at
        FROM message_feedback f WHERE only_rating = '' OR f.rating = only_rating
        ORDER BY f.updated_at DESC, f.message_id LIMIT max_rows;
END $$;
REVOKE ALL ON FUNCTION rag_feedback(text, integer) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION rag_feedback(text, integer) TO {app_role};
