"""Docling conversion: bytes of one file to a ParsedDocument (blocks with sections, pages, tables)."""

from __future__ import annotations

import io
import logging
from pathlib import PurePath

from docling.datamodel.base_models import ConversionStatus, DocumentStream, InputFormat
from docling.datamodel.pipeline_options import HeadingHierarchyOptions, NativePdfPipelineOptions, PdfPipelineOptions
from docling.document_converter import DocumentConverter, NativePdfFormatOption, PdfFormatOption

from ragmesh_common.errors import InvalidArgument
from ragmesh_common.formats import BY_NAME, FORMATS
from ragmesh_parser.document import ParsedDocument, blocks_from_docling, paragraphs_from_text
from ragmesh_parser.pdf_native import structure_pdf

logger = logging.getLogger(__name__)

# from the one format registry: the formats Docling converts, and the suffix it recognises each by (aliases we
# accept are renamed before conversion)
_INPUT_FORMATS: dict[str, InputFormat] = {f.name: InputFormat(f.docling) for f in FORMATS if f.docling}
_CANONICAL_SUFFIX = {f.name: f".{f.extensions[0]}" for f in FORMATS if f.docling}

PIPELINE_NATIVE_PDF = "native_pdf"
PIPELINE_STANDARD_PDF = "standard_pdf"
PIPELINE_SIMPLE = "simple"
PIPELINE_PLAIN_TEXT = "plain_text"


class DocumentParser:
    """Owns the Docling converters (built once) and turns one file into a ParsedDocument.

    Thread-safe for concurrent `parse` calls; the caller bounds the concurrency.
    """

    def __init__(self, artifacts_path: str | None = None, timeout_seconds: float | None = None) -> None:
        self.artifacts_path = artifacts_path
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

    def parse(self, filename: str, content: bytes, fmt: str) -> ParsedDocument:
        stem = PurePath(filename).stem or filename or "document"
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
        if fmt == "pdf":
            pipeline = self.pdf_pipeline
            doc = structure_pdf(result, content, stem) if pipeline == PIPELINE_NATIVE_PDF else result.document
        else:
            pipeline, doc = PIPELINE_SIMPLE, result.document
        blocks = blocks_from_docling(doc, fmt)
        if not blocks:
            hint = " (a scanned PDF? OCR is not enabled)" if fmt == "pdf" else ""
            raise InvalidArgument(f"{filename}: no text content found in the {fmt} file{hint}")
        headings = [b for b in blocks if b.kind == "heading"]
        title = headings[0].text if headings else stem
        return ParsedDocument(title=title, format=fmt, page_count=len(doc.pages), blocks=blocks, pipeline=pipeline)

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
