"""ParserService: Parse (file -> structure + hierarchical chunks) and ListFormats.

Conversion and chunking run in killable worker processes under time, CPU and memory limits (isolation.py);
this process only checks the request, hands it to a worker and builds the response."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import AsyncIterator, Callable

from grpc import aio
from opentelemetry import trace

from ragmesh.common.v1 import common_pb2
from ragmesh.parser.v1 import parser_pb2, parser_pb2_grpc
from ragmesh_common import attributes as attr
from ragmesh_common.errors import InvalidArgument, grpc_errors
from ragmesh_common.formats import accepted_extensions, check_content, detect_format
from ragmesh_common.server import GrpcService
from ragmesh_parser.chunker import LEVEL_DOCUMENT, LEVEL_SECTION, Chunker, ChunkRecord, load_tokenizer
from ragmesh_parser.config import Settings
from ragmesh_parser.document import Block, ParsedDocument
from ragmesh_parser.isolation import Converter, Job, Limits, ParsePool, Splitter, WorkerFactory
from ragmesh_parser.reading import PARSER_VERSION

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

_LEVELS = {LEVEL_DOCUMENT: common_pb2.CHUNK_LEVEL_DOCUMENT, LEVEL_SECTION: common_pb2.CHUNK_LEVEL_SECTION}


def _block_pb(block: Block) -> parser_pb2.Block:
    msg = parser_pb2.Block(
        kind=block.kind,
        text=block.text,
        section_path=block.section_path,
        page=block.page,
        heading_level=block.heading_level,
    )
    if block.ocr_confidence is not None:
        msg.ocr_confidence = block.ocr_confidence
    if block.bbox is not None:
        msg.bbox.CopyFrom(
            parser_pb2.BoundingBox(
                left=block.bbox.left,
                top=block.bbox.top,
                right=block.bbox.right,
                bottom=block.bbox.bottom,
                unit=block.bbox.unit,
            )
        )
    if block.rows:
        msg.table.CopyFrom(
            parser_pb2.Table(
                num_rows=len(block.rows),
                num_cols=max(len(r) for r in block.rows),
                rows=[parser_pb2.TableRow(cells=row) for row in block.rows],
            )
        )
    return msg


def _chunk_pb(chunk: ChunkRecord) -> common_pb2.Chunk:
    msg = common_pb2.Chunk(
        chunk_id=chunk.chunk_id,
        document_id=chunk.document_id,
        level=_LEVELS.get(chunk.level, common_pb2.CHUNK_LEVEL_PARAGRAPH),
        parent_id=chunk.parent_id,
        ordinal=chunk.ordinal,
        section_path=chunk.section_path,
        page=chunk.page,
        text=chunk.text,
        title=chunk.title,
        kind=common_pb2.ChunkKind.Value(f"CHUNK_KIND_{chunk.kind.upper()}"),
    )
    if chunk.ocr_confidence is not None:
        msg.ocr_confidence = round(chunk.ocr_confidence, 4)
    return msg


class ParserServicer(parser_pb2_grpc.ParserServiceServicer):
    def __init__(self, pool: ParsePool, *, max_bytes: int) -> None:
        self.pool = pool
        self.max_bytes = max_bytes

    async def warmup(self) -> None:
        await self.pool.start()

    async def _parse(
        self, request: parser_pb2.ParseRequest, progress: Callable[[int, int], None] | None = None
    ) -> parser_pb2.ParseResponse:
        name = request.filename or "<unnamed>"
        if request.max_chunk_tokens < 0:
            raise InvalidArgument(f"{name}: max_chunk_tokens must be >= 0, got {request.max_chunk_tokens}")
        fmt = detect_format(request.filename, request.mime_type)
        size = len(request.content)
        if size == 0:
            raise InvalidArgument(f"{name}: the file is empty")
        if size > self.max_bytes:
            raise InvalidArgument(
                f"{name}: the file is {size} bytes, above the limit of {self.max_bytes} bytes (PARSER_MAX_BYTES)"
            )
        # off the event loop: CPU work over the whole file (a ZIP's directory and relationships, image headers)
        await asyncio.to_thread(check_content, request.filename, request.content, request.mime_type)
        with tracer.start_as_current_span("parse") as span:
            span.set_attribute(attr.RAG_DOCUMENT_FORMAT, fmt)
            if request.document_id:
                span.set_attribute(attr.RAG_DOCUMENT_ID, request.document_id)
            result = await self.pool.parse(
                Job(name, request.content, fmt, request.document_id, request.max_chunk_tokens), progress
            )
            parsed, chunks = result.document, result.chunks
            span.set_attribute(attr.RAG_PARSE_PIPELINE, parsed.pipeline)
            span.set_attribute(attr.RAG_PARSE_PAGES, parsed.page_count)
            span.set_attribute(attr.RAG_PARSE_BLOCKS, len(parsed.blocks))
            if parsed.ocr_pages:
                span.set_attribute(attr.RAG_PARSE_OCR_PAGES, parsed.ocr_pages)
            if parsed.warnings:
                span.add_event("degraded", {attr.RAG_STAGE: "ocr", attr.RAG_DEGRADED_REASON: parsed.warnings[0][:200]})
            # chunking ran in the worker too: its span has the worker's start and end
            chunk_span = tracer.start_span("chunk", start_time=result.chunk_started_ns)
            chunk_span.set_attribute(attr.RAG_CHUNK_COUNT, len(chunks))
            chunk_span.end(end_time=result.chunk_ended_ns)
        logger.info(
            "parsed %s (%s, %s): %d pages (%d by OCR), %d blocks, %d chunks%s",
            name,
            fmt,
            parsed.pipeline,
            parsed.page_count,
            parsed.ocr_pages,
            len(parsed.blocks),
            len(chunks),
            f"; {'; '.join(parsed.warnings)}" if parsed.warnings else "",
        )
        return self._response(parsed, chunks)

    @grpc_errors
    async def Parse(
        self,
        request: parser_pb2.ParseRequest,
        context: aio.ServicerContext[parser_pb2.ParseRequest, parser_pb2.ParseResponse],
    ) -> parser_pb2.ParseResponse:
        return await self._parse(request)

    @grpc_errors
    async def ParseStream(
        self,
        request: parser_pb2.ParseStreamRequest,
        context: aio.ServicerContext[parser_pb2.ParseStreamRequest, parser_pb2.ParseStreamResponse],
    ) -> AsyncIterator[parser_pb2.ParseStreamResponse]:
        """Progress events while OCR reads pages, then the response (the errors of Parse)."""
        loop = asyncio.get_running_loop()
        events: asyncio.Queue[parser_pb2.ParseStreamResponse] = asyncio.Queue()

        def progress(done: int, total: int) -> None:  # called from the pool's worker thread
            event = parser_pb2.ParseStreamResponse(
                progress=parser_pb2.ParseProgress(pages_done=done, pages_total=total)
            )
            loop.call_soon_threadsafe(events.put_nowait, event)

        task = asyncio.create_task(self._parse(request.request, progress))
        try:
            while not task.done() or not events.empty():
                getter = asyncio.ensure_future(events.get())
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                else:
                    getter.cancel()
            response = task.result()
            yield parser_pb2.ParseStreamResponse(response=response)
        finally:
            if not task.done():
                task.cancel()  # the caller went away: the pool kills the worker of an abandoned parse

    @staticmethod
    def _response(parsed: ParsedDocument, chunks: list[ChunkRecord]) -> parser_pb2.ParseResponse:
        return parser_pb2.ParseResponse(
            title=parsed.title,
            format=parsed.format,
            page_count=parsed.page_count,
            parser_version=PARSER_VERSION,
            headings=[parser_pb2.Heading(text=h.text, level=h.level, page=h.page) for h in parsed.headings],
            blocks=[_block_pb(b) for b in parsed.blocks],
            chunks=[_chunk_pb(c) for c in chunks],
            warnings=parsed.warnings,
            ocr_pages=parsed.ocr_pages,
        )

    @grpc_errors
    async def ListFormats(
        self,
        request: parser_pb2.ListFormatsRequest,
        context: aio.ServicerContext[parser_pb2.ListFormatsRequest, parser_pb2.ListFormatsResponse],
    ) -> parser_pb2.ListFormatsResponse:
        return parser_pb2.ListFormatsResponse(extensions=accepted_extensions(), parser_version=PARSER_VERSION)


def build_worker(settings: Settings) -> tuple[Converter, Splitter]:
    """A worker process's converter and chunker (runs in the worker)."""
    from ragmesh_parser.converter import DocumentParser, OcrSettings  # Docling: only the workers import it

    ocr = (
        OcrSettings(dpi=settings.ocr_dpi, max_seconds=settings.ocr_max_seconds, threads=settings.ocr_threads)
        if settings.ocr_enabled
        else None
    )
    return (
        DocumentParser(settings.artifacts_path, settings.timeout_seconds, ocr),
        Chunker(load_tokenizer(), settings.max_chunk_tokens),
    )


def build_service(settings: Settings, worker: WorkerFactory | None = None) -> GrpcService:
    """The parser gRPC service; its worker processes are started and warmed before SERVING. `worker` builds a
    worker's converter and chunker in the worker process (default: Docling and the MiniLM tokenizer)."""
    limits = Limits(
        timeout_seconds=settings.timeout_seconds,
        cpu_seconds=settings.max_cpu_seconds,
        memory_bytes=settings.max_memory_mb * 1024 * 1024,
        ocr_seconds=settings.ocr_max_seconds if settings.ocr_enabled else 0.0,
        ocr_cpu_seconds=settings.ocr_max_seconds * settings.ocr_threads if settings.ocr_enabled else 0.0,
    )
    pool = ParsePool(worker or functools.partial(build_worker, settings), settings.concurrency, limits)
    servicer = ParserServicer(pool, max_bytes=settings.max_bytes)

    def add(server: aio.Server) -> list[str]:
        parser_pb2_grpc.add_ParserServiceServicer_to_server(servicer, server)
        return [parser_pb2.DESCRIPTOR.services_by_name["ParserService"].full_name]

    return GrpcService("parser", add, host=settings.host, port=settings.port, warmup=servicer.warmup, on_stop=pool.stop)
