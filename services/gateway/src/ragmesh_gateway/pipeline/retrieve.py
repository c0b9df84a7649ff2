"""retrieve: one search at the retriever, which embeds the question and its sub-queries itself (`embed_query`)
while it looks up permissions and runs the lexical legs, and merges the sub-queries' results after the
question's own ranking. Required; a down embedder degrades to lexical search (the `embed` stage says so).
The document counts decide the outcomes that are not an answer (no permission, empty filter, ingesting).

The graph leg: when the request asks for it (`graph_leg`) or the deployment's default says so (GATEWAY_GRAPH_LEG,
default off: on, off, or auto = when the router reads the question as multi-hop or relational), the graph's RankChunks is
asked first, as the same user (the graph reads only documents the catalogue says the user may read), and its
chunk scores go to the retriever as a third leg of the fusion (GATEWAY_GRAPH_PLACEMENT `fuse`), or, with `after`,
the two-leg search's order stands and the documents of the leg's best chunks that are not among its top passages
go right after them, as linked documents do (pipeline/link.py). A graph that cannot answer degrades the search to
two legs (the `graph` stage says so); it never fails the request."""

from __future__ import annotations

import asyncio
from typing import Any

from grpc import aio
from opentelemetry import trace

from ragmesh.common.v1 import common_pb2
from ragmesh.graph.v1 import graph_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common import attributes as attr
from ragmesh_common.text import spelling
from ragmesh_gateway.mesh import Mesh, StepFailed
from ragmesh_gateway.models import Outcome, SearchRequest
from ragmesh_gateway.pipeline.events import respelled_note
from ragmesh_gateway.pipeline.link import place
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Step

tracer = trace.get_tracer(__name__)

LEVELS = {
    "document": common_pb2.CHUNK_LEVEL_DOCUMENT,
    "section": common_pb2.CHUNK_LEVEL_SECTION,
    "paragraph": common_pb2.CHUNK_LEVEL_PARAGRAPH,
}


def fusion_type(name: str) -> retriever_pb2.FusionType.ValueType:
    """The proto FusionType of an HTTP API fusion name ("relative_score", "ranked", "distribution_based")."""
    try:
        return retriever_pb2.FusionType.Value("FUSION_TYPE_" + name.upper())
    except ValueError:
        raise StepFailed(
            "retrieve", f"unknown fusion {name!r}; use relative_score, ranked or distribution_based", 400
        ) from None


def search_request(
    state: RequestState,
    text: str,
    levels: list[str],
    *,
    alpha: float | None,
    candidates: int,
    default_context: dict[str, Any],
) -> retriever_pb2.SearchRequest:
    """The retriever's request for `text` with the state's filter, strategy, fusion and context options."""
    request = state.request
    proto = retriever_pb2.SearchRequest(
        query=text,
        embed_query=True,
        top_k=candidates,
        levels=[LEVELS[name] for name in levels],
        document_ids=state.document_ids,
        strategy=retriever_pb2.STRATEGY_SUMMARY_FIRST
        if state.strategy == "summary_first"
        else retriever_pb2.STRATEGY_DIRECT,
        fusion=fusion_type(request.fusion),
        language=state.language,
    )
    if alpha is not None:
        proto.alpha = alpha
    if isinstance(request, SearchRequest) and request.feedback_docs:
        proto.feedback_docs, proto.feedback_weight = request.feedback_docs, request.feedback_weight
    context = request.context.model_dump() if request.context is not None else default_context
    if context:
        proto.context.CopyFrom(retriever_pb2.ContextOptions(**context))
    return proto


def scope_outcome(found: retriever_pb2.SearchResponse, filtered: bool) -> Outcome:
    """What the document counts say before any relevance: no access at all, a filter that matched nothing
    readable, everything still ingesting, or "answer" (the grade decides from here)."""
    if found.accessible_documents:
        return Outcome.ANSWER
    if found.readable_documents == 0:
        return Outcome.NO_PERMISSION
    if filtered and found.filter_matched_documents == 0:
        return Outcome.NO_MATCH_IN_FILTER
    if found.ingesting_documents:
        return Outcome.INGESTING
    return Outcome.NO_SOURCES  # readable documents, none ready and none ingesting (failed)


class Retrieve(Step):
    """No span of its own: the gRPC client span is the search's span (a child of the same extent costs ~60 µs)."""

    name = "retrieve"

    def __init__(
        self,
        mesh: Mesh,
        timeout: float,
        default_context: dict[str, Any] | None = None,
        *,
        graph_leg: str = "auto",
        graph_timeout: float = 5.0,
        graph_seed_passages: int = 0,
        graph_placement: str = "fuse",
        graph_placed: int = 1,
        placed_after: int = 2,
        respell: bool = False,
    ) -> None:
        self.mesh = mesh
        self.timeout = timeout
        self.default_context = default_context or {}
        self.graph_leg = graph_leg
        self.graph_timeout = graph_timeout
        self.graph_seed_passages = graph_seed_passages
        self.graph_placement = graph_placement
        self.graph_placed = graph_placed
        self.placed_after = placed_after
        self.respell = respell

    def wants_graph(self, state: RequestState) -> bool:
        """The request's switch, else the default: on, off, or auto (the router's multi-hop/relational reading)."""
        asked = state.request.graph_leg
        if asked is not None:
            return asked
        if self.graph_leg == "auto":
            return state.route is not None and state.route.use_graph
        return self.graph_leg == "on"

    async def graph_scores(
        self, state: RequestState, candidates: int, seeds: list[graph_pb2.ChunkRef] | None = None
    ) -> list[graph_pb2.ChunkScore] | None:
        """The graph leg's chunk scores for the question (its walk seeded also by the entities of `seeds`, the top
        passages of a first search), or None (degraded, logged and traced) when the graph cannot answer."""
        with tracer.start_as_current_span("graph leg") as span:
            try:
                reply = await self.mesh.graph.RankChunks(
                    graph_pb2.RankChunksRequest(
                        query=state.query, document_ids=state.document_ids, top_k=candidates, seed_chunks=seeds or []
                    ),
                    metadata=state.user.metadata(),
                    timeout=self.graph_timeout,
                )
            except aio.AioRpcError as exc:
                state.degrade("graph", f"graph leg {exc.code().name}; searched without it")
                return None
            span.set_attribute(attr.RAG_GRAPH_SEEDS, len(reply.seeds))
            span.set_attribute(attr.RAG_SEARCH_GRAPH_HITS, len(reply.chunks))
        return list(reply.chunks)

    async def place_graph(
        self, state: RequestState, results: list[common_pb2.ScoredChunk], ranked: list[graph_pb2.ChunkScore]
    ) -> list[common_pb2.ScoredChunk]:
        """`results` with the documents of the graph's best chunks (`ranked`, best first; those the walk reached)
        that are not among the top `placed_after` passages placed right after them: `graph_placed` documents, each
        with its best chunk in `results`, or its beginning when the search did not find it (FetchSection, as the
        user). A failed fetch keeps the search's order (degraded, traced)."""
        top = {r.chunk.document_id for r in results[: self.placed_after]}
        count = getattr(state.request, "graph_placed", None) or self.graph_placed
        wanted: list[str] = []
        for chunk in ranked:
            if chunk.score > 0 and chunk.document_id not in top and chunk.document_id not in wanted:
                wanted.append(chunk.document_id)
                if len(wanted) == count:
                    break
        chosen: list[common_pb2.ScoredChunk] = []
        for document_id in wanted:
            found = next((r for r in results if r.chunk.document_id == document_id), None)
            if found is None:
                try:
                    reply = await self.mesh.retriever.FetchSection(
                        retriever_pb2.FetchSectionRequest(
                            document_id=document_id, document_ids=state.document_ids, limit=1
                        ),
                        metadata=state.user.metadata(),
                        timeout=self.timeout,
                    )
                except aio.AioRpcError as exc:
                    state.degrade("graph", f"graph placement {exc.code().name}; the search's order kept")
                    return results
                found = reply.results[0] if reply.results else None
            if found is not None:
                chosen.append(found)
        return place(results, chosen, self.placed_after)

    async def run(self, state: RequestState) -> dict[str, Any]:
        sub_queries = list(state.route.sub_queries) if state.route is not None else []
        request = search_request(
            state,
            state.query,
            state.levels,
            alpha=state.request.alpha,
            candidates=state.candidates,
            default_context=self.default_context,
        )
        request.sub_queries.extend(sub_queries)
        graph_chunks: int | None = None
        if state.query_vector is not None and state.request.alpha != 0:
            # the cache step embedded the question: not embedded twice (alpha 0 is lexical only: no vector leg)
            request.query_vector.extend(state.query_vector)
        found: retriever_pb2.SearchResponse | None = None
        placed: list[graph_pb2.ChunkScore] = []
        if self.wants_graph(state):
            asked = getattr(state.request, "graph_seed_passages", None)
            seeding = self.graph_seed_passages if asked is None else asked
            placement = getattr(state.request, "graph_placement", None) or self.graph_placement
            seeds: list[graph_pb2.ChunkRef] = []
            # the two-leg search first: its top passages seed the walk too (HippoRAG 2 style), and placed after, its
            # order is the answer's
            if seeding or placement == "after":
                found = await self.mesh.retriever.Search(request, metadata=state.user.metadata(), timeout=self.timeout)
                seeds = [
                    graph_pb2.ChunkRef(document_id=r.chunk.document_id, chunk_id=r.chunk.chunk_id)
                    for r in found.results[:seeding]
                ]
            scores = await self.graph_scores(state, state.candidates, seeds)
            if scores is not None:
                graph_chunks = len(scores)
                if placement == "after":
                    placed = scores  # the two-leg search's order stands; its documents go after the top passages
                else:
                    request.graph_scores.extend(
                        retriever_pb2.LegScore(chunk_id=c.chunk_id, score=c.score) for c in scores
                    )
                    weight = getattr(state.request, "graph_weight", None)
                    if weight is not None:
                        request.graph_weight = weight
                    found = None  # searched again with the third leg
        if found is None:
            found = await self.mesh.retriever.Search(request, metadata=state.user.metadata(), timeout=self.timeout)
        if found.vector_unavailable:
            state.degrade("embed", found.vector_unavailable)
        by_gateway = state.embed_ms is not None
        state.stages.append(
            {
                "stage": "embed",
                "ms": state.embed_ms if state.embed_ms is not None else round(found.embed_ms, 1),
                "in": "gateway" if by_gateway else "retriever",
                "degraded": bool(found.vector_unavailable),
            }
        )
        state.results = list(found.results)
        if placed:
            state.results = await self.place_graph(state, state.results, placed)
        state.accessible = found.accessible_documents
        state.ingesting = found.ingesting_documents
        state.vector_used = not found.vector_unavailable and state.request.alpha != 0
        state.outcome = scope_outcome(found, bool(state.request.document_ids))
        if self.respell and state.answering and state.mode != "agentic" and not state.respelled:
            texts = [t for r in found.results for t in (r.chunk.text, r.chunk.title, *r.chunk.section_path)]
            # in a thread: the first call reads WordNet's word forms (seconds), which must not stall the event loop
            read_question, read_as = await asyncio.to_thread(spelling.respelled, state.query, texts)
            if read_as:  # a slip in a key word: searched again as the candidates spell it, once
                pairs = [f"{a} -> {b}" for a, b in read_as]
                trace.get_current_span().set_attribute(attr.RAG_QUESTION_RESPELLED, pairs)
                state.respelled, state.query = read_as, read_question
                state.query_vector = state.embed_ms = None  # the slip's embedding: the retriever embeds the question
                state.notes.append(respelled_note(read_as))
                return {**await self.run(state), "respelled": pairs}
        if state.answering and found.ingesting_documents:
            state.notes.append(
                f"{found.ingesting_documents} of your documents are still being processed and were not searched yet."
            )
        return {
            "candidates": len(state.results),
            "accessible_documents": found.accessible_documents,
            "searches": 1 + len(sub_queries),
            "strategy": state.strategy,
            **({"graph_chunks": graph_chunks} if graph_chunks is not None else {}),
        }
