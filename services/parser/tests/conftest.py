"""Fixtures: one in-process parser gRPC server (port 0) for the whole parser suite."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragmesh.parser.v1 import parser_pb2_grpc
from ragmesh_common import attributes as attr
from ragmesh_common.context import UserContext
from ragmesh_common.testing import channel_as
from ragmesh_parser import server as parser_server
from ragmesh_parser.config import Settings
from ragmesh_parser.server import build_service

CALLER = UserContext("tester", "eng", ("employee",))  # every call carries its signed token

os.environ.setdefault("HF_HUB_OFFLINE", "1")

DATA = Path(__file__).resolve().parents[3] / ".." / "shared" / "data"
DOCUMENTS = DATA / "documents"
MAX_TOKENS = 200


@pytest.fixture
def parse_pipeline(monkeypatch: pytest.MonkeyPatch):
    """The Docling pipeline of the last parse, read from its span (a diagnostic, not in the ParseResponse)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()  # local provider: the global one stays untouched
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(parser_server, "tracer", provider.get_tracer("test"))
    return lambda: [s for s in exporter.get_finished_spans() if s.name == "parse"][-1].attributes[
        attr.RAG_PARSE_PIPELINE
    ]


def make_settings(**overrides: object) -> Settings:
    values: dict[str, object] = dict(
        host="127.0.0.1",
        port=0,
        max_bytes=5 * 1024 * 1024,
        timeout_seconds=60.0,
        concurrency=2,
        max_chunk_tokens=MAX_TOKENS,
        artifacts_path=None,
    )
    values.update(overrides)
    return Settings(**values)


@pytest.fixture(scope="session")
def documents() -> Path:
    if not DOCUMENTS.is_dir():
        pytest.skip(f"shared evaluation documents not found at {DOCUMENTS} (../shared/data is absent)")
    return DOCUMENTS


@pytest.fixture(scope="session")
async def parser_stub() -> AsyncIterator[parser_pb2_grpc.ParserServiceStub]:
    service = build_service(make_settings())
    port = await service.start()
    async with channel_as(f"127.0.0.1:{port}", CALLER) as channel:
        yield parser_pb2_grpc.ParserServiceStub(channel)
    await service.stop()
