"""Fixtures: one real ArcadeDB (Bolt) per session, and one in-process graph gRPC server on port 0 over it.

The graph asks the catalogue (the retriever's CheckDocumentAccess) who may read and who owns a document; here
that is an in-process catalogue server behind the real identity interceptor, whose documents a test declares
(`documents.add`). `graph_stub` calls as ALICE; `graph_as(user)` opens a stub for another user.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field

import grpc
import pytest
from grpc import aio

from ragmesh.graph.v1 import graph_pb2, graph_pb2_grpc
from ragmesh.retriever.v1 import retriever_pb2, retriever_pb2_grpc
from ragmesh_common.context import UserContext, require_user
from ragmesh_common.server import GrpcService
from ragmesh_common.testing import channel_as
from ragmesh_common.testing import user as local_user
from ragmesh_dev.engines.arcadedb import EmbeddedArcadeDB
from ragmesh_dev.ports import free_port
from ragmesh_graph.config import Settings
from ragmesh_graph.server import build_service
from ragmesh_graph.store import Q_COUNT_CHUNKS, GraphStore


@pytest.fixture(scope="session")
def arcadedb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedArcadeDB]:
    server = EmbeddedArcadeDB(tmp_path_factory.mktemp("arcadedb"), free_port(), free_port(), secrets.token_urlsafe(12))
    server.start(timeout=180)
    try:
        yield server
    finally:
        server.stop()


ALICE = local_user("alice", "eng", ("employee",))
CAROL = local_user("carol", "finance", ("employee",))


@dataclass
class Catalogue(retriever_pb2_grpc.RetrieverServiceServicer):
    """Documents by id: owner and the other users who may read them (ready unless said otherwise)."""

    documents: dict[str, tuple[str, set[str], bool]] = field(default_factory=dict)
    texts: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # document -> (chunk id, text)
    calls: int = 0
    down: bool = False

    def add(self, document_id: str, owner: str = "alice", readers: set[str] | None = None, ready: bool = True) -> str:
        self.documents[document_id] = (owner, set(readers or ()), ready)
        return document_id

    async def CheckDocumentAccess(
        self, request: retriever_pb2.CheckDocumentAccessRequest, context: aio.ServicerContext
    ) -> retriever_pb2.CheckDocumentAccessResponse:
        user = await require_user(context)  # the graph forwarded the caller's verified token
        self.calls += 1
        if self.down:
            await context.abort(grpc.StatusCode.UNAVAILABLE, "catalogue down")
        readable, owned = [], []
        for document_id in request.document_ids:
            if document_id not in self.documents:
                continue
            owner, readers, ready = self.documents[document_id]
            if ready and (user.user_id == owner or user.user_id in readers):
                readable.append(document_id)
            if user.user_id == owner:
                owned.append(document_id)
        return retriever_pb2.CheckDocumentAccessResponse(readable_ids=readable, owned_ids=owned)

    async def ListChunks(
        self, request: retriever_pb2.ListChunksRequest, context: aio.ServicerContext
    ) -> retriever_pb2.ListChunksResponse:
        """A document's chunk texts, for a caller who may read it (else NOT_FOUND, as under RLS)."""
        user = await require_user(context)
        owner, readers, ready = self.documents.get(request.document_id, ("", set(), False))
        if not ready or user.user_id not in {owner, *readers}:
            await context.abort(grpc.StatusCode.NOT_FOUND, "no such document")
        return retriever_pb2.ListChunksResponse(
            chunks=[retriever_pb2.ListedChunk(chunk_id=c, text=t) for c, t in self.texts.get(request.document_id, [])]
        )


@pytest.fixture(scope="session")
async def catalogue() -> AsyncIterator[tuple[Catalogue, int]]:
    servicer = Catalogue()

    def add(server: aio.Server) -> list[str]:
        retriever_pb2_grpc.add_RetrieverServiceServicer_to_server(servicer, server)
        return [retriever_pb2.DESCRIPTOR.services_by_name["RetrieverService"].full_name]

    service = GrpcService("catalogue", add)
    port = await service.start()
    yield servicer, port
    await service.stop()


@pytest.fixture(scope="session")
def graph_settings(arcadedb: EmbeddedArcadeDB, catalogue: tuple[Catalogue, int]) -> Settings:
    return Settings(
        host="127.0.0.1",
        port=0,
        neo4j_uri=arcadedb.uri,
        neo4j_user=arcadedb.user,
        neo4j_password=arcadedb.password,
        neo4j_database=arcadedb.database,
        query_timeout_seconds=20.0,
        max_entities_per_chunk=25,
        # the rule extractor: these tests are about the store, permissions and the leg, with texts whose entities
        # the rules find exactly; the spaCy extractor has its own tests (test_graph_nlp.py)
        spacy_model="",
        ppr_hops=2,  # the rank tests' bridge is three chunks long
        retriever_addr=f"127.0.0.1:{catalogue[1]}",
    )


@pytest.fixture(scope="session")
async def graph_address(graph_settings: Settings) -> AsyncIterator[str]:
    service = build_service(graph_settings)
    port = await service.start()
    yield f"127.0.0.1:{port}"
    await service.stop()


@pytest.fixture(scope="session")
def graph_as(
    graph_address: str,
) -> Callable[[UserContext], AbstractAsyncContextManager[graph_pb2_grpc.GraphServiceStub]]:
    @asynccontextmanager
    async def open_as(user: UserContext) -> AsyncIterator[graph_pb2_grpc.GraphServiceStub]:
        async with channel_as(graph_address, user) as channel:
            yield graph_pb2_grpc.GraphServiceStub(channel)

    return open_as


@pytest.fixture(scope="session")
async def graph_stub(
    graph_as: Callable[[UserContext], AbstractAsyncContextManager[graph_pb2_grpc.GraphServiceStub]],
) -> AsyncIterator[graph_pb2_grpc.GraphServiceStub]:
    """The graph, called as ALICE."""
    async with graph_as(ALICE) as stub:
        yield stub


@pytest.fixture(scope="session")
def documents(catalogue: tuple[Catalogue, int]) -> Catalogue:
    return catalogue[0]


@pytest.fixture(scope="session")
async def graph_store(graph_settings: Settings) -> AsyncIterator[GraphStore]:
    """A second store over the same database, for checks the API does not expose (orphan entities)."""
    store = GraphStore.connect(
        graph_settings.neo4j_uri,
        graph_settings.neo4j_user,
        graph_settings.neo4j_password,
        graph_settings.neo4j_database,
        graph_settings.query_timeout_seconds,
    )
    await store.setup_schema()  # idempotent: the constraints a test relies on, whichever test runs first
    yield store
    await store.close()


async def chunk_count(graph_store: GraphStore, document_id: str) -> int:
    """The document's chunks in the graph (what DeleteDocument removes)."""
    async with graph_store.driver.session(database=graph_store.database) as session:
        rows = await (await session.run(Q_COUNT_CHUNKS, document_id=document_id)).data()
    return int(rows[0]["n"])


@pytest.fixture
def doc_id(documents: Catalogue) -> str:
    """A fresh document of ALICE's per test: tests share one database and are isolated by the permission filter."""
    return documents.add(f"doc-{uuid.uuid4().hex[:10]}")


def ingest_request(document_id: str, *texts: str) -> graph_pb2.IngestChunksRequest:
    return graph_pb2.IngestChunksRequest(
        document_id=document_id,
        chunks=[
            graph_pb2.GraphChunk(chunk_id=f"{document_id}:{i}", document_id=document_id, text=text)
            for i, text in enumerate(texts)
        ],
    )
