"""Chunk hierarchy invariants, token bounds and input errors."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from ragmesh.parser.v1 import parser_pb2
from ragmesh_parser.chunker import Chunker, load_tokenizer
from ragmesh_parser.document import Block, ParsedDocument

LEVEL_DOCUMENT, LEVEL_SECTION, LEVEL_PARAGRAPH = 1, 2, 3


@pytest.fixture(scope="module")
def chunker() -> Chunker:
    return Chunker(load_tokenizer(), 200)


@pytest.mark.parametrize(
    "relpath", ["md/sources/wiki.md", "pdf/bookmark_sample.pdf", "pptx/sources/powerpoint_sample.pptx"]
)
@pytest.mark.parametrize("max_tokens", [0, 64])
async def test_chunk_hierarchy_invariants(
    parser_stub, documents: Path, chunker: Chunker, relpath: str, max_tokens: int
) -> None:
    path = documents / relpath
    reply = await parser_stub.Parse(
        parser_pb2.ParseRequest(
            filename=path.name, content=path.read_bytes(), document_id="d7", max_chunk_tokens=max_tokens
        ),
        timeout=60,
    )
    chunks = list(reply.chunks)
    by_id = {c.chunk_id: c for c in chunks}
    assert len(by_id) == len(chunks)
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    assert all(c.chunk_id == f"d7:{c.ordinal}" and c.document_id == "d7" and c.title == reply.title for c in chunks)
    docs = [c for c in chunks if c.level == LEVEL_DOCUMENT]
    assert len(docs) == 1 and docs[0].parent_id == ""
    for c in chunks:
        if c.level == LEVEL_SECTION:
            assert c.parent_id == docs[0].chunk_id
            assert c.text.startswith(" > ".join(c.section_path))
        elif c.level == LEVEL_PARAGRAPH:
            parent = by_id[c.parent_id]
            assert parent.level in (LEVEL_SECTION, LEVEL_DOCUMENT)
            if parent.level == LEVEL_SECTION:
                assert list(parent.section_path) == list(c.section_path)
            assert chunker.count(c.text) <= (max_tokens or 200)
            assert not c.text.startswith(" > ".join(c.section_path) + "\n") or not c.section_path
    # every block's text is covered by the paragraph chunks
    body = " ".join(c.text for c in chunks if c.level == LEVEL_PARAGRAPH).split()
    words = sum(len(b.text.split()) for b in reply.blocks if b.kind != "heading")
    assert len(body) >= words * 0.95


def test_oversized_paragraph_splits_on_sentences(chunker: Chunker) -> None:
    sentences = [f"Sentence number {i} talks about the retrieval pipeline in some detail." for i in range(60)]
    doc = ParsedDocument("T", "txt", 0, [Block("paragraph", " ".join(sentences))], "plain_text")
    chunks = [c for c in chunker.chunk(doc, "x", 50) if c.level == "paragraph"]
    assert len(chunks) > 5
    assert all(chunker.count(c.text) <= 50 for c in chunks)
    assert all(c.text.startswith("Sentence number") and c.text.endswith("detail.") for c in chunks)


def test_big_table_splits_by_rows_with_header(chunker: Chunker) -> None:
    rows = [["id", "name", "description"]] + [[str(i), f"item {i}", "a fairly long description"] for i in range(80)]
    doc = ParsedDocument("T", "csv", 0, [Block("table", "", rows=rows)], "simple")
    chunks = [c for c in chunker.chunk(doc, "x", 60) if c.kind == "table"]
    assert len(chunks) > 3
    assert all(c.text.startswith("| id | name | description |") for c in chunks)
    assert all(chunker.count(c.text) <= 60 for c in chunks)
    assert sum(c.text.count("\n") for c in chunks) == 80  # every data row once


def test_a_caption_opens_every_piece_of_its_table(chunker: Chunker) -> None:
    """Found with pptx_chart.pptx: "How many saltwater ducks were observed in 2021?" was withheld, as the chart's
    table chunk did not say "Observations" (its caption was a chunk of its own)."""
    rows = [["Year", "Saltwater Ducks"]] + [[str(2000 + i), str(i)] for i in range(40)]
    blocks = [Block("caption", "Wild Duck Observations by Year"), Block("table", "", rows=rows)]
    chunks = [
        c for c in chunker.chunk(ParsedDocument("T", "pptx", 0, blocks, "simple"), "x", 60) if c.level == "paragraph"
    ]
    assert len(chunks) > 2 and all(c.kind == "table" for c in chunks)
    assert all(c.text.startswith("Wild Duck Observations by Year\n| Year | Saltwater Ducks |") for c in chunks)
    assert all(chunker.count(c.text) <= 60 for c in chunks)
    assert sum(c.text.count("\n") for c in chunks) == 40 + len(chunks)  # every row once, the caption line each
    # a paragraph before a table stays a paragraph of its own
    blocks = [Block("paragraph", "Some words before."), Block("table", "", rows=rows[:3])]
    texts = [
        c.text for c in chunker.chunk(ParsedDocument("T", "docx", 0, blocks, "simple"), "x") if c.level == "paragraph"
    ]
    assert texts[0] == "Some words before." and texts[1].startswith("| Year")


def test_document_chunk_has_extractive_summary(chunker: Chunker) -> None:
    text = " ".join(f"Lead sentence {i} of the report." for i in range(100))
    doc = ParsedDocument("Report", "txt", 0, [Block("paragraph", text)], "plain_text")
    summary = chunker.chunk(doc, "x")[0]
    assert summary.level == "document" and summary.kind == "summary"
    assert summary.text.startswith("Report\nLead sentence 0 of the report.")
    assert len(summary.text.split()) <= 121


async def test_a_deck_of_headings_only_is_text_not_a_failure(parser_stub, documents: Path) -> None:
    """Found uploading the shared PPTX files: powerpoint_bad_text.pptx (one title, which Docling's ground truth
    keeps) failed with "no extractable text", as its only text was a heading. Now its heading is a paragraph."""
    path = documents / "pptx" / "sources" / "powerpoint_bad_text.pptx"
    reply = await parser_stub.Parse(parser_pb2.ParseRequest(filename=path.name, content=path.read_bytes()), timeout=60)
    paragraphs = [c for c in reply.chunks if c.level == LEVEL_PARAGRAPH]
    assert len(paragraphs) == 1 and paragraphs[0].text.startswith("X-Library The fully customisable")
    assert paragraphs[0].section_path == [paragraphs[0].text] and paragraphs[0].parent_id.endswith(":1")


def test_headings_become_paragraphs_only_when_nothing_else_is_text(chunker: Chunker) -> None:
    blocks = [
        Block("heading", "Agenda", section_path=["Agenda"]),
        Block("heading", "Q3", section_path=["Agenda", "Q3"]),
    ]
    chunks = chunker.chunk(ParsedDocument("Deck", "pptx", 0, blocks, "simple"), "x")
    assert [(c.text, c.section_path) for c in chunks if c.level == "paragraph"] == [
        ("Agenda", ["Agenda"]),
        ("Q3", ["Agenda", "Q3"]),
    ]
    blocks.append(Block("paragraph", "Revenue grew.", section_path=["Agenda", "Q3"]))
    chunks = chunker.chunk(ParsedDocument("Deck", "pptx", 0, blocks, "simple"), "x")
    assert [c.text for c in chunks if c.level == "paragraph"] == ["Revenue grew."]


BAD_INPUTS = [
    ("empty.md", b"", "empty"),
    ("random.docx", bytes(range(256)) * 8, "random.docx"),
    ("random.pdf", b"%PDF-1.4 garbage" + bytes(range(256)) * 4, "random.pdf"),
    ("photo.xyz", b"hello", "unsupported"),
    ("noext", b"hello", "unsupported"),
    ("binary.txt", b"\x00\x01\x02binary", "binary"),
]


@pytest.mark.parametrize(("filename", "content", "needle"), BAD_INPUTS, ids=[b[0] for b in BAD_INPUTS])
async def test_bad_files_are_invalid_argument(parser_stub, filename: str, content: bytes, needle: str) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await parser_stub.Parse(parser_pb2.ParseRequest(filename=filename, content=content), timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert needle in info.value.details() and filename in info.value.details()


async def test_mime_type_decides_without_extension(parser_stub) -> None:
    reply = await parser_stub.Parse(
        parser_pb2.ParseRequest(filename="upload", mime_type="text/markdown", content=b"# Hello\n\nWorld."), timeout=30
    )
    assert reply.format == "md" and [h.text for h in reply.headings] == ["Hello"]


async def test_file_over_the_size_limit_is_rejected(parser_stub) -> None:
    content = b"a" * (5 * 1024 * 1024 + 1)  # the suite runs with PARSER_MAX_BYTES = 5 MiB
    with pytest.raises(grpc.aio.AioRpcError) as info:
        await parser_stub.Parse(parser_pb2.ParseRequest(filename="big.txt", content=content), timeout=30)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "big.txt" in info.value.details() and "PARSER_MAX_BYTES" in info.value.details()


async def test_list_formats(parser_stub) -> None:
    reply = await parser_stub.ListFormats(parser_pb2.ListFormatsRequest(), timeout=10)
    assert {".pdf", ".docx", ".pptx", ".xlsx", ".csv", ".md", ".html", ".txt"} <= set(reply.extensions)


class _SlowParser:
    """Stands in for DocumentParser: every parse outlasts the service timeout."""

    def warmup(self) -> None:
        return None

    def parse(self, filename: str, content: bytes, fmt: str, progress: object = None) -> ParsedDocument:
        import time

        time.sleep(30)
        return ParsedDocument("t", fmt, 0, [Block("paragraph", "x")], "plain_text")


def slow_worker() -> tuple[_SlowParser, Chunker]:
    """A parser worker whose every parse outlasts the timeout (built in the worker process)."""

    return _SlowParser(), Chunker(load_tokenizer(), 200)


async def test_slow_conversion_times_out_for_good() -> None:
    """A parse past PARSER_TIMEOUT_SECONDS is killed and refused as INVALID_ARGUMENT (permanent: the ingestion
    worker retries only UNAVAILABLE, DEADLINE_EXCEEDED and RESOURCE_EXHAUSTED)."""
    from ragmesh.parser.v1 import parser_pb2_grpc
    from ragmesh_common.context import UserContext
    from ragmesh_common.testing import channel_as
    from ragmesh_parser.config import Settings
    from ragmesh_parser.server import build_service

    settings = Settings(
        host="127.0.0.1",
        port=0,
        max_bytes=1024,
        timeout_seconds=0.5,
        concurrency=1,
        max_chunk_tokens=200,
        artifacts_path=None,
    )
    service = build_service(settings, worker=slow_worker)
    port = await service.start()
    try:
        async with channel_as(f"127.0.0.1:{port}", UserContext("tester")) as channel:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await parser_pb2_grpc.ParserServiceStub(channel).Parse(
                    parser_pb2.ParseRequest(filename="slow.txt", content=b"hello"), timeout=120
                )
        assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "slow.txt" in info.value.details() and "PARSER_TIMEOUT_SECONDS" in info.value.details()
    finally:
        await service.stop()
