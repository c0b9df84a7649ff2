"""GraphService against a real ArcadeDB over Bolt: ingest, permission-filtered context, idempotency, delete."""

from __future__ import annotations

import asyncio
import itertools
import random
import string
import uuid

import grpc
import pytest

from ragmesh.graph.v1 import graph_pb2, graph_pb2_grpc
from ragmesh_common.context import UserContext
from ragmesh_graph import store as store_module
from ragmesh_graph.store import GraphStore

from .conftest import Catalogue, chunk_count, ingest_request

Stub = graph_pb2_grpc.GraphServiceStub

SPACE = (
    "NASA hired Acme Corp to build WidgetPro. NASA tested WidgetPro in Houston.",
    "Acme Corp sells WidgetPro to NASA.",
)
EUROPE = ("NASA works with the European Space Agency.", "The European Space Agency launches Ariane Rockets.")


def letters() -> str:
    return "".join(random.choices(string.ascii_lowercase, k=8))


def relation_set(reply: graph_pb2.GetContextResponse) -> set[tuple[str, str]]:
    return {(r.source, r.target) for r in reply.relations}


async def context(
    stub: Stub, query: str, *document_ids: str, depth: int = 0, limit: int = 0
) -> graph_pb2.GetContextResponse:
    return await stub.GetContext(
        graph_pb2.GetContextRequest(query=query, document_ids=list(document_ids), max_depth=depth, limit=limit),
        timeout=30,
    )


@pytest.fixture
async def two_documents(graph_stub: Stub, documents: Catalogue) -> tuple[str, str]:
    space = documents.add(f"space-{uuid.uuid4().hex[:8]}")
    europe = documents.add(f"europe-{uuid.uuid4().hex[:8]}")
    first = await graph_stub.IngestChunks(ingest_request(space, *SPACE), timeout=30)
    second = await graph_stub.IngestChunks(ingest_request(europe, *EUROPE), timeout=30)
    assert (first.entities, first.relations) == (4, 5)  # NASA, Acme Corp, WidgetPro, Houston
    assert (second.entities, second.relations) == (3, 2)
    return space, europe


async def test_context_with_both_documents_sees_relations_from_both(
    graph_stub: Stub, two_documents: tuple[str, str]
) -> None:
    reply = await context(graph_stub, "What does nasa do?", *two_documents, depth=1)
    assert [e.name for e in reply.matched] == ["NASA"]
    assert reply.matched[0].mentions == 3  # chunks naming NASA across both documents
    assert relation_set(reply) == {
        ("Acme Corp", "NASA"),
        ("NASA", "WidgetPro"),
        ("Houston", "NASA"),
        ("European Space Agency", "NASA"),
    }
    top = reply.relations[0]
    assert (top.source, top.target, top.weight, top.type, top.depth) == ("NASA", "WidgetPro", 3.0, "co-occurs", 1)
    assert [r.weight for r in reply.relations] == sorted((r.weight for r in reply.relations), reverse=True)
    space, europe = two_documents
    assert set(top.chunk_ids) == {f"{space}:0", f"{space}:1"}
    assert set(reply.chunk_ids) == {f"{space}:0", f"{space}:1", f"{europe}:0"}
    assert {e.name for e in reply.neighbours} == {"Acme Corp", "WidgetPro", "Houston", "European Space Agency"}


async def test_context_with_one_document_sees_only_that_document(
    graph_stub: Stub, two_documents: tuple[str, str]
) -> None:
    _space, europe = two_documents
    reply = await context(graph_stub, "What does NASA do?", europe)
    assert relation_set(reply) == {("European Space Agency", "NASA"), ("Ariane Rockets", "European Space Agency")}
    assert reply.matched[0].mentions == 1
    assert list(reply.chunk_ids) == [f"{europe}:0"]
    assert all(c.startswith(europe) for r in reply.relations for c in r.chunk_ids)
    # An entity named only in the other document is not even matched.
    assert not (await context(graph_stub, "Tell me about WidgetPro", europe)).matched


async def test_context_without_documents_sees_the_readable_ones_only(
    graph_stub: Stub, graph_as, two_documents: tuple[str, str]
) -> None:
    # no list: the graph asks the catalogue about the documents it finds (no permission list travels)
    reply = await context(graph_stub, "What does NASA do with Acme Corp?")
    assert {e.name for e in reply.matched} == {"NASA", "Acme Corp"} and reply.relations
    async with graph_as(UserContext("dave", "sales", ("employee",))) as dave:  # dave may read no document
        reply = await context(dave, "What does NASA do with Acme Corp?")
    assert not reply.matched and not reply.relations and not reply.neighbours and not reply.chunk_ids


async def test_second_hop_only_with_depth_two(graph_stub: Stub, two_documents: tuple[str, str]) -> None:
    shallow = await context(graph_stub, "Acme Corp", *two_documents, depth=1)
    deep = await context(graph_stub, "Acme Corp", *two_documents, depth=2)
    assert "European Space Agency" not in {e.name for e in shallow.neighbours}
    assert {r.depth for r in shallow.relations} == {1}
    second = {(r.source, r.target) for r in deep.relations if r.depth == 2}
    assert ("European Space Agency", "NASA") in second and ("Houston", "NASA") in second
    assert {"European Space Agency", "Houston"} <= {e.name for e in deep.neighbours}
    # max_depth 0 means 2
    assert relation_set(await context(graph_stub, "Acme Corp", *two_documents)) == relation_set(deep)


async def test_limit_keeps_the_heaviest_relations(graph_stub: Stub, two_documents: tuple[str, str]) -> None:
    reply = await context(graph_stub, "NASA", *two_documents, limit=1)
    assert [(r.source, r.target, r.weight) for r in reply.relations] == [("NASA", "WidgetPro", 3.0)]


async def test_reingest_is_idempotent(graph_stub: Stub, doc_id: str) -> None:
    request = ingest_request(doc_id, "NASA paid Acme Corp. NASA thanked Acme Corp.")
    await graph_stub.IngestChunks(request, timeout=30)
    before = await context(graph_stub, "nasa", doc_id)
    await graph_stub.IngestChunks(request, timeout=30)
    after = await context(graph_stub, "nasa", doc_id)
    assert [r.weight for r in after.relations] == [r.weight for r in before.relations] == [2.0]
    assert after.matched[0].mentions == 1
    # Re-ingesting changed text replaces the document's contribution.
    await graph_stub.IngestChunks(ingest_request(doc_id, "NASA met IBM."), timeout=30)
    changed = await context(graph_stub, "nasa", doc_id)
    assert relation_set(changed) == {("IBM", "NASA")}


async def test_a_document_over_one_batch_gets_the_graph_of_one_that_fits(
    graph_stub: Stub, doc_id: str, documents: Catalogue, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = ("NASA hired Acme Corp.", "Acme Corp built WidgetPro.", "NASA flew WidgetPro in Houston.")
    small = documents.add(f"{doc_id}-small")
    await graph_stub.IngestChunks(ingest_request(small, *texts), timeout=30)  # one transaction
    monkeypatch.setattr(store_module, "BATCH_ROWS", 1)  # the same text as a document over one batch
    await graph_stub.IngestChunks(ingest_request(doc_id, *texts), timeout=30)
    await graph_stub.IngestChunks(ingest_request(doc_id, *texts), timeout=30)  # and again: replaced, not added
    one, batched = await context(graph_stub, "nasa", small), await context(graph_stub, "nasa", doc_id)
    assert relation_set(one) == relation_set(batched) and ("Acme Corp", "NASA") in relation_set(one)
    assert sorted(r.weight for r in one.relations) == sorted(r.weight for r in batched.relations)


async def test_delete_removes_the_document_and_orphan_entities(
    graph_stub: Stub, graph_store: GraphStore, doc_id: str
) -> None:
    unique = f"Zorblax{letters()}Corp"  # a CamelCase name no other test uses
    await graph_stub.IngestChunks(ingest_request(doc_id, f"NASA bought {unique}.", "NASA again."), timeout=30)
    assert (await context(graph_stub, unique, doc_id)).matched
    assert await chunk_count(graph_store, doc_id) == 2
    await graph_stub.DeleteDocument(graph_pb2.DeleteDocumentRequest(document_id=doc_id), timeout=30)
    assert await chunk_count(graph_store, doc_id) == 0
    assert not (await context(graph_stub, f"NASA {unique}", doc_id)).matched
    async with graph_store.driver.session(database=graph_store.database) as session:
        rows = await (await session.run("MATCH (e:Entity {key: $key}) RETURN count(e) AS n", key=unique.lower())).data()
    assert rows == [{"n": 0}]
    await graph_stub.DeleteDocument(graph_pb2.DeleteDocumentRequest(document_id=doc_id), timeout=30)  # again: OK
    assert await chunk_count(graph_store, doc_id) == 0


async def test_delete_keeps_entities_other_documents_mention(
    graph_stub: Stub, doc_id: str, documents: Catalogue
) -> None:
    other = documents.add(f"{doc_id}-other")
    await graph_stub.IngestChunks(ingest_request(doc_id, "NASA and Acme Corp met."), timeout=30)
    await graph_stub.IngestChunks(ingest_request(other, "NASA and Acme Corp met again."), timeout=30)
    await graph_stub.DeleteDocument(graph_pb2.DeleteDocumentRequest(document_id=doc_id), timeout=30)
    reply = await context(graph_stub, "NASA", doc_id, other)
    assert relation_set(reply) == {("Acme Corp", "NASA")}
    assert reply.relations[0].weight == 1.0 and list(reply.chunk_ids) == [f"{other}:0"]


@pytest.mark.parametrize(
    "request_",
    [
        graph_pb2.IngestChunksRequest(document_id="", chunks=[graph_pb2.GraphChunk(chunk_id="c", text="NASA")]),
        graph_pb2.IngestChunksRequest(document_id="d", chunks=[graph_pb2.GraphChunk(chunk_id="", text="NASA")]),
        graph_pb2.IngestChunksRequest(document_id="d", chunks=[graph_pb2.GraphChunk(chunk_id="c", document_id="x")]),
        graph_pb2.IngestChunksRequest(
            document_id="d", chunks=[graph_pb2.GraphChunk(chunk_id="c"), graph_pb2.GraphChunk(chunk_id="c")]
        ),
    ],
    ids=["empty-document-id", "chunk-without-id", "other-document", "duplicate-chunk"],
)
async def test_invalid_ingest_is_rejected(graph_stub: Stub, request_: graph_pb2.IngestChunksRequest) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await graph_stub.IngestChunks(request_, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


@pytest.mark.parametrize(
    "request_",
    [
        graph_pb2.GetContextRequest(query="", document_ids=["d"]),
        graph_pb2.GetContextRequest(query="NASA", document_ids=["d"], max_depth=3),
        graph_pb2.GetContextRequest(query="NASA", document_ids=["d"], limit=-1),
    ],
    ids=["empty-query", "depth-3", "negative-limit"],
)
async def test_invalid_context_is_rejected(graph_stub: Stub, request_: graph_pb2.GetContextRequest) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await graph_stub.GetContext(request_, timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_delete_without_document_id_is_rejected(graph_stub: Stub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await graph_stub.DeleteDocument(graph_pb2.DeleteDocumentRequest(document_id=" "), timeout=30)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_concurrent_ingests_of_overlapping_entities_both_succeed(
    graph_stub: Stub, doc_id: str, documents: Catalogue
) -> None:
    # New entity names shared by every document: each ingest races to MERGE the same new nodes, and the
    # losers see ConstraintError (or a transient conflict) and retry.
    shared = [f"Qux{letters()}Labs" for _ in range(4)]
    text = " ".join(f"{a} partners with {b}." for a, b in itertools.pairwise(shared))
    ids = [documents.add(f"{doc_id}-{i}") for i in range(4)]
    replies = await asyncio.gather(*(graph_stub.IngestChunks(ingest_request(d, text, text), timeout=60) for d in ids))
    assert [r.relations for r in replies] == [3, 3, 3, 3]
    reply = await context(graph_stub, shared[0], *ids, depth=1)
    assert [e.name for e in reply.matched] == [shared[0]]
    assert reply.matched[0].mentions == 8  # 2 chunks x 4 documents, one entity node
    assert [({r.source, r.target}, r.weight) for r in reply.relations] == [({shared[0], shared[1]}, 8.0)]
