"""Scanned pages through the Parse RPCs: image files and PDF pages without a text layer are read by OCR (RapidOCR),
with page, box (PDF points, top-left origin) and confidence; a mixed PDF keeps its text layer where it has one; an
image without text, a decompression bomb and an OCR time bound each give a clear answer."""

from __future__ import annotations

import struct
import zlib

import grpc
import pytest
from PIL import Image

from ragmesh.parser.v1 import parser_pb2, parser_pb2_grpc
from ragmesh_common.formats import MAX_IMAGE_PIXELS
from ragmesh_dev import scans
from ragmesh_parser.converter import DocumentParser, OcrSettings, page_needs_ocr
from ragmesh_parser.ocr import OcrEngine

NORMANS = (
    "The Normans were the people who in the 10th and 11th centuries gave their name to Normandy, a region in France.",
    "They were descended from Norse raiders and pirates from Denmark, Iceland and Norway who swore fealty to King "
    "Charles III of West Francia.",
)
DUCHY = ("The Duchy of Normandy was ruled by dukes who lived in Rouen, beside the river Seine.",)


def _words(text: str) -> set[str]:
    return {w.strip(".,").lower() for w in text.split()}


async def _parse(stub: parser_pb2_grpc.ParserServiceStub, name: str, content: bytes) -> parser_pb2.ParseResponse:
    return await stub.Parse(parser_pb2.ParseRequest(filename=name, content=content, document_id="s"), timeout=120)


async def test_a_png_scan_is_read_with_boxes_in_points_and_confidence(parser_stub, parse_pipeline) -> None:
    page = scans.render_page(NORMANS, title="Normandy", dpi=200, noise=0.01, rotate=1.0, seed=3)
    reply = await _parse(parser_stub, "normans.png", scans.image_bytes(page, "PNG", dpi=200))
    assert (reply.format, reply.page_count, reply.ocr_pages, parse_pipeline()) == ("png", 1, 1, "ocr")
    assert reply.title == "Normandy"
    text = " ".join(b.text for b in reply.blocks)
    assert {"normans", "normandy", "norse", "fealty", "francia"} <= _words(text)
    width, height = scans.A4_INCHES[0] * 72, scans.A4_INCHES[1] * 72  # 200 dpi declared: points are inches x 72
    for block in reply.blocks:
        assert block.page == 1 and block.bbox.unit == "pt"
        assert 0 <= block.bbox.left < block.bbox.right <= width and 0 <= block.bbox.top < block.bbox.bottom <= height
        assert block.HasField("ocr_confidence") and 0.8 < block.ocr_confidence <= 1.0
    heading = reply.blocks[0]
    assert heading.kind == "heading" and heading.bbox.top < 120  # the title is printed at the top of the page
    paragraphs = [c for c in reply.chunks if c.text.startswith("The Normans")]
    assert paragraphs and paragraphs[0].page == 1 and paragraphs[0].HasField("ocr_confidence")
    assert not reply.warnings


async def test_a_scanned_pdf_streams_progress_per_page_and_reads_a_turned_page(
    parser_stub: parser_pb2_grpc.ParserServiceStub,
) -> None:
    upright = scans.render_page(NORMANS, dpi=150)
    turned = scans.render_page(DUCHY, dpi=150).transpose(Image.Transpose.ROTATE_90)  # scanned sideways
    pdf = scans.scanned_pdf([upright, turned], dpi=150)
    events = [
        event
        async for event in parser_stub.ParseStream(
            parser_pb2.ParseStreamRequest(
                request=parser_pb2.ParseRequest(filename="scan.pdf", content=pdf, document_id="s")
            ),
            timeout=120,
        )
    ]
    progress = [(e.progress.pages_done, e.progress.pages_total) for e in events if e.HasField("progress")]
    assert progress == [(1, 2), (2, 2)]
    assert events[-1].HasField("response")
    reply = events[-1].response
    assert (reply.page_count, reply.ocr_pages) == (2, 2)
    second = [b for b in reply.blocks if b.page == 2]
    assert second and second[0].text.startswith("The Duchy of Normandy was ruled by dukes")
    # the box is on the page as given (landscape: 842 x 595 points), where the sideways line runs down the left
    box = second[0].bbox
    assert box.right - box.left < box.bottom - box.top and box.right < 150


async def test_a_mixed_pdf_reads_only_the_page_without_text(parser_stub, parse_pipeline) -> None:
    native = ["Rouen is the capital of the region and lies on the Seine.", "Its cathedral was painted by Monet."]
    pdf = scans.mixed_pdf(native, [scans.render_page(DUCHY, dpi=150)], dpi=150)
    reply = await _parse(parser_stub, "mixed.pdf", pdf)
    assert (reply.page_count, reply.ocr_pages, parse_pipeline()) == (2, 1, "native_pdf+ocr")
    first = [b for b in reply.blocks if b.page == 1]
    second = [b for b in reply.blocks if b.page == 2]
    assert first[0].text == " ".join(native) and not first[0].HasField("ocr_confidence")
    assert "dukes" in second[0].text and second[0].HasField("ocr_confidence")


async def test_a_multi_page_tiff_gives_one_page_per_frame(parser_stub: parser_pb2_grpc.ParserServiceStub) -> None:
    first, second = scans.render_page(NORMANS, dpi=150), scans.render_page(DUCHY, dpi=150)
    tiff = scans.image_bytes(first, "TIFF", dpi=150, save_all=True, append_images=[second], compression="tiff_lzw")
    reply = await _parse(parser_stub, "bundle.tif", tiff)
    assert (reply.format, reply.page_count, reply.ocr_pages) == ("tiff", 2, 2)
    assert {b.page for b in reply.blocks} == {1, 2}
    assert any("Rouen" in b.text for b in reply.blocks if b.page == 2)


async def test_an_image_without_text_fails_with_no_text_found(parser_stub: parser_pb2_grpc.ParserServiceStub) -> None:
    blank = scans.image_bytes(Image.new("L", (1200, 1600), 255), "JPEG")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _parse(parser_stub, "blank.jpg", blank)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "no text found" in (caught.value.details() or "")


def _png_header(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    # a few rows of zeros compress to almost nothing: the file is tiny, its header claims the size
    rows = zlib.compress(b"\x00" * (width // 8 + 1) * 16, 9)
    ihdr = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", rows) + chunk(b"IEND", b"")


@pytest.mark.parametrize(("width", "height"), [(50_000, 50_000), (10_000, 9_000)])
async def test_a_decompression_bomb_is_refused_from_its_header(
    parser_stub: parser_pb2_grpc.ParserServiceStub, width: int, height: int
) -> None:
    assert width * height > MAX_IMAGE_PIXELS  # 2.5 billion (Pillow refuses it too), and 90 million (only we do)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await _parse(parser_stub, "bomb.png", _png_header(width, height))
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    details = caught.value.details() or ""
    assert "decompression bomb" in details and "refused before decoding" in details
    # the parser is still there for the next file
    ok = await _parse(parser_stub, "notes.txt", b"Still parsing.")
    assert ok.chunks


def test_a_text_layer_that_is_empty_or_garbage_is_read_by_ocr() -> None:
    assert page_needs_ocr("")
    assert page_needs_ocr("  12  ")  # a stamped page number on a scan
    assert page_needs_ocr("\ue001\ue002\ue003 \ue004\ue005 abc def ghi \ufffd\ufffd\ufffd\ufffd\ufffd\ufffd\ufffd")
    assert page_needs_ocr("(cid:12)(cid:15)(cid:18) (cid:20)(cid:3) ab")
    assert not page_needs_ocr("An ordinary page of text, with numbers 1, 2 and 3.")


def test_ocr_time_per_document_is_bounded_and_the_pages_left_are_reported() -> None:
    parser = DocumentParser(None, 60, OcrSettings(dpi=100, max_seconds=0.001))
    pages = [scans.render_page(NORMANS, dpi=100), scans.render_page(DUCHY, dpi=100), scans.render_page(DUCHY, dpi=100)]
    parsed = parser.parse("long.pdf", scans.scanned_pdf(pages, dpi=100), "pdf")
    assert parsed.ocr_pages == 1 and {b.page for b in parsed.blocks} == {1}  # the first page is always read
    assert any("PARSER_OCR_MAX_SECONDS" in w and "page(s) 2-3 were not read" in w for w in parsed.warnings)


def test_an_allocation_that_fails_inside_onnxruntime_is_a_memory_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the worker's RLIMIT_AS, onnxruntime fails with a C++ std::bad_alloc that rapidocr wraps in its own
    error; the worker answers a MemoryError as the memory limit (INVALID_ARGUMENT), anything else as an error."""
    engine = OcrEngine()
    page = Image.new("L", (64, 64), 255)

    def fails(message: str) -> None:
        def run(*args: object, **kwargs: object) -> None:
            try:
                raise RuntimeError(message)  # onnxruntime's RuntimeException
            except RuntimeError as cause:
                raise ValueError("Traceback (most recent call last): ...") from cause  # rapidocr's wrapper

        monkeypatch.setattr(engine, "_engine", run)

    fails("[ONNXRuntimeError] : 6 : RUNTIME_EXCEPTION : ... ReorderInput node. Status Message: std::bad_alloc")
    with pytest.raises(MemoryError):
        engine.read(page, 1.0)
    fails("[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Got invalid dimensions for input")
    with pytest.raises(ValueError):
        engine.read(page, 1.0)
