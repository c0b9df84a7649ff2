"""The embedded default backend: PostgreSQL + pgvector.

Vector leg: HNSW cosine search (pgvector 0.8 iterative scans, so filters do not starve the result).
Lexical leg: Okapi BM25 computed in SQL from postings (term frequencies from lexeme positions) and statistics
computed per query over the documents searched (document frequency from their postings, chunk count and
length from `lex_doc_stats`), so a score says nothing about documents the user cannot read.
Chunk rows and the postings and statistics derived from them are protected by row-level security: every query
runs as the user.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry import trace

from ragmesh.common.v1 import common_pb2
from ragmesh_common import attributes as attr
from ragmesh_common.errors import InvalidArgument
from ragmesh_common.identity import UserContext
from ragmesh_retriever.analysis import detect_language, prepare_lexical_text, query_analyses, regconfig_for, warm_up
from ragmesh_retriever.backends.base import Hit, Scope, SearchQuery, kind_name, kind_value
from ragmesh_retriever.documents import finish_index, lock_version, parse_document_id
from ragmesh_retriever.ranking import Fusion, fuse, merge_languages, rocchio
from ragmesh_retriever.session import Database

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

_INSERT = """
WITH src AS (
    SELECT u.id, u.level, nullif(u.parent_id, '') AS parent_id, u.ordinal,
           ARRAY(SELECT jsonb_array_elements_text(u.section_path::jsonb)) AS section_path,
           u.page, u.kind, u.title, u.text, nullif(u.embedding, '')::vector AS embedding,
           u.cfg::regconfig AS cfg, u.head, u.body, u.ocr_confidence
    FROM unnest(%(ids)s::text[], %(levels)s::smallint[], %(parents)s::text[], %(ordinals)s::int[],
                %(paths)s::text[], %(pages)s::int[], %(kinds)s::text[], %(titles)s::text[], %(texts)s::text[],
                %(embeddings)s::text[], %(cfgs)s::text[], %(heads)s::text[], %(bodies)s::text[],
                %(ocr)s::real[])
         AS u(id, level, parent_id, ordinal, section_path, page, kind, title, text, embedding, cfg, head, body,
              ocr_confidence)
), analysed AS (
    -- title and section path as weight-A positions (postings count them as tf_head), the text after them
    SELECT src.*, setweight(to_tsvector(src.cfg, src.head), 'A') || to_tsvector(src.cfg, src.body) AS tsv FROM src
)
INSERT INTO chunks (id, document_id, level, parent_id, ordinal, section_path, page, kind, title, text,
                    ts_config, tsv, doc_len, embedding, ocr_confidence)
SELECT a.id, %(document_id)s, a.level, a.parent_id, a.ordinal, a.section_path, a.page, a.kind, a.title, a.text,
       a.cfg, a.tsv,
       (SELECT coalesce(sum(coalesce(array_length(t.positions, 1), 1)), 0) FROM unnest(a.tsv) t), a.embedding,
       a.ocr_confidence
FROM analysed a
"""

# Okapi BM25 (Robertson; Lucene's idf): idf = ln(1 + (N - df + 0.5) / (df + 0.5)),
# score = sum over query terms of qtf * idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)),
# where tf counts an occurrence in the title or section path `heading weight` times (a BM25F-style field
# weight on term frequency; document length stays the plain token count).
# N, avgdl and df are those of the documents searched (%(docs)s: what the user may read, or the part of it
# the request narrows to), never of the whole corpus: a word found only in documents the user cannot read
# then scores exactly like a word found nowhere.
_BM25_TERMS = """
WITH qa AS (
    SELECT * FROM unnest(%(qcfgs)s::text[], %(qtexts)s::text[]) AS x(cfg, txt)
), q AS (
    -- the query analysed with each configuration; a lexeme two analyses share counts once
    SELECT u.lexeme AS term, max(coalesce(array_length(u.positions, 1), 1)) AS qtf
    FROM qa CROSS JOIN LATERAL unnest(to_tsvector(qa.cfg::regconfig, qa.txt)) u
    GROUP BY u.lexeme
), stats AS MATERIALIZED (
    {stats}
), tdf AS MATERIALIZED (
    -- each query term's document frequency among the documents searched
    SELECT s.level, s.n_docs, s.avgdl, q.term, q.qtf, ({df})::float8 AS df
    FROM q CROSS JOIN stats s
), w AS MATERIALIZED (
    -- per query term and level: the idf-weighted query term frequency and the length-normalisation
    -- constants, in double precision, computed once per term (never per posting)
    SELECT level, term,
           qtf * ln(1.0::float8 + (n_docs - df + 0.5::float8) / (df + 0.5::float8)) AS weight,
           %(k1)s::float8 * (1.0::float8 - %(b)s::float8) AS norm_base,
           %(k1)s::float8 * %(b)s::float8 / avgdl AS norm_len
    FROM tdf WHERE df > 0
), budget AS (
    -- per term, the postings a term-first plan reads (impact order): the most weighted term of the level reads
    -- %(per_term)s, a term of a third of its weight a third as many (each of its postings adds at most a third
    -- as much to a score), never fewer than %(min_per_term)s; a term with fewer readable postings reads them all
    SELECT w.*, least(%(per_term)s::int, greatest(%(min_per_term)s::int,
               ceil(%(per_term)s::float8 * w.weight / nullif(max(w.weight) OVER (PARTITION BY w.level), 0))::int
           )) AS quota
    FROM w
)
SELECT p.chunk_id,
       sum(w.weight * p.tf * (%(k1)s::float8 + 1.0::float8) / (p.tf + w.norm_base + w.norm_len * p.doc_len)) AS score,
       -- the score of a chunk matching every term without limit: what scores of two analyses are divided by
       (SELECT max(lw.s) FROM (SELECT sum(w2.weight) AS s FROM w w2 GROUP BY w2.level) lw)
           * (%(k1)s::float8 + 1.0::float8) AS bound
FROM budget w CROSS JOIN LATERAL {postings} p
GROUP BY p.chunk_id
ORDER BY score DESC, p.chunk_id
LIMIT %(k)s
"""
# Term first (many readable documents): a term's postings strongest first, at most its quota (`budget`:
# %(per_term)s for the most weighted term, fewer for a common one); exact whenever the term's readable
# postings are fewer, otherwise the weakest, which add the least, are left out (impact-ordered early
# termination, so the work per query is bounded at any corpus size).
_POSTINGS_BY_TERM = """(
    SELECT p.chunk_id, p.tf + %(head_extra)s::real * p.tf_head AS tf, p.doc_len FROM postings p
    WHERE p.term = w.term AND p.level = w.level AND p.document_id = ANY(%(docs)s::uuid[])
    ORDER BY p.impact DESC
    LIMIT w.quota
)"""
# Document first (few readable documents): every posting of the query terms in those documents, exact;
# a user who may read 1 % of a large corpus never walks the other 99 %'s postings.
_POSTINGS_BY_DOCUMENT = """(
    SELECT p.chunk_id, p.tf + %(head_extra)s::real * p.tf_head AS tf, p.doc_len FROM postings p
    WHERE p.document_id = ANY(%(docs)s::uuid[]) AND p.term = w.term AND p.level = w.level
)"""
# Statistics of listed documents: summed over their rows, the document frequency counted in their postings.
_STATS_OF_DOCUMENTS = """SELECT level, sum(n_chunks)::float8 AS n_docs, sum(total_len) / sum(n_chunks) AS avgdl
    FROM lex_doc_stats WHERE document_id = ANY(%(docs)s::uuid[]) AND level = ANY(%(levels)s)
    GROUP BY level HAVING sum(n_chunks) > 0"""
_DF_OF_DOCUMENTS = """SELECT count(*) FROM postings p
            WHERE p.term = q.term AND p.level = s.level AND p.document_id = ANY(%(docs)s::uuid[])"""
# A scope too large to list: the same statistics summed over the ACL scopes the user may read (row-level
# security on the per-scope tables keeps the others out); they partition the ready documents, so the sums are
# exactly those of the readable documents, at a cost that does not depend on how many there are.
_STATS_OF_SCOPES = """SELECT level, sum(n_chunks)::float8 AS n_docs, sum(total_len) / sum(n_chunks)::float8 AS avgdl
    FROM lex_scope_stats WHERE level = ANY(%(levels)s)
    GROUP BY level HAVING sum(n_chunks) > 0"""
_DF_OF_SCOPES = """SELECT coalesce(sum(t.df), 0) FROM lex_scope_terms t WHERE t.term = q.term AND t.level = s.level"""
# Term first over the readable scopes: the postings' row-level security is the only filter.
_POSTINGS_IN_SCOPES = """(
    SELECT p.chunk_id, p.tf + %(head_extra)s::real * p.tf_head AS tf, p.doc_len FROM postings p
    WHERE p.term = w.term AND p.level = w.level
    ORDER BY p.impact DESC
    LIMIT w.quota
)"""


def _bm25(stats: str, df: str, postings: str) -> str:
    return _BM25_TERMS.replace("{stats}", stats).replace("{df}", df).replace("{postings}", postings)


_BM25_BY_TERM = _bm25(_STATS_OF_DOCUMENTS, _DF_OF_DOCUMENTS, _POSTINGS_BY_TERM)
_BM25_BY_DOCUMENT = _bm25(_STATS_OF_DOCUMENTS, _DF_OF_DOCUMENTS, _POSTINGS_BY_DOCUMENT)
_BM25_BY_SCOPE = _bm25(_STATS_OF_SCOPES, _DF_OF_SCOPES, _POSTINGS_IN_SCOPES)

_VECTOR = """
SELECT id, 1 - (embedding <=> %(vec)s::vector) AS sim FROM chunks
WHERE level = ANY(%(levels)s) AND document_id = ANY(%(docs)s::uuid[]) AND embedding IS NOT NULL
ORDER BY embedding <=> %(vec)s::vector
LIMIT %(k)s
"""
# A scope too large to list: the chunks' row-level security decides what is readable, and a candidate of the
# HNSW scan is kept when its document is ready: one primary-key lookup per candidate, never per document (a
# scalar subquery, which the planner cannot turn into a join that would read every readable document first).
_READY = "(SELECT d.status FROM documents d WHERE d.id = c.document_id) = 'ready'"
_VECTOR_IN_SCOPES = f"""
SELECT c.id, 1 - (c.embedding <=> %(vec)s::vector) AS sim FROM chunks c
WHERE c.level = ANY(%(levels)s) AND c.embedding IS NOT NULL AND {_READY}
ORDER BY c.embedding <=> %(vec)s::vector
LIMIT %(k)s
"""

# A scope of few readable chunks among many (1 % of the catalogue: the HNSW walk with the permission filter
# reads ~100 candidates per kept one): the readable documents' chunks scored exactly. The distance is computed in a
# materialized CTE, so the planner cannot walk the HNSW index instead; the documents come by their scope
# (documents_ready_scope_idx), their chunks by chunks_document_idx, all under row-level security.
_VECTOR_EXACT_IN_SCOPES = """
WITH scored AS MATERIALIZED (
    SELECT c.id, c.embedding <=> %(vec)s::vector AS distance FROM chunks c
    WHERE c.document_id IN (
        SELECT d.id FROM documents d WHERE d.status = 'ready' AND d.scope_id IN (SELECT s.id FROM rag_scopes s)
    ) AND c.level = ANY(%(levels)s) AND c.embedding IS NOT NULL
)
SELECT id, 1 - distance AS sim FROM scored ORDER BY distance, id LIMIT %(k)s
"""

_DETAILS_COLUMNS = """
SELECT c.id, c.document_id, c.level, c.parent_id, c.ordinal, c.section_path, c.page, c.kind, c.title, c.text,
       CASE WHEN c.embedding IS NULL OR %(vec)s::text IS NULL THEN NULL
            ELSE 1 - (c.embedding <=> %(vec)s::vector) END AS sim
FROM chunks c WHERE c.id = ANY(%(ids)s)"""
_DETAILS = _DETAILS_COLUMNS + " AND c.document_id = ANY(%(docs)s::uuid[])"
_DETAILS_IN_SCOPES = _DETAILS_COLUMNS + f" AND {_READY}"


_SYSTEM = UserContext("system:retriever")
CHANGED_RETRIES = 3


async def _given(scores: Mapping[str, float]) -> dict[str, float]:
    return dict(scores)


_UUID = r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}"
_UUID_LIST = re.compile(rf"{_UUID}(?:,{_UUID})*")


def uuid_array_literal(ids: list[str]) -> str:
    """A uuid[] literal built in one join: psycopg adapting a Python list element by element costs a
    reader of a thousand documents milliseconds per leg; the server parses this in C (measured at 100k
    chunks, 1,000 readable documents: vector leg p50 6.4 → 3.9 ms, lexical 13.5 → 11.4 ms)."""
    joined = ",".join(ids)
    if ids and not _UUID_LIST.fullmatch(joined):
        raise InvalidArgument("document ids must be UUIDs")
    return "{" + joined + "}"


def vector_plan(readable: int, catalogue: float, pool: int, max_chunks: int) -> str:
    """`exact` or `hnsw_in_scopes` for a vector leg over ACL scopes. Scoring the `readable` chunks exactly costs
    about `readable` distance computations; walking the HNSW graph through the permission filter reads about
    `pool` / selectivity = `pool` × `catalogue` / `readable` candidates, each about as dear (measured, 384-d, 100k
    chunks: 1 % readable, 19 ms exact vs 110 ms walking; 10 %, 94 vs 29 ms). So exact while readable² ≤ pool ×
    catalogue, and never above `max_chunks`. A catalogue never analysed (no estimate) counts as the readable
    chunks alone."""
    if readable > max_chunks:
        return "hnsw_in_scopes"
    catalogue = max(catalogue, float(readable))
    return "exact" if float(readable) * readable <= pool * catalogue else "hnsw_in_scopes"


def _docs_param(scope: Scope) -> str | None:
    """The `docs` parameter of the statements over listed documents (None for a scope searched by ACL)."""
    return None if scope.document_ids is None else uuid_array_literal(scope.document_ids)


def lexical_columns(fields: list[tuple[str, list[str], str]], default_lang: str) -> dict[str, list[str]]:
    """The `cfgs`, `heads` and `bodies` parameters of `_INSERT` for chunks given as (title, section path,
    text): the text-search configuration of each chunk's detected language (`default_lang`, a language code
    or configuration name, when short or unclear), its heading (title and section path) and its text, each
    prepared for that configuration."""
    langs = [detect_language(text, default=default_lang) for _, _, text in fields]
    return {
        "cfgs": [regconfig_for(lang) for lang in langs],
        "heads": [
            prepare_lexical_text(" ".join([title, *path]), lang)
            for (title, path, _), lang in zip(fields, langs, strict=True)
        ],
        "bodies": [prepare_lexical_text(text, lang) for (_, _, text), lang in zip(fields, langs, strict=True)],
    }


def vector_literal(values: list[float]) -> str:
    return "[" + ",".join(repr(float(v)) for v in values) + "]"


def chunk_message(row: tuple[Any, ...]) -> common_pb2.Chunk:
    """A chunk from a tuple row whose first ten columns are those of `_DETAILS` (the default row factory)."""
    cid, doc, level, parent, ordinal, path, page, kind, title, text = row[:10]
    return common_pb2.Chunk(
        chunk_id=cid,
        document_id=str(doc),
        level=level,
        parent_id=parent or "",
        ordinal=ordinal,
        section_path=path,
        page=page,
        kind=kind_value(kind),
        title=title,
        text=text,
    )


class PgVectorBackend:
    name = "pgvector"
    fusions = frozenset(Fusion)
    shares_catalogue = True  # chunks and postings under the catalogue's RLS; ON DELETE CASCADE from documents

    def __init__(
        self,
        db: Database,
        *,
        dimension: int | None = None,
        text_search_config: str = "english",
        k1: float = 0.9,
        b: float = 0.4,
        heading_weight: float = 1.0,
        ef_search: int = 100,
        postings_per_term: int = 2000,
        min_postings_per_term: int = 2000,
        document_first_max_docs: int = 200,
        vector_exact_max_chunks: int = 0,
    ) -> None:
        self.db = db
        self.dimension = dimension
        self.cfg = text_search_config
        self.k1 = k1
        self.b = b
        self.heading_weight = heading_weight
        self.ef_search = ef_search
        self.postings_per_term = postings_per_term
        self.min_postings_per_term = min(min_postings_per_term, postings_per_term)
        self.document_first_max_docs = document_first_max_docs
        # a scope the document-first plan would not take is searched by ACL scope, never listed
        self.scope_list_max: int | None = document_first_max_docs
        # a scope searched by ACL with at most this many ready chunks at the searched levels may be scored exactly
        # instead of walking the HNSW graph through the permission filter (`vector_plan`; 0 = always the graph)
        self.vector_exact_max_chunks = vector_exact_max_chunks

    async def start(self) -> None:
        await asyncio.to_thread(warm_up)
        if self.dimension is None:
            async with self.db.transaction(_SYSTEM) as conn:
                row = await (
                    await conn.execute(
                        "SELECT atttypmod FROM pg_attribute WHERE attrelid = 'chunks'::regclass AND attname = 'embedding'"
                    )
                ).fetchone()
            self.dimension = int(row[0]) if row and row[0] > 0 else None

    async def close(self) -> None:
        return None

    async def index(self, user: UserContext, document_id: str, chunks: list[common_pb2.Chunk], version: int = 0) -> int:
        doc_id = parse_document_id(document_id)
        for i, chunk in enumerate(chunks):
            if not chunk.chunk_id:
                raise InvalidArgument(f"chunk {i} has no chunk_id")
            if chunk.document_id and chunk.document_id != document_id:
                raise InvalidArgument(f"chunk {chunk.chunk_id} belongs to {chunk.document_id}, not {document_id}")
            if self.dimension and chunk.embedding and len(chunk.embedding) != self.dimension:
                raise InvalidArgument(
                    f"chunk {chunk.chunk_id} has a {len(chunk.embedding)}-d embedding; "
                    f"the index holds {self.dimension}-d vectors"
                )
        params = {
            "document_id": doc_id,
            "cfg": self.cfg,
            "ids": [c.chunk_id for c in chunks],
            "levels": [c.level or common_pb2.CHUNK_LEVEL_PARAGRAPH for c in chunks],
            "parents": [c.parent_id for c in chunks],
            "ordinals": [c.ordinal for c in chunks],
            "paths": [json.dumps(list(c.section_path)) for c in chunks],
            "pages": [c.page for c in chunks],
            "kinds": [kind_name(c.kind) for c in chunks],
            "titles": [c.title for c in chunks],
            "texts": [c.text for c in chunks],
            "embeddings": [vector_literal(list(c.embedding)) if c.embedding else "" for c in chunks],
            "ocr": [c.ocr_confidence if c.HasField("ocr_confidence") else None for c in chunks],
        }
        # language identification of a large document takes a while: off the event loop
        params.update(
            await asyncio.to_thread(
                lexical_columns, [(c.title, list(c.section_path), c.text) for c in chunks], self.cfg
            )
        )
        # one transaction: a search sees the old chunks (and version) or the new ones, never both or neither
        async with self.db.transaction(user) as conn:
            target = await lock_version(conn, doc_id, version)  # the owner only; a superseded version is refused
            await conn.execute("DELETE FROM chunks WHERE document_id = %s", (doc_id,))
            if chunks:
                await conn.execute(_INSERT, params)
            await finish_index(conn, target, sum(1 for c in chunks if c.level in (0, common_pb2.CHUNK_LEVEL_PARAGRAPH)))
        return len(chunks)

    async def delete(self, user: UserContext, document_id: str) -> None:
        async with self.db.transaction(user) as conn:
            await conn.execute("DELETE FROM chunks WHERE document_id = %s", (parse_document_id(document_id),))

    async def lexical(
        self, user: UserContext, query: SearchQuery, accessible: Sequence[str] | Scope
    ) -> dict[str, float]:
        scope = Scope.of(accessible)
        if not scope or not query.text.strip() or query.alpha >= 1.0:
            return {}
        pool = max(query.candidates, query.top_k)
        base = {"levels": query.levels, "docs": _docs_param(scope), "k": pool, "cfg": self.cfg}
        return await self._lexical_leg(user, query, base, scope)

    async def search(
        self,
        user: UserContext,
        query: SearchQuery,
        accessible: Sequence[str] | Scope,
        lexical: Mapping[str, float] | None = None,
        attempt: int = 0,
    ) -> list[Hit]:
        scope = Scope.of(accessible)
        if not scope:
            return []
        pool = max(query.candidates, query.top_k)
        docs = _docs_param(scope)
        base = {"levels": query.levels, "docs": docs, "k": pool, "cfg": self.cfg}
        listed = scope.document_ids is not None
        plan = "listed" if listed else "hnsw_in_scopes"

        async def vector_leg() -> dict[str, float]:
            nonlocal plan
            if not query.vector or query.alpha <= 0.0:
                return {}
            async with self._vector_transaction(user, pool, listed) as conn:
                plan = await self._vector_plan(conn, scope, query.levels, pool)
                return await self._vector_leg(conn, {**base, "vec": vector_literal(query.vector)}, plan)

        # the two legs run at once, each on a connection (and a server process) of its own, under the user
        lex, vector = await asyncio.gather(
            self.lexical(user, query, scope) if lexical is None else _given(lexical), vector_leg()
        )
        vec = vector_literal(query.vector) if query.vector else None
        original_vec, expanded_query = vec, False
        fused = fuse(query.fusion, lex, vector, query.alpha, query.graph, query.graph_weight)
        span = trace.get_current_span()
        span.set_attribute(attr.RAG_SEARCH_LEXICAL_HITS, len(lex))
        span.set_attribute(attr.RAG_SEARCH_VECTOR_HITS, len(vector))
        if query.graph:
            span.set_attribute(attr.RAG_SEARCH_GRAPH_HITS, len(query.graph))
        if not fused:
            return []
        async with self.db.transaction(user) as conn:
            if query.feedback_docs > 0 and vec is not None and query.alpha > 0.0:
                with tracer.start_as_current_span("vector feedback"):
                    expanded = await self._feedback_vector(
                        conn, query, [f.chunk_id for f in fused[: query.feedback_docs]]
                    )
                if expanded is not None:
                    expanded_query = True
                    async with self._vector_transaction(user, pool, listed) as vconn:
                        vector = await self._vector_leg(vconn, {**base, "vec": vector_literal(expanded)}, plan)
                    fused = fuse(query.fusion, lex, vector, query.alpha, query.graph, query.graph_weight)
            top = fused[: query.top_k]
            cur = await conn.execute(
                _DETAILS if listed else _DETAILS_IN_SCOPES,
                {"vec": original_vec, "ids": [f.chunk_id for f in top], "docs": docs},
            )
            rows = {r[0]: r for r in await cur.fetchall()}
        hits = []
        for f in top:
            row = rows.get(f.chunk_id)
            if row is None:
                if f.lexical is None and f.vector is None:
                    # only the graph leg named it: a chunk of a document this user may not read (the details are
                    # read under RLS and within the accessible documents), or one the graph still holds of a
                    # replaced version; never shown
                    continue
                if attempt < CHANGED_RETRIES:
                    # the legs and the details are separate statements: a hit whose row is gone was replaced (a
                    # new version's chunks swapped in) or deleted in between; run again on what is there now,
                    # so a swap never shows as an empty result
                    span.add_event("chunks changed during search", {attr.RAG_STAGE: "details"})
                    return await self.search(user, query, scope, attempt=attempt + 1)
                continue
            # the reported similarity is always to the user's query, also after feedback moved the vector
            sim = (
                f.vector
                if f.vector is not None and not expanded_query
                else (float(row[10]) if row[10] is not None else None)
            )
            hits.append(Hit(chunk=chunk_message(row), hybrid=f.score, lexical=f.lexical, vector=sim))
        return hits

    async def _lexical_leg(
        self, user: UserContext, query: SearchQuery, base: dict[str, Any], scope: Scope
    ) -> dict[str, float]:
        with tracer.start_as_current_span("lexical leg") as span:
            if scope.document_ids is None:
                plan, statement = "term_first_by_scope", _BM25_BY_SCOPE
            elif scope.documents <= self.document_first_max_docs:
                plan, statement = "document_first", _BM25_BY_DOCUMENT
            else:
                plan, statement = "term_first", _BM25_BY_TERM
            span.set_attribute(attr.RAG_SEARCH_LEXICAL_PLAN, plan)
            languages = query.languages or (None,)
            if query.languages:
                span.set_attribute(attr.RAG_SEARCH_LANGUAGES, list(query.languages))
            rankings: list[tuple[dict[str, float], float]] = []
            async with self.db.transaction(user) as conn:
                # a short query of unclear language: one BM25 ranking per language, merged on one scale
                for language in languages:
                    analyses = query_analyses(query.text, self.cfg, language)
                    cur = await conn.execute(
                        statement,
                        {
                            **base,
                            "qcfgs": [a[0] for a in analyses],
                            "qtexts": [a[1] for a in analyses],
                            "k1": self.k1,
                            "b": self.b,
                            "head_extra": self.heading_weight - 1.0,
                            "per_term": self.postings_per_term,
                            "min_per_term": self.min_postings_per_term,
                        },
                    )
                    rows = await cur.fetchall()
                    rankings.append(({r[0]: float(r[1]) for r in rows}, float(rows[0][2]) if rows else 0.0))
            if len(rankings) == 1:
                return rankings[0][0]
            merged = merge_languages(rankings)
            return dict(sorted(merged.items(), key=lambda kv: (-kv[1], kv[0]))[: base["k"]])

    async def _vector_plan(self, conn: Any, scope: Scope, levels: Sequence[int], pool: int) -> str:
        """How the vector leg reads: `listed` (the documents' ids given), `exact` or `hnsw_in_scopes` for a scope
        searched by ACL (`vector_plan`), from the ready chunks at `levels` the user may read (the readable
        scopes' statistics) and the catalogue's chunks (the planner's estimate)."""
        if scope.document_ids is not None:
            return "listed"
        if self.vector_exact_max_chunks <= 0:
            return "hnsw_in_scopes"
        cur = await conn.execute(
            "SELECT (SELECT coalesce(sum(n_chunks), 0) FROM lex_scope_stats WHERE level = ANY(%s)), "
            "(SELECT reltuples FROM pg_class WHERE oid = 'chunks'::regclass)",
            (list(levels),),
        )
        row = await cur.fetchone()
        readable, catalogue = (int(row[0]), float(row[1] or 0)) if row else (0, 0.0)
        span = trace.get_current_span()
        span.set_attribute(attr.RAG_SEARCH_READABLE_CHUNKS, readable)
        return vector_plan(readable, catalogue, pool, self.vector_exact_max_chunks)

    def _vector_transaction(self, user: UserContext, pool: int, listed: bool = True) -> Any:
        """A transaction as `user` with the HNSW search settings for a candidate pool of `pool`. Over ACL scopes
        (not `listed`) sorting is off, so that the planner walks the HNSW graph: it cannot estimate how many
        candidates the permission filter keeps and would otherwise sort every readable chunk (measured: the
        whole catalogue read for a user who reads it all). The exact plan sorts its scored chunks in memory
        all the same (its ORDER BY over a materialized CTE has no other way)."""
        settings = {"hnsw.ef_search": str(max(self.ef_search, pool)), "hnsw.iterative_scan": "relaxed_order"}
        if not listed:
            settings["enable_sort"] = "off"
        return self.db.transaction(user, settings)

    @staticmethod
    async def _vector_leg(conn: Any, params: dict[str, Any], plan: str) -> dict[str, float]:
        statement = {"listed": _VECTOR, "exact": _VECTOR_EXACT_IN_SCOPES, "hnsw_in_scopes": _VECTOR_IN_SCOPES}[plan]
        with tracer.start_as_current_span("vector leg") as span:
            span.set_attribute(attr.RAG_SEARCH_VECTOR_PLAN, plan)
            cur = await conn.execute(statement, params)
            return {r[0]: float(r[1]) for r in await cur.fetchall()}

    @staticmethod
    async def _feedback_vector(conn: Any, query: SearchQuery, chunk_ids: list[str]) -> list[float] | None:
        """The query vector moved toward the top chunks' vectors (`ranking.rocchio`)."""
        cur = await conn.execute(
            "SELECT embedding::text FROM chunks WHERE id = ANY(%s) AND embedding IS NOT NULL", (chunk_ids,)
        )
        rows = [json.loads(r[0]) for r in await cur.fetchall()]
        if query.vector is None:
            return None
        return rocchio(query.vector, rows, query.feedback_weight)

    async def document_chunks(
        self, user: UserContext, document_ids: list[str], levels: list[int]
    ) -> list[common_pb2.Chunk]:
        if not document_ids:
            return []
        async with self.db.transaction(user) as conn:
            cur = await conn.execute(
                "SELECT id, document_id, level, parent_id, ordinal, section_path, page, kind, title, text FROM chunks "
                "WHERE document_id = ANY(%s::uuid[]) AND level = ANY(%s) ORDER BY document_id, ordinal LIMIT 5000",
                (document_ids, levels),
            )
            return [chunk_message(r) for r in await cur.fetchall()]
