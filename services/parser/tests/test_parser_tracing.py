"""The parse and chunk spans carry the registered attributes (and no document text)."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ragmesh.parser.v1 import parser_pb2
from ragmesh_common import attributes as attr
from ragmesh_parser import server as parser_server


async def test_parse_and_chunk_spans(parser_stub, monkeypatch: pytest.MonkeyPatch) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()  # local provider: the global one stays untouched
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(parser_server, "tracer", provider.get_tracer("test"))
    content = b"# Guide\n\nSecret body text.\n\n## Part\n\nMore text."
    await parser_stub.Parse(parser_pb2.ParseRequest(filename="guide.md", content=content, document_id="d1"), timeout=30)
    spans = {span.name: span for span in exporter.get_finished_spans()}
    assert set(spans) == {"parse", "chunk"}
    parse = spans["parse"].attributes
    assert parse[attr.RAG_DOCUMENT_FORMAT] == "md" and parse[attr.RAG_PARSE_PIPELINE] == "simple"
    assert parse[attr.RAG_PARSE_BLOCKS] == 4 and parse[attr.RAG_PARSE_PAGES] == 0
    assert spans["chunk"].attributes[attr.RAG_CHUNK_COUNT] == 5  # document, 2 sections, 2 paragraphs
    assert all(set(s.attributes) <= attr.REGISTRY for s in spans.values())
    assert not any("Secret" in str(v) for s in spans.values() for v in s.attributes.values())
