"""answer and verify, the streamed steps of a chat.

answer: the answerer's streamed generation over the top sources and the graph facts. Required. The answerer
sends its headers once it has admitted or queued the request, and a refusal (RESOURCE_EXHAUSTED, with a
retry-after) comes without them, so `started` means not refused, and the HTTP layer can still answer a
refusal with a real 503 (routers/chat.py reads up to that event).

verify: the answerer's verification (short answer, verified or withheld, evidence quotes, a verdict per
sentence) mapped onto the user's sources as the final event; an answer without a final message fails here.
"""

from __future__ import annotations

import time
from collections.abc import AsyncGenerator
from typing import Any

import grpc
from grpc import aio
from opentelemetry import trace

from ragmesh.answerer.v1 import answerer_pb2
from ragmesh_common import attributes as attr
from ragmesh_gateway.mesh import Mesh, StepFailed
from ragmesh_gateway.models import ChatRequest, Outcome
from ragmesh_gateway.pipeline.events import Event, answer_event, event, respelled_note, sentence_event
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Step, elapsed_ms, step_span

# Metadata keys of the answerer's admission control (ragmesh_answerer.server).
ADMISSION_KEY = "x-rag-admission"
RETRY_AFTER_KEY = "retry-after"


def metadata_value(metadata: Any, key: str) -> str | None:
    """The first value of `key` in gRPC metadata (aio.Metadata or a tuple of pairs; both iterate as pairs)."""
    for name, value in metadata or ():
        if name == key:
            return str(value)
    return None


def retry_after_seconds(exc: aio.AioRpcError) -> int | None:
    """The answerer's retry-after hint (whole seconds) on a RESOURCE_EXHAUSTED call, else None."""
    if exc.code() != grpc.StatusCode.RESOURCE_EXHAUSTED:
        return None
    value = metadata_value(exc.trailing_metadata(), RETRY_AFTER_KEY)
    try:
        return max(1, int(value)) if value is not None else 1
    except (TypeError, ValueError):
        return 1


def answer_request(state: RequestState) -> answerer_pb2.AnswerRequest:
    request = state.request
    assert isinstance(request, ChatRequest)  # the answer steps are in the chat pipeline only
    return answerer_pb2.AnswerRequest(
        question=state.query,
        sources=state.answer_sources(),
        graph_facts=state.facts,
        max_tokens=state.answer_max_tokens or request.max_tokens,
        history=state.answer_history(),
        stream_draft=request.stream_draft,
        resolved_question=state.resolved_question,
        bridges=state.bridges,
        summary=asks_summary(state),
        partial_tables=state.tables_partial,
    )


def asks_summary(state: RequestState) -> bool:
    """A question about a collection or a topic as a whole (the router's collection question, or an overview it
    searches summaries first for): the answerer summarises the sources instead of extracting a span."""
    route = state.route
    return route is not None and (route.collection or route.strategy == "summary_first")


class Answer(Step):
    name = "answer"
    span = "answer"

    def __init__(self, mesh: Mesh, timeout: float) -> None:
        self.mesh = mesh
        self.timeout = timeout

    async def stream(self, state: RequestState) -> AsyncGenerator[Event, None]:
        started = time.perf_counter()
        request = answer_request(state)
        first_token_ms: float | None = None
        first_sentence_ms: float | None = None
        with step_span(self.span) as span:
            call = self.mesh.answerer.Answer(request, metadata=state.user.metadata(), timeout=self.timeout)
            try:
                announced = metadata_value(await call.initial_metadata(), ADMISSION_KEY) is not None
                if announced:
                    yield event("progress", stage=self.name, status="started")
                async for reply in call:
                    if not announced:
                        announced = True
                        yield event("progress", stage=self.name, status="started")
                    if reply.HasField("final"):
                        state.final = reply.final
                        if reply.final.respelled:  # the answer is for the question read with the sources' spelling
                            state.notes.append(respelled_note((r.written, r.read) for r in reply.final.respelled))
                    elif reply.HasField("queued"):
                        yield event(
                            "progress",
                            stage=self.name,
                            status="queued",
                            position=reply.queued.position,
                            estimated_wait_s=round(reply.queued.estimated_wait_seconds, 1),
                        )
                    elif reply.HasField("sentence"):  # verified: relayed as it comes (#26.6)
                        first_sentence_ms = first_sentence_ms if first_sentence_ms is not None else elapsed_ms(started)
                        yield sentence_event(reply.sentence)
                    elif reply.token:  # the raw draft: only when the request asked for it (stream_draft)
                        first_token_ms = first_token_ms if first_token_ms is not None else elapsed_ms(started)
                        yield event("token", text=reply.token)
            except aio.AioRpcError as exc:
                raise StepFailed.from_rpc(self.name, exc, retry_after=retry_after_seconds(exc)) from exc
            finally:
                call.cancel()  # no-op once it ended; frees the answerer's slot when the client left mid-stream
            self._trace(span, state, len(request.sources))
        yield event(
            "progress",
            stage=self.name,
            status="done",
            ms=elapsed_ms(started),
            first_token_ms=first_token_ms,
            first_sentence_ms=first_sentence_ms,
        )

    @staticmethod
    def _trace(span: trace.Span, state: RequestState, sources: int) -> None:
        if state.final is not None:
            span.set_attribute(attr.RAG_GROUNDING_SCORE, state.final.grounding_score)
            span.set_attribute(attr.RAG_CITATIONS, len(state.final.citations))
        span.set_attribute(attr.RAG_SOURCES, sources)
        span.set_attribute(attr.RAG_OUTCOME, Outcome.ANSWER.value)


class Verify(Step):
    """No span and no progress event: the checks ran in the answerer (its `output_check` span)."""

    name = "verify"

    async def stream(self, state: RequestState) -> AsyncGenerator[Event, None]:
        if state.final is None:
            raise StepFailed("answer", "the answerer ended without a final message", 503)
        request = state.request
        assert isinstance(request, ChatRequest)
        yield answer_event(state, state.final, state.answer_sources())
