"""distinct: the sources given to the answer say one thing once.

A short document's paragraph, its section and the document's own chunk can all match a question, each the same
text under its headings: asked "How many monthly active users are there?" over a one-slide summary, three of the
five sources were that one text (the answer cited [1, 2, 3], the sources list showed one slide three times).
Before the answer, a source that restates (`ragmesh_common.text.words.without_restated`: its words, numbers included, all
among another's but for a few) a better-ranked source of the same document at another level (paragraph, section,
document) is left out, and the next candidate takes its place. Copies in other documents stay: each is a source of
its own. Rank order is kept.
"""

from __future__ import annotations

from typing import Any

from ragmesh_common.text.words import without_restated
from ragmesh_gateway.models import ChatRequest
from ragmesh_gateway.pipeline.state import RequestState
from ragmesh_gateway.pipeline.step import Step


class Distinct(Step):
    """distinct: sources that restate a better-ranked one of their document (another level of it) are left out
    before the answer."""

    name = "distinct"

    def applies(self, state: RequestState) -> bool:
        return state.answering and isinstance(state.request, ChatRequest) and len(state.results) > 1

    async def run(self, state: RequestState) -> dict[str, Any]:
        kept = without_restated(state.results, lambda item: (item.chunk.document_id, item.chunk.level, item.chunk.text))
        dropped = len(state.results) - len(kept)
        state.results[:] = kept
        return {"dropped": dropped} if dropped else {}
