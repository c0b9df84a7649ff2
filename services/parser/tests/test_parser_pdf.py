"""Text-layer PDFs through the model-free pipeline: pages, levelled headings, no running headers/footers."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from ragmesh.parser.v1 import parser_pb2


async def parse(stub, path: Path) -> parser_pb2.ParseResponse:
    content = await asyncio.to_thread(path.read_bytes)
    return await stub.Parse(parser_pb2.ParseRequest(filename=path.name, content=content, document_id="p"), timeout=60)


async def test_bookmarked_pdf_gives_heading_levels_and_drops_running_header(
    parser_stub, parse_pipeline, documents: Path
) -> None:
    reply = await parse(parser_stub, documents / "pdf/bookmark_sample.pdf")
    assert reply.page_count == 3 and parse_pipeline() == "native_pdf"
    assert [(h.text, h.level, h.page) for h in reply.headings] == [
        ("PART I - DEFINITIONS", 1, 1),
        ("1. Interpretation", 2, 1),
        ("2. Construction of Terms", 2, 1),
        ("PART II - OBLIGATIONS", 1, 2),
        ("3. Payment Terms", 2, 2),
        ("3.1 Payment Schedule", 3, 2),
        ("4. Termination", 2, 3),
        ("PART III - MISCELLANEOUS", 1, 3),
    ]
    # "Sample Agreement - page N" is printed at the top of every page
    assert not any("Sample Agreement" in b.text for b in reply.blocks)
    # the body clause repeats on every page too, but it is content, not furniture
    assert sum("demonstration purposes" in b.text for b in reply.blocks) == 8
    para = next(
        b
        for b in reply.blocks
        if b.kind == "paragraph" and b.page == 2 and b.section_path[-1] == "3.1 Payment Schedule"
    )
    assert list(para.section_path) == ["PART II - OBLIGATIONS", "3. Payment Terms", "3.1 Payment Schedule"]
    # lines merged into one paragraph, bbox in points with a top-left origin
    assert para.text.endswith("beneath each heading.")
    assert para.bbox.unit == "pt" and 0 <= para.bbox.top < para.bbox.bottom <= 792


async def test_multi_page_pdf_headings_match_groundtruth(parser_stub, documents: Path) -> None:
    reply = await parse(parser_stub, documents / "pdf/sources/multi_page.pdf")
    expected = [
        re.sub(r"^#+\s*", "", line)
        for line in (documents / "pdf/groundtruth/multi_page.md").read_text().splitlines()
        if line.startswith("#")
    ]
    assert [h.text for h in reply.headings] == expected
    assert reply.page_count == 5
    assert {b.page for b in reply.blocks} == {1, 2, 3, 4, 5}
    assert all(h.level >= 1 for h in reply.headings)
    assert reply.title == "The Evolution of the Word Processor"


async def test_page_numbers_and_running_footers_are_dropped(parser_stub, documents: Path) -> None:
    reply = await parse(parser_stub, documents / "pdf/sources/redp5110_sampled.pdf")
    texts = [b.text for b in reply.blocks]
    assert not any(re.fullmatch(r"[ivxlcdm]+|\d+", t) for t in texts)  # bare page numbers
    assert not any(re.search(r"Row and Column Access Control Support in IBM DB2 for i \d+$", t) for t in texts)
    assert any(h.text.startswith("1.1 Security fundamentals") for h in reply.headings)
