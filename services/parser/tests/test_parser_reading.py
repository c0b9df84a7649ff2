"""The parser's reading (`ragmesh_parser.reading.PARSER_VERSION`) is raised whenever its output changes.

A digest of what the parser reads from a few shared sample files (title, blocks, chunks: their kinds, texts,
sections, levels) is recorded beside the version it was recorded at (tests/data/reading.json). Output that changed
under the same version fails here: raise PARSER_VERSION (documents parsed before then show as stale, `ragmesh docs
reingest --stale`) and record the new digest with `RAGMESH_RECORD_READING=1 make test-unit ARGS=services/parser -k
reading`."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
from pathlib import Path

from ragmesh.parser.v1 import parser_pb2
from ragmesh_parser.reading import PARSER_VERSION

RECORDED = Path(__file__).parent / "data" / "reading.json"
# one file of each kind the parser reads without OCR or PDF rendering (those depend on the machine's fonts)
READ = [
    "md/sources/wiki.md",
    "html/sources/kvp_data_example.html",
    "html/sources/example_01.html",
    "html/sources/html_description_list.html",
    "docx/sources/word_sample.docx",
    "docx/sources/docx_checkboxes.docx",
    "pptx/sources/pptx_chart.pptx",
    "xlsx/sources/xlsx_01.xlsx",
    "csv/sources/csv-comma.csv",
]


def _reading(reply: parser_pb2.ParseResponse) -> dict[str, object]:
    return {
        "title": reply.title,
        "format": reply.format,
        "blocks": [[b.kind, b.text, list(b.section_path), b.page] for b in reply.blocks],
        "chunks": [[c.level, c.text, list(c.section_path)] for c in reply.chunks],
    }


async def test_the_reading_is_raised_whenever_the_output_changes(parser_stub, documents: Path) -> None:
    read = {}
    for relpath in READ:
        content = await asyncio.to_thread((documents / relpath).read_bytes)
        request = parser_pb2.ParseRequest(filename=Path(relpath).name, content=content, document_id="doc-1")
        reply = await parser_stub.Parse(request, timeout=60)
        assert reply.parser_version == PARSER_VERSION, relpath
        read[relpath] = _reading(reply)
    digest = hashlib.sha256(json.dumps(read, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
    if os.environ.get("RAGMESH_RECORD_READING") == "1":
        RECORDED.write_text(json.dumps({"parser_version": PARSER_VERSION, "digest": digest}, indent=2) + "\n")
    recorded = json.loads(RECORDED.read_text())
    if recorded["parser_version"] == PARSER_VERSION:
        assert recorded["digest"] == digest, (
            "the parser's output changed under the same reading: raise PARSER_VERSION in ragmesh_parser/reading.py "
            "(documents parsed before become stale) and record the digest (RAGMESH_RECORD_READING=1)"
        )
    else:
        raise AssertionError(
            f"PARSER_VERSION is {PARSER_VERSION}, the digest was recorded at {recorded['parser_version']}: record it "
            "again (RAGMESH_RECORD_READING=1)"
        )


async def test_the_parser_says_its_reading(parser_stub) -> None:
    formats = await parser_stub.ListFormats(parser_pb2.ListFormatsRequest(), timeout=10)
    assert formats.parser_version == PARSER_VERSION >= 1 and ".pdf" in formats.extensions
