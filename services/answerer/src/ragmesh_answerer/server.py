"""The AnswererService servicer and its server."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Sequence
from typing import Any, NoReturn

import grpc
from grpc import aio
from opentelemetry import trace

from ragmesh.answerer.v1 import answerer_pb2, answerer_pb2_grpc
from ragmesh_answerer.answering import Answerer, AnswerInput, AnswerResult, Sentence
from ragmesh_answerer.config import Settings
from ragmesh_answerer.limiter import Exhausted, Limiter
from ragmesh_answerer.llm import ChatModel, chat_model
from ragmesh_answerer.prompting import Source
from ragmesh_answerer.rewriting import rewrite_followup
from ragmesh_answerer.verify import Verdict
from ragmesh_common import attributes as attr
from ragmesh_common import metrics
from ragmesh_common.errors import InvalidArgument, grpc_errors
from ragmesh_common.server import GrpcService

logger = logging.getLogger(__name__)

SERVICE_NAME = answerer_pb2.DESCRIPTOR.services_by_name["AnswererService"].full_name
# Trailing metadata of a RESOURCE_EXHAUSTED Answer: whole seconds after which a retry is expected to fit.
RETRY_AFTER_KEY = "retry-after"
# Initial metadata sent as soon as the request is admitted or queued, before any event: a caller can wait
# for it to learn that the request was not refused (the gateway does, before it starts its HTTP response).
ADMISSION_KEY = "x-rag-admission"


_VERDICTS = {v: answerer_pb2.Verdict.Value(f"VERDICT_{v.name}") for v in Verdict}


def _final(result: AnswerResult) -> answerer_pb2.AnswerFinal:
    final = answerer_pb2.AnswerFinal(
        answer=result.answer,
        citations=[
            answerer_pb2.Citation(source_index=c.source_index, chunk_id=c.chunk_id, support=c.support)
            for c in result.citations
        ],
        grounding_score=result.grounding_score,
        grounded=result.grounded,
        warnings=result.warnings,
        respelled=[answerer_pb2.Respelled(written=written, read=read) for written, read in result.respelled],
        model=result.model,
        short_answer=result.short_answer,
        evidence=[
            answerer_pb2.EvidenceQuote(
                source_index=q.source_index, chunk_id=q.chunk_id, text=q.text, start=q.start, end=q.end
            )
            for q in result.evidence
        ],
        sentences=[
            answerer_pb2.SentenceVerdict(
                text=s.text,
                supported=s.supported,
                source_indexes=s.sources,
                unsupported_tokens=s.unsupported_tokens,
                reason=s.reason,
                verdict=_VERDICTS[s.verdict],
                short_answer=s.short_answer,
            )
            for s in result.sentences
        ],
        verified=result.verified,
        withheld=result.withheld,
    )
    if result.draft is not None:
        final.draft = result.draft
    if result.span is not None:
        where = result.span.sentence
        final.answer_span.CopyFrom(
            answerer_pb2.AnswerSpan(
                source_index=where.source_index,
                chunk_id=result.span_chunk_id,
                text=result.span.text,
                start=result.span.source_start,
                end=result.span.source_end,
                quote=where.text,
                quote_start=where.start,
                quote_end=where.end,
            )
        )
    final.overruled = result.overruled
    if result.prompt_tokens is not None and result.completion_tokens is not None:
        final.usage.CopyFrom(
            answerer_pb2.TokenUsage(input_tokens=result.prompt_tokens, output_tokens=result.completion_tokens)
        )
    return final


async def _refuse(context: aio.ServicerContext[Any, Any], exc: Exhausted) -> NoReturn:
    span = trace.get_current_span()
    span.set_attribute(attr.RAG_QUEUE_REFUSED, True)
    span.set_attribute(attr.RAG_RETRY_AFTER, exc.retry_after_seconds)
    span.add_event("refused", {attr.RAG_RETRY_AFTER: exc.retry_after_seconds})
    metrics.ANSWERER_REFUSALS.labels("queue_full" if "queue is full" in str(exc) else "wait_over_budget").inc()
    logger.warning("answer refused: %s; retry after %ds", exc, exc.retry_after_seconds)
    await context.abort(
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        f"{exc}; retry after {exc.retry_after_seconds}s",
        trailing_metadata=((RETRY_AFTER_KEY, str(exc.retry_after_seconds)),),
    )
    raise AssertionError("context.abort raises")


def _deadline(context: aio.ServicerContext[Any, Any]) -> float | None:
    """The caller's gRPC deadline as a time.monotonic() value (None: the call has none)."""
    remaining = context.time_remaining()
    return None if remaining is None else time.monotonic() + remaining


class AnswererServicer(answerer_pb2_grpc.AnswererServiceServicer):
    def __init__(self, answerer: Answerer, limiter: Limiter | None = None) -> None:
        self._answerer = answerer
        settings = answerer.settings
        self._limiter = limiter or Limiter(settings.max_concurrent, settings.max_queue, settings.queue_timeout_seconds)
        metrics.ANSWERER_QUEUE_DEPTH.set_function(lambda: self._limiter.queued)
        metrics.ANSWERER_ACTIVE.set_function(lambda: self._limiter.active)

    @grpc_errors
    async def CheckInput(
        self,
        request: answerer_pb2.CheckInputRequest,
        context: aio.ServicerContext[answerer_pb2.CheckInputRequest, answerer_pb2.CheckInputResponse],
    ) -> answerer_pb2.CheckInputResponse:
        verdict = self._answerer.check_input(request.question, [(turn.role, turn.content) for turn in request.history])
        if not verdict.allowed:
            logger.info("question refused by %s", ",".join(verdict.rules))
        return answerer_pb2.CheckInputResponse(allowed=verdict.allowed, reason=verdict.reason, rules=verdict.rules)

    @grpc_errors
    async def Answer(
        self,
        request: answerer_pb2.AnswerRequest,
        context: aio.ServicerContext[answerer_pb2.AnswerRequest, answerer_pb2.AnswerEvent],
    ) -> AsyncIterator[answerer_pb2.AnswerEvent]:
        answer_input = AnswerInput(
            question=request.question,
            sources=[Source.from_proto(s) for s in request.sources],
            graph_facts=list(request.graph_facts),
            history=[(turn.role, turn.content) for turn in request.history],
            max_tokens=request.max_tokens,
            temperature=request.temperature if request.HasField("temperature") else None,
            stream_draft=request.stream_draft,
            deadline=_deadline(context),
            resolved_question=request.resolved_question,
            summary=request.summary,
            bridges=tuple(request.bridges),
            partial_tables=request.partial_tables,
        )
        try:
            ticket = self._limiter.enter(context.time_remaining())
        except Exhausted as exc:
            await _refuse(context, exc)
        span = trace.get_current_span()
        queued_at = time.perf_counter()
        try:
            await context.send_initial_metadata(((ADMISSION_KEY, "started" if ticket.admitted else "queued"),))
            first_position = 0
            try:
                async for place in ticket.wait():
                    first_position = first_position or place.position
                    yield answerer_pb2.AnswerEvent(
                        queued=answerer_pb2.QueueStatus(
                            position=place.position, estimated_wait_seconds=place.estimated_wait
                        )
                    )
            except Exhausted as exc:
                await _refuse(context, exc)
            span.set_attribute(attr.RAG_QUEUE_POSITION, first_position)
            span.set_attribute(attr.RAG_QUEUE_WAIT_MS, round((time.perf_counter() - queued_at) * 1000, 1))
            if first_position:
                logger.info(
                    "started after %.1fs in the queue (joined at position %d)",
                    time.perf_counter() - queued_at,
                    first_position,
                )
            async with contextlib.aclosing(self._answerer.answer(answer_input)) as events:  # closes the model stream
                async for item in events:
                    if isinstance(item, str):
                        yield answerer_pb2.AnswerEvent(token=item)
                    elif isinstance(item, Sentence):
                        yield answerer_pb2.AnswerEvent(
                            sentence=answerer_pb2.VerifiedSentence(
                                index=item.index,
                                text=item.text,
                                source_indexes=item.sources,
                                extractive=item.extractive,
                            )
                        )
                    else:
                        logger.info(
                            "answered: grounding %.2f, %d citations, %s tokens",
                            item.grounding_score,
                            len(item.citations),
                            "unknown" if item.completion_tokens is None else item.completion_tokens,
                        )
                        yield answerer_pb2.AnswerEvent(final=_final(item))
        finally:
            ticket.release()  # also when the caller went away while it waited or streamed

    @grpc_errors
    async def Rewrite(
        self,
        request: answerer_pb2.RewriteRequest,
        context: aio.ServicerContext[answerer_pb2.RewriteRequest, answerer_pb2.RewriteResponse],
    ) -> answerer_pb2.RewriteResponse:
        if not request.question.strip():
            raise InvalidArgument("question must not be empty")
        result = await rewrite_followup(
            self._answerer.llm,
            request.question,  # at most limits.QUESTION characters (the shared request check)
            [(turn.role, turn.content) for turn in request.history],
            deadline=_deadline(context),
        )
        logger.info("rewrite by %s: %s", result.model, "rewritten" if result.rewritten else "kept the question")
        return answerer_pb2.RewriteResponse(question=result.question)


def build_service(settings: Settings, llm: ChatModel | None = None) -> GrpcService:
    """The answerer server; SERVING once the spaCy pipeline is loaded and the model server lists the model
    (retried until it does)."""
    chat = llm or chat_model(settings)
    answerer = Answerer(settings, chat)

    async def warmup() -> None:
        await answerer.load_reader()
        await chat.wait_ready()

    def add(server: aio.Server) -> Sequence[str]:
        # undecodable requests and the limits are checked by the shared ValidationInterceptor (GrpcService)
        answerer_pb2_grpc.add_AnswererServiceServicer_to_server(AnswererServicer(answerer), server)
        return [SERVICE_NAME]

    return GrpcService("answerer", add, host=settings.host, port=settings.port, warmup=warmup, on_stop=chat.close)
