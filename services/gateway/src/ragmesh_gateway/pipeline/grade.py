"""grade (CRAG): grade the candidates' relevance; `ambiguous` gets one corrective retrieval (the question's
keywords, a lexical-heavier alpha, every level, more candidates) and is graded again. Only `correct` answers
(with the relevance gate on, from the chunks the grade keeps). Required: the corrective search failing is a
503 naming `retrieve`."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from grpc import aio
from opentelemetry import trace

from ragmesh.common.v1 import common_pb2
from ragmesh_common import attributes as attr
from ragmesh_gateway import grading
from ragmesh_gateway.grading import GradedQuery, Thresholds
from ragmesh_gateway.mesh import Mesh, StepFailed
from ragmesh_gateway.models import Outcome
from ragmesh_gateway.pipeline.retrieve import search_request
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Step
from ragmesh_gateway.query import extract_entities

logger = logging.getLogger(__name__)

CORRECTIVE_LEVELS = ["document", "section", "paragraph"]


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


def graded_queries(state: RequestState) -> list[GradedQuery]:
    """The question and its sub-queries, each with the entities it names."""
    plan = state.route
    entities = plan.entities if plan is not None else extract_entities(state.query)
    queries = [GradedQuery.of(state.query, entities)]
    for sub in plan.sub_queries if plan is not None else []:
        queries.append(GradedQuery.of(sub, [e for e in entities if sub.startswith(e)]))
    return queries


class Grade(Step):
    name = "grade"
    span = "grade relevance"

    def __init__(
        self,
        mesh: Mesh,
        retrieve_timeout: float,
        thresholds: Thresholds,
        *,
        corrective_alpha: float = 0.3,
        corrective_candidates: int = 60,
        default_context: dict[str, Any] | None = None,
    ) -> None:
        self.mesh = mesh
        self.timeout = retrieve_timeout
        self.thresholds = thresholds
        self.corrective_alpha = corrective_alpha
        self.corrective_candidates = corrective_candidates
        self.default_context = default_context or {}

    async def run(self, state: RequestState) -> dict[str, Any]:
        queries = graded_queries(state)
        result = grading.grade(state.results, queries, have_vector=state.vector_used, thresholds=self.thresholds)
        relevance = result.payload()
        if result.grade == grading.AMBIGUOUS:
            result, relevance = await self._corrective(state, queries, relevance)
        span = trace.get_current_span()
        span.set_attribute(attr.RAG_RELEVANCE_GRADE, result.grade)
        span.set_attribute(attr.RAG_RELEVANCE_REASONS, relevance["reasons"])
        span.set_attribute(attr.RAG_RELEVANCE_KEPT, len(result.kept))
        span.set_attribute(attr.RAG_RELEVANCE_CORRECTIVE, "corrective" in relevance)
        logger.info("relevance %s (%s)", result.grade, "; ".join(relevance["reasons"]))
        state.relevance = relevance
        if not state.request.relevance_gate:
            relevance["gate"] = "off"
            if not state.results:
                state.outcome = Outcome.NO_SOURCES
        else:
            state.results = result.kept
            if result.grade != grading.CORRECT:
                state.outcome = Outcome.NO_SOURCES
        return {"grade": relevance["grade"], "relevant": len(state.results)}

    async def _corrective(
        self, state: RequestState, queries: list[GradedQuery], first: dict[str, Any]
    ) -> tuple[grading.Grade, dict[str, Any]]:
        """One more search for an ambiguous grade, merged after the first candidates, and graded again."""
        keywords = grading.keyword_query(queries[0])
        asked = state.request.alpha
        alpha = self.corrective_alpha if asked is None else min(asked, self.corrective_alpha)
        candidates = max(self.corrective_candidates, state.candidates)
        trace.get_current_span().add_event(
            "corrective retrieval", {attr.RAG_RELEVANCE_GRADE: first["grade"], attr.RAG_SEARCH_ALPHA: alpha}
        )
        request = search_request(
            state, keywords, CORRECTIVE_LEVELS, alpha=alpha, candidates=candidates, default_context=self.default_context
        )
        try:
            reply = await self.mesh.retriever.Search(request, metadata=state.user.metadata(), timeout=self.timeout)
        except aio.AioRpcError as exc:
            raise StepFailed.from_rpc("retrieve", exc) from exc
        pool = append_new(state.results, reply.results)
        vector = state.vector_used and not reply.vector_unavailable and alpha > 0
        result = grading.grade(pool, queries, have_vector=vector, thresholds=self.thresholds)
        relevance = {
            **result.payload(),
            "corrective": {
                "query": keywords,
                "alpha": alpha,
                "levels": CORRECTIVE_LEVELS,
                "candidates": candidates,
                "added": len(pool) - len(state.results),
                "first_grade": first["grade"],
                "first_reasons": first["reasons"],
            },
        }
        if result.grade == grading.AMBIGUOUS:
            relevance["reasons"].append("still ambiguous after the corrective retrieval: not answered")
        return result, relevance
