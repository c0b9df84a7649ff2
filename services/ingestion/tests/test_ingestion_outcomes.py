"""Honest ingestion outcomes: a document whose parse yields no paragraph text ends `failed`, not `ready`."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ragmesh.common.v1 import common_pb2
from ragmesh.embedder.v1 import embedder_pb2
from ragmesh.parser.v1 import parser_pb2
from ragmesh_ingestion.config import Deadlines
from ragmesh_ingestion.pipeline import Ingestor


class _User:
    user_id = "alice"

    def metadata(self) -> list[tuple[str, str]]:
        return []


class _Redis:
    def __init__(self) -> None:
        self.events: list[str] = []

    async def set(self, key: str, value: str, ex: int) -> None:
        pass

    async def publish(self, key: str, value: str) -> None:
        self.events.append(value)

    def pipeline(self, transaction: bool = True) -> _Pipeline:
        return _Pipeline(self)


class _Pipeline:
    """redis.asyncio's pipeline as Ingestor.publish uses it."""

    def __init__(self, redis: _Redis) -> None:
        self.redis = redis
        self.queued: list[str] = []

    async def __aenter__(self) -> _Pipeline:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    def set(self, key: str, value: str, ex: int) -> None:
        pass

    def publish(self, key: str, value: str) -> None:
        self.queued.append(value)

    async def execute(self) -> None:
        self.redis.events.extend(self.queued)


async def _ready() -> None:
    pass


def _mesh(parsed: parser_pb2.ParseResponse) -> tuple[SimpleNamespace, list[Any], list[str]]:
    statuses: list[Any] = []
    calls: list[str] = []

    async def parse(request: Any, **_: Any) -> parser_pb2.ParseResponse:
        calls.append("parse")
        return parsed

    async def embed(request: Any, **_: Any) -> embedder_pb2.EmbedResponse:
        calls.append("embed")
        return embedder_pb2.EmbedResponse(vectors=[embedder_pb2.Vector(values=[0.0, 1.0]) for _ in request.texts])

    async def index(request: Any, **_: Any) -> None:
        calls.append("index")

    async def update(request: Any, **_: Any) -> common_pb2.Document:
        statuses.append(request)
        return common_pb2.Document(document_id=request.document_id)

    async def parse_stream(request: Any, **options: Any) -> Any:
        yield parser_pb2.ParseStreamResponse(response=await parse(request.request, **options))

    mesh = SimpleNamespace(
        parser=SimpleNamespace(Parse=parse, ParseStream=parse_stream),
        embedder=SimpleNamespace(Embed=embed),
        retriever=SimpleNamespace(IndexChunks=index, UpdateDocumentStatus=update),
        channel=lambda name: SimpleNamespace(channel_ready=_ready),
    )
    return mesh, statuses, calls


def _chunk(level: int, text: str) -> common_pb2.Chunk:
    return common_pb2.Chunk(chunk_id=f"d:{level}:{len(text)}", document_id="d", level=level, text=text)


@pytest.mark.parametrize(
    "chunks",
    [
        [],
        [_chunk(common_pb2.CHUNK_LEVEL_DOCUMENT, "Slides")],  # a title, nothing else (an unreadable PPTX)
        [_chunk(common_pb2.CHUNK_LEVEL_PARAGRAPH, "  \n ")],
    ],
)
async def test_no_extractable_text_fails_the_document(tmp_path: Path, chunks: list[common_pb2.Chunk]) -> None:
    path = tmp_path / "deck.pptx"
    path.write_bytes(b"PK\x03\x04")
    mesh, statuses, calls = _mesh(parser_pb2.ParseResponse(format="pptx", chunks=chunks))
    redis = _Redis()
    await Ingestor(mesh, redis, Deadlines(), graph_enabled=False).run("d", _User(), path, "deck.pptx", "")
    assert calls == ["parse"]
    assert statuses[-1].status == common_pb2.DOCUMENT_STATUS_FAILED
    assert statuses[-1].error == "no extractable text"
    assert '"failed"' in redis.events[-1] and "no extractable text" in redis.events[-1]


async def test_a_document_with_paragraph_text_becomes_ready(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"Acme builds rockets.")
    chunks = [
        _chunk(common_pb2.CHUNK_LEVEL_DOCUMENT, "Notes"),
        _chunk(common_pb2.CHUNK_LEVEL_PARAGRAPH, "Acme builds rockets."),
    ]
    mesh, statuses, calls = _mesh(parser_pb2.ParseResponse(format="txt", chunks=chunks))
    await Ingestor(mesh, _Redis(), Deadlines(), graph_enabled=False).run("d", _User(), path, "notes.txt", "")
    assert calls == ["parse", "embed", "index"]
    assert statuses[-1].status == common_pb2.DOCUMENT_STATUS_READY
