"""communities: a collection-level question answered by map-reduce over community reports (GraphRAG's global
search). Optional: a down graph, or no community that the user can read, leaves the request as retrieval left it.

Runs for a chat the router marks as a collection question (`Route.collection`: "What are the main themes in my
documents about X?", "Summarise what we know about Y") when the request and the deployment allow the graph.
The graph service builds the reports of the relevant communities from chunks this user can read (their members,
the sentences ranked by centrality) and maps each to the sentences that best answer the question. This step is
the reduce: it takes the reports' partial answers round-robin, by report relevance, so the answer draws on
every relevant community; each chunk they come from becomes a source (its text: those sentences, its title: the
report's), and the answer step answers from them with citations (a summary: `AnswerRequest.summary`). A source
that does not name the question's topic gives its place to a search passage that does (`on_topic`). The reports
go in the reply's `graph.communities`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grpc import aio
from opentelemetry import trace

from ragmesh.common.v1 import common_pb2
from ragmesh.graph.v1 import graph_pb2
from ragmesh_common import attributes as attr
from ragmesh_common.text.questions import Question
from ragmesh_gateway.mesh import Mesh
from ragmesh_gateway.models import ChatRequest, Outcome
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Step

MAX_SENTENCES = 12  # kept by the reduce across reports


def reduce_reports(
    reports: list[graph_pb2.CommunityReport], max_sources: int
) -> tuple[list[common_pb2.ScoredChunk], list[dict[str, Any]], int]:
    """Round-robin over the reports' partial answers: sources (one per chunk, at most `max_sources`), the
    `graph.communities` records (with their sources, 1-based) and the number of sentences kept."""
    by_chunk: dict[tuple[str, str], int] = {}
    texts: list[list[str]] = []
    titles: list[str] = []
    scores: list[float] = []
    records: list[dict[str, Any]] = [
        {
            "id": r.community.id,
            "level": r.community.level,
            "title": r.community.title,
            "size": r.community.size,
            "key_entities": [e.name for e in r.key_entities],
            "sources": [],
        }
        for r in reports
    ]
    kept = 0
    depth = 0
    while kept < MAX_SENTENCES and any(depth < len(r.answer) for r in reports):
        for report, record in zip(reports, records, strict=True):
            if depth >= len(report.answer) or kept >= MAX_SENTENCES:
                continue
            sentence = report.answer[depth]
            key = (sentence.document_id, sentence.chunk_id)
            if key not in by_chunk:
                if len(by_chunk) >= max_sources:
                    continue
                by_chunk[key] = len(texts)
                texts.append([])
                titles.append(report.community.title)
                scores.append(report.relevance)
            index = by_chunk[key]
            if sentence.text not in texts[index]:
                texts[index].append(sentence.text)
                kept += 1
            if index + 1 not in record["sources"]:
                record["sources"].append(index + 1)
        depth += 1
    top = max(scores, default=1.0) or 1.0
    sources = [
        common_pb2.ScoredChunk(
            chunk=common_pb2.Chunk(
                chunk_id=chunk_id,
                document_id=document_id,
                level=common_pb2.CHUNK_LEVEL_PARAGRAPH,
                text=" ".join(texts[i]),
                title=titles[i],
            ),
            score=scores[i] / top,
        )
        for (document_id, chunk_id), i in sorted(by_chunk.items(), key=lambda item: item[1])
    ]
    return sources, records, kept


def on_topic(
    about: Question,
    sources: list[common_pb2.ScoredChunk],
    records: list[dict[str, Any]],
    searched: Sequence[common_pb2.ScoredChunk],
) -> tuple[list[common_pb2.ScoredChunk], list[dict[str, Any]], int]:
    """The reduce's sources that name the question's topic (their text or their report's title), then the
    search's passages that name it in the places of the others; the number of those passages. Reports chosen by
    the question's words can be about something else ("Summarise what we know about pharmacy" when no entity
    is pharmacy), while the search found the pharmacy passages. Nothing of the search names the topic either:
    the reports stay as they were (the answer then says what they say, unverified). The communities' `sources`
    are renumbered, and a community none of whose sources is kept leaves the records."""
    kept = [i for i, s in enumerate(sources) if about.about(f"{s.chunk.title}\n{s.chunk.text}")]
    if len(kept) == len(sources):
        return sources, records, 0
    have = {(sources[i].chunk.document_id, sources[i].chunk.chunk_id) for i in kept}
    extra = [
        r
        for r in searched
        if (r.chunk.document_id, r.chunk.chunk_id) not in have and about.about(f"{r.chunk.title}\n{r.chunk.text}")
    ]
    extra = extra[: len(sources) - len(kept)]
    if not kept and not extra:
        return sources, records, 0
    number = {old + 1: new + 1 for new, old in enumerate(kept)}
    renumbered = [{**record, "sources": [number[n] for n in record["sources"] if n in number]} for record in records]
    return [sources[i] for i in kept] + extra, [r for r in renumbered if r["sources"]], len(extra)


class Communities(Step):
    name = "communities"
    span = "graph communities"
    required = False

    def __init__(self, mesh: Mesh, timeout: float, *, enabled: bool = True) -> None:
        self.mesh = mesh
        self.timeout = timeout
        self.enabled = enabled

    def applies(self, state: RequestState) -> bool:
        request = state.request
        if not (self.enabled and isinstance(request, ChatRequest) and request.graph):
            return False
        if state.route is None or not state.route.collection or state.cached is not None:
            return False
        # a question about the collection may find no single passage relevant enough: the reports still answer
        return state.outcome in (Outcome.ANSWER, Outcome.NO_SOURCES)

    async def run(self, state: RequestState) -> dict[str, Any]:
        assert isinstance(state.request, ChatRequest)
        reply = await self.mesh.graph.GetCommunityReports(
            graph_pb2.GetCommunityReportsRequest(query=state.query, document_ids=state.document_ids),
            metadata=state.user.metadata(),
            timeout=self.timeout,
        )
        reports = [r for r in reply.reports if r.answer]
        span = trace.get_current_span()
        span.set_attribute(attr.RAG_GRAPH_COMMUNITIES, len(reports))
        if not reports:
            return {"reports": 0, "sentences": 0}
        sources, records, kept = reduce_reports(reports, state.request.top_k)
        sources, records, searched = on_topic(Question.parse(state.query).topic(), sources, records, state.results)
        span.set_attribute(attr.RAG_GRAPH_SEARCHED_SOURCES, searched)
        state.results = sources
        state.outcome = Outcome.ANSWER
        state.facts = [f"theme — {record['title']} — {', '.join(record['key_entities'][:6])}" for record in records[:6]]
        graph = state.graph or {"entities": [], "facts": [], "communities": []}
        graph["communities"] = records
        state.graph = graph
        return {"reports": len(reports), "sentences": kept, "searched": searched}

    def degraded_reason(self, exc: aio.AioRpcError) -> str:
        return f"graph {exc.code().name}; answered from retrieval without community reports"
