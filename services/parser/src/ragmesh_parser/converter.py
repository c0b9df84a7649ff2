"""Docling conversion: bytes of one file to a ParsedDocument (blocks with sections, pages, tables)."""

from __future__ import annotations

import io
import logging
import math
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath

import pypdfium2 as pdfium
from docling.datamodel.base_models import ConversionStatus, DocumentStream, InputFormat
from docling.datamodel.pipeline_options import HeadingHierarchyOptions, NativePdfPipelineOptions, PdfPipelineOptions
from docling.document_converter import DocumentConverter, NativePdfFormatOption, PdfFormatOption
from PIL import Image

from ragmesh_common.errors import InvalidArgument
from ragmesh_common.formats import BY_NAME, FORMATS, IMAGE_FORMATS, MAX_IMAGE_PIXELS
from ragmesh_parser.document import (
    Block,
    ParsedDocument,
    blocks_from_docling,
    bold_opening,
    declared_title,
    paragraphs_from_text,
)
from ragmesh_parser.ocr import ImageFile, OcrEngine, OcrPage, OcrReport, ocr_pages
from ragmesh_parser.pdf_native import structure_pdf, structure_scan

logger = logging.getLogger(__name__)

# from the one format registry: the formats Docling converts, and the suffix it recognises each by (aliases we
# accept are renamed before conversion)
_INPUT_FORMATS: dict[str, InputFormat] = {f.name: InputFormat(f.docling) for f in FORMATS if f.docling}
_CANONICAL_SUFFIX = {f.name: f".{f.extensions[0]}" for f in FORMATS if f.docling}

PIPELINE_NATIVE_PDF = "native_pdf"
PIPELINE_STANDARD_PDF = "standard_pdf"
PIPELINE_SIMPLE = "simple"
PIPELINE_PLAIN_TEXT = "plain_text"
PIPELINE_OCR = "ocr"  # an image file, read by OCR
PIPELINE_NATIVE_PDF_OCR = "native_pdf+ocr"  # a PDF with pages read by OCR

Progress = Callable[[int, int], None]  # (pages done, pages to do)

# A text layer with fewer letters and digits than this on a page is empty (a scan, perhaps with a stamped page
# number); one where more than GARBAGE_RATIO of the characters are unassigned, private-use, control or
# replacement characters (a font without a usable ToUnicode map) is unreadable: both pages are OCR'd.
MIN_PAGE_ALNUM = 10
GARBAGE_RATIO = 0.3
_GARBAGE_CATEGORIES = {"Co", "Cn", "Cc", "Cs"}


@dataclass(frozen=True)
class OcrSettings:
    dpi: int = 200  # page render resolution for OCR
    max_seconds: float = 150.0  # OCR time per document; pages left are reported, not read
    threads: int = 1  # onnxruntime threads per worker


def page_needs_ocr(text: str) -> bool:
    """Whether a page's text layer is empty or unreadable (see MIN_PAGE_ALNUM, GARBAGE_RATIO)."""
    chars = [ch for ch in text if not ch.isspace()]
    if sum(ch.isalnum() for ch in chars) < MIN_PAGE_ALNUM:
        return True
    bad = sum(ch == "\ufffd" or unicodedata.category(ch) in _GARBAGE_CATEGORIES for ch in chars)
    bad += 5 * text.count("(cid:") + 6 * text.count("GLYPH<")  # placeholders some extractors write for glyphs
    return bad > GARBAGE_RATIO * len(chars)


def _render(pdf: pdfium.PdfDocument, number: int, dpi: int) -> tuple[Image.Image, float]:
    """Page `number` (1-based) as an image at `dpi`, lowered so that it stays within MAX_IMAGE_PIXELS."""
    page = pdf[number - 1]
    try:
        width, height = page.get_size()
        scale = min(dpi / 72.0, math.sqrt(MAX_IMAGE_PIXELS / max(width * height, 1.0)))
        bitmap = page.render(scale=scale, grayscale=True)
        image = bitmap.to_pil().convert("RGB")
        bitmap.close()
        return image, scale
    finally:
        page.close()


def _confidences(blocks: list[Block], pages: list[OcrPage]) -> None:
    """Sets each block's OCR confidence from the OCR'd lines whose centre lies in its box (same page)."""
    by_page = {page.page: page.lines for page in pages}
    for block in blocks:
        lines = by_page.get(block.page)
        if not lines or block.bbox is None:
            continue
        box = block.bbox
        inside = [
            ln
            for ln in lines
            if box.left - 1 <= (ln.page_box[0] + ln.page_box[2]) / 2 <= box.right + 1
            and box.top - 1 <= (ln.page_box[1] + ln.page_box[3]) / 2 <= box.bottom + 1
        ]
        chars = sum(len(ln.text) for ln in inside)
        if chars:
            block.ocr_confidence = round(sum(ln.confidence * len(ln.text) for ln in inside) / chars, 4)


class DocumentParser:
    """Owns the Docling converters (built once) and turns one file into a ParsedDocument.

    Thread-safe for concurrent `parse` calls; the caller bounds the concurrency.
    """

    def __init__(
        self,
        artifacts_path: str | None = None,
        timeout_seconds: float | None = None,
        ocr: OcrSettings | None = None,
    ) -> None:
        self.artifacts_path = artifacts_path
        self.ocr = ocr
        self._engine: OcrEngine | None = OcrEngine(ocr.threads) if ocr is not None else None
        if artifacts_path:
            pdf_options = PdfPipelineOptions(
                artifacts_path=artifacts_path,
                do_ocr=False,
                do_table_structure=True,
                generate_parsed_pages=True,
                document_timeout=timeout_seconds,
                heading_hierarchy_options=HeadingHierarchyOptions(enabled=True),
            )
            pdf_format: PdfFormatOption = PdfFormatOption(pipeline_options=pdf_options)
            self.pdf_pipeline = PIPELINE_STANDARD_PDF
        else:
            pdf_format = NativePdfFormatOption(
                # no page images: nothing here reads them, and rasterising and PNG-encoding every page cost
                # a 120-page text PDF more than reading its text
                pipeline_options=NativePdfPipelineOptions(
                    parser_threads=1, document_timeout=timeout_seconds, generate_page_images=False
                )
            )
            self.pdf_pipeline = PIPELINE_NATIVE_PDF
        self._converter = DocumentConverter(
            allowed_formats=list(_INPUT_FORMATS.values()),
            format_options={InputFormat.PDF: pdf_format},
        )

    def warmup(self) -> None:
        """Builds every pipeline now, so the first request does not pay for it."""
        for input_format in _INPUT_FORMATS.values():
            self._converter.initialize_pipeline(input_format)
        if self._engine is not None:
            self._engine.warmup()

    def _ocr(
        self, numbers: list[int], load: Callable[[int], tuple[Image.Image, float]], progress: Progress | None
    ) -> OcrReport:
        assert self._engine is not None and self.ocr is not None
        return ocr_pages(self._engine, numbers, load, self.ocr.max_seconds, progress)

    def parse(self, filename: str, content: bytes, fmt: str, progress: Progress | None = None) -> ParsedDocument:
        stem = PurePath(filename).stem or filename or "document"
        if fmt in IMAGE_FORMATS:
            return self._parse_image(filename, content, fmt, stem, progress)
        if BY_NAME[fmt].docling is None:  # plain text: read here, not by Docling
            return self._parse_text(filename, content, stem)
        name = f"{stem}{_CANONICAL_SUFFIX[fmt]}"
        try:
            result = self._converter.convert(
                DocumentStream(name=name, stream=io.BytesIO(content)), raises_on_error=False
            )
        except Exception as exc:  # Docling raises many kinds for unreadable input
            logger.info("conversion of %s failed: %s: %s", filename, type(exc).__name__, exc)
            raise InvalidArgument(f"{filename}: not a readable {fmt} file ({type(exc).__name__}: {exc})") from exc
        if result.status not in (ConversionStatus.SUCCESS, ConversionStatus.PARTIAL_SUCCESS):
            detail = "; ".join(err.error_message for err in result.errors)[:300] or result.status.value
            raise InvalidArgument(f"{filename}: not a readable {fmt} file ({detail})")
        report: OcrReport | None = None
        if fmt == "pdf" and self.pdf_pipeline == PIPELINE_NATIVE_PDF:
            pipeline = self.pdf_pipeline
            scanned = [
                page.page_no
                for page in result.pages
                if page.parsed_page is not None
                and page_needs_ocr(" ".join(cell.text or "" for cell in page.parsed_page.textline_cells))
            ]
            if scanned and self._engine is not None and self.ocr is not None:
                dpi = self.ocr.dpi
                pdf = pdfium.PdfDocument(content)
                try:
                    report = self._ocr(scanned, lambda number: _render(pdf, number, dpi), progress)
                finally:
                    pdf.close()
                pipeline = PIPELINE_NATIVE_PDF_OCR
                logger.info(
                    "%s: %d of %d page(s) read by OCR in %.1fs",
                    filename,
                    len(report.pages),
                    len(result.pages),
                    report.seconds,
                )
            doc = structure_pdf(result, content, stem, report.pages if report else None)
        elif fmt == "pdf":
            pipeline, doc = self.pdf_pipeline, result.document
        else:
            pipeline, doc = PIPELINE_SIMPLE, result.document
        blocks = blocks_from_docling(doc, fmt)
        if report is not None:
            _confidences(blocks, report.pages)
        if not blocks:
            if report is not None:
                raise InvalidArgument(
                    f"{filename}: no text found in the {fmt} file (OCR read no text on its {len(report.pages)} "
                    "scanned page(s))"
                )
            hint = " (a scanned PDF? OCR is not enabled)" if fmt == "pdf" and self._engine is None else ""
            raise InvalidArgument(f"{filename}: no text content found in the {fmt} file{hint}")
        headings = [b for b in blocks if b.kind == "heading"]
        # the title the file declares, else its first heading, else a bold opening line; a workbook's headings
        # are its sheet names ("Sheet1"): its title is its file's name
        title = (
            (declared_title(doc) or (headings[0].text if headings else (bold_opening(doc) or stem)))
            if fmt != "xlsx"
            else stem
        )
        return ParsedDocument(
            title=title,
            format=fmt,
            page_count=len(doc.pages),
            blocks=blocks,
            pipeline=pipeline,
            warnings=report.warnings(self.ocr.max_seconds) if report is not None and self.ocr else [],
            ocr_pages=len(report.pages) if report is not None else 0,
        )

    def _parse_image(
        self, filename: str, content: bytes, fmt: str, stem: str, progress: Progress | None
    ) -> ParsedDocument:
        if self._engine is None or self.ocr is None:
            raise InvalidArgument(f"{filename}: images need OCR, which is disabled (PARSER_OCR_ENABLED)")
        image = ImageFile(filename, content, fmt)  # refuses a decompression bomb from its headers
        try:
            report = self._ocr(list(range(1, len(image.sizes) + 1)), image.page, progress)
        finally:
            image.close()
        if not report.pages:
            raise InvalidArgument(
                f"{filename}: OCR of the first page took longer than {self.ocr.max_seconds:g}s (PARSER_OCR_MAX_SECONDS)"
            )
        doc = structure_scan(report.pages, stem)
        blocks = blocks_from_docling(doc, "pdf")  # boxes in points, top-left origin, as for a PDF
        _confidences(blocks, report.pages)
        if not blocks:
            raise InvalidArgument(f"{filename}: no text found in the image (OCR read no text)")
        headings = [b for b in blocks if b.kind == "heading"]
        return ParsedDocument(
            title=headings[0].text if headings else stem,
            format=fmt,
            page_count=len(image.sizes),
            blocks=blocks,
            pipeline=PIPELINE_OCR,
            warnings=report.warnings(self.ocr.max_seconds),
            ocr_pages=len(report.pages),
        )

    @staticmethod
    def _parse_text(filename: str, content: bytes, stem: str) -> ParsedDocument:
        if b"\x00" in content[:8192]:
            raise InvalidArgument(f"{filename}: not a text file (binary content)")
        try:
            text = content.decode("utf-8-sig")
        except UnicodeDecodeError:
            text = content.decode("latin-1")
        blocks = paragraphs_from_text(text)
        if not blocks:
            raise InvalidArgument(f"{filename}: no text content found")
        return ParsedDocument(title=stem, format="txt", page_count=0, blocks=blocks, pipeline=PIPELINE_PLAIN_TEXT)
