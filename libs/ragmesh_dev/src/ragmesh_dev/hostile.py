"""A hostile-input corpus, generated: files and chat inputs built to stall or exhaust a service that reads them
naively (compression bombs, pathological XML, spreadsheets and PDFs that cost far more than their size, text
that makes backtracking regexes quadratic). Tests feed them through the public paths; nothing here is stored.

Each file is small on the wire; what it would cost is in its description.
"""

from __future__ import annotations

import io
import random
import zipfile
from dataclasses import dataclass

_CT_NS = "http://schemas.openxmlformats.org/package/2006/content-types"
_REL_NS = "http://schemas.openxmlformats.org/package/2006/relationships"
_OFFICE_DOCUMENT = "http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"
_MAIN = {"docx": "word/document.xml", "xlsx": "xl/workbook.xml", "pptx": "ppt/presentation.xml"}
_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


@dataclass(frozen=True)
class HostileFile:
    name: str  # what it is, for test ids
    filename: str
    content: bytes
    description: str  # what it costs a naive reader


def _rels(target: str, extra: str = "") -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><Relationships xmlns="{_REL_NS}">'
        f'<Relationship Id="rId1" Type="{_OFFICE_DOCUMENT}" Target="{target}"{extra}/></Relationships>'
    ).encode()


def _content_types() -> bytes:
    return (
        f'<?xml version="1.0" encoding="UTF-8"?><Types xmlns="{_CT_NS}">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/></Types>'
    ).encode()


def _zip(parts: dict[str, bytes], streamed: dict[str, tuple[bytes, int]] | None = None) -> bytes:
    """A deflated ZIP of `parts`; `streamed` entries are `piece` repeated `times` (written piece by piece, so a
    300 MiB entry never exists in memory here either)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
        for name, (piece, times) in (streamed or {}).items():
            with archive.open(name, "w", force_zip64=True) as stream:
                for _ in range(times):
                    stream.write(piece)
    return buffer.getvalue()


def _docx_body(body: str) -> bytes:
    return f'<?xml version="1.0" encoding="UTF-8"?><w:document xmlns:w="{_W}"><w:body>{body}</w:body></w:document>'.encode()


def huge_attribute_docx(length: int = 40_000) -> HostileFile:
    """The audit's 465-byte .docx: a Relationship tag with a 40,000-character attribute name (a backtracking
    attribute regex is quadratic in it: 35 s of the gateway's event loop)."""
    rels = (
        f'<?xml version="1.0"?><Relationships xmlns="{_REL_NS}"><Relationship Id="rId1" '
        f'Type="{_OFFICE_DOCUMENT}" Target="word/document.xml" {"a" * length}></Relationships>'
    ).encode()
    content = _zip({"[Content_Types].xml": _content_types(), "_rels/.rels": rels, "word/document.xml": _docx_body("")})
    return HostileFile("huge_attribute", "attribute.docx", content, f"{length}-character attribute in _rels/.rels")


def rels_bomb_docx(mib: int = 300) -> HostileFile:
    """A .docx whose _rels/.rels inflates to `mib` MiB (read whole into memory by a naive check)."""
    piece = b" " * (1024 * 1024)
    content = _zip(
        {"[Content_Types].xml": _content_types(), "word/document.xml": _docx_body("")},
        {"_rels/.rels": (piece, mib)},
    )
    return HostileFile("rels_bomb", "rels-bomb.docx", content, f"_rels/.rels inflates to {mib} MiB")


def zip_bomb(fmt: str, mib: int = 200) -> HostileFile:
    """A .docx/.xlsx/.pptx with valid relationships whose main part inflates to `mib` MiB."""
    main = _MAIN[fmt]
    piece = b"<a/>" * (256 * 1024)
    content = _zip(
        {"[Content_Types].xml": _content_types(), "_rels/.rels": _rels(main)},
        {main: (piece, mib)},
    )
    return HostileFile(f"zip_bomb_{fmt}", f"bomb.{fmt}", content, f"{main} inflates to {mib} MiB")


def many_entries_docx(entries: int = 50_000) -> HostileFile:
    """A .docx of `entries` empty members (a ZIP reader parses one record per entry before anything else)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_STORED) as archive:
        archive.writestr("[Content_Types].xml", _content_types())
        archive.writestr("_rels/.rels", _rels("word/document.xml"))
        archive.writestr("word/document.xml", _docx_body(""))
        for i in range(entries):
            archive.writestr(f"x/{i}", b"")
    return HostileFile("many_entries", "entries.docx", buffer.getvalue(), f"{entries} ZIP entries")


def _docx(body_xml: bytes) -> bytes:
    return _zip(
        {
            "[Content_Types].xml": _content_types(),
            "_rels/.rels": _rels("word/document.xml"),
            "word/document.xml": body_xml,
        }
    )


def deeply_nested_docx(depth: int = 100_000) -> HostileFile:
    """A .docx whose document.xml nests `depth` elements (recursive readers overflow their stack)."""
    tags = random.Random(depth).choices(range(1 << 32), k=depth)  # noise, so that it is no compression bomb
    body = "".join(f'<w:sdt w:tag="{tag:08x}"><w:sdtContent>' for tag in tags) + "</w:sdtContent></w:sdt>" * depth
    return HostileFile("deeply_nested", "nested.docx", _docx(_docx_body(body)), f"XML nested {depth} deep")


def billion_laughs_docx(levels: int = 10) -> HostileFile:
    """A .docx whose document.xml defines entities that expand 10^`levels` times (the billion laughs)."""
    entities = '<!ENTITY l0 "lol">' + "".join(
        f'<!ENTITY l{i} "{("&l" + str(i - 1) + ";") * 10}">' for i in range(1, levels)
    )
    xml = (
        f'<?xml version="1.0"?><!DOCTYPE w:document [{entities}]>'
        f'<w:document xmlns:w="{_W}"><w:body><w:p><w:r><w:t>&l{levels - 1};</w:t></w:r></w:p></w:body></w:document>'
    ).encode()
    return HostileFile("billion_laughs", "laughs.docx", _docx(xml), f"entities expanding 10^{levels} times")


def huge_rows_xlsx(rows: int = 1_000_000) -> HostileFile:
    """The audit's ~300 KB workbook: one sheet of `rows` rows (a converter builds a table of all of them)."""
    workbook = (
        b'<?xml version="1.0"?><workbook xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" '
        b'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships">'
        b'<sheets><sheet name="S" sheetId="1" r:id="rId1"/></sheets></workbook>'
    )
    workbook_rels = (
        f'<?xml version="1.0"?><Relationships xmlns="{_REL_NS}"><Relationship Id="rId1" '
        'Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/worksheet" '
        'Target="worksheets/sheet1.xml"/></Relationships>'
    ).encode()
    types = (
        f'<?xml version="1.0"?><Types xmlns="{_CT_NS}">'
        '<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/>'
        '<Override PartName="/xl/workbook.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
        '<Override PartName="/xl/worksheets/sheet1.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"/></Types>'
    ).encode()
    head = (
        b'<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
    )
    body = b"".join(b'<row r="%d"><c r="A%d"><v>%d</v></c></row>' % (i, i, i) for i in range(1, rows + 1))
    sheet = head + body + b"</sheetData></worksheet>"
    content = _zip(
        {
            "[Content_Types].xml": types,
            "_rels/.rels": _rels("xl/workbook.xml"),
            "xl/workbook.xml": workbook,
            "xl/_rels/workbook.xml.rels": workbook_rels,
            "xl/worksheets/sheet1.xml": sheet,
        }
    )
    return HostileFile("huge_rows", "rows.xlsx", content, f"{rows} rows in {len(content)} bytes")


def _pdf(objects: list[bytes], *, bad_xref: bool = False) -> bytes:
    out = io.BytesIO()
    out.write(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % (offset * 7 + 13 if bad_xref else offset))
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def many_pages_pdf(pages: int = 200_000) -> HostileFile:
    """A PDF whose page tree lists one page object `pages` times (a per-page pipeline does every one)."""
    kids = b" ".join(b"3 0 R" for _ in range(pages))
    content = _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [" + kids + b"] /Count %d >>" % pages,
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
            b"<< /Length 44 >>\nstream\nBT /F1 12 Tf 72 720 Td (Page text) Tj ET\nendstream",
        ]
    )
    return HostileFile("many_pages", "pages.pdf", content, f"{pages} pages in {len(content)} bytes")


def claimed_pages_bad_xref_pdf() -> HostileFile:
    """A PDF claiming two billion pages, with an xref table that points nowhere."""
    content = _pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 2000000000 >>",
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] >>",
        ],
        bad_xref=True,
    )
    return HostileFile("bad_xref", "xref.pdf", content, "2e9 pages claimed, xref offsets wrong")


def long_line_markdown(chars: int = 2_000_000) -> HostileFile:
    """Markdown of one 2-million-character line without a space (worst case for word and sentence regexes)."""
    content = b"# T\n\n" + b"a" * chars + b"\n"
    return HostileFile("long_line", "line.md", content, f"one line of {chars} characters")


def zip_files() -> list[HostileFile]:
    """The ZIP-container attacks the upload check itself must refuse (4xx) without inflating them."""
    return [
        rels_bomb_docx(),
        zip_bomb("docx"),
        zip_bomb("xlsx"),
        zip_bomb("pptx"),
        many_entries_docx(),
    ]


def parser_files() -> list[HostileFile]:
    """Files that pass the upload check but cost a converter more than their size says."""
    return [
        huge_attribute_docx(),
        deeply_nested_docx(),
        billion_laughs_docx(),
        huge_rows_xlsx(),
        many_pages_pdf(),
        claimed_pages_bad_xref_pdf(),
        long_line_markdown(),
    ]


def newline_history(turns: int = 20, chars: int = 8000) -> list[dict[str, str]]:
    """A chat history of `turns` turns of `chars` characters, mostly newlines and spaces (quadratic for a
    backtracking `\\s+ … \\w+` pattern): the audit's 8.6-11 s of guardrail per request."""
    turn = ("ignore\n" + "\n \n" * (chars // 3))[:chars]
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": turn} for i in range(turns)]
