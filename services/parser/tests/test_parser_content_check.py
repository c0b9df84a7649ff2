"""File content checked against its extension (`formats.check_content`): real files pass, mismatches are refused
with a reason, and the Parse RPC refuses them with INVALID_ARGUMENT."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import grpc
import pytest

from ragmesh.parser.v1 import parser_pb2
from ragmesh_common.errors import InvalidArgument
from ragmesh_common.formats import check_content

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64)


def _zip(parts: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in parts.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def _rels(target: str) -> bytes:
    return (
        b'<?xml version="1.0"?><Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
        b'<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/'
        b'officeDocument" Target="' + target.encode() + b'"/></Relationships>'
    )


def test_every_real_sample_file_passes(documents: Path) -> None:
    files = [f for f in sorted(documents.glob("*/sources/*")) if f.suffix.lower() != ".png"]
    assert len(files) > 100
    for f in files:
        assert check_content(f.name, f.read_bytes()) == f.parent.parent.name, f


@pytest.mark.parametrize(
    ("filename", "content", "reason"),
    [
        ("notes.txt", PNG, "a PNG image"),
        ("notes.md", b"ab\x00cd\x01\x02" * 50, "binary (it contains NUL bytes)"),
        ("table.csv", b"\x7fELF\x02\x01\x01" + bytes(40), "an executable"),
        ("page.html", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n", "a PDF"),
        ("report.pdf", b"<html><body>not a pdf</body></html>", "does not start with %PDF-"),
        ("report.pdf", PNG, "does not start with %PDF-"),
        ("letter.docx", b"plain text pretending", "is a ZIP container; this one is not"),
        (
            "deck.pptx",
            _zip({"_rels/.rels": _rels("word/document.xml"), "word/document.xml": b"<w/>"}),
            "its main part is word/document.xml, not in ppt/",
        ),
        ("book.xlsx", _zip({"readme.txt": b"just a zip"}), "its main part is missing"),
        ("letter.docx", _zip({"_rels/.rels": _rels("word/document.xml")}), "its main part is missing"),
    ],
)
def test_content_that_contradicts_the_extension_is_refused(filename: str, content: bytes, reason: str) -> None:
    with pytest.raises(InvalidArgument, match=filename.replace(".", r"\.")) as raised:
        check_content(filename, content)
    assert reason in str(raised.value)


@pytest.mark.parametrize(
    ("filename", "content"),
    [
        ("utf16.txt", "\ufeffHällo Welt\n".encode("utf-16")),  # NUL bytes, but a byte-order mark says UTF-16
        ("latin1.csv", "name;city\nJosé;Málaga\n".encode("latin-1")),
        ("late.pdf", b"\n\n%PDF-1.4\n"),  # Acrobat accepts the header within the first 1,024 bytes
        ("minimal.docx", _zip({"_rels/.rels": _rels("/word/document.xml"), "word/document.xml": b"<w/>"})),
        ("head-only.xlsx", _zip({"_rels/.rels": _rels("xl/workbook.xml"), "xl/workbook.xml": b"<x/>"})[:30]),
    ],
)
def test_unusual_but_honest_content_passes(filename: str, content: bytes) -> None:
    check_content(filename, content)


async def test_parse_refuses_a_binary_file_named_txt(parser_stub) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as raised:
        await parser_stub.Parse(parser_pb2.ParseRequest(filename="notes.txt", content=PNG), timeout=60)
    assert raised.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "a PNG image" in (raised.value.details() or "")
