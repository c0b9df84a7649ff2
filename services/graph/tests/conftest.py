"""Fixtures: one real ArcadeDB (Bolt) per session, and one in-process graph gRPC server on port 0 over it."""
from __future__ import annotations

import secrets
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest

from ragmesh.graph.v1 import graph_pb2, graph_pb2_grpc
from ragmesh_common.engines.arcadedb import EmbeddedArcadeDB
from ragmesh_common.engines.postgres import free_port
from ragmesh_common.server import insecure_channel
from ragmesh_graph.config import Settings
from ragmesh_graph.server import build_service
from ragmesh_graph.store import GraphStore


@pytest.fixture(scope="session")
def arcadedb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedArcadeDB]:
    server = EmbeddedArcadeDB(tmp_path_factory.mktemp("arcadedb"), free_port(), free_port(),
                              secrets.token_urlsafe(12))
    server.start(timeout=180)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def graph_settings(arcadedb: EmbeddedArcadeDB) -> Settings:
    return Settings(host="127.0.0.1", port=0, neo4j_uri=arcadedb.uri, neo4j_user=arcadedb.user,
                    neo4j_password=arcadedb.password, neo4j_database=arcadedb.database, query_timeout_seconds=20.0,
                    max_entities_per_chunk=25)


@pytest.fixture(scope="session")
async def graph_stub(graph_settings: Settings) -> AsyncIterator[graph_pb2_grpc.GraphServiceStub]:
    service = build_service(graph_settings)
    port = await service.start()
    async with insecure_channel(f"127.0.0.1:{port}") as channel:
        yield graph_pb2_grpc.GraphServiceStub(channel)
    await service.stop()


@pytest.fixture(scope="session")
async def graph_store(graph_settings: Settings) -> AsyncIterator[GraphStore]:
    """A second store over the same database, for checks the API does not expose (orphan entities)."""
    store = GraphStore.connect(graph_settings.neo4j_uri, graph_settings.neo4j_user, graph_settings.neo4j_password,
                               graph_settings.neo4j_database, graph_settings.query_timeout_seconds)
    yield store
    await store.close()


@pytest.fixture
def doc_id() -> str:
    """A fresh document id per test: tests share one database and are isolated by the permission filter."""
    return f"doc-{uuid.uuid4().hex[:10]}"


def ingest_request(document_id: str, *texts: str) -> graph_pb2.IngestChunksRequest:
    return graph_pb2.IngestChunksRequest(document_id=document_id, chunks=[
        graph_pb2.GraphChunk(chunk_id=f"{document_id}:{i}", document_id=document_id, text=text)
        for i, text in enumerate(texts)])
