"""rerank: the reranker's cross-encoder scores reorder the candidates. Optional: a reranker that is down,
has no model or breaks its contract leaves the retrieval order, and the request says so."""

from __future__ import annotations

from typing import Any

import grpc
from grpc import aio
from opentelemetry import trace

from ragmesh.common.v1 import common_pb2
from ragmesh.reranker.v1 import reranker_pb2
from ragmesh_common import attributes as attr
from ragmesh_gateway.mesh import Mesh
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Step

KEPT = "kept retrieval order"


def rescored(items: list[common_pb2.ScoredChunk], scores: list[float]) -> list[common_pb2.ScoredChunk]:
    """Copies of `items` with their rerank scores, best first."""
    reranked = []
    for item, score in zip(items, scores, strict=True):
        copy = common_pb2.ScoredChunk()
        copy.CopyFrom(item)
        copy.rerank_score, copy.reranked, copy.score = score, True, score
        reranked.append(copy)
    reranked.sort(key=lambda i: -i.rerank_score)
    return reranked


class Rerank(Step):
    name = "rerank"
    span = "rerank"
    required = False

    def __init__(self, mesh: Mesh, timeout: float) -> None:
        self.mesh = mesh
        self.timeout = timeout

    def applies(self, state: RequestState) -> bool:
        return state.answering and state.request.rerank and len(state.results) > 1

    async def run(self, state: RequestState) -> dict[str, Any]:
        items = state.results
        span = trace.get_current_span()
        span.set_attribute(attr.RAG_RERANK_CANDIDATES, len(items))
        reply = await self.mesh.reranker.Rerank(
            reranker_pb2.RerankRequest(query=state.query, passages=[i.chunk.text for i in items], normalize=True),
            metadata=state.user.metadata(),
            timeout=self.timeout,
        )
        if not reply.configured and not reply.scores:  # a deployment without a model: no error status
            span.set_attribute(attr.RAG_RERANK_CONFIGURED, False)
            return self.fallback(state, f"{reply.unconfigured_reason or 'no reranker model configured'}; {KEPT}")
        if len(reply.scores) != len(items):  # a reranker that broke its contract: keep the retrieval order
            return self.fallback(
                state, f"reranker returned {len(reply.scores)} scores for {len(items)} passages; {KEPT}"
            )
        state.results = rescored(items, list(reply.scores))
        return {}

    def degraded_reason(self, exc: aio.AioRpcError) -> str:
        reason = exc.details() if exc.code() == grpc.StatusCode.FAILED_PRECONDITION else f"reranker {exc.code().name}"
        return f"{reason}; {KEPT}"

    def fallback(self, state: RequestState, reason: str) -> dict[str, Any]:
        trace.get_current_span().set_attribute(attr.RAG_RERANK_FALLBACK, True)
        return super().fallback(state, reason)
