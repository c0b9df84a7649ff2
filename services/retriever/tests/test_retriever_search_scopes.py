"""Search over ACL scopes (a scope too large to list, #29) against the same search over the listed documents.

The per-scope statistics are kept by triggers, so each change that moves a document between scopes is made
here: an ACL change (and back), a document becoming ready and one failing, a re-index of a ready document and
a deletion. After each, for a reader of several scopes: the same readable count, the same lexical hits with
the same BM25 scores (1e-6, the statistics of exactly the readable documents), the same vector hits from each
of the vector leg's three plans (listed documents, the exact plan of a small ACL scope, the HNSW walk through
the permission filter) and none from an unreadable or unready document, and the per-scope tables equal to a
recount from the documents themselves.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from ragmesh.common.v1 import common_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common.identity import UserContext
from ragmesh_common.testing import user as local_user
from ragmesh_retriever.backends.base import SearchQuery
from ragmesh_retriever.backends.pgvector_backend import PgVectorBackend, _docs_param, vector_literal, vector_plan
from ragmesh_retriever.catalog import Catalog
from ragmesh_retriever.migrate import apply_schema
from ragmesh_retriever.session import Database

OWNER_A = local_user("scope-anna", "scope-eng", ())
OWNER_B = local_user("scope-ben", "scope-hr", ())
READER = local_user("scope-reader", "scope-eng", ("scope-auditor",))
QUERIES = ["quarterly harbour tariffs", "harbour", "lighthouse keeper salary", "tariffs tariffs salary bands"]


@pytest.fixture
def owner_dsn(postgres) -> str:
    """A database of its own (the per-scope tables are recounted from its documents)."""
    name = f"t_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres.owner_dsn, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    owner = make_conninfo(postgres.owner_dsn, dbname=name)
    password = str(conninfo_to_dict(postgres.app_dsn)["password"])  # the suite's: other tests connect with it
    apply_schema(owner, postgres.app_role, password, 384, rls_key=postgres.rls_key)
    return owner


@pytest.fixture
async def scoped(owner_dsn, postgres) -> AsyncIterator[tuple[Catalog, PgVectorBackend]]:
    app = make_conninfo(postgres.app_dsn, dbname=conninfo_to_dict(owner_dsn)["dbname"])
    db = Database(app, rls_key=postgres.rls_key, pool_size=2)
    await db.open()
    backend = PgVectorBackend(db, document_first_max_docs=10_000)  # listed: document first, exact
    await backend.start()
    yield Catalog(db), backend
    await db.close()


async def _document(
    catalog: Catalog, backend: PgVectorBackend, owner: UserContext, acl: common_pb2.Acl, texts: list[str]
) -> str:
    doc = await catalog.create(owner, "scope", "scope.md", "", acl, 1)
    await _index(backend, owner, doc.document_id, texts)
    return doc.document_id


async def _index(backend: PgVectorBackend, owner: UserContext, doc_id: str, texts: list[str]) -> None:
    chunks = [
        common_pb2.Chunk(chunk_id=f"{doc_id}:{i}", document_id=doc_id, level=3, ordinal=i, text=t)
        for i, t in enumerate(texts)
    ]
    for chunk in chunks:
        chunk.embedding.extend(_vector(chunk.text))
    await backend.index(owner, doc_id, chunks)


def _vector(text: str) -> list[float]:
    """A unit vector from the text's words (word i's hash picks a dimension), 384 wide."""
    values = [0.0] * 384
    for word in text.split():
        values[int(uuid.uuid5(uuid.NAMESPACE_URL, word)) % 384] += 1.0
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


async def _status(catalog: Catalog, owner: UserContext, doc_id: str, status: int) -> None:
    await catalog.update_status(
        owner, retriever_pb2.UpdateDocumentStatusRequest(document_id=doc_id, status=status, error="test")
    )


async def _same_search(catalog: Catalog, backend: PgVectorBackend, owner_dsn: str, step: str) -> None:
    async with catalog.db.transaction(READER) as conn:
        listed, counts = await catalog.search_scope(conn, None, None)
        by_scope, scope_counts = await catalog.search_scope(conn, None, 0)
        row = await (await conn.execute("SELECT count(*) FROM documents")).fetchone()
    assert listed.document_ids is not None and by_scope.document_ids is None, step
    assert by_scope.documents == listed.documents and scope_counts == counts, step
    assert row is not None and counts.readable == row[0], step
    for text in QUERIES:
        query = SearchQuery(text=text, vector=None, top_k=50, alpha=0.0, candidates=200)
        exact = await backend.lexical(READER, query, listed)
        scopes = await backend.lexical(READER, query, by_scope)
        assert exact.keys() == scopes.keys(), (step, text)
        for chunk_id, score in exact.items():
            assert scopes[chunk_id] == pytest.approx(score, abs=1e-6), (step, text, chunk_id)
    readable_now = await _readable_ready_chunks(owner_dsn)
    for text in QUERIES:  # the vector leg: listed, exact over a small ACL scope, the HNSW walk; all the same
        query = SearchQuery(text=text, vector=_vector(text), top_k=50, alpha=1.0, candidates=200)
        plans = {}
        for plan, (scope, exact_max) in {
            "listed": (listed, 0),
            "exact": (by_scope, 10_000),
            "hnsw_in_scopes": (by_scope, 0),
        }.items():
            backend.vector_exact_max_chunks = exact_max
            hits = await backend.search(READER, query, scope, lexical={})
            plans[plan] = sorted((h.chunk.chunk_id, round(h.vector or 0.0, 5)) for h in hits)
            # the leg itself, before the details statement (which reads only ready, readable chunks again)
            params = {"levels": [3], "docs": _docs_param(scope), "k": 200, "vec": vector_literal(query.vector or [])}
            async with backend._vector_transaction(READER, 200, scope.document_ids is not None) as conn:
                assert await backend._vector_plan(conn, scope, [3], 200) == plan
                leg = await backend._vector_leg(conn, params, plan)
            assert sorted((c, round(v, 5)) for c, v in leg.items()) == plans[plan], (step, text, plan)
        assert plans["listed"] == plans["exact"] == plans["hnsw_in_scopes"], (step, text, plans)
        # top 50 of a few chunks: every readable ready chunk, and nothing else
        assert {c for c, _ in plans["exact"]} == readable_now, (step, text)
    with psycopg.connect(owner_dsn) as conn:  # the per-scope tables are sums of what is there now
        kept = conn.execute(
            "SELECT scope_id, level, n_chunks, total_len FROM lex_scope_stats WHERE n_chunks <> 0 ORDER BY 1, 2"
        ).fetchall()
        recount = conn.execute(
            "SELECT d.scope_id, c.level, count(*), sum(c.doc_len)::float8 FROM chunks c "
            "JOIN documents d ON d.id = c.document_id WHERE d.status = 'ready' GROUP BY 1, 2 ORDER BY 1, 2"
        ).fetchall()
        assert kept == recount, step
        kept_df = conn.execute(
            "SELECT scope_id, term, level, df FROM lex_scope_terms WHERE df <> 0 ORDER BY 1, 2, 3"
        ).fetchall()
        recount_df = conn.execute(
            "SELECT d.scope_id, p.term, p.level, count(*) FROM postings p JOIN documents d ON d.id = p.document_id "
            "WHERE d.status = 'ready' GROUP BY 1, 2, 3 ORDER BY 1, 2, 3"
        ).fetchall()
        assert kept_df == recount_df, step
        stray = conn.execute(
            "SELECT count(*) FROM postings p JOIN documents d ON d.id = p.document_id "
            "WHERE p.scope_id IS DISTINCT FROM CASE WHEN d.status = 'ready' THEN d.scope_id END"
        ).fetchone()
        assert stray == (0,), step


async def _readable_ready_chunks(owner_dsn: str) -> set[str]:
    """The chunks of the ready documents READER may read, by the ACL itself (as the table's owner, no RLS)."""
    with psycopg.connect(owner_dsn) as conn:
        rows = conn.execute(
            "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.document_id WHERE d.status = 'ready' AND ("
            "'scope-eng' = ANY(d.acl_departments) OR 'scope-reader' = ANY(d.acl_users) "
            "OR 'scope-auditor' = ANY(d.acl_roles) OR d.acl_public)"
        ).fetchall()
    return {r[0] for r in rows}


async def test_search_by_scope_equals_search_by_listed_documents(scoped, owner_dsn) -> None:
    catalog, backend = scoped
    ready, failed = common_pb2.DOCUMENT_STATUS_READY, common_pb2.DOCUMENT_STATUS_FAILED
    eng = await _document(
        catalog, backend, OWNER_A, common_pb2.Acl(departments=["scope-eng"]), ["quarterly harbour tariffs rise"]
    )
    shared = await _document(
        catalog, backend, OWNER_A, common_pb2.Acl(users=["scope-reader"]), ["harbour lighthouse keeper", "salary"]
    )
    audit = await _document(
        catalog, backend, OWNER_B, common_pb2.Acl(roles=["scope-auditor"]), ["tariffs tariffs and salary bands"]
    )
    hidden = await _document(
        catalog, backend, OWNER_B, common_pb2.Acl(departments=["scope-hr"]), ["harbour salary bands for keepers"]
    )
    later = await _document(catalog, backend, OWNER_B, common_pb2.Acl(public=True), ["the harbour tariffs of 1900"])
    for owner, doc in ((OWNER_A, eng), (OWNER_A, shared), (OWNER_B, audit), (OWNER_B, hidden)):
        await _status(catalog, owner, doc, ready)
    await _same_search(catalog, backend, owner_dsn, "indexed; one public document not ready yet")

    await catalog.update(
        OWNER_B,
        retriever_pb2.UpdateDocumentRequest(document_id=hidden, acl=common_pb2.Acl(departments=["scope-eng"])),
    )
    await _same_search(catalog, backend, owner_dsn, "a hidden document shared with the reader's department")
    await catalog.update(
        OWNER_B, retriever_pb2.UpdateDocumentRequest(document_id=hidden, acl=common_pb2.Acl(departments=["scope-hr"]))
    )
    await _same_search(catalog, backend, owner_dsn, "and hidden again")

    await _status(catalog, OWNER_B, later, ready)
    await _same_search(catalog, backend, owner_dsn, "the public document ready")
    await _status(catalog, OWNER_A, eng, failed)
    await _same_search(catalog, backend, owner_dsn, "a readable document failed")

    await _index(backend, OWNER_A, shared, ["a new lighthouse text", "quarterly keeper salary", "harbour"])
    await _same_search(catalog, backend, owner_dsn, "a ready document re-indexed")
    await catalog.delete(OWNER_B, audit)
    await _same_search(catalog, backend, owner_dsn, "a readable document deleted")


def test_the_vector_plan_scores_a_selective_scope_exactly_and_walks_the_graph_for_a_broad_one() -> None:
    # readable² ≤ pool × catalogue: exact; the numbers of bench/results/readers.json (100k chunks, pool 100)
    assert vector_plan(1_000, 100_000, 100, 20_000) == "exact"  # 1 %: 10k candidates walked for 100 kept
    assert vector_plan(10_000, 100_000, 100, 20_000) == "hnsw_in_scopes"  # 10 %
    assert vector_plan(100_000, 100_000, 100, 200_000) == "hnsw_in_scopes"
    assert vector_plan(1_000, 1_000, 100, 20_000) == "hnsw_in_scopes"  # everything readable: the graph is cheap
    assert vector_plan(3_000, 10_000_000, 100, 20_000) == "exact"
    assert vector_plan(30_000, 100_000_000, 100, 20_000) == "hnsw_in_scopes"  # above the cap: never exact
    assert vector_plan(50, 0.0, 100, 20_000) == "exact"  # no estimate yet: a tiny scope is still exact
    assert vector_plan(500, 0.0, 100, 20_000) == "hnsw_in_scopes"
