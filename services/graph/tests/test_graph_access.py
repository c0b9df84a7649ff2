"""The graph decides access itself: a verified token names the caller, the catalogue says what it may read or
owns, and a caller can neither read, write nor delete another user's document's graph data."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from ragmesh.graph.v1 import graph_pb2, graph_pb2_grpc
from ragmesh_common.identity import IDENTITY_KEY, UserContext
from ragmesh_common.server import insecure_channel
from ragmesh_common.testing import local_signer
from ragmesh_common.tokens import TokenSigner
from ragmesh_graph.access import DocumentAccess
from ragmesh_graph.store import GraphStore

from .conftest import ALICE, CAROL, Catalogue, chunk_count, ingest_request

Stub = graph_pb2_grpc.GraphServiceStub
GraphAs = Callable[[UserContext], AbstractAsyncContextManager[Stub]]
TEXT = "NASA hired Acme Corp to build WidgetPro. NASA tested WidgetPro in Houston."


def _context(query: str, *document_ids: str) -> graph_pb2.GetContextRequest:
    return graph_pb2.GetContextRequest(query=query, document_ids=list(document_ids), max_depth=1)


def _refused_metadata() -> dict[str, tuple[tuple[str, str], ...]]:
    signer = local_signer()
    now = int(time.time())
    return {
        "no identity": (),
        "forged plain metadata": (("x-rag-user", "alice"), ("x-rag-department", "eng"), ("x-rag-roles", "employee")),
        "wrong key": ((IDENTITY_KEY, TokenSigner(Ed25519PrivateKey.generate(), actor="x").mint(ALICE)),),
        "expired": ((IDENTITY_KEY, signer.mint(ALICE, iat=now - 300, exp=now - 60)),),
        "other audience": ((IDENTITY_KEY, signer.mint(ALICE, aud="ragmesh-public")),),
    }


@pytest.mark.parametrize("case", ["no identity", "forged plain metadata", "wrong key", "expired", "other audience"])
async def test_every_rpc_refuses_a_caller_without_a_valid_token(
    graph_stub: Stub, graph_address: str, doc_id: str, case: str
) -> None:
    await graph_stub.IngestChunks(ingest_request(doc_id, TEXT), timeout=30)
    metadata = _refused_metadata()[case]
    async with insecure_channel(graph_address) as channel:
        stub = Stub(channel)
        calls = [
            stub.GetContext(_context("NASA", doc_id), metadata=metadata, timeout=30),
            stub.IngestChunks(ingest_request(doc_id, "Globex bought NASA."), metadata=metadata, timeout=30),
            stub.DeleteDocument(graph_pb2.DeleteDocumentRequest(document_id=doc_id), metadata=metadata, timeout=30),
        ]
        for call in calls:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call
            assert caught.value.code() == grpc.StatusCode.UNAUTHENTICATED, case
    # nothing changed: alice still reads her document as it was
    assert {r.target for r in (await graph_stub.GetContext(_context("NASA", doc_id), timeout=30)).relations} >= {
        "WidgetPro"
    }


async def test_another_user_cannot_read_a_document_by_naming_it(
    graph_stub: Stub, graph_as: GraphAs, doc_id: str, documents: Catalogue
) -> None:
    await graph_stub.IngestChunks(ingest_request(doc_id, TEXT), timeout=30)
    async with graph_as(CAROL) as carol:
        reply = await carol.GetContext(_context("NASA WidgetPro", doc_id), timeout=30)
        assert not reply.matched and not reply.relations and not reply.neighbours and not reply.chunk_ids
        documents.add(doc_id, owner="alice", readers={"carol"})  # alice shares it: now carol reads it
        shared = await carol.GetContext(_context("NASA WidgetPro", doc_id), timeout=30)
        assert {e.name for e in shared.matched} == {"NASA", "WidgetPro"}


async def test_without_a_document_list_the_graph_reads_every_readable_document_and_no_other(
    graph_stub: Stub, graph_as: GraphAs, doc_id: str, documents: Catalogue
) -> None:
    """No permission list travels with the request: the graph asks the catalogue about the documents it finds."""
    await graph_stub.IngestChunks(ingest_request(doc_id, "Zorblax Corp hired Quibble Labs in Houston."), timeout=30)
    unnamed = graph_pb2.GetContextRequest(query="Zorblax Corp", max_depth=1)
    assert {e.name for e in (await graph_stub.GetContext(unnamed, timeout=30)).neighbours} >= {"Quibble Labs"}
    async with graph_as(CAROL) as carol:
        reply = await carol.GetContext(unnamed, timeout=30)
        assert not reply.matched and not reply.relations and not reply.neighbours and not reply.chunk_ids
        documents.add(doc_id, owner="alice", readers={"carol"})
        assert {e.name for e in (await carol.GetContext(unnamed, timeout=30)).matched} == {"Zorblax Corp"}
        # a list narrows and never widens: another document named alone reads nothing of this one
        other = graph_pb2.GetContextRequest(query="Zorblax Corp", max_depth=1, document_ids=["doc-elsewhere"])
        assert not (await carol.GetContext(other, timeout=30)).matched


async def test_unready_documents_are_not_read(graph_stub: Stub, doc_id: str, documents: Catalogue) -> None:
    await graph_stub.IngestChunks(ingest_request(doc_id, TEXT), timeout=30)  # the owner may index while it is not ready
    documents.add(doc_id, ready=False)
    assert not (await graph_stub.GetContext(_context("NASA", doc_id), timeout=30)).matched


async def test_another_user_cannot_write_into_a_document(
    graph_stub: Stub, graph_as: GraphAs, doc_id: str, documents: Catalogue
) -> None:
    await graph_stub.IngestChunks(ingest_request(doc_id, TEXT), timeout=30)
    async with graph_as(CAROL) as carol:
        for readers in (set(), {"carol"}):  # reading a document is not owning it
            documents.add(doc_id, owner="alice", readers=readers)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await carol.IngestChunks(ingest_request(doc_id, "Carol Industries owns NASA."), timeout=30)
            assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    reply = await graph_stub.GetContext(_context("NASA", doc_id), timeout=30)
    assert "Carol Industries" not in {e.name for e in reply.neighbours}
    assert {e.name for e in reply.neighbours} == {"Acme Corp", "WidgetPro", "Houston"}


async def test_another_user_cannot_delete_a_document(
    graph_stub: Stub, graph_as: GraphAs, doc_id: str, documents: Catalogue, graph_store: GraphStore
) -> None:
    await graph_stub.IngestChunks(ingest_request(doc_id, TEXT), timeout=30)
    async with graph_as(CAROL) as carol:
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await carol.DeleteDocument(graph_pb2.DeleteDocumentRequest(document_id=doc_id), timeout=30)
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert (await graph_stub.GetContext(_context("NASA", doc_id), timeout=30)).matched
    # the owner deletes after the catalogue row is gone (the gateway's order): the recorded owner decides
    del documents.documents[doc_id]
    await graph_stub.DeleteDocument(graph_pb2.DeleteDocumentRequest(document_id=doc_id), timeout=30)
    assert await chunk_count(graph_store, doc_id) == 0


async def test_a_document_unknown_to_the_catalogue_cannot_be_written(graph_stub: Stub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await graph_stub.IngestChunks(ingest_request("doc-nobody-registered", TEXT), timeout=30)
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED


async def test_catalogue_down_fails_closed(graph_stub: Stub, doc_id: str, documents: Catalogue) -> None:
    await graph_stub.IngestChunks(ingest_request(doc_id, TEXT), timeout=30)
    documents.down = True
    try:
        for call in (
            graph_stub.GetContext(_context("NASA", doc_id), timeout=30),
            graph_stub.IngestChunks(ingest_request(doc_id, TEXT), timeout=30),
        ):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call
            assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "document access check failed" in (caught.value.details() or "")
    finally:
        documents.down = False


async def test_an_access_change_holds_for_the_very_next_graph_read(
    graph_stub: Stub, graph_as: GraphAs, doc_id: str, documents: Catalogue
) -> None:
    """The service as deployed (default settings): a share, a revocation, a new version being ingested and a
    deletion each show in the next GetContext of the same user with the same token, not seconds later."""
    await graph_stub.IngestChunks(ingest_request(doc_id, TEXT), timeout=30)

    async def names(carol: Stub) -> set[str]:
        reply = await carol.GetContext(_context("NASA WidgetPro", doc_id), timeout=30)
        return {e.name for e in reply.matched} | {r.target for r in reply.relations} | set(reply.chunk_ids)

    async with graph_as(CAROL) as carol:
        documents.add(doc_id, owner="alice", readers={"carol"})
        assert {"NASA", "WidgetPro"} <= await names(carol)
        documents.add(doc_id, owner="alice", readers=set())  # revoked
        assert await names(carol) == set()
        documents.add(doc_id, owner="alice", readers={"carol"})  # shared again
        assert {"NASA", "WidgetPro"} <= await names(carol)
        documents.add(doc_id, owner="alice", readers={"carol"}, ready=False)  # a new version is being ingested
        assert await names(carol) == set()
        documents.add(doc_id, owner="alice", readers={"carol"})
        assert {"NASA", "WidgetPro"} <= await names(carol)
        del documents.documents[doc_id]  # deleted from the catalogue
        assert await names(carol) == set()


async def test_each_check_asks_the_catalogue_once_about_all_its_documents(graph_settings, documents: Catalogue) -> None:
    access = DocumentAccess(graph_settings.retriever_addr)
    signer = local_signer()
    alice = UserContext("alice", "eng", ("employee",), token=signer.token(ALICE))
    a, b = documents.add("check-a"), documents.add("check-b", owner="bob")
    try:
        before = documents.calls
        first = await access.check(alice, [a, b, a])
        assert first.readable == {a} and first.owned == {a}
        assert documents.calls == before + 1
        documents.add(a, owner="bob")  # alice gave it away: the next check says so
        second = await access.check(alice, [a, b])
        assert second.readable == second.owned == frozenset()
        assert documents.calls == before + 2
        assert (await access.check(alice, [])).readable == frozenset() and documents.calls == before + 2
    finally:
        await access.close()
