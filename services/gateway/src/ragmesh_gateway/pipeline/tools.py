"""The agent's tools beside search (pipeline/agentic.py): fetch a document's section by title, and the graph
neighbours of an entity.

- fetch_section: the retriever's FetchSection: the readable documents titled like one of the entities (case,
  punctuation and a trailing "(…)" qualifier aside), their beginning. The agent calls it once per search with
  the entities the step's best evidence names (when a later sub-question waits for a bridge) and the names the
  step's query gives, so that the document an entity is about joins the evidence, and a bridge entity that has
  a document of its own is the one carried forward.
- graph_neighbours: the graph's GetContext at depth 1: the entities next to the ones named in a query. The
  agent calls it when a step's evidence gives no bridge entity for the next sub-question.

Each call runs as the user (the same internal token in the metadata: the retriever's row-level security, the
graph's access check through the retriever) within the request's document filter, under its own span
(`agent tool`), and is recorded as a step. A failed call degrades (logged, traced, reported) to nothing found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from grpc import aio
from opentelemetry import trace

from ragmesh.common.v1 import common_pb2
from ragmesh.graph.v1 import graph_pb2
from ragmesh.retriever.v1 import retriever_pb2
from ragmesh_common import attributes as attr
from ragmesh_common.text.entities import spot
from ragmesh_common.text.names import without_qualifier
from ragmesh_gateway.mesh import Mesh
from ragmesh_gateway.pipeline.state import RequestState

tracer = trace.get_tracer(__name__)

FETCH_SECTION = "fetch_section"
GRAPH_NEIGHBOURS = "graph_neighbours"
FETCH_CHUNKS = 3  # chunks of a fetched document (its beginning)
FETCH_DOCUMENTS = 2  # documents of one call
FETCH_TITLES = 16  # titles asked for in one call
NEIGHBOURS = 10  # graph relations asked for

_COMMA_QUALIFIER = re.compile(r",.*$", re.DOTALL)
_PUNCTUATION = re.compile(r"[\W_]+")


def title_key(title: str) -> str:
    """A title as FetchSection matches it: lower case, without a trailing "(…)" or ", …" qualifier, punctuation
    as spaces."""
    return _PUNCTUATION.sub(" ", _COMMA_QUALIFIER.sub("", without_qualifier(title)).lower()).strip()


_APOSTROPHE_GAP = ("' ", "’ ")  # "Dunkin' Brands": a name the spotter cuts at its apostrophe


def names_in(text: str) -> list[str]:
    """The entities of a text (`extract_entities`), a name cut at an apostrophe joined again ("Dunkin' Brands",
    not "Dunkin" and "Brands")."""
    mentions = spot(text, for_question=True)
    out: list[str] = []
    joined_last = False
    for i, mention in enumerate(mentions):
        if joined_last:
            joined_last = False
            continue
        after = mention.start + len(mention.text)
        nxt = mentions[i + 1] if i + 1 < len(mentions) else None
        if nxt is not None and text[after : nxt.start] in _APOSTROPHE_GAP:
            out.append(text[mention.start : nxt.start + len(nxt.text)])
            joined_last = True
        else:
            out.append(mention.text)
    first: dict[str, str] = {}
    for name in out:
        first.setdefault(name.lower(), name)  # the first of each, case aside
    return list(first.values())


@dataclass
class ToolCall:
    """What one call found: chunks (fetch_section) or entity names (graph_neighbours)."""

    tool: str
    query: str
    chunks: list[common_pb2.ScoredChunk] = field(default_factory=list)
    names: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return bool(self.chunks or self.names)


class Tools:
    """The tool calls, with the clients and deadlines of the steps that own those services."""

    def __init__(self, mesh: Mesh, retrieve_timeout: float, graph_timeout: float, *, graph_enabled: bool) -> None:
        self.mesh = mesh
        self.retrieve_timeout = retrieve_timeout
        self.graph_timeout = graph_timeout
        self.graph_enabled = graph_enabled

    def graph_allowed(self, state: RequestState) -> bool:
        """The graph as the request and the deployment allow it (the chat's `graph` switch)."""
        return self.graph_enabled and bool(getattr(state.request, "graph", True))

    async def fetch_section(self, state: RequestState, titles: list[str], score: float) -> ToolCall:
        """The beginning of the readable documents titled like any of `titles` (the first titles' first), scored
        as the evidence that named them."""
        call = ToolCall(FETCH_SECTION, "; ".join(titles))
        with tracer.start_as_current_span("agent tool") as span:
            span.set_attribute(attr.RAG_AGENT_TOOL, FETCH_SECTION)
            try:
                reply = await self.mesh.retriever.FetchSection(
                    retriever_pb2.FetchSectionRequest(
                        titles=titles,
                        document_ids=state.document_ids,
                        limit=FETCH_CHUNKS,
                        max_documents=FETCH_DOCUMENTS,
                    ),
                    metadata=state.user.metadata(),
                    timeout=self.retrieve_timeout,
                )
            except aio.AioRpcError as exc:
                state.degrade(FETCH_SECTION, f"retriever {exc.code().name}; the section was not fetched")
                return call
            for item in reply.results:
                item.score = score
            call.chunks = list(reply.results)
            span.set_attribute(attr.RAG_SEARCH_RESULTS, len(call.chunks))
        return call

    async def graph_neighbours(self, state: RequestState, query: str) -> ToolCall:
        """The entities next to those `query` names (depth 1), read only from documents the user may read."""
        call = ToolCall(GRAPH_NEIGHBOURS, query)
        with tracer.start_as_current_span("agent tool") as span:
            span.set_attribute(attr.RAG_AGENT_TOOL, GRAPH_NEIGHBOURS)
            try:
                reply = await self.mesh.graph.GetContext(
                    graph_pb2.GetContextRequest(
                        query=query, document_ids=state.document_ids, max_depth=1, limit=NEIGHBOURS
                    ),
                    metadata=state.user.metadata(),
                    timeout=self.graph_timeout,
                )
            except aio.AioRpcError as exc:
                state.degrade(GRAPH_NEIGHBOURS, f"graph {exc.code().name}; no neighbours")
                return call
            matched = {e.name.lower() for e in reply.matched}
            names = [e.name for e in reply.neighbours]
            # a relation's far end counts too (the neighbours list may be capped before the relations)
            names += [r.target if r.source.lower() in matched else r.source for r in reply.relations]
            known = query.lower()
            call.names = [n for n in dict.fromkeys(names) if n and n.lower() not in matched and n.lower() not in known]
            span.set_attribute(attr.RAG_GRAPH_RELATIONS, len(reply.relations))
        return call
