"""The search-backend contract, run against every backend that is reachable.

pgvector always runs (embedded PostgreSQL); Weaviate runs when WEAVIATE_URL is set (e.g.
WEAVIATE_URL=http://localhost:8080 WEAVIATE_GRPC_PORT=50051) and is skipped with that reason otherwise.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator

import pytest

from ragmesh.common.v1 import common_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common.testing import user as local_user
from ragmesh_retriever.backends.base import SearchBackend, SearchQuery
from ragmesh_retriever.catalog import Catalog
from ragmesh_retriever.ranking import Fusion
from ragmesh_retriever.session import Database

ALICE = local_user("contract-alice", "eng", ())
DIM = 384


def axis(i: int) -> list[float]:
    v = [0.0] * DIM
    v[i] = 1.0
    return v


@pytest.fixture(params=["pgvector", "weaviate"])
async def backend(request, postgres) -> AsyncIterator[tuple[SearchBackend, Catalog]]:
    db = Database(postgres.app_dsn, rls_key=postgres.rls_key, pool_size=2)
    await db.open()
    if request.param == "weaviate":
        url = os.environ.get("WEAVIATE_URL")
        if not url:
            await db.close()
            pytest.skip("WEAVIATE_URL is not set: no Weaviate server to run the contract against")
        from ragmesh_retriever.backends.weaviate_backend import WeaviateBackend

        impl: SearchBackend = WeaviateBackend(
            url,
            grpc_port=int(os.environ.get("WEAVIATE_GRPC_PORT", "50051")),
            collection=f"Contract{uuid.uuid4().hex[:8]}",
        )
    else:
        from ragmesh_retriever.backends.pgvector_backend import PgVectorBackend

        impl = PgVectorBackend(db)
    await impl.start()
    yield impl, Catalog(db)
    await impl.close()
    await db.close()


async def _document(catalog: Catalog, backend: SearchBackend, texts: list[str], level: int = 3) -> str:
    doc = await catalog.create(ALICE, "contract", "contract.md", "", common_pb2.Acl(), 1)
    chunks = [
        common_pb2.Chunk(
            chunk_id=f"{doc.document_id}:{i}",
            document_id=doc.document_id,
            level=level,
            ordinal=i,
            text=t,
            title="contract",
            embedding=axis(20 + i),
        )
        for i, t in enumerate(texts)
    ]
    assert await backend.index(ALICE, doc.document_id, chunks) == len(chunks)
    await catalog.update_status(  # only a ready document is searched
        ALICE,
        retriever_pb2.UpdateDocumentStatusRequest(document_id=doc.document_id, status=common_pb2.DOCUMENT_STATUS_READY),
    )
    return doc.document_id


async def test_search_is_limited_to_accessible_documents(backend) -> None:
    impl, catalog = backend
    one = await _document(catalog, impl, ["marmalade recipe with oranges"])
    two = await _document(catalog, impl, ["marmalade recipe with lemons"])
    query = SearchQuery(text="marmalade recipe", vector=axis(20), top_k=10, alpha=0.5)
    both = {h.chunk.document_id for h in await impl.search(ALICE, query, [one, two])}
    assert both == {one, two}
    only = {h.chunk.document_id for h in await impl.search(ALICE, query, [two])}
    assert only == {two}
    assert await impl.search(ALICE, query, []) == []


async def test_vector_and_lexical_legs_and_fusions(backend) -> None:
    impl, catalog = backend
    doc = await _document(catalog, impl, ["quasar telescope observations", "unrelated pottery glaze"])
    vector_only = await impl.search(ALICE, SearchQuery(text="quasar", vector=axis(21), top_k=2, alpha=1.0), [doc])
    assert vector_only[0].chunk.text == "unrelated pottery glaze"
    assert vector_only[0].vector == pytest.approx(1.0, abs=1e-4)
    lexical_only = await impl.search(ALICE, SearchQuery(text="quasar", vector=axis(21), top_k=2, alpha=0.0), [doc])
    assert lexical_only[0].chunk.text == "quasar telescope observations"
    ranked = await impl.search(
        ALICE, SearchQuery(text="quasar", vector=axis(20), top_k=2, alpha=0.5, fusion=Fusion.RANKED), [doc]
    )
    assert ranked[0].chunk.text == "quasar telescope observations"


async def test_levels_and_reindex_and_delete(backend) -> None:
    impl, catalog = backend
    doc = await _document(catalog, impl, ["fjord kayaking summary"], level=common_pb2.CHUNK_LEVEL_DOCUMENT)
    query = SearchQuery(text="fjord kayaking", vector=None, top_k=5, alpha=0.0)
    assert await impl.search(ALICE, query, [doc]) == []  # default level: paragraphs
    summary = SearchQuery(
        text="fjord kayaking", vector=None, top_k=5, alpha=0.0, levels=[common_pb2.CHUNK_LEVEL_DOCUMENT]
    )
    assert [h.chunk.document_id for h in await impl.search(ALICE, summary, [doc])] == [doc]
    replacement = [
        common_pb2.Chunk(
            chunk_id=f"{doc}:9",
            document_id=doc,
            level=common_pb2.CHUNK_LEVEL_DOCUMENT,
            text="glacier hiking summary",
            embedding=axis(40),
        )
    ]
    await impl.index(ALICE, doc, replacement)  # replaces, never appends
    assert await impl.search(ALICE, summary, [doc]) == []
    every_level = [common_pb2.CHUNK_LEVEL_DOCUMENT, common_pb2.CHUNK_LEVEL_SECTION, common_pb2.CHUNK_LEVEL_PARAGRAPH]
    chunks = await impl.document_chunks(ALICE, [doc], every_level)
    assert [c.chunk_id for c in chunks] == [f"{doc}:9"]
    await impl.delete(ALICE, doc)
    assert await impl.document_chunks(ALICE, [doc], every_level) == []
