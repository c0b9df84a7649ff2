"""Scans through the upload API to a cited answer: a scanned PDF (no text layer) and a PNG are uploaded, read by OCR
in the parser, indexed, and a question about what is printed on them is answered citing the document and the page;
an image without text fails with "no text found"; a decompression bomb is refused at upload (413) from its header."""

from __future__ import annotations

import struct
import zlib

import httpx
import pytest
from PIL import Image

from ragmesh_dev import scans
from ragmesh_dev.devstack import Stack

from .conftest import auth, upload, wait_document

pytestmark = pytest.mark.e2e

LIGHTHOUSE = (
    "The Varnholm lighthouse stands on the northern cape of the island and guides ships into the harbour.",
    "The Varnholm lighthouse was built in 1887 by the engineer Marta Kovacs, who also designed its copper lantern.",
)
PREFACE = ("This booklet describes the coastal buildings of the island and the people who made them.",)
FERRY = ("The Quillon harbour ferry departs every 40 minutes from pier 7, from six in the morning until midnight.",)


@pytest.fixture(scope="module")
def token(mesh: Stack) -> str:
    return mesh.token("oskar", "archive", ["employee"])


def _ready(client: httpx.Client, token: str, name: str, content: bytes) -> dict[str, object]:
    reply = upload(client, token, name, content)
    assert reply.status_code == 202, reply.text
    doc = wait_document(client, token, reply.json()["document_id"])
    assert doc["status"] == "ready", doc
    return doc


def _chat(client: httpx.Client, token: str, question: str, document_id: str) -> dict[str, object]:
    reply = client.post("/api/v1/chat", headers=auth(token), json={"question": question, "document_ids": [document_id]})
    assert reply.status_code == 200, reply.text
    body: dict[str, object] = reply.json()
    return body


def test_a_scanned_pdf_is_answered_citing_the_page(client: httpx.Client, token: str) -> None:
    pages = [
        scans.render_page(PREFACE, title="Coastal buildings", dpi=200),
        # a section of its own: paragraphs of one section merge into a chunk across pages, cited at its first page
        scans.render_page(LIGHTHOUSE, title="The lighthouse", dpi=200),
    ]
    doc = _ready(client, token, "coastal-scan.pdf", scans.scanned_pdf(pages, dpi=200))
    assert doc["page_count"] == 2 and not doc["warnings"]
    body = _chat(client, token, "Who built the Varnholm lighthouse?", str(doc["document_id"]))
    assert body["outcome"] == "answer", body
    assert "Kovacs" in str(body["answer"])
    sources = body["sources"]
    assert isinstance(sources, list) and sources
    cited = [s for s in sources if "Kovacs" in s["snippet"]]
    assert cited and cited[0]["document_id"] == doc["document_id"] and cited[0]["page"] == 2


def test_a_png_is_answered_citing_it(client: httpx.Client, token: str) -> None:
    png = scans.image_bytes(scans.render_page(FERRY, title="Harbour timetable", dpi=200, rotate=1.0), "PNG", dpi=200)
    doc = _ready(client, token, "timetable.png", png)
    assert doc["page_count"] == 1
    body = _chat(client, token, "How often does the Quillon harbour ferry depart?", str(doc["document_id"]))
    assert body["outcome"] == "answer", body
    assert "40 minutes" in str(body["answer"])
    sources = body["sources"]
    assert isinstance(sources, list)
    assert any(s["document_id"] == doc["document_id"] and s["page"] == 1 for s in sources)


def test_an_image_without_text_fails_with_no_text_found(client: httpx.Client, token: str) -> None:
    reply = upload(client, token, "blank.png", scans.image_bytes(Image.new("L", (1000, 1400), 255), "PNG"))
    assert reply.status_code == 202, reply.text
    doc = wait_document(client, token, reply.json()["document_id"])
    assert doc["status"] == "failed" and "no text found" in doc["error"], doc


def test_a_decompression_bomb_is_refused_at_upload(client: httpx.Client, token: str) -> None:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 50_000, 50_000, 1, 0, 0, 0, 0)
    bomb = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(bytes(7000), 9))
    reply = upload(client, token, "bomb.png", bomb + chunk(b"IEND", b""))
    assert reply.status_code == 413, reply.text
    assert "decompression bomb" in reply.text
