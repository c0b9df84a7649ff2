"""Headings of text-layer PDFs read from the words' fonts (stop 59): section titles set at the body's size in
italic or a heavier weight, TeX's font names, and what only looks like a heading (a paragraph opening with a bold
name, a caption, a row of labels, a passage in a heading's style, a line that starts lower-case)."""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

from ragmesh.parser.v1 import parser_pb2
from ragmesh_parser.pdf_native import Line, font_style, mark_headings, segments

BODY = "Times-Roman"


def line(top: float, text: str, font: str = BODY, *, size: float = 8.5, left: float = 72.0, page: int = 1) -> Line:
    out = Line(page, left, top, left + 5.0 * len(text), top + size, text, size, False)
    out.fonts = Counter({font: len(text)})
    out.bold = font_style(font).weight >= 700
    return out


def body(top: float, n: int) -> list[Line]:
    return [line(top + 12.5 * i, f"body text line number {i} of a paragraph that goes on") for i in range(n)]


def headings(lines: list[Line]) -> list[str]:
    mark_headings(lines, [])
    return [s.text for s in segments(lines) if s.kind == "heading"]


def test_font_names_say_weight_and_slant_including_tex_codes() -> None:
    assert font_style("/KIDKQO+Times-Italic").italic
    assert font_style("AAAAAD+SFBX1000").weight == 700 and not font_style("AAAAAC+SFRM1000").italic
    assert font_style("CMTI10").italic and font_style("CMBX12").weight == 700
    assert font_style("KoPubDotumMedium").weight == 500
    assert font_style("MyCorporateSans").weight == 400  # unknown: regular, upright


def test_an_italic_title_at_body_size_is_a_heading_an_italic_passage_is_not() -> None:
    lines = [
        *body(40, 4),
        line(100, "Elastic Stop Nut", "Times-Italic"),
        *body(115, 3),
        line(160, "Note that this whole passage is set in italic", "Times-Italic"),
        line(172.5, "because it is a quotation from another manual", "Times-Italic"),
        line(185, "and ends with a full stop.", "Times-Italic"),
        *body(200, 3),
        line(240, "Figure 7-26 Boots self-locking nut", "Times-Italic"),
        *body(255, 3),
    ]
    assert headings(lines) == ["Elastic Stop Nut"]


def test_a_heavier_weight_stands_out_only_when_clearly_heavier() -> None:
    light = "KoPubBatangLight"
    lines = [line(40 + 12.5 * i, f"본문 줄 {i} 입니다 그리고 계속됩니다", light) for i in range(6)]
    lines += [line(130, "(1) 감염병 관련 법률 개정", "KoPubDotumMedium")]
    lines += [line(145 + 12.5 * i, f"본문 줄 {i} 입니다 그리고 계속됩니다", light) for i in range(4)]
    assert headings(lines) == ["(1) 감염병 관련 법률 개정"]
    regular = [line(40 + 12.5 * i, f"body line {i} in the regular weight goes on", "Tajawal-Regular") for i in range(8)]
    assert headings([*regular, line(150, "Label In Medium", "Tajawal-Medium")]) == []  # Medium over Regular


def test_a_paragraph_opening_with_a_bold_name_is_not_a_bold_heading() -> None:
    lead = line(100, "Jim Bainbridge is a senior DB2 consultant on the DB2 for i", "Helvetica")
    lead.fonts = Counter({"Helvetica-Bold": 13, "Helvetica": 45})
    regular = [line(40 + 12.5 * i, "regular body text in Helvetica that fills the line", "Helvetica") for i in range(4)]
    lines = [
        *regular,
        line(88, "Authors", "Helvetica-Bold"),
        lead,
        line(112.5, "Center of Excellence team", "Helvetica"),
    ]
    assert headings(lines) == ["Authors"]


def test_a_heading_broken_over_lines_stays_whole_but_a_lower_case_start_is_no_heading() -> None:
    regular = [line(40 + 12.5 * i, "regular body text in Helvetica that fills the line", "Helvetica") for i in range(6)]
    lines = [
        *regular,
        line(130, "Implement roles and separation", "Helvetica-Bold", size=12.4),
        line(145, "of duties", "Helvetica-Bold", size=12.4),
        *[line(165 + 12.5 * i, "regular body text in Helvetica that fills the line", "Helvetica") for i in range(3)],
        # a paragraph's line in a taller box (a superscript in it): larger, but it opens lower-case
        line(210, "global businesses of all sizes. The Identity Theft Resource", "Helvetica", size=11.8),
    ]
    assert headings(lines) == ["Implement roles and separation of duties"]


def test_labels_side_by_side_are_a_row_not_headings_a_far_column_is_not_a_row() -> None:
    regular = [line(40 + 12.5 * i, "regular body text in Helvetica that fills the line", "Helvetica") for i in range(6)]
    row = [
        line(130, "Column name", "Helvetica-Bold", left=72),
        line(130, "Data type", "Helvetica-Bold", left=72 + 5 * 11 + 20),
    ]
    columns = [
        line(200, "Protect Columns", "Helvetica-Bold", left=30),
        line(200, "Building", "Helvetica-Bold", left=470),
    ]
    assert headings([*regular, *row, *columns]) == ["Protect Columns", "Building"]


def test_a_passage_set_in_a_heading_style_is_a_paragraph() -> None:
    light = "KoPubBatangLight"
    lines = [line(40 + 12.5 * i, f"본문 줄 {i} 입니다 그리고 계속됩니다", light) for i in range(8)]
    summary = "요약 문단의 단어가 여기에 있고 계속해서 이어지며 길게 쓰여 있습니다"
    lines += [line(150 + 12.5 * i, f"{summary} {i}", "KoPubDotumMedium") for i in range(4)]
    mark_headings(lines, [])
    assert [s.kind for s in segments(lines)][-1] == "paragraph"


async def parse(stub, path: Path) -> parser_pb2.ParseResponse:
    content = await asyncio.to_thread(path.read_bytes)
    return await stub.Parse(parser_pb2.ParseRequest(filename=path.name, content=content, document_id="p"), timeout=60)


async def test_shared_pdfs_get_their_italic_tex_and_bold_headings(parser_stub, documents: Path) -> None:
    amt = await parse(parser_stub, documents / "pdf/sources/amt_handbook_sample.pdf")
    assert [h.text for h in amt.headings] == [
        "Boots Self-Locking Nut",
        "Stainless Steel Self-Locking Nut",
        "Elastic Stop Nut",
    ]
    para = next(b for b in amt.blocks if b.text.startswith("The elastic stop nut is a standard nut"))
    assert para.kind == "paragraph" and list(para.section_path)[-1] == "Elastic Stop Nut"

    tex = await parse(parser_stub, documents / "pdf/sources/2305.03393v1-pg9.pdf")
    assert [h.text for h in tex.headings] == ["5.1 Hyper Parameter Optimization", "5.2 Quantitative Results"]

    redp = await parse(parser_stub, documents / "pdf/sources/redp5110_sampled.pdf")
    texts = {h.text for h in redp.headings}
    assert "Implement roles and separation of duties" in texts and "Authors" in texts
    assert not any(t.startswith("Jim Bainbridge is") for t in texts)
    assert any(b.kind == "paragraph" and b.text.startswith("Jim Bainbridge is a senior DB2") for b in redp.blocks)
    # paragraph lines in taller boxes (a footnote mark in them) that open lower-case
    assert not any(t.startswith(("global businesses", "financial cost")) for t in texts)
