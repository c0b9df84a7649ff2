"""define: a question asking what something is gets a source that says what it is.

"What is TableFormer?" over the TableFormer paper: the five best-ranked passages named TableFormer many times (its
results, a figure, the authors' line) and none said what it is; the paper's own "We propose TableFormer, a
transformer based model that …" ranked eleventh, so the answer was withheld. For a question that asks only what or
who something is (`ragmesh_common.text.defining.asked_term`), when none of the sources the answer gets (the first
`top_k`) states what the term is (`defines`), the best-ranked further candidate that does takes the last of those
places; the one it displaces moves just behind it. Rank order is otherwise kept, and nothing is added that the
user's search did not already return (the same readable, graded candidates).
"""

from __future__ import annotations

from typing import Any

from ragmesh_common.text.defining import asked_term, defines
from ragmesh_gateway.models import ChatRequest
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Step


class Define(Step):
    """define: a candidate that states what the asked term is joins the answer's sources when none of them does."""

    name = "define"

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
        if found is None:
            return {"term": term}
        state.results.insert(top_k - 1, state.results.pop(found))
        return {"term": term, "promoted_from": found + 1}
