"""Document ingestion: parse → chunk → embed → index → graph, run by a Celery worker.

The gateway stores the upload, creates the catalogue row (status `queued`) and enqueues a task;
the worker moves the document through `parsing`, `embedding`, `indexing` to `ready` (or `failed`,
with the reason) and publishes every step on Redis (`ragmesh:ingest:<id>`), which the gateway
streams to the uploader as Server-Sent Events. Tasks are acknowledged late, so a worker that dies
mid-document leaves the task in the queue rather than losing it: the broker hands it out again after
INGEST_VISIBILITY_TIMEOUT_SECONDS (default 3600, longer than any ingestion), or at once when the local
stack's single worker restarts (worker.py, INGEST_RESTORE_UNACKED_ON_START). Running a document again is
harmless: indexing replaces the document's chunks in one transaction and the graph MERGEs.

Every status change goes to the catalogue and to the channel together (`advance`), under the same name
(ragmesh_common.ingestion.status_name of the proto enum); `retrying` is the one event that is not a catalogue status.

A hop whose service is down, restarting or warming up (UNAVAILABLE) is waited for (the channel's
`channel_ready`, then the call with `wait_for_ready`) and retried with backoff for up to the retry budget
(INGEST_RETRY_BUDGET_SECONDS, longer than any service's start), so a rolling deploy fails no upload; other
transient failures (a deadline, an overloaded service) go back to the queue (worker.py, a few times).

A slow machine fails no upload either. The embedder serves one batch at a time, so an Embed call's deadline
would time the queue in front of it as much as the call: the embed calls in flight are bounded for the whole
worker process (`embed_gate`, EMBED_IN_FLIGHT shared by every document it ingests at once, not per document),
and an embed batch that still misses its deadline (INGEST_EMBED_DEADLINE_SECONDS) or is refused as overloaded
is sent again within the retry budget, like an unavailable hop: embedding is a pure function, and only that
batch is repeated, not the whole document. Before, eight documents each kept two 64-text batches queued at the
embedder, a loaded machine needed minutes for the queue, every call timed out, and the whole document went
back to the queue to be parsed and embedded again until its last attempt failed it.

What the uploader sees of a failure (the document's `error`, the events' `message`) is the step and the cause,
never gRPC's details, which name internal addresses (ragmesh_common.errors.public_message); the full details
go to the log and the trace.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TypeVar

import grpc
from grpc import aio
from opentelemetry import trace
from redis.asyncio import Redis

from ragmesh.common.v1 import common_pb2
from ragmesh.embedder.v1 import embedder_pb2
from ragmesh.graph.v1 import graph_pb2
from ragmesh.parser.v1 import parser_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common import attributes as attr
from ragmesh_common import metrics
from ragmesh_common.context import UserContext
from ragmesh_common.errors import public_message
from ragmesh_common.ingestion import RETRYING, channel_name, event, status_name
from ragmesh_ingestion.clients import Clients
from ragmesh_ingestion.config import Deadlines

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

EMBED_BATCH = 64
EMBED_IN_FLIGHT = 2
TRANSIENT = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.RESOURCE_EXHAUSTED}
WAITED_FOR = frozenset({grpc.StatusCode.UNAVAILABLE})  # what _step retries within the budget for any hop
# ... and for a hop that may be repeated as it is (a pure function: embedding), a slow or overloaded service too
WAITED_FOR_IDEMPOTENT = frozenset(TRANSIENT)
RETRY_FIRST_SECONDS = 0.5  # an unavailable hop is tried again after this, doubling up to RETRY_MAX_SECONDS
RETRY_MAX_SECONDS = 10.0
T = TypeVar("T")
# The catalogue version the running ingestion is for (0 = the current one), passed with every status and index
# call: a version superseded by a newer upload is refused there, so a late run never overwrites a newer one.
VERSION: ContextVar[int] = ContextVar("ragmesh_ingest_version", default=0)


class TransientIngestError(RuntimeError):
    """A hop was unavailable; the task is retried with backoff."""


class Ingestor:
    """The async ingestion pipeline for one document."""

    def __init__(
        self,
        mesh: Clients,
        redis: Redis,
        deadlines: Deadlines,
        *,
        graph_enabled: bool = True,
        reader: Callable[[Path], bytes] = Path.read_bytes,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        embed_gate: asyncio.Semaphore | None = None,
    ) -> None:
        self.mesh = mesh
        # the embed calls in flight: the worker passes one gate for every document of its process (worker._Loop)
        self.embed_gate = embed_gate or asyncio.Semaphore(EMBED_IN_FLIGHT)
        self.redis = redis
        self.deadlines = deadlines
        self.graph_enabled = graph_enabled
        self.reader = reader  # the worker's reads only below the upload store (admission.read_in_store)
        self._clock = clock
        self._sleep = sleep

    async def publish(self, document_id: str, status: str, **extra: Any) -> None:
        payload = json.dumps(event(document_id, status, time=time.time(), **extra))
        key = channel_name(document_id)
        try:
            async with self.redis.pipeline(transaction=False) as pipe:  # one round trip for both
                pipe.set(f"{key}:last", payload, ex=3600)
                pipe.publish(key, payload)
                await pipe.execute()
        except Exception:  # progress events must not fail the ingestion
            logger.warning("could not publish ingestion event for %s", document_id, exc_info=True)

    async def _status(
        self, user: UserContext, document_id: str, status: common_pb2.DocumentStatus.ValueType, **fields: Any
    ) -> common_pb2.Document:
        return await self._step(
            "ingest",  # a refused status (a superseded version) is the run's, not a hop's
            document_id,
            "retriever",
            lambda: self.mesh.retriever.UpdateDocumentStatus(
                retriever_pb2.UpdateDocumentStatusRequest(
                    document_id=document_id, status=status, version=VERSION.get(), **fields
                ),
                metadata=user.metadata(),
                timeout=self.deadlines.index,
                wait_for_ready=True,
            ),
        )

    async def advance(
        self,
        user: UserContext,
        document_id: str,
        status: common_pb2.DocumentStatus.ValueType,
        fields: dict[str, Any] | None = None,
        **extra: Any,
    ) -> common_pb2.Document:
        """Records `status` in the catalogue (with `fields`), then publishes it (with `extra`); the document as
        the catalogue has it now."""
        document = await self._status(user, document_id, status, **(fields or {}))
        await self.publish(document_id, status_name(status), **extra)
        return document

    async def run(
        self,
        document_id: str,
        user: UserContext,
        path: Path,
        filename: str,
        mime_type: str,
        final_attempt: bool = True,
        version: int = 0,
    ) -> None:
        token = VERSION.set(version)
        with tracer.start_as_current_span("ingest") as span:
            span.set_attribute(attr.RAG_DOCUMENT_ID, document_id)
            try:
                await self._run(document_id, user, path, filename, mime_type)
            except aio.AioRpcError as exc:
                step = getattr(exc, "_ragmesh_step", "ingest")
                if exc.code() == grpc.StatusCode.FAILED_PRECONDITION and version and step in ("ingest", "index"):
                    logger.info(
                        "document %s: version %d was superseded; stopping (%s)", document_id, version, exc.details()
                    )
                    metrics.INGEST_DOCUMENTS.labels("superseded").inc()
                    return
                if exc.code() in TRANSIENT and not final_attempt:
                    logger.warning("document %s: %s %s: %s", document_id, step, exc.code().name, exc.details())
                    await self.publish(
                        document_id, RETRYING, step=step, message=public_message(exc.code(), exc.details())
                    )
                    metrics.INGEST_DOCUMENTS.labels("retrying").inc()
                    raise TransientIngestError(f"{step}: {exc.code().name}") from exc
                message = f"{step} failed: {public_message(exc.code(), exc.details())}"
                detail = f"{step} failed: {exc.code().name}: {exc.details()}"
                await self._fail(document_id, user, message, detail, stage=step)
            except OSError as exc:  # its message names paths in the upload store
                await self._fail(
                    document_id, user, "ingest failed: the stored upload could not be read", str(exc), stage="read"
                )
            except ValueError as exc:
                await self._fail(document_id, user, f"ingest failed: {exc}")
            finally:
                VERSION.reset(token)

    async def _fail(
        self, document_id: str, user: UserContext, message: str, detail: str = "", *, stage: str = "ingest"
    ) -> None:
        """Fails the document with `message` (what the uploader sees); `detail` (internal) goes to the log and
        the trace only; `stage` (the step that failed it) to the metrics."""
        metrics.INGEST_DOCUMENTS.labels("failed").inc()
        metrics.INGEST_FAILURES.labels(stage).inc()
        logger.warning("document %s failed: %s%s", document_id, message, f" ({detail})" if detail else "")
        trace.get_current_span().set_status(trace.Status(trace.StatusCode.ERROR, detail or message))
        try:
            await self._status(user, document_id, common_pb2.DOCUMENT_STATUS_FAILED, error=message[:2000])
        finally:
            await self.publish(document_id, status_name(common_pb2.DOCUMENT_STATUS_FAILED), error=message)

    async def _step(
        self,
        step: str,
        document_id: str,
        service: str,
        call: Callable[[], Awaitable[T]],
        waited_for: frozenset[grpc.StatusCode] = WAITED_FOR,
    ) -> T:
        """One hop: waits until `service`'s channel is ready, calls, and while the service is unavailable (down,
        restarting, warming up; or any code of `waited_for`) waits and calls again with backoff, for up to the
        retry budget. The failed hop's name travels with a final error to run()."""
        started = self._clock()
        delay = RETRY_FIRST_SECONDS
        while True:
            left = self.deadlines.retry_budget - (self._clock() - started)
            try:
                try:
                    await asyncio.wait_for(self.mesh.channel(service).channel_ready(), timeout=max(left, 0.001))
                except TimeoutError:
                    raise aio.AioRpcError(
                        grpc.StatusCode.UNAVAILABLE,
                        aio.Metadata(),
                        aio.Metadata(),
                        details=f"{service} not reachable within the retry budget ({self.deadlines.retry_budget:g} s)",
                        debug_error_string="",
                    ) from None
                return await call()
            except aio.AioRpcError as exc:
                left = self.deadlines.retry_budget - (self._clock() - started)
                if exc.code() not in waited_for or left <= delay:
                    exc._ragmesh_step = step  # type: ignore[attr-defined]
                    raise
                logger.warning(
                    "document %s: %s %s (%s); again in %.1f s, %.0f s of the retry budget left",
                    document_id,
                    step,
                    exc.code().name,
                    exc.details(),
                    delay,
                    left,
                )
                trace.get_current_span().add_event(
                    "retry", {attr.RAG_STAGE: step, attr.RAG_DEGRADED_REASON: exc.details() or exc.code().name}
                )
                await self.publish(document_id, RETRYING, step=step, message=public_message(exc.code(), None))
                await self._sleep(delay)
                delay = min(delay * 2, RETRY_MAX_SECONDS)

    async def _run(self, document_id: str, user: UserContext, path: Path, filename: str, mime_type: str) -> None:
        # user.metadata() per hop, not once: a parse may outlast a token's lifetime (the signer caches it anyway)
        content = await asyncio.to_thread(self.reader, path)  # off the loop other documents share
        await self.advance(user, document_id, common_pb2.DOCUMENT_STATUS_PARSING, progress=0.1)
        request = parser_pb2.ParseRequest(
            filename=filename, content=content, mime_type=mime_type, document_id=document_id
        )
        parsed = await self._step("parse", document_id, "parser", lambda: self._parse(document_id, user, request))
        chunks = list(parsed.chunks)
        if not any(c.level == common_pb2.CHUNK_LEVEL_PARAGRAPH and c.text.strip() for c in chunks):
            await self._fail(document_id, user, "no extractable text", stage="parse")  # an image-only file, links only
            return
        # `chunks` in events is what the API's chunk_count and the CLI say: the paragraph chunks (the document and
        # section summaries are embedded and indexed too, and counted as `embedded` of `to_embed`)
        paragraphs = sum(1 for c in chunks if c.level in (0, common_pb2.CHUNK_LEVEL_PARAGRAPH))
        document = await self.advance(
            user,
            document_id,
            common_pb2.DOCUMENT_STATUS_EMBEDDING,
            {"page_count": parsed.page_count},
            progress=0.3,
            chunks=paragraphs,
            to_embed=len(chunks),
            pages=parsed.page_count,
            format=parsed.format,
        )
        # the graph needs only the chunks' text: a first ingestion builds it while they embed and index; a new
        # version's graph waits until its chunks are swapped in, so that a run superseded by a newer upload
        # (refused at IndexChunks) never replaces the newer version's graph
        in_parallel = self.graph_enabled and not VERSION.get()
        # the graph's topic is the document's title: one a person chose, else the one the parser found; a chosen
        # title is also its chunks' title (what sources show, and the lexical leg weighs as a heading)
        topic = document.title if document.title_given else parsed.title
        if document.title_given:
            for chunk in chunks:
                chunk.title = document.title
        graph = asyncio.create_task(self._graph(document_id, user, chunks, topic)) if in_parallel else None
        try:
            await self._embed(document_id, user, chunks)
            await self.advance(user, document_id, common_pb2.DOCUMENT_STATUS_INDEXING, progress=0.85)
            await self._step(
                "index",
                document_id,
                "retriever",
                lambda: self.mesh.retriever.IndexChunks(
                    retriever_pb2.IndexChunksRequest(document_id=document_id, chunks=chunks, version=VERSION.get()),
                    metadata=user.metadata(),
                    timeout=self.deadlines.index,
                    wait_for_ready=True,
                ),
            )
            if graph is not None:
                graph_note = await graph
            else:
                graph_note = await self._graph(document_id, user, chunks, topic) if self.graph_enabled else ""
        finally:
            if graph is not None and not graph.done():
                graph.cancel()
        summary = next((c.text for c in chunks if c.level == common_pb2.CHUNK_LEVEL_DOCUMENT), "")
        await self.advance(
            user,
            document_id,
            common_pb2.DOCUMENT_STATUS_READY,
            {
                "title": parsed.title,
                "summary": summary[:2000],
                "page_count": parsed.page_count,
                "warnings": list(parsed.warnings),  # ready with warnings: e.g. OCR pages read poorly or not at all
                "parser_version": parsed.parser_version,  # which reading: a later parser's makes this one stale
            },
            progress=1.0,
            chunks=paragraphs,
            graph=graph_note,
            **({"warnings": list(parsed.warnings)} if parsed.warnings else {}),
        )
        metrics.INGEST_DOCUMENTS.labels("ready").inc()
        logger.info("document %s ready: %d chunks, %s", document_id, paragraphs, graph_note or "no graph")

    async def _parse(
        self, document_id: str, user: UserContext, request: parser_pb2.ParseRequest
    ) -> parser_pb2.ParseResponse:
        """Parse with progress: each page OCR reads is published as a `parsing` event (pages_done of pages_total),
        so a long scan shows how far it got."""
        stream = self.mesh.parser.ParseStream(
            parser_pb2.ParseStreamRequest(request=request),
            metadata=user.metadata(),
            timeout=self.deadlines.parse,
            wait_for_ready=True,
        )
        async for item in stream:
            if item.HasField("response"):
                return item.response
            done, total = item.progress.pages_done, item.progress.pages_total
            await self.publish(
                document_id,
                status_name(common_pb2.DOCUMENT_STATUS_PARSING),
                progress=round(0.1 + 0.2 * done / max(total, 1), 3),
                pages_done=done,
                pages_total=total,
            )
        raise ValueError("the parser ended without a result")

    async def _embed(self, document_id: str, user: UserContext, chunks: list[common_pb2.Chunk]) -> None:
        """Embeds in batches, EMBED_IN_FLIGHT requests at a time for the whole process (`embed_gate`), so that
        the embedder always has the next batch queued (its micro-batcher) instead of waiting a round trip between
        batches, and no call's deadline runs out behind a backlog of other documents' batches."""
        done = 0

        async def batch(part: list[common_pb2.Chunk]) -> None:
            nonlocal done

            async def embed() -> embedder_pb2.EmbedResponse:
                async with self.embed_gate:  # per attempt: a batch waiting out a backoff holds no slot
                    reply: embedder_pb2.EmbedResponse = await self.mesh.embedder.Embed(
                        embedder_pb2.EmbedRequest(texts=[_embed_text(c) for c in part]),
                        metadata=user.metadata(),
                        timeout=self.deadlines.embed,
                        wait_for_ready=True,
                    )
                    return reply

            reply = await self._step("embed", document_id, "embedder", embed, WAITED_FOR_IDEMPOTENT)
            if len(reply.vectors) != len(part):  # never index chunks without their vectors
                raise ValueError(f"the embedder returned {len(reply.vectors)} vectors for {len(part)} texts")
            for chunk, vector in zip(part, reply.vectors, strict=True):
                chunk.embedding[:] = vector.values
            done += len(part)
            if len(chunks) > EMBED_BATCH:  # progress of a large document; a small one goes straight on
                await self.publish(
                    document_id,
                    status_name(common_pb2.DOCUMENT_STATUS_EMBEDDING),
                    progress=round(0.3 + 0.5 * done / len(chunks), 3),
                    embedded=done,
                    to_embed=len(chunks),
                )

        tasks = [
            asyncio.create_task(batch(chunks[start : start + EMBED_BATCH]))
            for start in range(0, len(chunks), EMBED_BATCH)
        ]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    async def _graph(self, document_id: str, user: UserContext, chunks: list[common_pb2.Chunk], title: str) -> str:
        try:
            reply = await self.mesh.graph.IngestChunks(
                graph_pb2.IngestChunksRequest(
                    document_id=document_id,
                    title=title,
                    chunks=[
                        graph_pb2.GraphChunk(chunk_id=c.chunk_id, document_id=document_id, text=c.text)
                        for c in chunks
                        if c.level == common_pb2.CHUNK_LEVEL_PARAGRAPH
                    ],
                ),
                metadata=user.metadata(),
                timeout=self.deadlines.index,
                wait_for_ready=True,  # a graph restarting is waited for within the deadline; not retried after
            )
            return f"{reply.entities} entities, {reply.relations} relations"
        except aio.AioRpcError as exc:
            # the graph is optional context: the document is searchable without it
            graph_note = f"graph skipped: {exc.code().name}"
            logger.warning("document %s: %s", document_id, graph_note)
            span = trace.get_current_span()
            span.set_attribute(attr.RAG_DEGRADED, True)
            span.add_event("degraded", {attr.RAG_STAGE: "graph", attr.RAG_DEGRADED_REASON: graph_note})
            return graph_note


def _embed_text(chunk: common_pb2.Chunk) -> str:
    """What the embedder sees: the section path gives a paragraph its context."""
    if chunk.level == common_pb2.CHUNK_LEVEL_PARAGRAPH and chunk.section_path:
        return " › ".join(chunk.section_path) + "\n" + chunk.text
    return chunk.text
