"""define: a question asking what something is gets a source that says what it is.

"What is TableFormer?" over the TableFormer paper: the five best-ranked passages named TableFormer many times (its
results, a figure, the authors' line) and none said what it is; the paper's own "We propose TableFormer, a
transformer based model that …" ranked eleventh, so the answer was withheld. For a question that asks only what or
who something is (`ragmesh_common.text.defining.asked_term`), when none of the sources the answer gets (the first
`top_k`) states what the term is (`defines`), the best-ranked further candidate that does takes the last of those
places; the one it displaces moves just behind it. Rank order is otherwise kept.

When no candidate defines it either, the same search is asked once more, deeper (`depth`, GATEWAY_DEFINE_DEPTH,
100 candidates; 0 turns it off): "What does OTSL stand for?" over the OTSL paper, where every passage names OTSL, had
its "we propose here our Optimised Table Structure Language (OTSL)" 33rd, past the 30 candidates. Its first result
that defines the term takes that place (stage record `deeper`). It is the user's own search (same filter, levels,
strategy; row-level security decides what it returns), so nothing unreadable can enter; a failed deeper search
leaves the sources as they were (optional step: logged, traced, reported as degraded).
"""

from __future__ import annotations

from typing import Any

from ragmesh_common.text.defining import asked_term, defines
from ragmesh_gateway.mesh import Mesh
from ragmesh_gateway.models import ChatRequest
from ragmesh_gateway.pipeline.retrieve import search_request
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Step


class Define(Step):
    """define: a candidate that states what the asked term is joins the answer's sources when none of them does."""

    name = "define"
    required = False

    def __init__(
        self, mesh: Mesh, timeout: float, *, depth: int = 0, default_context: dict[str, Any] | None = None
    ) -> None:
        self.mesh = mesh
        self.timeout = timeout
        self.depth = depth
        self.default_context = default_context or {}

    def applies(self, state: RequestState) -> bool:
        return state.answering and isinstance(state.request, ChatRequest) and len(state.results) > 1

    async def run(self, state: RequestState) -> dict[str, Any]:
        term = asked_term(state.query)
        request = state.request
        assert isinstance(request, ChatRequest)  # applies() checked it
        top_k = request.top_k
        if term is None or len(state.results) <= top_k:
            return {}
        if any(defines(term, r.chunk.text) for r in state.results[:top_k]):
            return {"term": term}
        found = next((i for i in range(top_k, len(state.results)) if defines(term, state.results[i].chunk.text)), None)
        if found is not None:
            state.results.insert(top_k - 1, state.results.pop(found))
            return {"term": term, "promoted_from": found + 1}
        if self.depth <= len(state.results):
            return {"term": term}
        search = search_request(
            state,
            state.query,
            state.levels,
            alpha=state.request.alpha,
            candidates=self.depth,
            default_context=self.default_context,
        )
        reply = await self.mesh.retriever.Search(search, metadata=state.user.metadata(), timeout=self.timeout)
        known = {r.chunk.chunk_id for r in state.results}
        deeper = next(
            (
                (rank, item)
                for rank, item in enumerate(reply.results, 1)
                if item.chunk.chunk_id not in known and defines(term, item.chunk.text)
            ),
            None,
        )
        if deeper is None:
            return {"term": term, "deeper": len(reply.results)}
        rank, item = deeper
        state.results.insert(top_k - 1, item)
        return {"term": term, "promoted_from": rank, "deeper": len(reply.results)}
