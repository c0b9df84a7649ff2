"""One chat request through the mesh: guardrails → embed → retrieve → rerank → graph → answer → checks.

Required hops (guardrail, retrieve, answer) fail the request with the step named; optional hops
(embed → lexical-only search, rerank → retrieval order, graph → no graph context) degrade, and every
degradation is logged, recorded on the span and reported in the final event.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import grpc
from grpc import aio
from opentelemetry import trace

from ragmesh.answerer.v1 import answerer_pb2
from ragmesh.common.v1 import common_pb2
from ragmesh.graph.v1 import graph_pb2
from ragmesh.reranker.v1 import reranker_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common import attributes as attr
from ragmesh_common.context import UserContext
from ragmesh_gateway import grading
from ragmesh_gateway.config import Deadlines
from ragmesh_gateway.grading import GradedQuery, Thresholds
from ragmesh_gateway.mesh import Mesh, StepFailed
from ragmesh_gateway.query import Route, arewrite_followup, extract_entities, route

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

NO_PERMISSION = (
    "You do not have access to any documents yet, so I cannot answer from company knowledge. "
    "Upload a document or ask an administrator for access."
)
NO_SOURCES = (
    "I could not find anything relevant to your question in the documents you can access, "
    "so I will not guess. Try rephrasing or naming the document."
)
NO_MATCH_IN_FILTER = (
    "None of the documents you selected is one you can read, so there is nothing to search. "
    "Check the selection, or ask without choosing documents to search all of yours."
)
INGESTING = (
    "Your documents are still being processed (parsing, embedding, indexing) and cannot be searched yet. "
    "Ask again once they are ready; the documents list shows their status."
)
MESSAGES = {
    "no_permission": NO_PERMISSION,
    "no_sources": NO_SOURCES,
    "no_match_in_filter": NO_MATCH_IN_FILTER,
    "ingesting": INGESTING,
}
CORRECTIVE_LEVELS = ["document", "section", "paragraph"]
SNIPPET_CHARS = 320
LEVELS = {
    "document": common_pb2.CHUNK_LEVEL_DOCUMENT,
    "section": common_pb2.CHUNK_LEVEL_SECTION,
    "paragraph": common_pb2.CHUNK_LEVEL_PARAGRAPH,
}

T = TypeVar("T")
# Metadata keys of the answerer's admission control (ragmesh_answerer.server).
ADMISSION_KEY = "x-rag-admission"
RETRY_AFTER_KEY = "retry-after"


def fusion_type(name: str) -> retriever_pb2.FusionType.ValueType:
    """The proto FusionType of an HTTP API fusion name ("relative_score", "ranked", "distribution_based")."""
    try:
        return retriever_pb2.FusionType.Value("FUSION_TYPE_" + name.upper())
    except ValueError:
        raise StepFailed(
            "retrieve", f"unknown fusion {name!r}; use relative_score, ranked or distribution_based", 400
        ) from None


@dataclass
class ChatOptions:
    question: str
    history: list[tuple[str, str]] = field(default_factory=list)
    top_k: int = 5
    candidates: int = 30
    alpha: float | None = None
    levels: list[str] = field(default_factory=list)
    document_ids: list[str] = field(default_factory=list)
    rerank: bool = True
    graph: bool = True
    max_tokens: int = 0
    relevance_gate: bool = True
    routing: bool = True  # query router picks levels, strategy, graph use, sub-queries
    strategy: str | None = None  # "direct" | "summary_first": manual override
    fusion: str = "relative_score"
    context: dict[str, Any] | None = None  # ContextOptions fields; None = the gateway default
    feedback_docs: int = 0
    feedback_weight: float = 1.0
    stream_draft: bool = False  # relay the answerer's raw draft tokens too (verified sentences always)


@dataclass
class Prepared:
    """The part of a chat that runs before the response starts (so errors become HTTP statuses)."""

    options: ChatOptions
    user: UserContext
    stages: list[dict[str, Any]]
    results: list[common_pb2.ScoredChunk]
    accessible: int
    degraded: list[dict[str, str]]
    outcome: str  # "answer" | "no_permission" | "no_match_in_filter" | "ingesting" | "no_sources"
    query: str = ""  # the self-contained question actually searched
    route: Route | None = None
    relevance: dict[str, Any] | None = None  # the grade, its reasons and the corrective retrieval, if any
    rewritten_question: str | None = None  # the follow-up as rewritten, when it was
    notes: list[str] = field(default_factory=list)
    ingesting: int = 0


def chunk_origin(item: common_pb2.ScoredChunk) -> str:
    """The API's name of why the chunk is there ("search", "summary", "sibling", ...)."""
    origin = item.origin or common_pb2.CHUNK_ORIGIN_SEARCH
    return common_pb2.ChunkOrigin.Name(origin).removeprefix("CHUNK_ORIGIN_").lower()


def chunk_kind(chunk: common_pb2.Chunk) -> str:
    """The API's name of the chunk's kind ("paragraph", "table", ...; "" when unset)."""
    return common_pb2.ChunkKind.Name(chunk.kind).removeprefix("CHUNK_KIND_").lower() if chunk.kind else ""


def event(name: str, **data: Any) -> dict[str, Any]:
    return {"event": name, "data": data}


def source_payload(index: int, item: common_pb2.ScoredChunk, snippet: bool = True) -> dict[str, Any]:
    chunk = item.chunk
    text = chunk.text.strip()
    if snippet and len(text) > SNIPPET_CHARS:
        text = text[:SNIPPET_CHARS].rsplit(" ", 1)[0] + " …"
    return {
        "index": index + 1,
        "document_id": chunk.document_id,
        "chunk_id": chunk.chunk_id,
        "title": chunk.title,
        "section_path": list(chunk.section_path),
        "page": chunk.page or None,
        "kind": chunk_kind(chunk),
        "snippet": text,
        "origin": chunk_origin(item),
        "scores": {
            "score": round(item.score, 6),
            "hybrid": round(item.hybrid_score, 6),
            "lexical": round(item.lexical_score, 6),
            "vector": round(item.vector_score, 6),
            "rerank": round(item.rerank_score, 6) if item.reranked else None,
        },
    }


def evidence_payload(quote: answerer_pb2.EvidenceQuote, items: list[common_pb2.ScoredChunk]) -> dict[str, Any]:
    """An answer's evidence quote with the document, section and page of the source it is cut from."""
    chunk = items[quote.source_index].chunk if 0 <= quote.source_index < len(items) else common_pb2.Chunk()
    return {
        "source": quote.source_index + 1,
        "document_id": chunk.document_id,
        "title": chunk.title,
        "section_path": list(chunk.section_path),
        "page": chunk.page or None,
        "quote": quote.text,
        "start": quote.start,
        "end": quote.end,
    }


class Orchestrator:
    def __init__(
        self,
        mesh: Mesh,
        deadlines: Deadlines,
        *,
        min_relevance: float,
        graph_enabled: bool = True,
        default_context: dict[str, Any] | None = None,
        relevance: Thresholds | None = None,
        corrective_alpha: float = 0.3,
        corrective_candidates: int = 60,
    ) -> None:
        self.default_context = default_context or {}
        self.mesh = mesh
        self.deadlines = deadlines
        self.min_relevance = min_relevance
        self.graph_enabled = graph_enabled
        # GATEWAY_MIN_RELEVANCE stays the cosine below which a chunk is no evidence at all
        self.relevance = relevance or Thresholds(vector_weak=min_relevance)
        self.corrective_alpha = corrective_alpha
        self.corrective_candidates = corrective_candidates

    async def _call(self, step: str, call: Awaitable[T]) -> T:
        try:
            return await call
        except aio.AioRpcError as exc:
            raise StepFailed.from_rpc(step, exc) from exc

    @staticmethod
    def _degrade(degraded: list[dict[str, str]], step: str, reason: str) -> None:
        logger.warning("degraded: %s skipped (%s)", step, reason)
        span = trace.get_current_span()
        span.set_attribute(attr.RAG_DEGRADED, True)
        span.add_event("degraded", {attr.RAG_STAGE: step, attr.RAG_DEGRADED_REASON: reason})
        degraded.append({"step": step, "reason": reason})

    async def prepare(self, user: UserContext, options: ChatOptions, *, guard: bool = True) -> Prepared:
        """Guardrail, embed and retrieve. Raises StepFailed (4xx/503) before any byte is streamed."""
        md = user.metadata()
        stages: list[dict[str, Any]] = []
        degraded: list[dict[str, str]] = []
        for name in options.levels:
            if name not in LEVELS:
                raise StepFailed("retrieve", f"unknown level {name!r}; use document, section or paragraph", 400)

        if guard:
            started = time.perf_counter()
            with tracer.start_as_current_span("guardrail") as span:
                check = await self._call(
                    "guardrail",
                    self.mesh.answerer.CheckInput(
                        answerer_pb2.CheckInputRequest(
                            question=options.question,
                            history=[
                                answerer_pb2.ChatTurn(role=role, content=content) for role, content in options.history
                            ],
                        ),
                        metadata=md,
                        timeout=self.deadlines.guardrail,
                    ),
                )
                span.set_attribute(attr.RAG_GUARDRAIL_ALLOWED, check.allowed)
                span.set_attribute(attr.RAG_GUARDRAIL_RULES, list(check.rules))
            if not check.allowed:
                raise StepFailed("guardrail", f"question rejected: {check.reason}", 400)
            stages.append({"stage": "guardrail", "ms": _ms(started)})

        started = time.perf_counter()
        query = options.question
        # A span only when there is something to understand (history to rewrite from, or routing): a
        # self-contained question without routing passes through unchanged, and a span costs ~60 µs.
        understanding = bool(options.history) or options.routing
        with (
            tracer.start_as_current_span("understand query")
            if understanding
            else contextlib.nullcontext(trace.INVALID_SPAN)
        ) as span:
            rewrite = None
            if options.history:
                rewrite = await arewrite_followup(
                    options.question,
                    options.history,
                    timeout=self.deadlines.rewrite,
                    llm=lambda question, history: self._model_rewrite(user, question, history),
                )
                if rewrite.degraded:
                    self._degrade(degraded, "rewrite", f"{rewrite.degraded}; kept the rule rewrite")
            if rewrite is not None and rewrite.rewritten:
                query = rewrite.text
            plan = route(query) if options.routing else None
            span.set_attribute(attr.RAG_QUERY_REWRITTEN, bool(rewrite and rewrite.rewritten))
            if rewrite is not None:
                span.set_attribute(attr.RAG_QUERY_REWRITE_METHOD, "llm" if rewrite.reason == "llm" else "rules")
            if plan is not None:
                span.set_attribute(attr.RAG_QUERY_KIND, plan.kind)
                span.set_attribute(attr.RAG_QUERY_MULTI_HOP, plan.multi_hop)
                span.set_attribute(attr.RAG_QUERY_STRATEGY, plan.strategy)
                span.set_attribute(attr.RAG_QUERY_SUB_QUERIES, len(plan.sub_queries))
        stages.append(
            {
                "stage": "understand",
                "ms": _ms(started),
                "query": query,
                "rewritten": bool(rewrite and rewrite.rewritten),
                "kind": plan.kind if plan else None,
                "multi_hop": plan.multi_hop if plan else None,
            }
        )

        levels = list(options.levels)
        if not levels and plan is not None and plan.levels != ["paragraph"]:
            levels = sorted({*plan.levels, "paragraph"}, key=list(LEVELS).index)  # never lose the paragraphs
        strategy = options.strategy or (plan.strategy if plan else "direct")
        sub_queries = list(plan.sub_queries) if plan else []

        # One search: the retriever embeds the query and its sub-queries itself (embed_query) while it looks
        # up permissions and runs the lexical legs, so the embedder's time hides behind them, and merges the
        # sub-queries' results after the question's own ranking (ragmesh_retriever.ranking).
        started = time.perf_counter()
        request = self._search_request(options, query, levels, strategy, options.alpha, options.candidates)
        request.sub_queries.extend(sub_queries)
        found = await self._call(
            "retrieve", self.mesh.retriever.Search(request, metadata=md, timeout=self.deadlines.retrieve)
        )
        if found.vector_unavailable:
            self._degrade(degraded, "embed", found.vector_unavailable)
        stages.append(
            {
                "stage": "embed",
                "ms": round(found.embed_ms, 1),
                "in": "retriever",
                "degraded": bool(found.vector_unavailable),
            }
        )
        results = list(found.results)
        stages.append(
            {
                "stage": "retrieve",
                "ms": _ms(started),
                "candidates": len(results),
                "accessible_documents": found.accessible_documents,
                "searches": 1 + len(sub_queries),
                "strategy": strategy,
            }
        )
        prepared = Prepared(
            options=options,
            user=user,
            stages=stages,
            results=results,
            accessible=found.accessible_documents,
            degraded=degraded,
            outcome=scope_outcome(found, options),
            query=query,
            route=plan,
            rewritten_question=query if query != options.question else None,
            ingesting=found.ingesting_documents,
        )
        if prepared.outcome != "answer":
            return prepared
        if found.ingesting_documents:
            prepared.notes.append(
                f"{found.ingesting_documents} of your documents are still being processed and were not searched yet."
            )
        if options.rerank and len(results) > 1:
            started = time.perf_counter()
            prepared.results = await self._rerank(prepared, results)
            stages.append(
                {"stage": "rerank", "ms": _ms(started), "degraded": any(d["step"] == "rerank" for d in degraded)}
            )
        started = time.perf_counter()
        await self._grade(prepared, levels, strategy, have_vector=not found.vector_unavailable and options.alpha != 0)
        stages.append(
            {
                "stage": "grade",
                "ms": _ms(started),
                "grade": prepared.relevance["grade"] if prepared.relevance else None,
                "relevant": len(prepared.results),
            }
        )
        return prepared

    def _search_request(
        self, options: ChatOptions, text: str, levels: list[str], strategy: str, alpha: float | None, candidates: int
    ) -> retriever_pb2.SearchRequest:
        request = retriever_pb2.SearchRequest(
            query=text,
            embed_query=True,
            top_k=candidates,
            levels=[LEVELS[name] for name in levels],
            document_ids=options.document_ids,
            strategy=retriever_pb2.STRATEGY_SUMMARY_FIRST
            if strategy == "summary_first"
            else retriever_pb2.STRATEGY_DIRECT,
        )
        if alpha is not None:
            request.alpha = alpha
        if options.feedback_docs:
            request.feedback_docs, request.feedback_weight = options.feedback_docs, options.feedback_weight
        request.fusion = fusion_type(options.fusion)
        context = options.context if options.context is not None else self.default_context
        if context:
            request.context.CopyFrom(retriever_pb2.ContextOptions(**context))
        return request

    async def _grade(self, prepared: Prepared, levels: list[str], strategy: str, *, have_vector: bool) -> None:
        """CRAG: grade the candidates; `ambiguous` gets one corrective retrieval (the question's keywords, a
        lexical-heavier alpha, every level, more candidates) and is graded again. Only `correct` answers."""
        options = prepared.options
        plan = prepared.route
        entities = plan.entities if plan is not None else extract_entities(prepared.query)
        queries = [GradedQuery.of(prepared.query, entities)]
        for sub in plan.sub_queries if plan is not None else []:
            queries.append(GradedQuery.of(sub, [e for e in entities if sub.startswith(e)]))
        with tracer.start_as_current_span("grade relevance") as span:
            result = grading.grade(prepared.results, queries, have_vector=have_vector, thresholds=self.relevance)
            relevance = result.payload()
            if result.grade == grading.AMBIGUOUS:
                first = relevance
                keywords = grading.keyword_query(queries[0])
                alpha = self.corrective_alpha if options.alpha is None else min(options.alpha, self.corrective_alpha)
                candidates = max(self.corrective_candidates, options.candidates)
                span.add_event(
                    "corrective retrieval", {attr.RAG_RELEVANCE_GRADE: first["grade"], attr.RAG_SEARCH_ALPHA: alpha}
                )
                reply = await self._call(
                    "retrieve",
                    self.mesh.retriever.Search(
                        self._search_request(options, keywords, CORRECTIVE_LEVELS, strategy, alpha, candidates),
                        metadata=prepared.user.metadata(),
                        timeout=self.deadlines.retrieve,
                    ),
                )
                pool = append_new(prepared.results, reply.results)
                vector = have_vector and not reply.vector_unavailable and alpha > 0
                result = grading.grade(pool, queries, have_vector=vector, thresholds=self.relevance)
                relevance = {
                    **result.payload(),
                    "corrective": {
                        "query": keywords,
                        "alpha": alpha,
                        "levels": CORRECTIVE_LEVELS,
                        "candidates": candidates,
                        "added": len(pool) - len(prepared.results),
                        "first_grade": first["grade"],
                        "first_reasons": first["reasons"],
                    },
                }
                if result.grade == grading.AMBIGUOUS:
                    relevance["reasons"].append("still ambiguous after the corrective retrieval: not answered")
            span.set_attribute(attr.RAG_RELEVANCE_GRADE, result.grade)
            span.set_attribute(attr.RAG_RELEVANCE_REASONS, relevance["reasons"])
            span.set_attribute(attr.RAG_RELEVANCE_KEPT, len(result.kept))
            span.set_attribute(attr.RAG_RELEVANCE_CORRECTIVE, "corrective" in relevance)
        logger.info("relevance %s (%s)", result.grade, "; ".join(relevance["reasons"]))
        prepared.relevance = relevance
        if not options.relevance_gate:
            relevance["gate"] = "off"
            if not prepared.results:
                prepared.outcome = "no_sources"
            return
        prepared.results = result.kept
        if result.grade != grading.CORRECT:
            prepared.outcome = "no_sources"

    async def _model_rewrite(self, user: UserContext, question: str, history: list[tuple[str, str]]) -> str:
        """The answerer's model rewrites a follow-up the rules could not resolve (its own deadline)."""
        reply = await self.mesh.answerer.Rewrite(
            answerer_pb2.RewriteRequest(
                question=question,
                history=[answerer_pb2.ChatTurn(role=role, content=content) for role, content in history],
            ),
            metadata=user.metadata(),
            timeout=self.deadlines.rewrite,
        )
        return reply.question

    async def _rerank(self, prepared: Prepared, items: list[common_pb2.ScoredChunk]) -> list[common_pb2.ScoredChunk]:
        with tracer.start_as_current_span("rerank") as span:
            span.set_attribute(attr.RAG_RERANK_CANDIDATES, len(items))
            try:
                reply = await self.mesh.reranker.Rerank(
                    reranker_pb2.RerankRequest(
                        query=prepared.query or prepared.options.question,
                        passages=[i.chunk.text for i in items],
                        normalize=True,
                    ),
                    metadata=prepared.user.metadata(),
                    timeout=self.deadlines.rerank,
                )
            except aio.AioRpcError as exc:
                reason = (
                    exc.details()
                    if exc.code() == grpc.StatusCode.FAILED_PRECONDITION
                    else f"reranker {exc.code().name}"
                )
                span.set_attribute(attr.RAG_RERANK_FALLBACK, True)
                self._degrade(prepared.degraded, "rerank", f"{reason}; kept retrieval order")
                return items
            if not reply.configured and not reply.scores:  # a deployment without a model: no error status
                span.set_attribute(attr.RAG_RERANK_CONFIGURED, False)
                span.set_attribute(attr.RAG_RERANK_FALLBACK, True)
                self._degrade(
                    prepared.degraded,
                    "rerank",
                    f"{reply.unconfigured_reason or 'no reranker model configured'}; kept retrieval order",
                )
                return items
            if len(reply.scores) != len(items):  # a reranker that broke its contract: keep the retrieval order
                span.set_attribute(attr.RAG_RERANK_FALLBACK, True)
                self._degrade(
                    prepared.degraded,
                    "rerank",
                    f"reranker returned {len(reply.scores)} scores for {len(items)} passages; kept retrieval order",
                )
                return items
        reranked = []
        for item, score in zip(items, reply.scores, strict=True):
            copy = common_pb2.ScoredChunk()
            copy.CopyFrom(item)
            copy.rerank_score, copy.reranked, copy.score = score, True, score
            reranked.append(copy)
        reranked.sort(key=lambda i: -i.rerank_score)
        return reranked

    async def _graph(self, prepared: Prepared) -> list[str]:
        with tracer.start_as_current_span("graph context") as span:
            try:
                reply = await self.mesh.graph.GetContext(
                    graph_pb2.GetContextRequest(
                        query=prepared.query or prepared.options.question,
                        # the user's document filter, if any; the graph reads only
                        # what the catalogue says the user may read
                        document_ids=prepared.options.document_ids,
                        max_depth=2,
                        limit=6,
                    ),
                    metadata=prepared.user.metadata(),
                    timeout=self.deadlines.graph,
                )
            except aio.AioRpcError as exc:
                self._degrade(prepared.degraded, "graph", f"graph {exc.code().name}; answered without graph context")
                return []
            span.set_attribute(attr.RAG_GRAPH_RELATIONS, len(reply.relations))
        return [f"{r.source} — {r.type.lower().replace('_', ' ')} — {r.target}" for r in reply.relations]

    async def search(self, user: UserContext, options: ChatOptions) -> tuple[Prepared, list[common_pb2.ScoredChunk]]:
        """Retrieval only (the search API and the benchmarks): embed, retrieve, rerank; no answer."""
        prepared = await self.prepare(user, options, guard=False)  # reranks and grades too
        return prepared, prepared.results[: options.top_k]

    async def run(self, prepared: Prepared) -> AsyncIterator[dict[str, Any]]:
        """Streams progress, tokens and the final event (with sources) for a prepared chat."""
        for stage in prepared.stages:
            yield event("progress", status="done", **stage)
        trace_id = format(trace.get_current_span().get_span_context().trace_id, "032x")
        if prepared.outcome != "answer":
            message = MESSAGES[prepared.outcome]
            trace.get_current_span().set_attribute(attr.RAG_OUTCOME, prepared.outcome)
            yield event("token", text=message)
            yield event(
                "final",
                outcome=prepared.outcome,
                answer=message,
                sources=[],
                citations=[],
                grounding_score=None,
                grounded=None,
                warnings=[],
                degraded=prepared.degraded,
                accessible_documents=prepared.accessible,
                trace_id=trace_id,
                **_retrieval_fields(prepared),
            )
            return
        options = prepared.options
        items = prepared.results[: options.top_k]  # reranked and graded in prepare()
        facts: list[str] = []
        use_graph = prepared.route.use_graph if prepared.route is not None else True
        if options.graph and self.graph_enabled and use_graph:
            started = time.perf_counter()
            facts = await self._graph(prepared)
            yield event(
                "progress",
                stage="graph",
                status="done",
                ms=_ms(started),
                facts=len(facts),
                degraded=any(d["step"] == "graph" for d in prepared.degraded),
            )
        started = time.perf_counter()
        request = answerer_pb2.AnswerRequest(
            question=prepared.query or options.question,
            sources=items,
            graph_facts=facts,
            max_tokens=options.max_tokens,
            history=[answerer_pb2.ChatTurn(role=role, content=content) for role, content in options.history],
            stream_draft=options.stream_draft,
        )
        final: answerer_pb2.AnswerFinal | None = None
        first_token_ms: float | None = None
        first_sentence_ms: float | None = None
        with tracer.start_as_current_span("answer") as span:
            call = self.mesh.answerer.Answer(request, metadata=prepared.user.metadata(), timeout=self.deadlines.answer)
            try:
                # The answerer sends its headers once it has admitted or queued the request; a refusal
                # (RESOURCE_EXHAUSTED) comes without them. So "started" means not refused, and the HTTP
                # layer can still answer a refusal with a real 503 (app.py reads up to this event).
                announced = metadata_value(await call.initial_metadata(), ADMISSION_KEY) is not None
                if announced:
                    yield event("progress", stage="answer", status="started")
                async for reply in call:
                    if not announced:
                        announced = True
                        yield event("progress", stage="answer", status="started")
                    if reply.HasField("final"):
                        final = reply.final
                    elif reply.HasField("queued"):
                        yield event(
                            "progress",
                            stage="answer",
                            status="queued",
                            position=reply.queued.position,
                            estimated_wait_s=round(reply.queued.estimated_wait_seconds, 1),
                        )
                    elif reply.HasField("sentence"):  # verified: relayed as it comes (#26.6)
                        if first_sentence_ms is None:
                            first_sentence_ms = _ms(started)
                        yield sentence_event(reply.sentence)
                    elif reply.token:
                        if first_token_ms is None:
                            first_token_ms = _ms(started)
                        yield event("token", text=reply.token)
            except aio.AioRpcError as exc:
                failed = StepFailed.from_rpc("answer", exc)
                retry_after = retry_after_seconds(exc)
                # a busy answerer is load, not a fault: a warning, so that a burst does not flood the error log
                (logger.warning if retry_after else logger.error)("answer step failed: %s", failed)
                yield event(
                    "error",
                    step="answer",
                    message=failed.message,
                    status=failed.http_status,
                    trace_id=trace_id,
                    **({"retry_after": retry_after} if retry_after else {}),
                )
                return
            finally:
                call.cancel()  # no-op once it ended; frees the answerer's slot when the client left mid-stream
            if final is not None:
                span.set_attribute(attr.RAG_GROUNDING_SCORE, final.grounding_score)
                span.set_attribute(attr.RAG_CITATIONS, len(final.citations))
            span.set_attribute(attr.RAG_SOURCES, len(items))
            trace.get_current_span().set_attribute(attr.RAG_OUTCOME, "answer")
        yield event(
            "progress",
            stage="answer",
            status="done",
            ms=_ms(started),
            first_token_ms=first_token_ms,
            first_sentence_ms=first_sentence_ms,
        )
        if final is None:
            yield event(
                "error",
                step="answer",
                message="the answerer ended without a final message",
                status=503,
                trace_id=trace_id,
            )
            return
        sources = [source_payload(i, item) for i, item in enumerate(items)]
        support = {c.source_index: c.support for c in final.citations}
        for i, source in enumerate(sources):
            source["cited"] = i in support
            source["support"] = round(support.get(i, 0.0), 4)
        yield event(
            "final",
            outcome="answer",
            answer=final.answer,
            sources=sources,
            citations=[
                {"source": c.source_index + 1, "chunk_id": c.chunk_id, "support": round(c.support, 4)}
                for c in final.citations
            ],
            grounding_score=round(final.grounding_score, 4),
            grounded=final.grounded,
            warnings=list(final.warnings),
            degraded=prepared.degraded,
            model=final.model,
            accessible_documents=prepared.accessible,
            trace_id=trace_id,
            short_answer=final.short_answer,
            verified=final.verified,
            withheld=final.withheld,
            draft=final.draft if final.HasField("draft") else None,
            overruled=final.overruled,
            answer_span=answer_span_payload(final),
            evidence=[evidence_payload(q, items) for q in final.evidence],
            sentences=[
                {
                    "text": v.text,
                    "supported": v.supported,
                    "sources": [j + 1 for j in v.source_indexes],
                    "unsupported_tokens": list(v.unsupported_tokens),
                    "reason": v.reason,
                    "verdict": answerer_pb2.Verdict.Name(v.verdict).removeprefix("VERDICT_").lower(),
                    "short_answer": v.short_answer,
                }
                for v in final.sentences
            ],
            **_retrieval_fields(prepared),
        )


def sentence_event(sentence: answerer_pb2.VerifiedSentence) -> dict[str, Any]:
    """A verified answer sentence for the client: shown as it comes (sources numbered from 1)."""
    return event(
        "sentence",
        index=sentence.index,
        text=sentence.text,
        sources=[j + 1 for j in sentence.source_indexes],
        extractive=sentence.extractive,
    )


def answer_span_payload(final: answerer_pb2.AnswerFinal) -> dict[str, Any] | None:
    """The extractive short answer with its quote and offsets in the source's text (None when nothing verified)."""
    if not final.HasField("answer_span"):
        return None
    span = final.answer_span
    return {
        "source": span.source_index + 1,
        "chunk_id": span.chunk_id,
        "text": span.text,
        "start": span.start,
        "end": span.end,
        "quote": span.quote,
        "quote_start": span.quote_start,
        "quote_end": span.quote_end,
    }


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


def scope_outcome(found: retriever_pb2.SearchResponse, options: ChatOptions) -> str:
    """What the document counts say before any relevance: no access at all, a filter that matched nothing
    readable, everything still ingesting, or "answer" (the grade decides from here)."""
    if found.accessible_documents:
        return "answer"
    if found.readable_documents == 0:
        return "no_permission"
    if options.document_ids and found.filter_matched_documents == 0:
        return "no_match_in_filter"
    if found.ingesting_documents:
        return "ingesting"
    return "no_sources"  # readable documents, none ready and none ingesting (failed)


def _retrieval_fields(prepared: Prepared) -> dict[str, Any]:
    """The final event's fields about retrieval: the relevance grade, the rewritten question, notes."""
    return {
        "relevance": prepared.relevance,
        "rewritten_question": prepared.rewritten_question,
        "notes": prepared.notes,
        "ingesting_documents": prepared.ingesting,
    }


def append_new(
    first: list[common_pb2.ScoredChunk], more: Iterable[common_pb2.ScoredChunk]
) -> list[common_pb2.ScoredChunk]:
    """The first results untouched, then those of `more` (in its order) not among them: the corrective
    retrieval adds to the candidates without reordering the ones already graded."""
    seen = {item.chunk.chunk_id for item in first}
    added: dict[str, common_pb2.ScoredChunk] = {}
    for item in more:
        key = item.chunk.chunk_id
        if key not in seen and (key not in added or item.vector_score > added[key].vector_score):
            added[key] = item
    return [*first, *added.values()]


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)
